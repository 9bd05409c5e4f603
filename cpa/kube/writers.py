"""Target writers: one per way of writing a target's count, and the one place that knows
which a target takes. Callers (the poll, ``cpa explain``, Events, metrics) ask the writer,
never the kind.

A writer reads what a target holds now, ensures the count (GET, then a write only on a
change), and says what the write means for ``cpa explain`` and a ``Scaled`` Event;
``bounded`` writers' own bounds may change the count written (an HPA's 1..maxReplicas).
"""

from __future__ import annotations

from typing import Protocol

from cpa.kube.api import Api, RawApi
from cpa.kube.hpafloor import HPA_FLOOR
from cpa.kube.scale import SCALE
from cpa.kube.targets import KINDS, Current, ScaleResult, Shape, Target

__all__ = ["TargetWriter", "ensure_replicas", "read_current", "read_replicas", "writer_for"]


class TargetWriter(Protocol):
    """One way of writing a target's count."""

    @property
    def writes(self) -> str:
        """What is written: ``scale``, ``spec.minReplicas`` (``cpa explain -o json``)."""
        ...

    @property
    def unit(self) -> str:
        """How ``cpa explain``'s answer names the count (``3 replicas``)."""
        ...

    @property
    def bounded(self) -> bool:
        """Whether the target's own bounds may change the count (reported when they do)."""
        ...

    @property
    def has_pods(self) -> bool:
        """Whether the target's ``/scale`` selects Pods of its own (what the load axis
        scrapes); an HPA floor's count goes to the HPA, not to a workload."""
        ...

    def read(self, api: Api, namespace: str, target: Target) -> Current: ...

    def ensure(self, api: RawApi, namespace: str, target: Target, replicas: int,
               shape: Shape | None = None, dry_run: bool = False) -> ScaleResult: ...

    def explain(self, target: Target, current: Current,
                replicas: int) -> tuple[int, tuple[str, str] | None]:
        """The count written for ``replicas`` and, when there is something to say, the
        step (key, text) that says why."""
        ...

    def change_note(self, target: Target, previous: int | None, replicas: int) -> str: ...


def writer_for(target: Target) -> TargetWriter:
    """The writer of ``target``. A ``RESOURCE.GROUP`` target not resolved yet is a scale
    target (discovery accepts only resources with ``/scale``)."""
    kind = target.resolved or KINDS.get(target.kind)
    return HPA_FLOOR if kind is not None and kind.floor else SCALE


def read_current(api: Api, namespace: str, target: Target) -> Current:
    """GET what the target holds now (raises ApiError)."""
    return writer_for(target).read(api, namespace, target)


def read_replicas(api: Api, namespace: str, target: Target) -> int:
    """The target's replicas now (an HPA's minReplicas; raises ApiError)."""
    return read_current(api, namespace, target).replicas


def ensure_replicas(api: RawApi, namespace: str, target: Target, replicas: int,
                    shape: Shape | None = None, dry_run: bool = False) -> ScaleResult:
    """Write ``replicas`` to the target its way, when it holds another count."""
    return writer_for(target).ensure(api, namespace, target, replicas, shape, dry_run)
