"""``--react-to-node-changes`` (ours, opt-in): an early poll, between the period's polls,
when the node counts change the decision.

The node store calls :meth:`EarlyPolls.nodes_changed` from the watch's thread on every
changed Node record; that only raises a flag. The poll loop's wait (:meth:`EarlyPolls.sleep`
instead of the ticker's own) waits for the changes to pause for ``REACT_DEBOUNCE_SECONDS``
(at most ``REACT_MIN_INTERVAL_SECONDS`` after the first): a node pool's Nodes arriving
together are one burst, and the burst's last counts are the ones looked at. It then
recomputes the decision from the counts and the parameters parsed last (no request, no
parsing: O(1)) and polls early only when the replica count moved, at most once a second,
and never when the period's poll comes first anyway. A follower never polls early.

Why the pause and not a fixed delay from the first change: a fixed delay polls in the
middle of a burst that lasts longer than the delay, and the burst's last Nodes then wait
out the one-a-second limit (a 0.2 s burst was written 0.9 s after its last Node).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cpa import logs
from cpa.horizontal.decide.decision import decide
from cpa.horizontal.decide.modes.mode import Params
from cpa.nodes.counts import ClusterCounts
from cpa.runtime.ticker import Ticker

__all__ = ["REACT_DEBOUNCE_SECONDS", "REACT_MIN_INTERVAL_SECONDS", "EarlyPolls"]

REACT_DEBOUNCE_SECONDS = 0.1
"""How long the node changes must pause before the counts are looked at: the rest of a
burst (a node pool's Nodes registering together) lands in the same early poll."""
REACT_MIN_INTERVAL_SECONDS = 1.0
"""At most one early poll a second, however the Nodes churn."""


@dataclass(eq=False, repr=False, slots=True)
class EarlyPolls:
    """When to poll between the period's polls, and the early poll itself (``poll``).
    ``last``: the parameters parsed last and the replicas the last poll decided."""

    ticker: Ticker
    clock: Callable[[], float]
    counts: Callable[[], ClusterCounts]
    last: Callable[[], tuple[Params | None, int | None]]
    poll: Callable[[], object]
    may_write: Callable[[], bool] | None
    early_polls: int = field(init=False, default=0)
    """Polls run early because the node counts changed the decision."""
    node_wakeups: int = field(init=False, default=0)
    """Node changes the loop woke up for."""
    decision_checks: int = field(init=False, default=0)
    """Decisions recomputed against new node counts, without a poll."""
    _nodes_dirty: bool = field(init=False, default=False)
    _last_early: float = field(init=False, default=float("-inf"))
    _log: Any = field(init=False, default_factory=lambda: logs.get_logger("autoscaler"))

    def nodes_changed(self) -> None:
        """The node store's ``on_change``: a Node's record changed. Runs in the watch's
        thread once per such event, so it only raises a flag (and sets an event the first
        time)."""
        if not self._nodes_dirty:
            self._nodes_dirty = True
            self.ticker.interrupt()

    def sleep(self, stop: threading.Event, until: float) -> bool:
        """The ticker's prompt wait with early polls: the same boundaries, and an early
        poll whenever the node counts change the decision; True when stopped."""
        return self.ticker.sleep_prompt(stop, until, self._between)

    def _between(self, stop: threading.Event, until: float) -> None:
        if self._nodes_dirty:
            self._react(stop, until)

    def _pause(self, stop: threading.Event, seconds: float) -> bool:
        """Wait ``seconds`` (node changes meanwhile are taken in by the caller); False
        when a stop or a wake() cut it short."""
        deadline = self.clock() + seconds
        while True:
            if stop.is_set() or self.ticker.woken:
                return False
            remaining = deadline - self.clock()
            if remaining <= 0:
                return True
            self.ticker.wait_interrupt(min(remaining, 1.0))

    def _settle(self, stop: threading.Event, cap: float) -> float | None:
        """Wait until the node changes pause for ``REACT_DEBOUNCE_SECONDS``, or until
        ``cap`` while they go on; the time it ended, or None when a stop or a wake() cut
        it short. A change that comes after the flag is lowered here raises it again, so
        none is lost: the decision reads the counts, not the events."""
        while True:
            self._nodes_dirty = False
            now = self.clock()
            if not self._pause(stop, min(now + REACT_DEBOUNCE_SECONDS, cap) - now):
                return None
            now = self.clock()
            if not self._nodes_dirty or now >= cap:
                return now

    def _decision_moved(self) -> bool:
        """Do the counts now give another replica count than the last poll's decision?
        Computed with the parameters parsed last (no request, no parsing): O(1)."""
        self._nodes_dirty = False
        params, last = self.last()
        if params is None or last is None:
            return False
        self.decision_checks += 1
        try:
            decision = decide(params, self.counts())
        except Exception:  # the next regular poll reports whatever this is
            return False
        if decision.error is not None:  # e.g. the Pods or Services, which only polls count
            return False
        replicas = decision.replicas
        if logs.v(5):  # at most ten a second: not even --v=4's every-poll level
            self._log.info("nodes.checked", replicas=replicas, desired_before=last,
                           moved=replicas != last)
        return replicas != last

    def _react(self, stop: threading.Event, until: float) -> None:
        """A node change: once the changes pause, and at most once a second, poll early if
        the counts now move the decision. A follower never does (only the leader polls), nor
        does the loop when the period's poll comes first anyway."""
        self.node_wakeups += 1
        if self.may_write is not None and not self.may_write():
            self._nodes_dirty = False
            return
        last_call = until - REACT_DEBOUNCE_SECONDS  # later, the period's poll sees them
        earliest = max(self.clock() + REACT_DEBOUNCE_SECONDS,
                       self._last_early + REACT_MIN_INTERVAL_SECONDS)
        if earliest >= last_call:
            self._nodes_dirty = False
            return
        settled = self._settle(stop, min(self.clock() + REACT_MIN_INTERVAL_SECONDS,
                                         last_call))
        if settled is None:
            return
        if settled >= last_call:
            self._nodes_dirty = False
            return
        if earliest > settled and not self._pause(stop, earliest - self.clock()):
            return
        if not self._decision_moved():
            return
        if self.may_write is not None and not self.may_write():
            return
        self._last_early = self.clock()
        self.early_polls += 1
        if logs.v(4):
            self._log.info("poll.early", reason="the node counts change the decision",
                           desired_before=self.last()[1])
        self.poll()
