"""A drop-in replacement for the Kubernetes cluster-proportional-autoscaler."""

__version__ = "0.1.0"
