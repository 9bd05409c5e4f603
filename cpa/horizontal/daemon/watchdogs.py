"""Two things a poll watches for beside its own job, each logged once per episode (the
third, stale node counts, is both daemons': :mod:`cpa.runtime.stalecounts`).

* :class:`OtherWriters`: a target's replicas are not what we last wrote (or found right)
  there: an HPA, a second autoscaler or a person changes them, and we are about to undo it.
  The same object only: a target deleted and created again (another UID) starts afresh
  with the replicas of its manifest, which no one overwrote;
* :class:`FloorClamps` (ours, HPA floor targets): the HPA's bounds keep its minReplicas
  from the count the parameters give (above maxReplicas, or 0).

Upstream does neither and stays silent in both cases; here they are plain state machines
the poll loop asks once per poll, so each can be tested on its own.
"""

from __future__ import annotations

from typing import NamedTuple

from cpa import logs
from cpa.kube.targets import ScaleResult, Target

__all__ = ["FloorClamps", "OtherWriters", "Overwrite"]


class Overwrite(NamedTuple):
    """A target found with other replicas than we last wrote there."""

    target: Target
    ours: int
    found: int


class OtherWriters:
    """What we last wrote (or found right) on each target, and who undid it."""

    def __init__(self) -> None:
        self._written: dict[Target, int] = {}
        self._uids: dict[Target, str] = {}  # the object we wrote to
        self._fighting: set[Target] = set()  # targets in an episode of another writer
        self._log = logs.get_logger("autoscaler")

    def check(self, res: ScaleResult) -> Overwrite | None:
        """Look at one target's scale result; warn once per episode, return every
        overwrite (for the metric)."""
        target = res.target
        if res.uid is not None:
            known = self._uids.get(target)
            if known is not None and known != res.uid:  # deleted and created again
                self._written.pop(target, None)
                self._fighting.discard(target)
                if logs.v(1):
                    self._log.info("scale.target_recreated", target=str(target), uid=res.uid)
            self._uids[target] = res.uid
        ours = self._written.get(target)
        found: Overwrite | None = None
        if ours is not None and res.previous is not None and res.previous != ours:
            found = Overwrite(target, ours, res.previous)
            if target not in self._fighting:
                self._fighting.add(target)
                self._log.warning(
                    "scale.overwritten", target=str(target), ours=ours, found=res.previous,
                    hint="another writer changes this target's replicas (an HPA, a second "
                         "autoscaler, a person): see 'Another writer' in "
                         "docs/troubleshooting.md")
        elif ours is not None and res.previous == ours and target in self._fighting:
            self._fighting.discard(target)
            self._log.info("scale.overwritten.ended", target=str(target), replicas=ours)
        if res.error is None:
            self._written[target] = res.replicas if res.changed else (
                res.previous if res.previous is not None else res.replicas)
        return found


class FloorClamps:
    """HPA floor targets whose minReplicas cannot take the parameters' count: warned once
    per episode (a new pair of counts is a new episode), and when it ends."""

    def __init__(self) -> None:
        self._clamped: dict[Target, tuple[int, int]] = {}
        self._log = logs.get_logger("autoscaler")

    def check(self, res: ScaleResult) -> None:
        target = res.target
        if res.error is not None:
            return
        if res.clamped_from is None:
            if self._clamped.pop(target, None) is not None:
                self._log.info("hpa.floor_clamped.ended", target=str(target),
                               min_replicas=res.replicas)
            return
        pair = (res.clamped_from, res.replicas)
        if self._clamped.get(target) == pair:
            return
        self._clamped[target] = pair
        why = ("it is above the HPA's maxReplicas" if res.clamped_from > res.replicas else
               "an HPA's minReplicas cannot be below 1")
        self._log.warning(
            "hpa.floor_clamped", target=str(target), wanted=res.clamped_from,
            min_replicas=res.replicas, max_replicas=res.max_replicas,
            hint=f"the parameters give {res.clamped_from} but {why}: raise the HPA's "
                 "maxReplicas, or lower the parameters")
