"""What happens every poll period: counts -> parameters -> replicas -> scale writes.

The order is upstream's: cluster status from the node store (no API call), GET (or lazily
create) the ConfigMap, re-parse it only when its resourceVersion changed, compute, then
GET/PUT each target's scale. Time and the API are injected so the loop can be tested.

The whole outcome of a poll (:class:`PollResult`) goes to a list of observers: the health
endpoint first, then whatever else wants it (metrics, Events), so none of them reaches into
the loop.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple, Protocol

from cpa import logs
from cpa.daemon.watchdogs import FloorClamps, OtherWriters, Overwrite, StaleCounts
from cpa.decide.behavior import Behavior, BehaviorStage, Outcome
from cpa.decide.decision import Decision, decide
from cpa.decide.modes.mode import Params
from cpa.decide.modes.registry import parse_configmap_data
from cpa.decide.params import ParamsError
from cpa.kube import configmap
from cpa.kube.api import ApiError, RawApi
from cpa.kube.scale import ScaleResult, Target, ensure_replicas
from cpa.nodes.counts import ClusterCounts, CountingPolicy
from cpa.nodes.watch import WatchStatus

if TYPE_CHECKING:
    from cpa.decide.load import Load
    from cpa.decide.windows import LoadAxis

LARGE_PARAMS_BYTES = 64 * 1024
"""A ConfigMap this large (a ladder of thousands of steps): the polls after it is loaded,
and after it is replaced, also collect the garbage (see :func:`return_free_memory`)."""
GIVE_BACK_POLLS = 3
_trim: Callable[[int], int] | None = None


def return_free_memory(collect: bool = False) -> None:
    """Give the heap's free pages back to the system (glibc's ``malloc_trim``, ~0.3 ms;
    nothing where there is none), after collecting the garbage when ``collect``.

    Why after every poll: glibc keeps freed pages resident, so a passing peak stays in the
    RSS. Parsing a 70,000-step ladder takes ~15 MiB for a moment; replaced by a small one,
    it left RSS 5-6 MiB higher for good (a tenth of the 64 MiB limit), and ~2.7 MiB with
    this (what remains are the small-object allocator's arenas, which CPython returns only
    when they are wholly free)."""
    global _trim
    if collect:
        gc.collect()
    if _trim is None:
        try:
            import ctypes  # after the first poll's writes, not on the start-up path

            _trim = getattr(ctypes.CDLL(None), "malloc_trim", None) or (lambda _pad: 0)
        except (OSError, AttributeError):
            _trim = lambda _pad: 0  # noqa: E731 - no libc to ask
    _trim(0)


class LoopConfig(NamedTuple):
    """What the poll loop is told: where the parameters and the targets are, how often to
    poll and when to give up. The daemon builds it from its flags (:func:`cpa.cli.loop_config`);
    the loop knows nothing of the command line."""

    namespace: str
    configmap: str
    targets: tuple[Target, ...]
    poll_period_seconds: float = 10.0
    default_params: Mapping[str, str] | None = None
    """The ConfigMap's data to create it with when it is missing (``--default-params``)."""
    max_sync_failures: int = 0
    """Consecutive failed polls that end the loop with exit code 1; 0: never."""
    react_to_node_changes: bool = False
    """Ours (``--react-to-node-changes``): poll at once, between the period's polls, when
    the node counts change the decision (:meth:`Autoscaler.nodes_changed`)."""
    dry_run: bool = False
    """Ours (``--dry-run``): compute everything, write nothing (no scale or HPA write, no
    ConfigMap creation); log what would have been written."""


REACT_DEBOUNCE_SECONDS = 0.1
"""How long a node change waits before it is looked at: the rest of a burst (a node
pool's Nodes registering together) lands in the same early poll."""
REACT_MIN_INTERVAL_SECONDS = 1.0
"""At most one early poll a second, however the Nodes churn."""


class PollError(Exception):
    """A poll that could not do its job; the message is what /last-poll reports."""


class _InvalidParams(PollError):
    """The ConfigMap's current version has parameters we refuse."""


