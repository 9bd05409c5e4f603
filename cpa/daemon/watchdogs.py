"""Two things a poll watches for beside its own job, each logged once per episode.

* :class:`StaleCounts`: the node watch has been down for more than a few poll periods, so
  the counts may be out of date (the poll still decides on them, and says so);
* :class:`OtherWriters`: a target's replicas are not what we last wrote (or found right)
  there: an HPA, a second autoscaler or a person changes them, and we are about to undo it;
* :class:`FloorClamps` (ours, HPA floor targets): the HPA's bounds keep its minReplicas
  from the count the parameters give (above maxReplicas, or 0).

Upstream does neither and stays silent in both cases; here they are plain state machines
the poll loop asks once per poll, so each can be tested on its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cpa import logs
from cpa.kube.scale import ScaleResult, Target
from cpa.nodes.watch import WatchStatus

__all__ = ["STALE_AFTER_MIN_SECONDS", "STALE_AFTER_POLLS", "FloorClamps", "OtherWriters",
           "Overwrite", "StaleCounts"]

STALE_AFTER_POLLS = 3
STALE_AFTER_MIN_SECONDS = 30.0


class StaleCounts:
    """Reports stale node counts: down longer than max(3 poll periods, 30 s)."""

    def __init__(self, status: Callable[[], WatchStatus], clock: Callable[[], float],
                 poll_period_seconds: float) -> None:
        self._status = status
        self._clock = clock
        self._limit = max(STALE_AFTER_POLLS * poll_period_seconds, STALE_AFTER_MIN_SECONDS)
        self._logged = False
        self._log = logs.get_logger("autoscaler")

    def check(self) -> str | None:
        """The reason the counts may be stale, or None while they are current."""
        status = self._status()
        down_for = status.stale_seconds(self._clock())
        if down_for <= self._limit:
            if self._logged:
                self._log.info("nodes.fresh", watch_restarts=status.restarts)
                self._logged = False
            return None
        if not self._logged:
            self._log.warning("nodes.stale", down_seconds=round(down_for), error=status.error,
                              hint="check the API server's reachability and the nodes "
                                   "list/watch permission")
            self._logged = True
        return (f"node counts may be stale: the node watch has been down for "
                f"{down_for:.0f}s ({status.error or 'no reason given'}); deciding on the "
                "last known counts")


@dataclass(frozen=True, slots=True)
class Overwrite:
    """A target found with other replicas than we last wrote there."""

    target: Target
    ours: int
    found: int


class OtherWriters:
    """What we last wrote (or found right) on each target, and who undid it."""

    def __init__(self) -> None:
        self._written: dict[Target, int] = {}
        self._fighting: set[Target] = set()  # targets in an episode of another writer
        self._log = logs.get_logger("autoscaler")

    def check(self, res: ScaleResult) -> Overwrite | None:
        """Look at one target's scale result; warn once per episode, return every
        overwrite (for the metric)."""
        target, ours = res.target, self._written.get(res.target)
        found: Overwrite | None = None
        if ours is not None and res.previous is not None and res.previous != ours:
            found = Overwrite(target, ours, res.previous)
            if target not in self._fighting:
                self._fighting.add(target)
                self._log.warning(
                    "scale.overwritten", target=str(target), ours=ours, found=res.previous,
                    hint="another writer changes this target's replicas (an HPA, a second "
                         "autoscaler, a person): see 'Another writer' in the README")
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
