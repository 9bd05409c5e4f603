"""``--watch-targets`` (ours): the poll's side of another writer's replica count.

The poll reads each target's replicas before writing; when they are not what we last
wrote (or found right) there, another writer set them (:class:`~cpa.horizontal.daemon.
watchdogs.OtherWriters` says so). With ``--dry-run`` nothing is ours, so any change since
the last poll's reading is another writer's. Each such write is reported (the log event
``target.foreign_write``, the counter, an Event) with the manager the watch saw write it,
and recorded for the contention rule (:mod:`cpa.horizontal.daemon.contention`), whose
start and end are logged once each.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

from cpa import logs
from cpa.horizontal.daemon.contention import CALM_SECONDS, FIGHT_WINDOW_SECONDS, Contention
from cpa.horizontal.daemon.watchdogs import Overwrite
from cpa.kube.targets import ScaleResult, Target

__all__ = ["UNKNOWN_WRITER", "ForeignWrite", "ForeignWrites", "Writers"]

UNKNOWN_WRITER = "unknown"
"""The manager named when managedFields named none (the watch had not seen the write)."""


class Writers(Protocol):
    """Who wrote a target's replicas last, when not us
    (:class:`~cpa.horizontal.daemon.targetwatch.TargetWatches`)."""

    def writer(self, target: Target) -> str | None: ...


class ForeignWrite(NamedTuple):
    """A replica count another writer set, found by a poll."""

    target: Target
    manager: str
    ours: int | None
    """What we last wrote (or found right); None in a dry run."""
    found: int
    contended: bool
    """The target is contended after this write: answered at the poll period only."""


class ForeignWrites:
    """Each target's foreign writes as the polls find them."""

    def __init__(self, writers: Writers, contention: Contention) -> None:
        self._writers = writers
        self._contention = contention
        self._read: dict[Target, int] = {}  # a dry run: the replicas the last poll read
        self._contended: set[Target] = set()
        self._log = logs.get_logger("autoscaler")

    def check(self, res: ScaleResult, overwrite: Overwrite | None) -> ForeignWrite | None:
        """One target's result of this poll (and what :class:`OtherWriters` made of it):
        the foreign write it shows, reported, or None."""
        target, found = res.target, res.previous
        ours: int | None = None
        if res.dry_run:
            before = self._read.get(target)
            if found is not None:
                self._read[target] = found
            if before is None or found is None or found == before:
                return None
        elif overwrite is None:
            return None
        else:
            ours, found = overwrite.ours, overwrite.found
        manager = self._writers.writer(target) or UNKNOWN_WRITER
        contended = self._contention.record(target)
        self._log.warning(
            "target.foreign_write", target=str(target), manager=manager, ours=ours,
            found=found, answer="at the poll period" if contended else "at once",
            hint="another writer set this target's replicas; its field manager is named "
                 "from managedFields: see 'Another writer' in docs/troubleshooting.md")
        self._contention_began(target, manager, contended)
        return ForeignWrite(target, manager, ours, found, contended)

    def states(self, targets: tuple[Target, ...]) -> dict[Target, bool]:
        """Whether each target is contended now (a calm one is logged as ended)."""
        states = {target: self._contention.is_contended(target) for target in targets}
        for target, contended in states.items():
            if not contended and target in self._contended:
                self._contended.discard(target)
                self._log.info("target.contended.ended", target=str(target),
                               calm_seconds=CALM_SECONDS)
        return states

    def _contention_began(self, target: Target, manager: str, contended: bool) -> None:
        if contended and target not in self._contended:
            self._contended.add(target)
            self._log.warning(
                "target.contended", target=str(target), manager=manager,
                window_seconds=FIGHT_WINDOW_SECONDS,
                hint="another writer keeps undoing this target's replicas: it is answered "
                     "at the poll period only until it has been calm for "
                     f"{int(CALM_SECONDS)} seconds; stop one of the two writers")
