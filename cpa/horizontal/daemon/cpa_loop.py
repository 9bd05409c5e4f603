"""What happens every poll period: counts -> parameters -> replicas -> target writes.

:meth:`Autoscaler.poll_once` reads as upstream's ``pollAPIServer``
(autoscaler_server.go): the cluster status from the node store (no API call), the
ConfigMap (GET, or lazily create; re-parsed only when its resourceVersion changed:
:mod:`cpa.horizontal.daemon.paramscache`), the expected replicas, then each target's write (its
writer's GET, and a write on change: :mod:`cpa.kube.writers`); with a ``load`` key (ours),
each target's load axis between the two (:class:`LoadAxes`). Time and the API are
injected so the loop can be tested; the period is a :class:`~cpa.runtime.ticker.Ticker`,
the early polls of ``--react-to-node-changes`` are :mod:`cpa.horizontal.daemon.react`'s.

The whole outcome of a poll (:class:`PollResult`) goes to a list of observers: the health
endpoint first, then whatever else wants it (metrics, Events), so none of them reaches into
the loop.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from cpa import logs
from cpa.horizontal.daemon.configdir import ConfigDir, ConfigDirError
from cpa.horizontal.daemon.configmapsource import ConfigMapSource, DefaultsReport
from cpa.horizontal.daemon.foreignwrites import ForeignWrite
from cpa.horizontal.daemon.loopconfig import LoopConfig
from cpa.horizontal.daemon.objectstage import with_objects
from cpa.horizontal.daemon.paramscache import InvalidParams, ParamsCache
from cpa.horizontal.daemon.placements import PlacementCounts, TargetPlacements
from cpa.horizontal.daemon.react import EarlyPolls
from cpa.horizontal.daemon.target_writes import PollError, TargetWrites
from cpa.horizontal.daemon.targetwatch import TargetWatches
from cpa.horizontal.daemon.watchdogs import Overwrite
from cpa.horizontal.decide.behavior import BehaviorStage
from cpa.horizontal.decide.decision import Decision, decide
from cpa.horizontal.decide.modes.mode import Params
from cpa.kube.api import ApiError, RawApi
from cpa.kube.targets import ScaleResult, Target
from cpa.kube.targetselector import matching_targets
from cpa.nodes.counts import ClusterCounts, CountingPolicy
from cpa.nodes.watch import WatchStatus
from cpa.objects.counters import ObjectCounters
from cpa.runtime.polls import PollRecord, report
from cpa.runtime.stalecounts import StaleCounts
from cpa.runtime.ticker import Ticker

if TYPE_CHECKING:
    from cpa.horizontal.decide.behavior import Outcome
    from cpa.horizontal.decide.load import Load
    from cpa.horizontal.decide.placeable import CapOutcome, Room
    from cpa.horizontal.decide.windows import LoadAxis


@dataclass(slots=True)
class PollResult(PollRecord):
    """Everything one poll saw and did."""

    counts: ClusterCounts | None = None
    params: Params | None = None
    params_version: str | None = None  # the ConfigMap's resourceVersion
    params_invalid: str | None = None  # why that version's parameters are invalid
    configmap_defaults: DefaultsReport | None = None
    """Ours, ``--update-configmap-from-defaults``: the ConfigMap against the defaults."""
    decision: Decision | None = None
    scales: list[ScaleResult] = field(default_factory=list)
    overwritten: list[Overwrite] = field(default_factory=list)  # another writer's changes
    foreign_writes: list[ForeignWrite] = field(default_factory=list)
    """Ours, ``--watch-targets``: another writer's changes, with the writer named."""
    contended: dict[Target, bool] = field(default_factory=dict)
    """Ours, ``--watch-targets``: whether each target of the poll is contended."""
    behavior: dict[Target, Outcome] = field(default_factory=dict)
    """Ours: what ``behavior`` made of the decision per target (empty without it)."""
    early: bool = False
    """Ours: run between the period's polls because the node counts changed the decision
    (``--react-to-node-changes``)."""
    load: dict[Target, LoadAxis] = field(default_factory=dict)
    """Ours: the load axis per target (parameters with a ``load`` key; empty without)."""
    decisions: dict[Target, Decision] = field(default_factory=dict)
    """Ours, with ``load`` or ``targetPlacement``: each target's decision (the load axis
    and the placement are per target); ``decision`` is then the first target's."""
    target_counts: dict[Target, ClusterCounts] = field(default_factory=dict)
    """Ours, with ``targetPlacement``: the counts of the Nodes each target fits on
    (empty without the key: every target decides on ``counts``)."""
    placeable: dict[Target, CapOutcome] = field(default_factory=dict)
    """Ours, with ``capToPlaceable``: what the cap made of each target's count (a target
    without a required self anti-affinity has none)."""
    placeable_changed: list[tuple[Target, CapOutcome]] = field(default_factory=list)
    """Ours: the targets whose replicas newly exceed their room (or by another number):
    what is logged and sent as an Event once per change."""


