"""``/cpvpa``'s poll: counts -> config file -> computation -> template PATCH (and resizes).

CPVA's ``pollAPIServer`` (autoscaler_server.go:95-156) in CPVA's order: the cluster size
first (a failure ends the poll before the config file is looked at), then the config file,
then :meth:`cpa.vertical.decide.state.VerticalState.plan`, then the write when the computed
requirements differ from the last ones written (or it was never written since the start).
A failed write is retried by the next poll; a dry run counts as written, as in CPVA.

Log events mirror CPVA's lines one to one, structured: ``config.set`` (CPVA's "setting
config"), ``update`` ("Updating resource for nodes: %d, cores: %d"), ``setting`` (one per
value), ``update.failed`` and ``dry_run``; ``poll.counts`` and ``poll.computed`` at ``--v=4``.

With ``--resize-mode=in-place`` each poll also runs :class:`InPlaceResizer`, before the
template, which is then patched only where that restarts no Pod, or as the fallback.

Several targets (``--target`` a comma list, ours): one Node count and one look at the
config file per poll serve them all; then each target's share
(:class:`~cpa.vertical.daemon.target.TargetLoop`) runs on its own, in ``--target``'s order,
so that one failing target (a PATCH refused, an unexpected error) does not stop the others.
The whole outcome (:class:`VerticalPollResult`, one :class:`TargetPollResult` per target)
goes to observers: health, metrics, Events.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, NamedTuple

from cpa import logs
from cpa.kube.api import ApiError
from cpa.objects.counters import CountUnavailable, ObjectCounters
from cpa.runtime.polls import PollRecord, report
from cpa.runtime.ticker import Ticker
from cpa.vertical.daemon.configfile import ConfigFile
from cpa.vertical.daemon.target import TargetLoop, TargetPollResult
from cpa.vertical.decide.formula import CoresError, CountsUnavailable
from cpa.vertical.decide.state import VerticalState

__all__ = ["TargetPollResult", "VerticalAutoscaler", "VerticalLoopConfig",
           "VerticalPollResult"]


class VerticalLoopConfig(NamedTuple):
    poll_period_seconds: float = 10.0
    in_place: bool = False


@dataclass(slots=True)
class VerticalPollResult(PollRecord):
    """Everything one poll saw and did: the counts, and each target's share."""

    nodes: int | None = None
    cores: int | None = None
    dry_run: bool = False
    targets: list[TargetPollResult] = field(default_factory=list)

    @property
    def first(self) -> TargetPollResult:
        """The first target's share: CPVA's only target."""
        return self.targets[0]

Observer = Callable[[VerticalPollResult], None]


@dataclass(eq=False, repr=False, slots=True)
class VerticalAutoscaler:
    """The poll loop of ``/cpvpa``. ``targets``: each target's loop, CPVA's only one first
    (ours: the others of a ``--target`` comma list). ``may_write`` (leader election) is
    asked before every poll: a follower does not poll, it calls ``warm`` instead (the Node
    counts get ready for a takeover) and ``on_follower`` (to report a Lease it cannot
    read). ``objects`` (ours) counts the Pods and Services while a config in force has
    ``podsPerStep``/``servicesPerStep``."""

    config: VerticalLoopConfig
    counts: Callable[[], tuple[int, int]]
    config_file: ConfigFile
    targets: list[TargetLoop]
    _: KW_ONLY
    observers: list[Observer] = field(default_factory=list)
    stale: Callable[[], str | None] | None = None
    may_write: Callable[[], bool] | None = None
    warm: Callable[[], None] | None = None
    on_follower: Callable[[], None] | None = None
    objects: ObjectCounters | None = None
    clock: Callable[[], float] = time.monotonic
    polls: int = field(init=False, default=0)
    _ticker: Ticker = field(init=False)
    _log: Any = field(init=False, default_factory=lambda: logs.get_logger("cpvpa"))

    def __post_init__(self) -> None:
        self.observers = list(self.observers)  # add_observer must not change the caller's
        self._ticker = Ticker(float(self.config.poll_period_seconds), self.clock)

    @property
    def state(self) -> VerticalState:
        """The first target's state (CPVA's only one)."""
        return self.targets[0].state

    def add_observer(self, observer: Observer) -> None:
        self.observers.append(observer)

    def wake(self) -> None:
        self._ticker.wake()

    def forget_written(self) -> None:
        """Leadership lost: the next leadership writes at once, as CPVA after a restart."""
        for target in self.targets:
            target.state.last_written = None

    # --- one poll ---------------------------------------------------------------------
    def poll_once(self) -> VerticalPollResult:
        """One poll; never raises: the result carries the error."""
        self.polls += 1
        result = VerticalPollResult(started=self.clock(),
                                    dry_run=self.targets[0].writer.dry_run)
        try:
            self._poll(result)
        except Exception as exc:  # an unexpected error must not end the loop
            result.error = f"unexpected {type(exc).__name__}: {exc}"
        if result.error is not None:
            self._log.error("poll.failed", error=result.error)
        result.duration = self.clock() - result.started
        report(self.observers, result, self._log)
        return result

    def _poll(self, result: VerticalPollResult) -> None:
        result.stale = self.stale() if self.stale is not None else None
        try:
            nodes, cores = self.counts()
        except (ApiError, CoresError) as exc:
            result.error = f"Error getting cluster size: {exc}"
            return
        result.nodes, result.cores = nodes, cores
        if logs.v(4):
            self._log.info("poll.counts", nodes=nodes, cores=cores)
        file = self.config_file.poll()
        wanted: set[str] = set()  # the kinds of object the configs in force count
        for target in self.targets:
            share = TargetPollResult(target.key)
            result.targets.append(share)
            try:
                target.poll(nodes, cores, file, share, self._counted(wanted))
            except Exception as exc:  # one target's bug must not stop the others
                share.error = f"unexpected {type(exc).__name__}: {exc}"
        if self.objects is not None:
            self.objects.use(frozenset(wanted))
        failed = [t for t in result.targets if t.error is not None]
        if len(self.targets) == 1:
            result.error = result.targets[0].error
        elif failed:
            result.error = "; ".join(f"{t.target}: {t.error}" for t in failed)

    def _counted(self, wanted: set[str]
                 ) -> Callable[[frozenset[str]], dict[str, int]] | None:
        """Ours: what a target's config asks of the Pod and Service counts (their watches
        started as it asks; those no config asked for are stopped after the poll)."""
        objects = self.objects
        if objects is None:
            return None

        def counted(kinds: frozenset[str]) -> dict[str, int]:
            wanted.update(kinds)
            objects.use(objects.kinds | kinds)
            try:
                return {kind: objects.count(kind) for kind in kinds}
            except CountUnavailable as exc:
                raise CountsUnavailable(str(exc)) from None
        return counted

    # --- the loop -----------------------------------------------------------------------
    def run(self, stop: threading.Event) -> int:
        """Poll now, then once per period (a ticker: an overrun skips the ticks it missed,
        as Go's ``time.Ticker`` drops them), until ``stop``."""
        return self._ticker.run(stop, self._tick)

    def _tick(self) -> None:
        """The leader polls; a follower keeps its Node counts ready for a takeover."""
        if self.may_write is None or self.may_write():
            self.poll_once()
            return
        if self.on_follower is not None:
            self.on_follower()
        if self.warm is not None:
            try:
                self.warm()
            except Exception as exc:  # the leader's polls report such errors
                if logs.v(4):
                    self._log.info("follower.warm_failed", error=str(exc))
