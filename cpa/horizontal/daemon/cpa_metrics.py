"""Prometheus metrics on the health port (``GET /metrics``), fed by the poll's observers.

Why an observer: the poll loop hands its whole result to observers and knows nothing of
Prometheus; this module turns each :class:`~cpa.horizontal.daemon.cpa_loop.PollResult` into gauges
and
counters, and reads the node watch's status at scrape time.

Every name is prefixed ``cpa_``; labels are few and bounded (targets come from the command
line, modes from the registry), so the series count cannot grow with the cluster.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from prometheus_client import Counter, Gauge, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from cpa.horizontal.decide.modes.registry import MODES
from cpa.kube.configmap import DefaultsState
from cpa.kube.writers import writer_for
from cpa.runtime import metrics_registry as common

if TYPE_CHECKING:
    from cpa.horizontal.daemon.cpa_loop import PollResult
    from cpa.horizontal.daemon.loadstage import TargetLoad
    from cpa.horizontal.decide.modes.mode import Params
    from cpa.kube.targets import Target
    from cpa.nodes.counts import ClusterCounts
    from cpa.nodes.watch import WatchStatus
    from cpa.runtime.leaderelection import LeaseStatus

_STALE_HELP = ("How long the node watch has been down (0 while it is up): the counts may have "
               "missed changes for this long.")


class _LoadCollector(Collector):
    """The load axis (ours, the ``load`` key), read at scrape time from the scrapers and
    the last poll's axis: no series at all for a target without a ``load`` key."""

    def __init__(self, view: Callable[[], list[TargetLoad]]) -> None:
        self._view = view

    def collect(self) -> Iterable[Metric]:
        view = self._view()
        available = GaugeMetricFamily(
            "cpa_load_available", "1 while the load axis has a rate in its stable window, "
            "0 while it is out (the proportional count decides alone).", labels=["target"])
        rate = GaugeMetricFamily(
            "cpa_load_rate", "The load's rate (per second) averaged over each window at "
            "the last poll.", labels=["target", "window"])
        replicas = GaugeMetricFamily(
            "cpa_load_replicas", "The replicas the load axis gave at the last poll (before "
            "max(proportional, load)).", labels=["target"])
        panic = GaugeMetricFamily(
            "cpa_load_panic", "1 while the load axis is in panic mode (it only scales up).",
            labels=["target"])
        ready = GaugeMetricFamily(
            "cpa_load_pods", "Pods at the last scrape: Ready ones, and those that gave a "
            "rate.", labels=["target", "state"])
        errors = CounterMetricFamily(
            "cpa_load_scrape_errors", "Pods (or Prometheus queries) that gave no rate, and "
            "scrapes with rates from too few Pods (too_few_pods), by reason.",
            labels=["target", "reason"])
        scrapes = CounterMetricFamily(
            "cpa_load_scrapes", "Scrapes of the load axis run.", labels=["target"])
        duration = GaugeMetricFamily(
            "cpa_load_scrape_duration_seconds", "How long the last scrape took (the Pod "
            "list and every Pod, or the query).", labels=["target"])
        for item in view:
            name = str(item.target)
            axis, scrape = item.axis, item.scrape
            outcome = axis.outcome if axis is not None else None
            available.add_metric([name], 1 if outcome is not None else 0)
            if outcome is not None:
                rate.add_metric([name, "stable"], outcome.reading.stable)
                if outcome.reading.panic is not None:
                    rate.add_metric([name, "panic"], outcome.reading.panic)
                replicas.add_metric([name], outcome.replicas)
            panic.add_metric([name], 1 if outcome is not None and outcome.panicking else 0)
            ready.add_metric([name, "ready"], scrape.ready)
            ready.add_metric([name, "answered"], scrape.answered)
            for reason, count in sorted(scrape.errors.items()):
                errors.add_metric([name, reason], count)
            scrapes.add_metric([name], scrape.scrapes)
            duration.add_metric([name], scrape.duration)
        if view:
            yield from (available, rate, replicas, panic, ready, errors, scrapes, duration)


class _ForeignSeries:
    """``--watch-targets``: another writer's counts, and whether each target is contended;
    no series without the flag."""

    def __init__(self, registry: CollectorRegistry, targets: Sequence[Target]) -> None:
        self.writes = Counter(
            "cpa_foreign_writes", "Replica counts another writer set on a target, by the "
            "field manager that wrote them (--watch-targets).", ["target", "manager"],
            registry=registry)
        self.contended = Gauge(
            "cpa_target_contended", "1 while another writer keeps undoing a target's "
            "replicas (3 times in 5 minutes) and it is answered at the poll period only; 0 "
            "after 5 minutes without a foreign write (--watch-targets).", ["target"],
            registry=registry)
        for target in targets:
            self.contended.labels(str(target)).set(0)

    def observe(self, result: PollResult) -> None:
        for target, contended in result.contended.items():
            self.contended.labels(str(target)).set(1 if contended else 0)
        for write in result.foreign_writes:
            self.writes.labels(str(write.target), write.manager).inc()
            self.contended.labels(str(write.target)).set(1 if write.contended else 0)


