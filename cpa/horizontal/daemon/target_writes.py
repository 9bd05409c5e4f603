"""The targets' writes of one poll: every target attempted (ours: upstream stops at the
first failure), each its writer's way, its own decision where the load axis made one; the
``behavior`` (ours, opt-in) shaping what is written; the dry run's log of what would have
been; another writer and a clamped HPA floor noticed (:mod:`cpa.horizontal.daemon.watchdogs`);
last, ``capToPlaceable`` (ours, opt-in) capping (or only reporting) a count beyond the
Nodes its Pods can be placed on (:mod:`cpa.horizontal.decide.placeable`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from cpa import logs
from cpa.horizontal.daemon.budgets import Budgets
from cpa.horizontal.daemon.foreignwrites import ForeignWrite, ForeignWrites
from cpa.horizontal.daemon.targetwatch import TargetWatches
from cpa.horizontal.daemon.watchdogs import FloorClamps, OtherWriters, Overwrite
from cpa.horizontal.decide.decision import Decision
from cpa.horizontal.decide.placeable import CapOutcome, Room, cap_replicas
from cpa.kube.api import RawApi
from cpa.kube.targets import ScaleResult, Target
from cpa.kube.writers import writer_for
from cpa.nodes.counts import ClusterCounts

if TYPE_CHECKING:
    from cpa.horizontal.decide.behavior import Behavior, BehaviorStage, Outcome

__all__ = ["PollError", "TargetWrites"]


class PollError(Exception):
    """A poll that could not do its job; the message is what /last-poll reports."""


class WriteRecord(Protocol):
    """What the writes read of the poll's result and add to it (the poll loop's
    ``PollResult``)."""

    started: float
    scales: list[ScaleResult]
    overwritten: list[Overwrite]
    foreign_writes: list[ForeignWrite]
    contended: dict[Target, bool]
    behavior: dict[Target, Outcome]
    target_counts: dict[Target, ClusterCounts]
    placeable: dict[Target, CapOutcome]
    placeable_changed: list[tuple[Target, CapOutcome]]


@dataclass(eq=False, repr=False, slots=True)
class TargetWrites:
    """Writes each target's count, poll after poll (what it keeps across polls: the dry
    run's last logged pair per target, the watchdogs' episodes). ``behavior``: the
    behavior stage, made when first asked for (its module is loaded only for parameters
    with a ``behavior`` key); ``watches`` (``--watch-targets``): another writer's counts
    reported, its manager named."""

    api: RawApi
    namespace: str
    targets: tuple[Target, ...]
    dry_run: bool
    behavior: Callable[[], BehaviorStage]
    watches: TargetWatches | None = None
    _foreign: ForeignWrites | None = field(init=False)
    _writers: OtherWriters = field(init=False, default_factory=OtherWriters)
    _clamps: FloorClamps = field(init=False, default_factory=FloorClamps)
    _budgets: Budgets = field(init=False)
    _would: dict[Target, tuple[int | None, int]] = field(init=False, default_factory=dict)
    """Dry run: the pair last logged per target, logged once each."""
    _short: dict[Target, tuple[int, int, int]] = field(init=False, default_factory=dict)
    """capToPlaceable: the shortfall last logged per target, logged once each."""
    _log: Any = field(init=False, default_factory=lambda: logs.get_logger("autoscaler"))

    def __post_init__(self) -> None:
        watches = self.watches
        self._foreign = ForeignWrites(watches, watches.contention) if watches else None
        self._budgets = Budgets(self.api, self.namespace)

    def update(self, proportional: Decision, with_load: Mapping[Target, Decision],
               counts: ClusterCounts, behavior: Behavior | None,
               result: WriteRecord, budgets: bool = False,
               targets: tuple[Target, ...] | None = None,
               failures: list[str] | None = None,
               caps: tuple[str | None, Mapping[Target, Room | None]] = (None, {})) -> None:
        """Every target is attempted (ours: upstream stops at the first failure), each with
        its own decision where the load axis made one; then, with ``budgets``
        (``managePodDisruptionBudget``), each written target's budget. ``targets``: this
        poll's (``--target-selector``), else ``--target``'s; ``failures``: the poll's
        problems so far, reported with the writes'; ``caps``: ``capToPlaceable``'s mode and
        each target's room (ours), applied after every other step."""
        failures = list(failures or [])
        mode, rooms = caps
        targets = self.targets if targets is None else targets
        if self.watches is not None and self._foreign is not None:  # --watch-targets
            failures += self.watches.poll(targets)  # a 403 names the rule to add
            result.contended = self._foreign.states(targets)  # a calm one is not contended
        for target in targets:
            decision = with_load.get(target, proportional)
            if decision.error is not None:  # only a load axis's: the proportional one raised
                failures.append(f"{target}: {decision.error}")
                continue
            room = rooms.get(target) if mode is not None else None
            res = self._ensure(target, decision, behavior, result,
                               None if mode is None or room is None else (mode, room))
            result.scales.append(res)
            self._report_room(target, res, result)
            self._watch_write(res, decision, result)
            shaped = self._behavior_fields(res, result)
            if res.error:
                failures.append(res.error)
            elif res.changed:
                seen = result.target_counts.get(target, counts)
                self._log.info("scale.changed", target=str(target), old=res.previous,
                               new=res.replicas, mode=decision.mode, nodes=decision.nodes,
                               cores=decision.cores, total_nodes=seen.total_nodes,
                               total_cores=seen.total_cores,
                               schedulable_nodes=seen.schedulable_nodes,
                               schedulable_cores=seen.schedulable_cores,
                               **_zones_field(decision), **_load_fields(decision), **shaped)
        failures += self._budgets.sync(budgets, result.scales)
        if failures:
            raise PollError("; ".join(failures))

    @property
    def watching(self) -> bool:
        """``--watch-targets``: a watch's thread may wake the loop."""
        return self.watches is not None

    def _ensure(self, target: Target, decision: Decision, behavior: Behavior | None,
                result: WriteRecord, cap: tuple[str, Room] | None) -> ScaleResult:
        """One target's write, its writer's way. Whatever goes wrong is this target's
        error alone, named: a failed request or a malformed answer is the writer's
        :class:`ApiError` result; anything else (a bug) is caught here too, so that the
        targets after it are still written in this poll."""
        try:
            return writer_for(target).ensure(self.api, self.namespace, target,
                                             decision.replicas,
                                             self._capper(target, result, cap, decision.replicas,
                                                          self._shaper(target, behavior,
                                                                       result, decision)),
                                             dry_run=self.dry_run)
        except Exception as exc:
            return ScaleResult(target, None, decision.replicas, False,
                               f"{target}: unexpected {type(exc).__name__}: {exc}")

    def _watch_write(self, res: ScaleResult, decision: Decision, result: WriteRecord) -> None:
        """A clamped floor, another writer, or (a dry run) what would have been written."""
        self._clamps.check(res)
        overwrite = None
        if res.dry_run:
            self._would_write(res, decision)
        else:  # a dry run writes nothing, so there is no fight to report
            overwrite = self._writers.check(res)
            if overwrite is not None:
                result.overwritten.append(overwrite)
        if self._foreign is not None:
            foreign = self._foreign.check(res, overwrite)
            if foreign is not None:
                result.foreign_writes.append(foreign)

    def _shaper(self, target: Target, behavior: Behavior | None, result: WriteRecord,
                decision: Decision) -> Callable[[int], int] | None:
        """With ``behavior``, the count written depends on the target's current replicas
        (the scale GET's), so the scale write asks this function; without it, None and the
        formula's count is written as upstream writes it.

        History is kept per target across polls and ConfigMap versions (a changed window or
        mode is judged against the same history, so an edit can never release a scale-down
        that the window was holding); it is dropped when the ConfigMap has no behavior.
        """
        if behavior is None:
            return None
        desired, now, floor = decision.replicas, result.started, decision.floor

        def shape(current: int) -> int:
            outcome = self.behavior().shape(target, behavior, desired, current, now, floor)
            result.behavior[target] = outcome
            return outcome.replicas
        return shape

    @staticmethod
    def _capper(target: Target, result: WriteRecord, cap: tuple[str, Room] | None,
                desired: int, shaper: Callable[[int], int] | None
                ) -> Callable[[int], int] | None:
        """With ``capToPlaceable`` and a room to judge, the count written is the behavior's
        (or the decision's, ``desired``) capped at the room, or only reported
        (``"report"``)."""
        if cap is None:
            return shaper
        mode, room = cap

        def capped(current: int) -> int:
            wanted = shaper(current) if shaper is not None else desired
            outcome = cap_replicas(wanted, mode, room)
            if outcome is None:  # cannot be: a room was given
                return wanted
            result.placeable[target] = outcome
            return outcome.replicas
        return capped

    def _report_room(self, target: Target, res: ScaleResult, result: WriteRecord) -> None:
        """``capToPlaceable``: log (and hand to the Events) a shortfall once per change of
        its numbers, and its end once."""
        outcome = result.placeable.get(target)
        if res.error is not None:
            return
        if outcome is None or not outcome.unplaceable:
            if self._short.pop(target, None) is not None:
                self._log.info("scale.placeable", target=str(target), replicas=res.replicas)
            return
        seen = (outcome.wanted, outcome.room.domains, outcome.replicas)
        if self._short.get(target) == seen:
            return
        self._short[target] = seen
        result.placeable_changed.append((target, outcome))
        self._log.warning("scale.unplaceable", target=str(target), wanted=outcome.wanted,
                          placeable=outcome.room.domains, topology_key=outcome.room.key,
                          replicas=outcome.replicas, mode=outcome.mode,
                          unplaceable=outcome.unplaceable)

    def _behavior_fields(self, res: ScaleResult, result: WriteRecord) -> dict[str, object]:
        """Record a successful write in the target's history; log a hold once per episode;
        return the extra ``scale.changed`` fields when the behavior shaped the write."""
        outcome = result.behavior.get(res.target)
        if outcome is None or res.error is not None:
            return {}
        if res.changed and res.previous is not None:
            self.behavior().written(res.target, res.previous, res.replicas, result.started)
        elif self.behavior().newly_held(res.target, outcome):
            self._log.info("scale.held", target=str(res.target), replicas=outcome.replicas,
                           desired=outcome.desired, behavior=outcome.reason)
        if not outcome.shaped:
            return {}
        return {"desired": outcome.desired, "behavior": outcome.reason}

    def _would_write(self, res: ScaleResult, decision: Decision) -> None:
        """Dry run: log what would have been written, once per target and pair of counts."""
        pair = (res.previous, res.replicas)
        if res.previous == res.replicas:
            self._would.pop(res.target, None)
            return
        if self._would.get(res.target) == pair:
            return
        self._would[res.target] = pair
        self._log.info("dry_run.would_scale", target=str(res.target), old=res.previous,
                       new=res.replicas, mode=decision.mode, nodes=decision.nodes,
                       cores=decision.cores, **_zones_field(decision))

def _load_fields(decision: Decision) -> dict[str, object]:
    """``proportional`` and ``load`` for ``scale.changed`` with a load key (ours)."""
    if decision.proportional is None:
        return {}
    return {"proportional": decision.proportional, "load": decision.load}


def _zones_field(decision: Decision) -> dict[str, object]:
    """``zones`` for ``scale.changed`` when the parameters count them (ours, opt-in)."""
    return {} if decision.zones is None else {"zones": decision.zones}