Observer = Callable[[PollResult], None]


class LoadAxes(Protocol):
    """Ours, the ``load`` key: each target's load axis
    (:class:`cpa.horizontal.daemon.loadstage.LoadStage`)."""

    def axis(self, target: Target, load: Load, now: float) -> LoadAxis:
        """The load axis of ``target`` for the poll at ``now``."""
        ...

    def retire(self) -> None:
        """No ``load`` key any more: stop scraping."""
        ...


def targets_now(api: RawApi, config: LoopConfig) -> tuple[tuple[Target, ...], list[str]]:
    """The targets of this poll: ``--target``'s, then (ours, ``--target-selector``) the
    workloads each selector lists now, each once; and each selector's problem (one that
    matches nothing, a failed list), which fails the poll after the others' writes.
    Without a selector, ``--target``'s and no request."""
    if not config.target_selectors:
        return config.targets, []
    targets = list(config.targets)
    problems: list[str] = []
    for selector in config.target_selectors:
        try:
            found = matching_targets(api, config.namespace, selector)
        except ApiError as exc:
            problems.append(str(exc))
            continue
        if not found:
            problems.append(f"--target-selector={selector}: no {selector.kind} in namespace "
                            f"{config.namespace} matches; label the workloads to scale, or "
                            "fix the selector")
        targets.extend(t for t in found if t not in targets)
    return tuple(targets), problems


def _rooms(placements: TargetPlacements | None, params: Params) -> dict[Target, Room | None]:
    """Ours, ``capToPlaceable``: each target's room (the domains its Pods can go to, read
    with the templates by ``Autoscaler._placed_counts``); empty without the key."""
    if params.shared.cap_to_placeable is None:
        return {}
    if placements is None:
        raise PollError("capToPlaceable: this process keeps no per-placement Node totals")
    try:
        return placements.rooms()
    except LookupError as exc:
        raise PollError(f"capToPlaceable: {exc}; the next poll tries again") from None


