"""When a Pod whose resize failed transiently is tried again: a per-Pod exponential backoff.

A resize that failed with a 5xx, 409, 429 or no answer is retried at a later poll instead
of falling back (:mod:`cpa.vertical.decide.resize_errors`). One poll later is right for a single
blip; a Pod whose resize keeps failing (a webhook that flaps, a server shedding load) must
not get one PATCH every poll for ever, so after ``n`` failures in a row the next try waits
``min(cap, initial * factor ** (n - 1))`` seconds from the failure: 1 s, 2 s, 4 s, ...
5 min by default. The first waits are shorter than the default poll period (10 s), so a
blip costs one poll; the cap bounds how stale a flapping Pod can get. A success resets the
Pod's count; a Pod no longer seen is forgotten.

Pure: no clock of its own (every call is given ``now``), no I/O.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Final, Generic, TypeVar

__all__ = ["DEFAULT_POLICY", "Attempt", "Backoff", "BackoffPolicy"]

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True, slots=True)
class BackoffPolicy:
    initial: float = 1.0
    factor: float = 2.0
    cap: float = 300.0

    def delay(self, failures: int) -> float:
        """The wait after ``failures`` (>= 1) failures in a row."""
        step = max(0, failures - 1)
        if self.initial <= 0:
            return 0.0
        if self.factor <= 1:
            return min(self.cap, self.initial)
        wait = self.initial
        for _ in range(step):  # stops at the cap: no float overflow for a huge count
            wait *= self.factor
            if wait >= self.cap:
                return self.cap
        return min(self.cap, wait)


DEFAULT_POLICY: Final = BackoffPolicy()


@dataclass(frozen=True, slots=True)
class Attempt:
    """A key's state after a failure: how many in a row, and when it may be tried again."""

    failures: int
    delay: float
    next_at: float


class Backoff(Generic[K]):
    """The retry schedule of each key (a Pod's uid)."""

    def __init__(self, policy: BackoffPolicy = DEFAULT_POLICY) -> None:
        self.policy = policy
        self._state: dict[K, Attempt] = {}

    def due(self, key: K, now: float) -> bool:
        """Whether ``key`` may be tried at ``now`` (a key that never failed always may)."""
        state = self._state.get(key)
        return state is None or now >= state.next_at

    def get(self, key: K) -> Attempt | None:
        return self._state.get(key)

    def failed(self, key: K, now: float) -> Attempt:
        """Record a failure at ``now``; the attempt says when to try again."""
        previous = self._state.get(key)
        failures = (previous.failures if previous is not None else 0) + 1
        delay = self.policy.delay(failures)
        attempt = self._state[key] = Attempt(failures, delay, now + delay)
        return attempt

    def succeeded(self, key: K) -> None:
        """A success: the next failure starts from the initial wait again."""
        self._state.pop(key, None)

    def keep_only(self, keys: Iterable[K]) -> None:
        """Forget every key not in ``keys`` (Pods gone since)."""
        wanted = set(keys)
        for key in [k for k in self._state if k not in wanted]:
            del self._state[key]

    def __len__(self) -> int:
        return len(self._state)