def _whole(value: object) -> int:
    """A bound from the parameters' fields; 0 when the mode has none."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


class Metrics:
    """The daemon's metrics in a registry of their own, plus the library's process ones."""

    def __init__(self, targets: Sequence[Target],
                 watch_status: Callable[[], WatchStatus] | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time, dry_run: bool = False,
                 load_view: Callable[[], list[TargetLoad]] | None = None,
                 follow_defaults: bool = False, leader_elect: bool = False,
                 watch_targets: bool = False) -> None:
        """``follow_defaults`` (``--update-configmap-from-defaults``): its series exist;
        ``watch_targets`` (``--watch-targets``): the foreign writes' series exist;
        ``leader_elect``: ``cpa_leader`` starts at 0 (a scrape before the Lease is first
        acquired must not see 1); :meth:`watch_lease` adds the Lease's series."""
        self.registry = common.new_registry()
        self._wall = wall
        self._cluster_series()
        self._poll_series()
        self._decision_series()
        self._write_series(dry_run, leading=not leader_elect)
        for target in targets:  # present from the start, so absence is never ambiguous
            self.scale_writes.labels(str(target))
            self.overwritten.labels(str(target))
            if writer_for(target).bounded:
                self.floor_clamped.labels(str(target)).set(0)
        for mode in MODES:
            self.params_info.labels(mode).set(0)
        if watch_status is not None:
            self.registry.register(
                common.NodeWatchCollector("cpa", watch_status, clock, _STALE_HELP))
        if load_view is not None:
            self.registry.register(_LoadCollector(load_view))
        self.registry.register(common.LogCollector("cpa"))
        self.defaults_diverged: Gauge | None = None
        self.defaults_updates: Counter | None = None
        if follow_defaults:
            self._defaults_series()
        self.foreign = _ForeignSeries(self.registry, targets) if watch_targets else None
        # The series every poll sets, looked up once: labels() costs more than set().
        self._poll_ok = self.polls.labels("success")
        self._poll_error = self.polls.labels("error")
        self._nodes = (self.cluster_nodes.labels("all"), self.cluster_nodes.labels("schedulable"))
        self._cores = (self.cluster_cores.labels("all"), self.cluster_cores.labels("schedulable"))
        self._mode: str | None = None  # the mode params_info says is in force
        self._params_key: tuple[str | None, int] | None = None
        """The ConfigMap version (and the parameters' id) the gauges were set from."""
        self._zones = False  # whether cluster_zones has series (a zones key was in force)
        self._counts_shown: ClusterCounts | None = None  # what the count gauges hold
        self._shown: dict[Gauge, float] = {}  # the last value set, for a few steady gauges
        self._placed = False  # whether target_nodes has series (targetPlacement in force)
        self._capping = False  # whether target_unplaceable has series (capToPlaceable)
        self._objects: set[str] = set()  # the kinds cluster_objects has a series of
        self._writes: dict[Target, Counter] = {}
        self._replicas: dict[Target, Gauge] = {}  # made at a target's first replica count

    # The series, registered in the order the exposition lists them.
    def _cluster_series(self) -> None:
        reg = self.registry
        self.target_replicas = Gauge(
            "cpa_target_replicas", "Replicas of each target, as last read or written.",
            ["target"], registry=reg)
        self.desired_replicas = Gauge(
            "cpa_desired_replicas", "The replicas the parameters gave at the last decision.",
            registry=reg)
        self.cluster_nodes = Gauge(
            "cpa_cluster_nodes", "Nodes counted (scope: all, or schedulable only).",
            ["scope"], registry=reg)
        self.cluster_cores = Gauge(
            "cpa_cluster_cores", "Allocatable cores counted, rounded up (scope as nodes).",
            ["scope"], registry=reg)
        self.cluster_zones = Gauge(
            "cpa_cluster_zones", "Zones the counted Nodes are in (scope as nodes); only "
            "with a zones key in the parameters.", ["scope"], registry=reg)
        self.cluster_objects = Gauge(
            "cpa_cluster_objects", "Ours: Pods (not finished, not being deleted) or Services "
            "counted in the cluster; only while the parameters have an axis of that kind.",
            ["kind"], registry=self.registry)
        self.target_nodes = Gauge(
            "cpa_target_nodes", "Nodes counted for each target by its Pod template's "
            "placement (set: all, or schedulable only); only with targetPlacement in the "
            "parameters.", ["target", "set"], registry=reg)
        self.target_unplaceable = Gauge(
            "cpa_target_unplaceable_replicas", "Ours: replicas wanted for each target beyond "
            "the Nodes (or zones) its required self anti-affinity lets them be placed on, 0 "
            "when they fit; only with capToPlaceable in the parameters.", ["target"],
            registry=reg)

    def _poll_series(self) -> None:
        reg = self.registry
        self.polls = common.polls_counter("cpa", reg)
        self.early_polls = Counter(
            "cpa_early_polls", "Polls run between the period's because the node counts "
            "changed the replica count (--react-to-node-changes); also in cpa_polls.",
            registry=reg)
        self.poll_duration = common.poll_duration_histogram("cpa", reg)
        self.scale_writes = Counter(
            "cpa_scale_writes", "Replica counts written to a target's scale subresource.",
            ["target"], registry=reg)
        self.overwritten = Counter(
            "cpa_scale_overwritten",
            "Polls that found a target's replicas changed by another writer.", ["target"],
            registry=reg)
        self.last_success = common.last_success_gauge("cpa", reg)

    def _decision_series(self) -> None:
        reg = self.registry
        self.params_info = Gauge(
            "cpa_params_info", "1 for the mode of the parameters in force, 0 for the others.",
            ["mode"], registry=reg)
        self.params_min = Gauge(
            "cpa_params_min_replicas", "The min of the parameters in force (linear mode; 0 "
            "when the mode has none).", registry=reg)
        self.params_max = Gauge(
            "cpa_params_max_replicas", "The max of the parameters in force (linear mode; 0 "
            "when nothing caps the count): with cpa_desired_replicas, shows a cluster that "
            "outgrew its parameters.", registry=reg)
        self.floor_clamped = Gauge(
            "cpa_hpa_floor_clamped", "1 while an HPA floor target's bounds (maxReplicas, or "
            "the minimum of 1) keep its minReplicas from the parameters' count.", ["target"],
            registry=reg)

    def _write_series(self, dry_run: bool, leading: bool) -> None:
        reg = self.registry
        self.leader = common.leader_gauge("cpa", reg, leading)
        self.dry_run = Gauge(
            "cpa_dry_run", "1 when the daemon runs with --dry-run and writes nothing.",
            registry=reg)
        self.dry_run.set(1 if dry_run else 0)
        self.would_write = Gauge(
            "cpa_dry_run_replicas", "With --dry-run: the replicas (an HPA's minReplicas) the "
            "daemon would have written to each target at the last poll.", ["target"],
            registry=reg)

    def _defaults_series(self) -> None:
        reg = self.registry
        self.defaults_diverged = Gauge(
            "cpa_configmap_defaults_diverged", "1 while the ConfigMap's data differs from "
            "--default-params and is left alone: edited since the autoscaler wrote it, "
            "never written by it, immutable, or newer defaults that replaced these "
            "(--update-configmap-from-defaults).", registry=reg)
        self.defaults_updates = Counter(
            "cpa_configmap_defaults_updates", "Times the ConfigMap's data was replaced by "
            "new --default-params (--update-configmap-from-defaults).", registry=reg)

    def _observe_defaults(self, result: PollResult) -> None:
        report = result.configmap_defaults
        if report is None or self.defaults_diverged is None or self.defaults_updates is None:
            return
        self.defaults_diverged.set(1 if report.state in (DefaultsState.DIVERGED,
                                                         DefaultsState.SUPERSEDED) else 0)
        if report.replaced is not None:
            self.defaults_updates.inc()

    def _set_replicas(self, target: Target, value: int) -> None:
        gauge = self._replicas.get(target)
        if gauge is None:
            gauge = self._replicas[target] = self.target_replicas.labels(str(target))
        self._show(gauge, value)

    def _show(self, gauge: Gauge, value: float) -> None:
        """Set a gauge that mostly keeps its value only when the value changed (a steady
        poll would set it to the same number every period)."""
        if self._shown.get(gauge) != value:
            gauge.set(value)
            self._shown[gauge] = value

    def observe(self, result: PollResult) -> None:
        """A poll observer."""
        (self._poll_ok if result.ok else self._poll_error).inc()
        if result.early:
            self.early_polls.inc()
        self.poll_duration.observe(result.duration)
        if result.ok:
            self.last_success.set(self._wall())
        counts = result.counts
        if counts is not None and counts != self._counts_shown:
            self._counts_shown = counts
            self._nodes[0].set(counts.total_nodes)
            self._nodes[1].set(counts.schedulable_nodes)
            self._cores[0].set(counts.total_cores)
            self._cores[1].set(counts.schedulable_cores)
            if counts.total_zones is not None and counts.schedulable_zones is not None:
                self.cluster_zones.labels("all").set(counts.total_zones)
                self.cluster_zones.labels("schedulable").set(counts.schedulable_zones)
                self._zones = True
            elif self._zones:
                self.cluster_zones.clear()  # no zones key: no series, rather than a 0
                self._zones = False
        if counts is not None:
            self._observe_objects(counts)
        if result.target_counts:
            for target, placed in result.target_counts.items():
                self.target_nodes.labels(str(target), "all").set(placed.total_nodes)
                self.target_nodes.labels(str(target), "schedulable").set(
                    placed.schedulable_nodes)
            self._placed = True
        elif self._placed and result.params is not None:
            self.target_nodes.clear()  # no targetPlacement: no series, rather than a 0
            self._placed = False
        self._observe_placeable(result)
        if result.params is not None and (
                (result.params_version, id(result.params)) != self._params_key):
            self._params_in_force(result.params, result.params_version)
        if result.decision is not None:
            self._show(self.desired_replicas, result.decision.replicas)
        for scale in result.scales:
            if scale.error is None and writer_for(scale.target).bounded:
                self.floor_clamped.labels(str(scale.target)).set(scale.clamped_from is not None)
            if scale.dry_run:
                self.would_write.labels(str(scale.target)).set(scale.replicas)
            if scale.changed:
                writes = self._writes.get(scale.target)
                if writes is None:
                    writes = self._writes[scale.target] = self.scale_writes.labels(
                        str(scale.target))
                writes.inc()
                self._set_replicas(scale.target, scale.replicas)
            elif scale.previous is not None:
                self._set_replicas(scale.target, scale.previous)
        for overwrite in result.overwritten:
            self.overwritten.labels(str(overwrite.target)).inc()
        self._observe_defaults(result)
        if self.foreign is not None:
            self.foreign.observe(result)

    def _observe_placeable(self, result: PollResult) -> None:
        """Ours, ``capToPlaceable``: each target's replicas beyond its room (0 when they
        fit, or nothing bounds them); no series without the key, rather than a 0."""
        if result.params is None:
            return
        if result.params.shared.cap_to_placeable is None:
            if self._capping:
                self.target_unplaceable.clear()
                self._capping = False
            return
        for scale in result.scales:
            if scale.error is None:
                outcome = result.placeable.get(scale.target)
                self._show(self.target_unplaceable.labels(str(scale.target)),
                           0 if outcome is None else outcome.unplaceable)
        self._capping = True

    def _observe_objects(self, counts: ClusterCounts) -> None:
        """Ours: a series per kind of object counted, none for a kind not counted (rather
        than a 0)."""
        for kind, count in (("pods", counts.pods), ("services", counts.services)):
            if count is not None:
                self.cluster_objects.labels(kind).set(count)
                self._objects.add(kind)
            elif kind in self._objects:
                self.cluster_objects.remove(kind)
                self._objects.discard(kind)

    def _params_in_force(self, params: Params, version: str | None) -> None:
        """The parameters of a new ConfigMap version: the bounds are read from every new
        version, since an edit of ``max`` within ``linear`` changes no mode name but must
        move the gauge the at-max alert reads. (The version and the object's id are kept,
        not the object: a large table must not outlive its version here.)"""
        self._params_key = (version, id(params))
        if params.name != self._mode:
            current = self._mode = params.name
            for mode in MODES:
                self.params_info.labels(mode).set(1 if mode == current else 0)
        fields = params.fields()
        self.params_min.set(_whole(fields.get("min")))
        self.params_max.set(_whole(fields.get("max")))

    def watch_lease(self, status: Callable[[], LeaseStatus]) -> None:
        """The election's view of the Lease, read at each scrape (``--leader-elect``)."""
        self.registry.register(common.LeaseCollector("cpa", status))

    def failed_lease(self) -> None:
        """A poll period that passed with this follower unable to read or write the Lease:
        it counts as a failed poll, so that the alerts on failed polls fire."""
        self.polls.labels("error").inc()

    def failed_before_sync(self) -> None:
        """A poll period that passed with the first Node list failing (the API server
        down, nodes forbidden): no poll could run, and it counts as a failed one, so that
        the alerts on failed polls fire from the first minute."""
        self.polls.labels("error").inc()

    def set_leader(self, leading: bool) -> None:
        self.leader.set(1 if leading else 0)

    def exposition(self) -> bytes:
        """The Prometheus text format of every metric."""
        return generate_latest(self.registry)
