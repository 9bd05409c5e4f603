"""``--events`` for ``/cpvpa`` (ours; CPVA creates none): Kubernetes Events regarding each
target, posted through :class:`cpa.runtime.event_sink.EventSink` as the autoscaler's are.

What is recorded, per target and poll:

* ``Normal``/``ResourcesUpdated`` on every template write: the values, the counts, and what
  the controller does with it (a StatefulSet's or DaemonSet's update strategy);
* ``Normal``/``ResizedInPlace`` when Pods were resized in place: which, and the values;
* ``Warning``/``ResizeFallback`` on every fallback (once per change of the computed values
  and reason, as the ``resize.fallback`` log line), with the refusals, and on every poll
  in which the bounded fallback evicted Pods.

A dry run records nothing (nothing changed). RBAC: ``create`` on ``events.k8s.io``
``events`` in the targets' namespace; without it one log line says so and the polls go on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cpa.runtime.event_sink import EventSink

if TYPE_CHECKING:
    from cpa.vertical.daemon.cpvpa_loop import TargetPollResult, VerticalPollResult
    from cpa.vertical.decide.formula import Requirements

__all__ = ["REPORTING_CONTROLLER", "VerticalEvents"]

REPORTING_CONTROLLER = "cluster-proportional-vertical-autoscaler"


def _values(computed: Requirements) -> str:
    return ", ".join(f"{name} {kind}[{res}]={q}"
                     for name, req in computed.items()
                     for kind, values in (("requests", req.requests), ("limits", req.limits))
                     for res, q in values.items())


class VerticalEvents:
    """The observer: one sink, Events regarding each target."""

    def __init__(self, sink: EventSink) -> None:
        self.sink = sink

    def observe(self, result: VerticalPollResult) -> None:
        if result.dry_run:
            return
        counts = f"{result.nodes} nodes, {result.cores} cores"
        for share in result.targets:
            self._target(share, counts)

    def _target(self, share: TargetPollResult, counts: str) -> None:
        regarding = {"apiVersion": "apps/v1", "kind": share.kind, "name": share.name,
                     "namespace": self.sink.namespace}
        if share.written is not None:
            note = f"pod template set to {_values(share.written)} ({counts})"
            if share.fallbacks or share.fallback is not None:
                note += "; the fallback of in-place resize"
            if share.rollout:
                note += f"; {share.rollout}"
            self.sink.emit("Normal", "ResourcesUpdated", "Patch", regarding, note)
        inplace = share.inplace
        plan = share.plan
        if inplace is not None and inplace.resized and plan is not None \
                and plan.computed is not None:
            pods = ", ".join(inplace.resized[:20]) + (
                f" and {len(inplace.resized) - 20} more" if len(inplace.resized) > 20 else "")
            self.sink.emit("Normal", "ResizedInPlace", "Resize", regarding,
                           f"{len(inplace.resized)} Pod(s) resized in place to "
                           f"{_values(plan.computed)} ({counts}): {pods}")
        if share.fallbacks and inplace is not None:
            refusals = "; ".join(str(r) for r in inplace.refusals[:5])
            self.sink.emit("Warning", "ResizeFallback", "Resize", regarding,
                           f"in-place resize refused ({', '.join(share.fallbacks)}): "
                           f"{refusals}; the pod template is patched instead")
        evictions = share.evictions
        if evictions is not None and evictions.evicted:
            self.sink.emit("Warning", "ResizeFallback", "Evict", regarding,
                           f"the fallback evicted {len(evictions.evicted)} Pod(s) whose "
                           f"resize is refused, so that they restart with the new values "
                           f"(at most --resize-fallback-max-pods-per-cycle per poll): "
                           f"{', '.join(evictions.evicted)}")
