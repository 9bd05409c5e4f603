"""Which kinds of object are counted: a watch per kind while the parameters in force use it.

The poll hands over the kinds its parameters count (:meth:`ObjectCounters.use`); a kind no
parameters use any more has its watch stopped and its objects forgotten, so a cluster
whose parameters never name an axis costs no request and no memory. The poll then reads
each count (:meth:`ObjectCounters.count`): an int, or why there is none.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Protocol

from cpa import logs
from cpa.kube.api import StreamingApi
from cpa.objects.watch import KINDS, Kind, ObjectWatch

__all__ = ["CountUnavailable", "ObjectCounters", "Watch"]


class CountUnavailable(Exception):
    """A kind the parameters count is not counted: not listed yet, or refused (403)."""


class Watch(Protocol):
    """What the counters need of a watch (:class:`~cpa.objects.watch.ObjectWatch`)."""

    @property
    def error(self) -> str | None: ...

    @property
    def forbidden(self) -> bool: ...

    @property
    def synced(self) -> bool: ...

    @property
    def count(self) -> int: ...

    def start(self) -> None: ...

    def stop(self, timeout: float = ...) -> None: ...

    def wait_synced(self, timeout: float | None = None) -> bool: ...


class ObjectCounters:
    """The watches of the kinds in use, started and stopped as the parameters change."""

    def __init__(self, api: StreamingApi, *,
                 make: Callable[[Kind], Watch] | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 first_list_wait: float = 0.0) -> None:
        """``first_list_wait``: how long the first poll that needs a kind waits for its
        first list (the daemon's poll period), rather than failing at once."""
        self._first_wait = first_list_wait
        self._fresh: set[str] = set()  # started, and no poll has waited for them yet
        self._make = make or (lambda kind: ObjectWatch(api, kind, clock=clock,
                                                        rng=random.Random()))
        self._watches: dict[str, Watch] = {}
        self._log = logs.get_logger("objects")

    @property
    def kinds(self) -> frozenset[str]:
        """The kinds being watched now."""
        return frozenset(self._watches)

    def use(self, kinds: frozenset[str]) -> None:
        """Watch exactly ``kinds`` from now on."""
        for name in sorted(set(self._watches) - kinds):
            self._watches.pop(name).stop()
            self._fresh.discard(name)
            self._log.info("objects.watch_stopped", kind=name)
        for name in sorted(kinds - set(self._watches)):
            watch = self._watches[name] = self._make(KINDS[name])
            watch.start()
            self._fresh.add(name)
            self._log.info("objects.watch_started", kind=name)

    def count(self, kind: str) -> int:
        """The count of ``kind``; :class:`CountUnavailable` says why there is none (a 403
        names the rule to add, even when an earlier list had counted)."""
        watch = self._watches.get(kind)
        if watch is None:
            raise CountUnavailable(f"the {kind} are not watched")
        if kind in self._fresh:
            self._fresh.discard(kind)
            watch.wait_synced(self._first_wait)
        if watch.forbidden and watch.error:
            raise CountUnavailable(watch.error)
        if not watch.synced:
            why = f": {watch.error}" if watch.error else ""
            raise CountUnavailable(f"the {kind} are not counted yet (their first list is not "
                                   f"complete){why}")
        return watch.count

    def counts(self) -> dict[str, int | None]:
        """Each watched kind's count, None where there is none (for metrics)."""
        out: dict[str, int | None] = {}
        for name, watch in self._watches.items():
            out[name] = watch.count if watch.synced else None
        return out

    def stop(self) -> None:
        self.use(frozenset())
