"""The poll period of both daemons: poll now, then on every period boundary, as Go's
``time.Ticker`` ticks (an overrun skips the ticks it missed instead of firing them back to
back, so slow polls never pile up), until told to stop; a wake() (leadership acquired)
ticks at once and makes that moment the new boundary.

The plain wait looks at a wake() between steps of ``step`` seconds (none when nothing can
wake the loop); a loop that another thread wakes often (the autoscaler's load axis, whose
scrapes call wake()) waits with :meth:`Ticker.sleep_prompt`, which takes it at once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["Sleep", "Ticker", "next_boundary"]

Sleep = Callable[[threading.Event, float], bool]
"""Wait until the clock reads the second argument (or a wake); True when stopped."""


def next_boundary(previous: float, period: float, now: float) -> float:
    """The first boundary after ``previous`` that is still ahead of ``now``."""
    next_at = previous + period
    if next_at <= now:
        next_at += period * ((now - next_at) // period + 1)
    return next_at


class Ticker:
    """Calls ``tick`` on every boundary; ``wake`` cuts the wait short."""

    def __init__(self, period: float, clock: Callable[[], float], step: float = 1.0) -> None:
        """``step``: how long one wait may be when a wake() can come from another thread
        (it is looked at between steps); ``inf`` when nothing can wake the loop."""
        self._period = period
        self._clock = clock
        self._step = step
        self.woken = False
        self._wakeup = threading.Event()  # wake() and interrupt(), for sleep_prompt()

    def wake(self) -> None:
        self.woken = True
        self._wakeup.set()

    def interrupt(self) -> None:
        """Make :meth:`sleep_prompt` look at its stop event now (set just before), and at
        what its ``between`` looks at."""
        self._wakeup.set()

    def sleep(self, stop: threading.Event, until: float) -> bool:
        """Wait until the clock reads ``until``, or a wake(); True when stopped."""
        while not self.woken:
            remaining = until - self._clock()
            if remaining <= 0:
                return stop.is_set()
            if stop.wait(min(remaining, self._step)):
                return True
        self.woken = False
        return stop.is_set()

    def sleep_prompt(self, stop: threading.Event, until: float,
                     between: Callable[[threading.Event, float], None] | None = None
                     ) -> bool:
        """:meth:`sleep` with a wake() from another thread taken at once, and the stop
        event at once after :meth:`interrupt` (every second at least); True when stopped.
        ``between(stop, until)`` runs after each :meth:`interrupt` (or second) that neither
        stopped nor woke the loop (the early polls' look at the node counts)."""
        while True:
            if stop.is_set():
                return True
            if self.woken:
                self.woken = False
                return False
            remaining = until - self._clock()
            if remaining <= 0:
                return False
            self.wait_interrupt(min(remaining, 1.0))
            if between is not None and not stop.is_set() and not self.woken:
                between(stop, until)

    def wait_interrupt(self, seconds: float) -> None:
        """Wait up to ``seconds`` for an :meth:`interrupt` (or a wake())."""
        self._wakeup.wait(seconds)
        self._wakeup.clear()

    def run(self, stop: threading.Event, tick: Callable[[], int | None],
            sleep: Sleep | None = None) -> int:
        """Tick now, then on every boundary until ``stop``; the exit code is the first
        one ``tick`` returns, else 0. ``sleep`` replaces :meth:`sleep` (one that also
        reacts to something between the boundaries)."""
        wait = sleep or self.sleep
        next_at = self._clock()
        while not stop.is_set():
            code = tick()
            if code is not None:
                return code
            next_at = next_boundary(next_at, self._period, self._clock())
            if wait(stop, next_at):
                break
            next_at = min(next_at, self._clock())  # woken early: this is the new boundary
        return 0