class Autoscaler:
    """Joins the node store, the ConfigMap and the targets, once per poll."""

    def __init__(self, config: LoopConfig, api: RawApi, counts: Callable[[], ClusterCounts], *,
                 observers: Sequence[Observer] = (),
                 watch_status: Callable[[], WatchStatus] | None = None,
                 may_write: Callable[[], bool] | None = None,
                 on_follower: Callable[[], None] | None = None,
                 count_by: Callable[[CountingPolicy], bool] | None = None,
                 load: LoadAxes | None = None,
                 placements: PlacementCounts | None = None,
                 placement_wait: float = 0.0, objects: ObjectCounters | None = None,
                 target_watch: TargetWatches | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """``may_write`` (leader election) is asked before every poll: a follower does not
        poll at all, it only keeps its node watch warm, and ``on_follower`` is called on
        each period boundary instead (to report a Lease it cannot read). ``count_by`` hands
        the parameters' counting policy to the node store (True when that changed the
        counts); ``placements`` (the node store) keeps the totals per placement for
        ``targetPlacement``, whose list with every label is waited for ``placement_wait``
        seconds at most. ``objects`` (ours) counts the Pods and Services while the
        parameters in force, and ``target_watch`` (--watch-targets) the targets."""
        self._config = config
        self._objects = objects
        self._api = api
        self._counts = counts
        self._count_by = count_by
        self._load = load
        """Ours: the load axis (``load`` key); None in tests that have no scrapers."""
        self._load_active = False  # the parameters in force have a load key
        self._may_write = may_write
        self._on_follower = on_follower
        self._observers = list(observers)
        self._clock = clock
        self._log = logs.get_logger("autoscaler")
        self._configmap = (None if config.config_dir else ConfigMapSource(
            api, config.namespace, config.configmap, config.default_params,
            dry_run=config.dry_run,
            update_from_defaults=config.update_configmap_from_defaults))
        self._params = ParamsCache(self._configmap or ConfigDir(config.config_dir))
        self._stale = (StaleCounts(watch_status, clock, config.poll_period_seconds)
                       if watch_status is not None else None)
        source = (f"--config-dir {config.config_dir}" if config.config_dir
                  else f"ConfigMap {config.namespace}/{config.configmap}")
        self._placements = (TargetPlacements(api, config.namespace, source, placements,
                                             placement_wait)
                            if placements is not None else None)
        self._placed_decisions: dict[Target, tuple[Params, ClusterCounts, Decision]] = {}
        self._writes = TargetWrites(api, config.namespace, config.targets, config.dry_run,
                                    lambda: self.behavior, target_watch)
        self._last_desired: int | None = None  # the last poll's decision
        self._last_decision: tuple[Params, ClusterCounts, Decision] | None = None
        # Without anything that wakes the loop early (leader election), it sleeps once
        # until the boundary.
        self._ticker = Ticker(float(config.poll_period_seconds), clock,
                              1.0 if may_write is not None else float("inf"))
        self._react = (EarlyPolls(self._ticker, clock, lambda: self._counts(),
                                  lambda: (self._params.params, self._last_desired),
                                  lambda: self.poll_once(early=True), may_write)
                       if config.react_to_node_changes else None)
        self._behavior = BehaviorStage()
        self.consecutive_failures = 0
        self.polls = 0

    @property
    def behavior(self) -> BehaviorStage:
        """Ours: the windows' and policies' history, per target."""
        return self._behavior

    def stop_counting_objects(self) -> None:
        """Ours: stop the Pod and Service watches."""
        if self._objects is not None:
            self._objects.stop()

    def add_observer(self, observer: Observer) -> None:
        self._observers.append(observer)

    def wake(self) -> None:
        """Poll at once instead of at the next period boundary (leadership acquired); the
        loop notices within a second (at once with ``react_to_node_changes``, or while a
        ``load`` key is in force: the load's scrapes call this)."""
        self._ticker.wake()
        self.interrupt()

    def interrupt(self) -> None:
        """Make a waiting loop look at its stop event now (the signal handler calls this
        after setting it); without ``react_to_node_changes`` or a ``load`` key the loop
        waits on the stop event itself and this changes nothing."""
        self._ticker.interrupt()

    def nodes_changed(self) -> None:
        """A Node's record changed (:attr:`node_listener`, when reacting)."""
        if self._react is not None:
            self._react.nodes_changed()

    @property
    def node_listener(self) -> Callable[[], None] | None:
        """What the node store calls on every changed Node record: the early polls' flag
        with ``react_to_node_changes``, else nothing (the store then calls no one)."""
        return self._react.nodes_changed if self._react is not None else None

    @property
    def early_polls(self) -> int:
        """Ours: polls run early because the node counts changed the decision."""
        return self._react.early_polls if self._react is not None else 0

    @property
    def node_wakeups(self) -> int:
        """Ours: node changes the loop woke up for (``react_to_node_changes``)."""
        return self._react.node_wakeups if self._react is not None else 0

    @property
    def decision_checks(self) -> int:
        """Ours: decisions recomputed against new node counts, without a poll."""
        return self._react.decision_checks if self._react is not None else 0

    # --- one poll, as upstream's pollAPIServer -------------------------------------------
    def poll_once(self, early: bool = False) -> PollResult:
        """Run one poll; never raises: the outcome (and /last-poll) carries the error.
        ``early``: run between the period's polls (``react_to_node_changes``)."""
        self.polls += 1
        result = PollResult(started=self._clock(), early=early)
        try:
            counts = self._cluster_status(result)
            params = self._sync_params(result)
            counts = self._count_as(params, counts, result)
            counts = result.counts = with_objects(self._objects, params.object_kinds(), counts)
            targets, unmatched = targets_now(self._api, self._config)
            placed = self._placed_counts(params, result, targets, counts)
            caps = params.shared.cap_to_placeable, _rooms(self._placements, params)
            decision = self._expected_replicas(params, counts, result)
            with_load = self._load_axes(params, counts, result, placed, targets)
            if params.shared.behavior is None:
                self._behavior.reset()
            self._writes.update(decision, with_load, counts, params.shared.behavior, result,
                                params.shared.manage_budgets, targets, unmatched, caps)
        except InvalidParams as exc:
            result.error = result.params_invalid = str(exc)
            result.params_version = self._params.version
        except (PollError, ApiError, ConfigDirError) as exc:
            result.error = str(exc)
        except Exception as exc:
            result.error = f"unexpected {type(exc).__name__}: {exc}"
        self._count_failure(result)
        result.duration = self._clock() - result.started
        report(self._observers, result, self._log)
        self._params.give_back()  # after a large version came or went
        return result

    def _cluster_status(self, result: PollResult) -> ClusterCounts:
        """The node store's running totals (no request), and whether they may be stale."""
        result.stale = self._stale.check() if self._stale is not None else None
        counts = result.counts = self._counts()
        if logs.v(4):
            self._log.info("poll.counts", nodes=counts.total_nodes, cores=counts.total_cores,
                           schedulable_nodes=counts.schedulable_nodes,
                           schedulable_cores=counts.schedulable_cores)
        return counts

    def _sync_params(self, result: PollResult) -> Params:
        """The ConfigMap's parameters (one GET; a parse only for a new version), or
        the mounted directory's (``--config-dir``: one readlink while unchanged)."""
        try:
            params = result.params = self._params.load()
        finally:
            if self._configmap is not None:
                result.configmap_defaults = self._configmap.defaults
        result.params_version = self._params.version
        return params

    def _count_as(self, params: Params, counts: ClusterCounts,
                  result: PollResult) -> ClusterCounts:
        """The counts under the parameters' counting policy (counted again when it is a
        new one)."""
        if self._count_by is not None and self._count_by(params.shared.policy()):
            counts = result.counts = self._counts()
        return counts

    def _placed_counts(self, params: Params, result: PollResult,
                       targets: tuple[Target, ...], cluster: ClusterCounts
                       ) -> dict[Target, ClusterCounts]:
        """Ours, ``targetPlacement``: the counts of the Nodes each target's Pod template fits
        on (one GET of each workload); empty without the key. The Pods and Services are the
        cluster's for every target."""
        if self._placements is None:
            if params.shared.target_placement:
                raise PollError("targetPlacement: this process keeps no per-placement Node "
                                "totals")
            return {}
        placed = self._placements.counts(params, targets)
        for target, counts in placed.items():
            if counts is None:
                raise PollError("targetPlacement: the Node list with every label and taint "
                                "is not complete yet; the next poll tries again")
            result.target_counts[target] = counts._replace(pods=cluster.pods,
                                                           services=cluster.services)
        return result.target_counts

    def _decide_placed(self, target: Target, params: Params,
                       counts: ClusterCounts) -> Decision:
        """A target's own decision on its own counts, reused while both are the same."""
        last = self._placed_decisions.get(target)
        if last is not None and last[0] is params and last[1] == counts:
            return last[2]
        decision = decide(params, counts)
        self._placed_decisions[target] = (params, counts, decision)
        return decision

    def _expected_replicas(self, params: Params, counts: ClusterCounts,
                           result: PollResult) -> Decision:
        """:func:`decide`, or the last poll's decision when its inputs are the same: the
        decision is a pure function of the two (its steps, written out for ``explain``,
        were a tenth of a steady poll's CPU)."""
        last = self._last_decision
        if last is not None and last[0] is params and last[1] == counts:
            decision = last[2]
        else:
            decision = decide(params, counts)
            self._last_decision = (params, counts, decision)
        result.decision = decision
        self._last_desired = decision.replicas
        if decision.error is not None:
            raise PollError(decision.error)
        return decision

    def _load_axes(self, params: Params, counts: ClusterCounts, result: PollResult,
                   placed: Mapping[Target, ClusterCounts], targets: tuple[Target, ...]
                   ) -> Mapping[Target, Decision]:
        """Ours, the ``load`` key: each target's decision with its load axis, max(proportional,
        load) (:func:`decide` with the axis); empty without the key (every target takes the
        proportional decision). The scrapers stop when a version without the key comes."""
        load = params.shared.load
        if load is None and self._load_active and self._load is not None:
            self._load.retire()
        self._load_active = load is not None and self._load is not None
        if load is None or self._load is None:
            if not placed:
                self._placed_decisions.clear()
                return {}
            for target in targets:
                decision = result.decisions[target] = self._decide_placed(
                    target, params, placed[target])
                if len(result.decisions) == 1:
                    result.decision = decision
            return result.decisions
        for target in targets:
            axis = result.load[target] = self._load.axis(target, load, result.started)
            decision = result.decisions[target] = decide(params, placed.get(target, counts),
                                                         axis)
            if len(result.decisions) == 1:
                result.decision = decision
        return result.decisions

    def _count_failure(self, result: PollResult) -> None:
        if result.error is None:
            self.consecutive_failures = 0
        else:
            self.consecutive_failures += 1
            self._log.error("poll.failed", error=result.error,
                            consecutive_failures=self.consecutive_failures)

    # --- the loop ------------------------------------------------------------------
    def run(self, stop: threading.Event) -> int:
        """Poll now, then on every period boundary until ``stop``; return the exit code
        (1 after ``max_sync_failures`` consecutive failed polls, early ones included).

        A poll that overruns the period skips the boundaries it missed instead of
        firing them back to back, so slow polls never pile up.
        """
        return self._ticker.run(stop, self._tick, self._sleep)

    def _sleep(self, stop: threading.Event, until: float) -> bool:
        """The wait between boundaries: with early polls, theirs; while a ``load`` key is
        in force, one that a scrape's wake() cuts short at once; else the ticker's."""
        if self._react is not None:
            return self._react.sleep(stop, until)
        if self._load_active or self._writes.watching:  # wake() from another thread
            return self._ticker.sleep_prompt(stop, until)
        return self._ticker.sleep(stop, until)

    def _tick(self) -> int | None:
        if self._gave_up():  # early polls failed meanwhile
            return 1
        if self._may_write is None or self._may_write():
            self.poll_once()
            if self._gave_up():
                return 1
        elif self._on_follower is not None:
            self._on_follower()
        return None

    def _gave_up(self) -> bool:
        limit = self._config.max_sync_failures
        if limit > 0 and self.consecutive_failures >= limit:
            self._log.error("exit.max_sync_failures", failures=self.consecutive_failures,
                            limit=limit)
            return True
        return False
