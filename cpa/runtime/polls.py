"""What every poll of either daemon reports, and how its outcome reaches the observers.

Each daemon's result (:class:`cpa.horizontal.daemon.cpa_loop.PollResult`,
:class:`cpa.vertical.daemon.cpvpa_loop.VerticalPollResult`) extends :class:`PollRecord` with what
its poll saw; observers (health, metrics, Events) get the whole result, and none of them
may stop the polls.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = ["PollRecord", "report"]

@dataclass(slots=True)
class PollRecord:
    """When a poll ran, how long it took, and what went wrong."""

    started: float  # the loop's clock
    duration: float = 0.0
    error: str | None = None
    stale: str | None = None  # why the counts may be out of date (the poll still ran)

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def health_error(self) -> str | None:
        """What ``/last-poll`` reports: the poll's error, else stale counts, else None."""
        return self.error or self.stale


_R = TypeVar("_R", bound=PollRecord)


def report(observers: Sequence[Callable[[_R], None]], result: _R, log: Any) -> None:
    """Hand ``result`` to each observer in turn; one that fails is logged and skipped."""
    for observer in observers:
        try:
            observer(result)
        except Exception as exc:  # an observer must never stop the polls
            log.error("observer.failed", observer=repr(observer),
                      error=f"{type(exc).__name__}: {exc}")