@dataclass(slots=True)
class PollResult:
    """Everything one poll saw and did."""

    started: float  # the loop's clock
    duration: float = 0.0
    error: str | None = None
    counts: ClusterCounts | None = None
    params: Params | None = None
    params_version: str | None = None  # the ConfigMap's resourceVersion
    params_invalid: str | None = None  # why that version's parameters are invalid
    decision: Decision | None = None
    scales: list[ScaleResult] = field(default_factory=list)
    stale: str | None = None  # why the counts may be out of date (the poll still ran)
    overwritten: list[Overwrite] = field(default_factory=list)  # another writer's changes
    behavior: dict[Target, Outcome] = field(default_factory=dict)
    """Ours: what ``behavior`` made of the decision per target (empty without it)."""
    early: bool = False
    """Ours: run between the period's polls because the node counts changed the decision
    (``--react-to-node-changes``)."""
    load: dict[Target, LoadAxis] = field(default_factory=dict)
    """Ours: the load axis per target (parameters with a ``load`` key; empty without)."""
    decisions: dict[Target, Decision] = field(default_factory=dict)
    """Ours, with ``load``: each target's decision (the load axis is per target);
    ``decision`` is then the first target's."""

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def health_error(self) -> str | None:
        """What ``/last-poll`` reports: the poll's error, else stale counts, else None."""
        return self.error or self.stale


Observer = Callable[[PollResult], None]


class LoadAxes(Protocol):
    """Ours, the ``load`` key: each target's load axis (:class:`cpa.daemon.loadstage.LoadStage`)."""

    def axis(self, target: Target, load: Load, now: float) -> LoadAxis:
        """The load axis of ``target`` for the poll at ``now``."""
        ...

    def retire(self) -> None:
        """No ``load`` key any more: stop scraping."""
        ...


