"""What every poll of either daemon reports, and how its outcome reaches the observers.

Each daemon's result (:class:`cpa.horizontal.daemon.cpa_loop.PollResult`,
:class:`cpa.vertical.daemon.cpvpa_loop.VerticalPollResult`) extends :class:`PollRecord` with what
its poll saw; observers (health, metrics, Events) get the whole result, and none of them
may stop the polls.

Plain classes, not dataclasses: the first poll imports this module while the Node list is
decoded, and a dataclass costs ~1 ms to create. Each class names its fields in order
(``_FIELDS``, its base's first), from which :class:`PollRecord` compares and shows any
result as the dataclass did; every ``__init__`` takes its base's fields first, as the
dataclass's did.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar, TypeVar

__all__ = ["FRESH", "PollRecord", "report"]

FRESH: Any = object()
"""The default of a list or dict argument: a new empty one for each result (a dataclass's
``field(default_factory=...)``)."""


class PollRecord:
    """When a poll ran, how long it took, and what went wrong. (A plain class, not a
    dataclass: see the module's docstring.)"""

    __slots__ = ("duration", "error", "stale", "started")
    _FIELDS: ClassVar[tuple[str, ...]] = ("started", "duration", "error", "stale")
    """Every field, in the order of ``__init__``'s arguments: what ``==`` compares and
    ``repr`` shows (a subclass appends its own)."""

    def __init__(self, started: float, duration: float = 0.0, error: str | None = None,
                 stale: str | None = None) -> None:
        self.started = started  # the loop's clock
        self.duration = duration
        self.error = error
        self.stale = stale  # why the counts may be out of date (the poll still ran)

    def __eq__(self, other: object) -> bool:
        """As a dataclass's: the same class, and equal fields (compared as one tuple)."""
        if not isinstance(other, PollRecord) or other.__class__ is not self.__class__:
            return NotImplemented
        return (tuple(getattr(self, name) for name in self._FIELDS)
                == tuple(getattr(other, name) for name in self._FIELDS))

    # With __eq__ and no __hash__, not hashable: as the (mutable) dataclass.

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._FIELDS)
        return f"{type(self).__qualname__}({fields})"

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
