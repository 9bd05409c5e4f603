"""A drop-in replacement for the Kubernetes cluster-proportional-autoscaler."""

__version__ = "0.1.0"
UPSTREAM_VERSION = "v1.10.3"
"""The upstream cluster-proportional-autoscaler release whose behaviour this follows."""
VERSION_TEXT = f"{__version__} (follows cluster-proportional-autoscaler {UPSTREAM_VERSION})"
"""What ``--version`` prints: our version first (scripts take the first word), then the
upstream release a user can compare against."""
VERTICAL_UPSTREAM_VERSION = "v0.8.9"
"""The cluster-proportional-vertical-autoscaler release ``/cpvpa`` follows."""
VERTICAL_VERSION_TEXT = (f"{__version__} (follows cluster-proportional-vertical-autoscaler "
                         f"{VERTICAL_UPSTREAM_VERSION})")