class Autoscaler:
    """Joins the node store, the ConfigMap and the targets, once per poll."""

    def __init__(self, config: LoopConfig, api: RawApi, counts: Callable[[], ClusterCounts], *,
                 observers: Sequence[Observer] = (),
                 watch_status: Callable[[], WatchStatus] | None = None,
                 may_write: Callable[[], bool] | None = None,
                 count_by: Callable[[CountingPolicy], bool] | None = None,
                 load: LoadAxes | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """``may_write`` (leader election) is asked before every poll: a follower does not
        poll at all, it only keeps its node watch warm. ``count_by`` hands the parameters'
        counting policy to the node store (True when that changed the counts)."""
        self._config = config
        self._count_by = count_by
        self._load = load
        """Ours: the load axis (``load`` key); None in tests that have no scrapers."""
        self._load_active = False  # the parameters in force have a load key
        self._may_write = may_write
        self._woken = False
        self._wakeup = threading.Event()  # wake() and nodes_changed(), when reacting
        self._nodes_dirty = False
        self._react = config.react_to_node_changes
        self._last_desired: int | None = None  # the last poll's decision
        self._last_decision: tuple[Params, ClusterCounts, Decision] | None = None
        self._last_early = float("-inf")
        self.early_polls = 0
        """Ours: polls run early because the node counts changed the decision."""
        self.node_wakeups = 0
        """Ours: node changes the loop woke up for (``react_to_node_changes``)."""
        self.decision_checks = 0
        """Ours: decisions recomputed against new node counts, without a poll."""
        self._api = api
        self._counts = counts
        self._observers = list(observers)
        self._clock = clock
        self._log = logs.get_logger("autoscaler")
        self._params_rv: str | None = None
        self._params: Params | None = None
        self._params_error: str | None = None
        self._mode: str | None = None
        """The mode of the last valid parameters: an invalid version in between does not
        change it, so ``mode.changed`` names the mode that was really in force before."""
        self._params_size = 0  # of the ConfigMap version in force, in characters
        self._give_back = 0  # polls that still end with return_free_memory()
        self._stale = (StaleCounts(watch_status, clock, config.poll_period_seconds)
                       if watch_status is not None else None)
        self._writers = OtherWriters()
        self._clamps = FloorClamps()
        self._would: dict[Target, tuple[int | None, int]] = {}  # dry run: logged once each
        self._would_create_logged = False
        self.behavior = BehaviorStage()
        """Ours: the windows' and policies' history, per target."""
        self.consecutive_failures = 0
        self.polls = 0

    def add_observer(self, observer: Observer) -> None:
        self._observers.append(observer)

    def wake(self) -> None:
        """Poll at once instead of at the next period boundary (leadership acquired); the
        loop notices within a second (at once with ``react_to_node_changes``)."""
        self._woken = True
        self._wakeup.set()

    def interrupt(self) -> None:
        """Make a waiting loop look at its stop event now (the signal handler calls this
        after setting it); without ``react_to_node_changes`` the loop waits on the stop
        event itself and this changes nothing."""
        self._wakeup.set()

    def nodes_changed(self) -> None:
        """The node store's ``on_change`` (``react_to_node_changes``): a Node's record
        changed. Runs in the watch's thread once per such event, so it only raises a flag
        (and sets an event the first time); the loop looks at the counts itself, at most
        every ``REACT_DEBOUNCE_SECONDS``, against the parameters it parsed last."""
        if not self._nodes_dirty:
            self._nodes_dirty = True
            self._wakeup.set()

    def _sleep(self, stop: threading.Event, until: float) -> bool:
        """Wait until the clock reads ``until``, or a wake(); True when stopped.

        The waits are cut into seconds only when something can wake the loop early
        (leader election): without it the loop sleeps once until the boundary."""
        if self._react or self._load_active:  # the load's scrapes may wake() it
            return self._sleep_reacting(stop, until)
        step = 1.0 if self._may_write is not None else float("inf")
        while not self._woken:
            remaining = until - self._clock()
            if remaining <= 0:
                return stop.is_set()
            if stop.wait(min(remaining, step)):
                return True
        self._woken = False
        return stop.is_set()

    # --- reacting to node changes (ours, opt-in) -----------------------------------
    def _sleep_reacting(self, stop: threading.Event, until: float) -> bool:
        """``_sleep`` with ``react_to_node_changes``: the same boundaries, and an early
        poll whenever the node counts change the decision. The stop event is looked at
        every second at least (at once after :meth:`interrupt`)."""
        while True:
            if stop.is_set():
                return True
            if self._woken:
                self._woken = False
                return False
            remaining = until - self._clock()
            if remaining <= 0:
                return False
            self._wakeup.wait(min(remaining, 1.0))
            self._wakeup.clear()
            if self._nodes_dirty and not stop.is_set() and not self._woken:
                self._react_to_nodes(stop, until)

    def _pause(self, stop: threading.Event, seconds: float) -> bool:
        """Wait ``seconds`` (node changes meanwhile are taken in by the caller); False
        when a stop or a wake() cut it short."""
        deadline = self._clock() + seconds
        while True:
            if stop.is_set() or self._woken:
                return False
            remaining = deadline - self._clock()
            if remaining <= 0:
                return True
            self._wakeup.wait(min(remaining, 1.0))
            self._wakeup.clear()

    def _decision_moved(self) -> bool:
        """Do the counts now give another replica count than the last poll's decision?
        Computed with the parameters parsed last (no request, no parsing): O(1)."""
        self._nodes_dirty = False
        params, last = self._params, self._last_desired
        if params is None or last is None:
            return False
        self.decision_checks += 1
        try:
            replicas = decide(params, self._counts()).replicas
        except Exception:  # the next regular poll reports whatever this is
            return False
        if logs.v(5):  # at most ten a second: not even --v=4's every-poll level
            self._log.info("nodes.checked", replicas=replicas, desired_before=last,
                           moved=replicas != last)
        return replicas != last

    def _react_to_nodes(self, stop: threading.Event, until: float) -> None:
        """A node change: after the debounce, and at most once a second, poll early if the
        counts now move the decision. A follower never does (only the leader polls), nor
        does the loop when the period's poll comes first anyway."""
        self.node_wakeups += 1
        if self._may_write is not None and not self._may_write():
            self._nodes_dirty = False
            return
        earliest = max(self._clock() + REACT_DEBOUNCE_SECONDS,
                       self._last_early + REACT_MIN_INTERVAL_SECONDS)
        if earliest >= until - REACT_DEBOUNCE_SECONDS:
            self._nodes_dirty = False  # the period's poll sees these counts
            return
        if not self._pause(stop, earliest - self._clock()) or not self._decision_moved():
            return
        if self._may_write is not None and not self._may_write():
            return
        self._last_early = self._clock()
        self.early_polls += 1
        if logs.v(4):
            self._log.info("poll.early", reason="the node counts change the decision",
                           desired_before=self._last_desired)
        self.poll_once(early=True)

    # --- one poll ------------------------------------------------------------------
    def _load_params(self) -> Params:
        cm = configmap.get_or_create(self._api, self._config.namespace, self._config.configmap,
                                     self._config.default_params,
                                     create=not self._config.dry_run)
        if cm.would_create != self._would_create_logged:
            self._would_create_logged = cm.would_create
            if cm.would_create:
                self._log.info("configmap.would_create", namespace=self._config.namespace,
                               name=self._config.configmap, data=cm.data,
                               hint="dry run: deciding on --default-params, creating nothing")
        if cm.resource_version == self._params_rv:
            if self._params_error is not None:
                raise _InvalidParams(self._params_error)
            assert self._params is not None
            return self._params
        old = self._params
        self._params_rv = cm.resource_version
        size = sum(len(value) for value in (cm.data or {}).values())
        # The garbage of parsing a large table, and the table replaced, are given back
        # once the old parameters are gone (poll_once, after this returns).
        if size >= LARGE_PARAMS_BYTES or self._params_size >= LARGE_PARAMS_BYTES:
            self._give_back = GIVE_BACK_POLLS
        self._params_size = size
        try:
            params = parse_configmap_data(cm.data)
        except Exception as exc:
            # Fail closed on ANY error, unexpected ones included: this version is invalid
            # on every poll until it changes, and older parameters never stay in force.
            reason = str(exc) if isinstance(exc, ParamsError) else (
                f"unexpected {type(exc).__name__} while parsing it: {exc}")
            self._params, self._params_error = None, (
                f"invalid ConfigMap {self._config.namespace}/{self._config.configmap} "
                f"(resourceVersion {cm.resource_version}): {reason}")
            self._log.error("params.invalid", configmap=self._config.configmap,
                            resource_version=cm.resource_version, error=reason,
                            hint="fix the ConfigMap; nothing is scaled until then")
            raise _InvalidParams(self._params_error) from exc
        self._params, self._params_error = params, None
        mode, previous = params.name, self._mode
        self._mode = mode
        if mode != previous and logs.v(1):
            self._log.info("mode.changed", mode=mode, previous=previous)
        if logs.v(2):  # once per resourceVersion, not once per poll
            self._log.info("params.loaded", mode=mode, changed=params != old,
                           resource_version=cm.resource_version, **params.fields())
        return params

    # --- behavior (ours, opt-in) ---------------------------------------------------
    def _shaper(self, target: Target, behavior: Behavior | None, result: PollResult,
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
            outcome = self.behavior.shape(target, behavior, desired, current, now, floor)
            result.behavior[target] = outcome
            return outcome.replicas
        return shape

    def _behavior_fields(self, res: ScaleResult, result: PollResult) -> dict[str, object]:
        """Record a successful write in the target's history; log a hold once per episode;
        return the extra ``scale.changed`` fields when the behavior shaped the write."""
        outcome = result.behavior.get(res.target)
        if outcome is None or res.error is not None:
            return {}
        if res.changed and res.previous is not None:
            self.behavior.written(res.target, res.previous, res.replicas, result.started)
        elif self.behavior.newly_held(res.target, outcome):
            self._log.info("scale.held", target=str(res.target), replicas=outcome.replicas,
                           desired=outcome.desired, behavior=outcome.reason)
        if not outcome.shaped:
            return {}
        return {"desired": outcome.desired, "behavior": outcome.reason}

    def _decide(self, params: Params, counts: ClusterCounts) -> Decision:
        """:func:`decide`, or the last poll's decision when its inputs are the same: the
        decision is a pure function of the two (its steps, written out for ``explain``,
        were a tenth of a steady poll's CPU)."""
        last = self._last_decision
        if last is not None and last[0] is params and last[1] == counts:
            return last[2]
        decision = decide(params, counts)
        self._last_decision = (params, counts, decision)
        return decision

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

    def poll_once(self, early: bool = False) -> PollResult:
        """Run one poll; never raises: the outcome (and /last-poll) carries the error.
        ``early``: run between the period's polls (``react_to_node_changes``)."""
        self.polls += 1
        result = PollResult(started=self._clock(), early=early)
        try:
            result.stale = self._stale.check() if self._stale is not None else None
            counts = result.counts = self._counts()
            if logs.v(4):
                self._log.info("poll.counts", nodes=counts.total_nodes,
                               cores=counts.total_cores,
                               schedulable_nodes=counts.schedulable_nodes,
                               schedulable_cores=counts.schedulable_cores)
            params = result.params = self._load_params()
            result.params_version = self._params_rv
            if self._count_by is not None and self._count_by(params.shared.policy()):
                counts = result.counts = self._counts()  # counted as these params say
            decision = self._decide(params, counts)
            result.decision = decision
            self._last_desired = decision.replicas
            if decision.error is not None:
                raise PollError(decision.error)
            failures: list[str] = []
            behavior = params.shared.behavior
            if behavior is None:
                self.behavior.reset()
            load = params.shared.load
            if load is None and self._load_active and self._load is not None:
                self._load.retire()
            self._load_active = load is not None and self._load is not None
            for target in self._config.targets:  # ours: every target is attempted
                if load is not None and self._load is not None:
                    axis = result.load[target] = self._load.axis(target, load, result.started)
                    decision = result.decisions[target] = decide(params, counts, axis)
                    if len(result.decisions) == 1:
                        result.decision = decision
                    if decision.error is not None:
                        failures.append(f"{target}: {decision.error}")
                        continue
                res = ensure_replicas(self._api, self._config.namespace, target,
                                      decision.replicas,
                                      self._shaper(target, behavior, result, decision),
                                      dry_run=self._config.dry_run)
                result.scales.append(res)
                self._clamps.check(res)
                if res.dry_run:
                    self._would_write(res, decision)
                else:  # a dry run writes nothing, so there is no fight to report
                    overwrite = self._writers.check(res)
                    if overwrite is not None:
                        result.overwritten.append(overwrite)
                shaped = self._behavior_fields(res, result)
                if res.error:
                    failures.append(res.error)
                elif res.changed:
                    self._log.info("scale.changed", target=str(target), old=res.previous,
                                   new=res.replicas, mode=decision.mode,
                                   nodes=decision.nodes, cores=decision.cores,
                                   total_nodes=counts.total_nodes,
                                   total_cores=counts.total_cores,
                                   schedulable_nodes=counts.schedulable_nodes,
                                   schedulable_cores=counts.schedulable_cores,
                                   **_zones_field(decision), **_load_fields(decision),
                                   **shaped)
            if failures:
                raise PollError("; ".join(failures))
        except _InvalidParams as exc:
            result.error = result.params_invalid = str(exc)
            result.params_version = self._params_rv
        except (PollError, ApiError) as exc:
            result.error = str(exc)
        except Exception as exc:
            result.error = f"unexpected {type(exc).__name__}: {exc}"
        if result.error is None:
            self.consecutive_failures = 0
        else:
            self.consecutive_failures += 1
            self._log.error("poll.failed", error=result.error,
                            consecutive_failures=self.consecutive_failures)
        result.duration = self._clock() - result.started
        for observer in self._observers:
            try:
                observer(result)
            except Exception as exc:  # an observer must never stop the polls
                self._log.error("observer.failed", observer=repr(observer),
                                error=f"{type(exc).__name__}: {exc}")
        return_free_memory(collect=self._give_back > 0)  # after a large version came or went
        self._give_back = max(0, self._give_back - 1)
        return result

    # --- the loop ------------------------------------------------------------------
    def run(self, stop: threading.Event) -> int:
        """Poll now, then on every period boundary until ``stop``; return the exit code.

        A poll that overruns the period skips the boundaries it missed instead of
        firing them back to back, so slow polls never pile up.
        """
        period = float(self._config.poll_period_seconds)
        limit = self._config.max_sync_failures
        next_at = self._clock()
        while not stop.is_set():
            leading = self._may_write is None or self._may_write()
            if leading:
                self.poll_once()
                if limit > 0 and self.consecutive_failures >= limit:
                    self._log.error("exit.max_sync_failures",
                                    failures=self.consecutive_failures, limit=limit)
                    return 1
            now = self._clock()
            next_at += period
            if next_at <= now:
                next_at += period * ((now - next_at) // period + 1)
            if self._sleep(stop, next_at):
                break
            if limit > 0 and self.consecutive_failures >= limit:  # early polls failed
                self._log.error("exit.max_sync_failures",
                                failures=self.consecutive_failures, limit=limit)
                return 1
            next_at = min(next_at, self._clock())  # woken early: this is the new boundary
        return 0


def _load_fields(decision: Decision) -> dict[str, object]:
    """``proportional`` and ``load`` for ``scale.changed`` with a load key (ours)."""
    if decision.proportional is None:
        return {}
    return {"proportional": decision.proportional, "load": decision.load}


def _zones_field(decision: Decision) -> dict[str, object]:
    """``zones`` for ``scale.changed`` when the parameters count them (ours, opt-in)."""
    return {} if decision.zones is None else {"zones": decision.zones}
