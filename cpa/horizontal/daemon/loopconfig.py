"""What the poll loop is told (:class:`LoopConfig`), made from the flags."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from cpa.kube.targets import Target
from cpa.kube.targetselector import TargetSelector

__all__ = ["LoopConfig"]


class LoopConfig(NamedTuple):
    """What the poll loop is told: where the parameters and the targets are, how often to
    poll and when to give up. The daemon builds it from its flags
    (:func:`cpa.horizontal.daemon.cpa_main.loop_config`); the loop knows nothing of the
    command line."""

    namespace: str
    configmap: str
    targets: tuple[Target, ...]
    poll_period_seconds: float = 10.0
    default_params: Mapping[str, str] | None = None
    """The ConfigMap's data to create it with when it is missing (``--default-params``)."""
    max_sync_failures: int = 0
    """Consecutive failed polls that end the loop with exit code 1; 0: never."""
    react_to_node_changes: bool = False
    """Ours (``--react-to-node-changes``): poll at once, between the period's polls, when
    the node counts change the decision (:meth:`Autoscaler.nodes_changed`)."""
    dry_run: bool = False
    """Ours (``--dry-run``): compute everything, write nothing (no scale or HPA write, no
    ConfigMap creation); log what would have been written."""
    config_dir: str = ""
    """Ours (``--config-dir``): read the parameters from this mounted ConfigMap directory,
    never from the API."""
    update_configmap_from_defaults: bool = False
    """Ours (``--update-configmap-from-defaults``): new defaults replace the data of a
    ConfigMap nobody edited since the autoscaler wrote it."""
    target_selectors: tuple[TargetSelector, ...] = ()
    """Ours (``--target-selector``): the workloads each selects are targets too, listed
    every poll."""
