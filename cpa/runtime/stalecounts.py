"""Stale node counts: the node watch has been down for more than a few poll periods, so
the counts may be out of date. Both daemons poll on (they decide on the last known counts)
and say so, once per episode, in the log and on ``/last-poll``; upstream stays silent.
"""

from __future__ import annotations

from collections.abc import Callable

from cpa import logs
from cpa.nodes.watch import WatchStatus

__all__ = ["STALE_AFTER_MIN_SECONDS", "STALE_AFTER_POLLS", "StaleCounts"]

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
