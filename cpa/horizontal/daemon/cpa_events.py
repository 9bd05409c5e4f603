"""Kubernetes Events (events.k8s.io/v1) about what the autoscaler did: opt-in (``--events``).

Why opt-in: upstream never created Events, and the RBAC real clusters grant it has no
``events create``; with ``--events`` but without that right, the daemon logs one clear line
and carries on (it tries again an hour later, in case the right was granted meanwhile).
Every Event goes through :meth:`EventRecorder.emit`, which truncates, swallows and logs
failures: an Event is a side effect and must never fail or slow a poll by more than one
request.

What is recorded:

* ``Normal``/``Scaled`` regarding the target, on every replica change: old -> new, the mode
  and the counts;
* ``Warning``/``InvalidParameters`` regarding the ConfigMap, once per resourceVersion whose
  parameters are invalid (with ``--config-dir`` and no ``--configmap``, none: there is no
  object to regard);
* ``Normal``/``DefaultsApplied`` regarding the ConfigMap, when
  ``--update-configmap-from-defaults`` replaced its data with new defaults;
* ``Warning``/``ReplicasCapped`` regarding the target (``capToPlaceable``), when its
  replicas newly exceed the Nodes (or zones) its Pods can be placed on, or by another
  number: capped, or with ``"report"`` only said;
* ``Warning``/``ForeignWrite`` regarding the target (``--watch-targets``), on every replica
  count another writer set, naming its field manager.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from cpa.kube.api import Api
from cpa.kube.writers import writer_for
from cpa.runtime.event_sink import NOTE_LIMIT, RETRY_FORBIDDEN_SECONDS, EventSink

if TYPE_CHECKING:
    from cpa.horizontal.daemon.cpa_loop import PollResult
    from cpa.horizontal.decide.placeable import CapOutcome
    from cpa.kube.targets import Target

__all__ = ["NOTE_LIMIT", "REPORTING_CONTROLLER", "RETRY_FORBIDDEN_SECONDS", "EventRecorder"]

REPORTING_CONTROLLER = "cluster-proportional-autoscaler"


class EventRecorder:
    """Posts Events to ``namespace``; ``instance`` names this process (the Pod name). How
    an Event is posted (and a 403 handled) is :class:`cpa.runtime.event_sink.EventSink`'s."""

    def __init__(self, api: Api, namespace: str, configmap: str, instance: str, *,
                 mounted: bool = False,
                 clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        """``mounted`` (``--config-dir``): the parameters' versions are the directory's, not
        the ConfigMap's resourceVersions, so the Events regard the ConfigMap without one
        (and none at all when ``configmap`` is empty)."""
        self._mounted = mounted
        self._sink = EventSink(api, namespace, REPORTING_CONTROLLER, instance,
                               clock=clock, wall=wall)
        self._namespace = namespace
        self._configmap = configmap
        self._warned_versions: set[str] = set()
        self.emit = self._sink.emit

    @property
    def sent(self) -> int:
        return self._sink.sent

    @property
    def failed(self) -> int:
        return self._sink.failed

    def _capped(self, target: Target, outcome: CapOutcome) -> None:
        room = outcome.room
        kind = target.api
        done = (f"capped to {outcome.replicas}" if outcome.replicas < outcome.wanted
                else f"not capped (capToPlaceable is \"report\"): {outcome.unplaceable} "
                     "stay Pending")
        self.emit("Warning", "ReplicasCapped", "Scale", {
            "apiVersion": kind.api_version, "kind": kind.name, "name": target.name,
            "namespace": self._namespace},
            f"{outcome.wanted} replicas wanted, but a required anti-affinity of the Pods "
            f"against each other on {room.key} lets them be placed on {room.domains} "
            f"only: {done}")

    # --- the observer ------------------------------------------------------------------
    def observe(self, result: PollResult) -> None:
        for scale in result.scales:
            decision = result.decisions.get(scale.target, result.decision)
            placed = result.target_counts.get(scale.target)  # ours: targetPlacement
            counts = placed if placed is not None else result.counts
            if not scale.changed or decision is None or counts is None:
                continue
            kind = scale.target.api
            what = writer_for(scale.target).change_note(scale.target, scale.previous,
                                                        scale.replicas)
            where = ("the Nodes its Pod template fits on are" if placed is not None
                     else "the cluster has")
            note = (f"{what} ({decision.mode} mode: {decision.nodes} nodes and "
                    f"{decision.cores} cores counted; {where} {counts.total_nodes} "
                    f"nodes and {counts.total_cores} cores, {counts.schedulable_nodes} and "
                    f"{counts.schedulable_cores} of them schedulable)")
            outcome = result.behavior.get(scale.target)
            if outcome is not None and outcome.shaped:
                note += (f"; the parameters gave {outcome.desired}, the behavior wrote "
                         f"{outcome.replicas}: {outcome.reason}")
            self.emit("Normal", "Scaled", "Scale", {
                "apiVersion": kind.api_version, "kind": kind.name,
                "name": scale.target.name, "namespace": self._namespace}, note)
        for capped_target, capped in result.placeable_changed:
            self._capped(capped_target, capped)
        self._foreign(result)
        defaults = result.configmap_defaults
        if defaults is not None and defaults.replaced is not None:
            self.emit("Normal", "DefaultsApplied", "UpdateConfigMap", {
                "apiVersion": "v1", "kind": "ConfigMap", "name": self._configmap,
                "namespace": self._namespace},
                f"Replaced the data of ConfigMap {self._namespace}/{self._configmap} with the "
                "new --default-params: nobody had edited what the autoscaler wrote "
                f"(keys before: {', '.join(sorted(defaults.replaced)) or 'none'})")
        invalid, version = result.params_invalid, result.params_version
        if invalid is not None and version is not None and self._configmap \
                and version not in self._warned_versions:
            self._warned_versions.add(version)
            regarding = {"apiVersion": "v1", "kind": "ConfigMap", "name": self._configmap,
                         "namespace": self._namespace}
            if not self._mounted:
                regarding["resourceVersion"] = version
            self.emit("Warning", "InvalidParameters", "LoadParameters", regarding, invalid)

    def _foreign(self, result: PollResult) -> None:
        """``--watch-targets``: a Warning for each count another writer set."""
        for write in result.foreign_writes:
            kind = write.target.api
            answer = ("it is contended, so answered at the poll period only"
                      if write.contended else "answered at once")
            ours = f" over our {write.ours}" if write.ours is not None else ""
            self.emit("Warning", "ForeignWrite", "Scale", {
                "apiVersion": kind.api_version, "kind": kind.name,
                "name": write.target.name, "namespace": self._namespace},
                f"Field manager {write.manager} set the replicas of {write.target} to "
                f"{write.found}{ours}; {answer}")
