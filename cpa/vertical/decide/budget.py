"""The fallback's disruption budget (``--resize-fallback-max-pods-per-cycle``,
``--resize-fallback-grace-period``, ours; the castai fork of CPVA has both flags): which
refused Pods the fallback may restart this poll.

Why: in-place resize falls back to a restart where the cluster refuses a resize (see
:mod:`cpa.vertical.daemon.inplace`). Unbounded, that is CPVA's write -- the template is
patched and the controller replaces every Pod. With a budget the fallback restarts Pods
itself, oldest refusal first, at most N per poll, and only once a Pod's refusal has lasted
the grace period (a refusal that clears by itself, a deferred resize the kubelet applies
after all, restarts nothing).

This module keeps only the when and how many; it does not classify refusals (that is the
resizer's) nor send anything (:mod:`cpa.vertical.daemon.fallback`). Pure: the clock is an
argument.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["FallbackBudget", "FallbackPlan"]


@dataclass(frozen=True, slots=True)
class FallbackPlan:
    """One poll's share of the fallback."""

    restart: tuple[str, ...] = ()  # past the grace period and within the budget
    over_budget: tuple[str, ...] = ()  # past the grace period, left for a later poll
    waiting: tuple[tuple[str, float], ...] = ()  # within the grace period: (Pod, s left)

    @property
    def due(self) -> bool:
        """Whether the fallback acts this poll (some refusal outlasted the grace)."""
        return bool(self.restart or self.over_budget)


class FallbackBudget:
    """Remembers since when each Pod's resize is refused, and spends the budget."""

    def __init__(self, max_pods: int = 0, grace: float = 0.0) -> None:
        """``max_pods`` 0: no bound on the Pods per poll; ``grace`` in seconds."""
        if max_pods < 0 or grace < 0:
            raise ValueError("max_pods and grace must not be negative")
        self.max_pods = max_pods
        self.grace = grace
        self._since: dict[str, float] = {}  # Pod -> when its refusal was first seen

    @property
    def bounded(self) -> bool:
        """Whether the fallback restarts Pods itself (else the controller does)."""
        return self.max_pods > 0

    def plan(self, refused: Iterable[str], now: float) -> FallbackPlan:
        """This poll's plan for the Pods refused now (a Pod no longer refused is
        forgotten: refused again later, it waits the whole grace period again)."""
        current = dict.fromkeys(refused)
        for pod in [p for p in self._since if p not in current]:
            del self._since[pod]
        for pod in current:
            self._since.setdefault(pod, now)
        order = sorted(current, key=lambda pod: (self._since[pod], pod))
        due = [pod for pod in order if now - self._since[pod] >= self.grace]
        waiting = tuple((pod, self.grace - (now - self._since[pod]))
                        for pod in order if now - self._since[pod] < self.grace)
        if not self.bounded:
            return FallbackPlan(tuple(due), (), waiting)
        return FallbackPlan(tuple(due[:self.max_pods]), tuple(due[self.max_pods:]), waiting)
