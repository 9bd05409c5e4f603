"""``--watch-targets`` (ours): when answering another writer at once turns into a fight.

Another writer's change of a target's replicas is answered at once (a poll, not a poll
period later). Two writers that each answer at once would flap the target as fast as the
API server takes the writes, so a target is *contended* once another writer undid ours
:data:`FIGHT_WRITES` times within :data:`FIGHT_WINDOW_SECONDS`: from then on its foreign
writes are answered at the poll period only. It calms down (answered at once again) after
:data:`CALM_SECONDS` without a foreign write.

The rule is a pure function of the foreign writes' times (:func:`contended`); the small
state around it (:class:`Contention`) is shared by the watch's thread, which asks whether
to answer at once, and the poll, which records each foreign write it undoes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from cpa.kube.targets import Target

__all__ = ["CALM_SECONDS", "FIGHT_WINDOW_SECONDS", "FIGHT_WRITES", "Contention", "contended"]

FIGHT_WRITES = 3
"""Foreign writes within the window that make a fight."""
FIGHT_WINDOW_SECONDS = 300.0
"""The window those writes fall in."""
CALM_SECONDS = 300.0
"""How long a contended target must go without a foreign write to be answered at once
again (and ``cpa_target_contended`` back to 0)."""


def contended(times: Sequence[float], now: float, was: bool) -> bool:
    """Whether a target is contended at ``now``, given the times of its foreign writes
    (ascending) and whether it was contended before: :data:`FIGHT_WRITES` writes within
    :data:`FIGHT_WINDOW_SECONDS` start a fight; a fight lasts until the last foreign write
    is :data:`CALM_SECONDS` old."""
    if sum(1 for t in times if 0 <= now - t < FIGHT_WINDOW_SECONDS) >= FIGHT_WRITES:
        return True
    return was and bool(times) and now - times[-1] < CALM_SECONDS


class Contention:
    """Each target's recent foreign writes and whether it is contended; thread-safe."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._times: dict[Target, list[float]] = {}
        self._contended: dict[Target, bool] = {}

    def record(self, target: Target) -> bool:
        """A foreign write of ``target`` undone now; whether it is contended after it."""
        now = self._clock()
        with self._lock:
            times = self._times.setdefault(target, [])
            times.append(now)
            keep = max(FIGHT_WINDOW_SECONDS, CALM_SECONDS)
            times[:] = [t for t in times if now - t < keep][-FIGHT_WRITES:]
            return self._update(target, now)

    def is_contended(self, target: Target) -> bool:
        """Whether ``target`` is contended now (the watch asks before answering at once)."""
        with self._lock:
            return self._update(target, self._clock())

    def _update(self, target: Target, now: float) -> bool:
        state = self._contended[target] = contended(
            self._times.get(target, ()), now, self._contended.get(target, False))
        return state
