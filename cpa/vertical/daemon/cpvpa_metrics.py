"""``/metrics`` of ``/cpvpa`` (``--health-port``): what was computed and what was written.

An observer of :class:`~cpa.vertical.daemon.cpvpa_loop.VerticalPollResult`, as the autoscaler's
metrics observe its polls. Every name is prefixed ``cpvpa_``. The per-value families are
labelled by container, kind (``requests``/``limits``) and resource, all from the config,
so the series count is bounded by the config; a value the config no longer has is removed.
Values are in the resource's base unit (cores, bytes), as Prometheus prefers.

Several targets (ours): the per-target families gain a ``target`` label (``kind/name``),
last; with one target they keep the labels they had (dashboards and alerts stay valid).
``cpvpa_target_ok{target}`` says, per target, whether its share of the last poll was clean.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric

from cpa.nodes.watch import WatchStatus
from cpa.runtime import metrics_registry as common
from cpa.vertical.daemon.cpvpa_loop import TargetPollResult, VerticalPollResult
from cpa.vertical.decide.formula import Requirements
from cpa.vertical.decide.resize_errors import RETRY_REASONS

if TYPE_CHECKING:
    from cpa.runtime.leaderelection import LeaseStatus

__all__ = ["VerticalMetrics"]

_Labels = tuple[str, ...]


def _by_label(values: Requirements, target: tuple[str, ...] = ()) -> dict[_Labels, float]:
    out: dict[_Labels, float] = {}
    for name, req in values.items():
        for kind, found in (("requests", req.requests), ("limits", req.limits)):
            for res, q in found.items():
                out[(name, kind, res, *target)] = q.milli_value() / 1000
    return out


class _NodesCollector(common.NodeWatchCollector):
    """The node watch's state at scrape time, after the counts' source (a watch, or one
    list per poll)."""

    def __init__(self, status: Callable[[], WatchStatus], mode: Callable[[], str],
                 clock: Callable[[], float]) -> None:
        super().__init__("cpvpa", status, clock, "How long the node watch has been down (0 "
                         "while it is up or not used).", lambda: mode() == "watch")
        self._mode = mode

    def collect(self) -> Iterable[Metric]:
        mode = GaugeMetricFamily(
            "cpvpa_node_counts_source",
            "1 for how the Nodes are counted: watch, or list (one list per poll, where "
            "RBAC grants no watch on nodes, as CPVA's does not).", labels=["source"])
        current = self._mode()
        for source in ("watch", "list"):
            mode.add_metric([source], 1 if current == source else 0)
        yield mode
        yield from super().collect()


_M = TypeVar("_M", Counter, Gauge)


def _child(metric: _M, per: tuple[str, ...]) -> _M:
    """The series of ``metric`` for the target (no labels with one target)."""
    return metric.labels(*per) if per else metric


class VerticalMetrics:
    """The vertical daemon's metrics in a registry of their own."""

    def __init__(self, watch_status: Callable[[], WatchStatus] | None = None,
                 node_source: Callable[[], str] = lambda: "",
                 clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time, leader_elect: bool = False,
                 targets: tuple[str, ...] = ()) -> None:
        """``leader_elect``: ``cpvpa_leader`` starts at 0, until the Lease is acquired.
        ``targets``: the instance's ``kind/name`` list; more than one adds the ``target``
        label."""
        self.registry = common.new_registry()
        reg = self.registry
        self._wall = wall
        self._multi = len(targets) > 1
        per = ["target"] if self._multi else []
        self._values(reg, ["container", "kind", "resource", *per])
        self._writes(reg, per, targets)
        self.target_ok = Gauge(
            "cpvpa_target_ok", "1 when the target's share of the last poll had no error.",
            ["target"], registry=reg)
        self.last_success = common.last_success_gauge("cpvpa", reg)
        self.leader = common.leader_gauge("cpvpa", reg, not leader_elect)
        if watch_status is not None:
            reg.register(_NodesCollector(watch_status, node_source, clock))
        reg.register(common.LogCollector("cpvpa"))
        self._shown: dict[Gauge, dict[_Labels, float]] = {}

    def _values(self, reg: CollectorRegistry, labels: list[str]) -> None:
        """What the config gives and what was written, and the cluster it was given for."""
        self.computed = Gauge(
            "cpvpa_computed", "The value the config gives at the current cluster size, per "
            "container, kind (requests/limits) and resource, in base units.", labels,
            registry=reg)
        self.written = Gauge(
            "cpvpa_written", "The value last written to the target's pod template "
            "(not set by a dry run).", labels, registry=reg)
        self.drift = Gauge(
            "cpvpa_template_drift", "In-place mode: 1 where the pod template does not have "
            "the computed value (left alone so that no Pod restarts), else 0.", labels,
            registry=reg)
        self.cluster_nodes = Gauge("cpvpa_cluster_nodes", "Nodes counted (all of them).",
                                   registry=reg)
        self.cluster_cores = Gauge("cpvpa_cluster_cores",
                                   "Cores counted: the Nodes' capacity cpu, summed.",
                                   registry=reg)
        self.polls = common.polls_counter("cpvpa", reg)
        self.poll_duration = common.poll_duration_histogram("cpvpa", reg)

    def _writes(self, reg: CollectorRegistry, per: list[str], targets: tuple[str, ...]
                ) -> None:
        """The writes: template PATCHes, in-place resizes, their retries and fallbacks;
        every result and retry reason has its series from the start."""
        self.writes = Counter("cpvpa_writes", "Template PATCHes by result (success, error, "
                              "dry_run).", ["result", *per], registry=reg)
        self.resizes = Counter("cpvpa_pod_resizes", "Pods resized in place (pods/resize "
                               "PATCHes accepted).", per, registry=reg)
        self.pending = Gauge("cpvpa_pod_resizes_pending", "Pods whose in-place resize the "
                             "kubelet defers or is applying.", per, registry=reg)
        self.fallbacks = Counter(
            "cpvpa_resize_fallbacks", "In-place resizes refused, by reason, counted once per "
            "change of the computed values; the template is patched instead.",
            ["reason", *per], registry=reg)
        self.retries = Counter(
            "cpvpa_resize_retries", "In-place resizes that failed transiently (reason: "
            "server_error, conflict, too_many_requests, connection, other); the Pod is "
            "tried again at a later poll, after a backoff, and nothing falls back.",
            ["reason", *per], registry=reg)
        self.retrying = Gauge("cpvpa_pod_resizes_retrying", "Pods whose in-place resize "
                              "failed transiently and waits for its retry.", per, registry=reg)
        self.restarts = Counter(
            "cpvpa_fallback_pod_restarts", "Pods the bounded fallback evicted "
            "(--resize-fallback-max-pods-per-cycle), so that their controller recreates them "
            "with the new values.", per, registry=reg)
        self.waiting = Gauge(
            "cpvpa_fallback_pods_waiting", "Pods whose resize is refused and whose fallback "
            "waits: for the grace period, or for the per-poll budget.", per, registry=reg)
        for key in targets if self._multi else ("",):
            extra = [key] if self._multi else []
            for result in ("success", "error", "dry_run"):
                self.writes.labels(result, *extra)
            for reason in RETRY_REASONS:
                self.retries.labels(reason, *extra)

    def _set(self, gauge: Gauge, values: dict[_Labels, float]) -> None:
        """Set ``values`` and remove the series a previous poll had and this one has not."""
        for labels in set(self._shown.get(gauge, {})) - set(values):
            gauge.remove(*labels)
        for labels, value in values.items():
            gauge.labels(*labels).set(value)
        self._shown[gauge] = dict(values)

    def observe(self, result: VerticalPollResult) -> None:
        """A poll observer."""
        self.polls.labels("success" if result.ok else "error").inc()
        self.poll_duration.observe(result.duration)
        if result.ok:
            self.last_success.set(self._wall())
        if result.nodes is not None and result.cores is not None:
            self.cluster_nodes.set(result.nodes)
            self.cluster_cores.set(result.cores)
        computed: dict[_Labels, float] = {}
        written: dict[_Labels, float] = {}
        drift: dict[_Labels, float] = {}
        seen = {"computed": False, "written": False, "drift": False}
        for share in result.targets:
            self._target(result, share, computed, written, drift, seen)
        if seen["computed"]:
            self._set(self.computed, computed)
        if seen["written"]:
            self._set(self.written, written)
        if seen["drift"]:
            self._set(self.drift, drift)

    def _target(self, result: VerticalPollResult, share: TargetPollResult,
                computed: dict[_Labels, float], written: dict[_Labels, float],
                drift: dict[_Labels, float], seen: dict[str, bool]) -> None:
        """One target's share; the value families are set once for all targets (a value
        of a target this poll has no news of keeps its series)."""
        per = (share.target,) if self._multi else ()
        self.target_ok.labels(share.target).set(1 if share.error is None else 0)
        plan = share.plan
        if plan is not None and plan.computed is not None:
            computed.update(_by_label(plan.computed, per))
            seen["computed"] = True
        else:
            computed.update(self._kept(self.computed, per))
        if share.written is not None:
            if result.dry_run:
                self.writes.labels("dry_run", *per).inc()
                written.update(self._kept(self.written, per))
            else:
                self.writes.labels("success", *per).inc()
                written.update(_by_label(share.written, per))
                seen["written"] = True
        else:
            if share.write_failed:
                self.writes.labels("error", *per).inc()
            written.update(self._kept(self.written, per))
        inplace = share.inplace
        if inplace is not None and plan is not None and plan.computed is not None:
            _child(self.resizes, per).inc(len(inplace.resized))
            _child(self.retrying, per).set(len(inplace.retries))
            for retry in inplace.retries:
                if retry.failed_now:
                    self.retries.labels(retry.reason, *per).inc()
            _child(self.pending, per).set(len(inplace.pending))
            values = dict.fromkeys(_by_label(plan.computed, per), 0.0)
            values.update({(d.container, d.kind, d.resource, *per): 1.0 for d in share.drift})
            drift.update(values)
            seen["drift"] = True
        else:
            drift.update(self._kept(self.drift, per))
        for reason in share.fallbacks:
            self.fallbacks.labels(reason, *per).inc()
        if share.fallback is not None:
            _child(self.waiting, per).set(len(share.fallback.waiting)
                                          + len(share.fallback.over_budget))
        if share.evictions is not None:
            _child(self.restarts, per).inc(len(share.evictions.evicted))

    def _kept(self, gauge: Gauge, per: tuple[str, ...]) -> dict[_Labels, float]:
        """The series of ``gauge`` this target had (kept while it has no news; with one
        target a gauge without news is not set at all)."""
        if not per:
            return {}
        return {labels: value for labels, value in self._shown.get(gauge, {}).items()
                if labels[-1] == per[0]}

    def set_leader(self, leading: bool) -> None:
        self.leader.set(1 if leading else 0)

    def watch_lease(self, status: Callable[[], LeaseStatus]) -> None:
        """The election's view of the Lease, read at each scrape (``--leader-elect``)."""
        self.registry.register(common.LeaseCollector("cpvpa", status))

    def failed_lease(self) -> None:
        """A poll period that passed with this follower unable to read or write the Lease:
        a failed poll, as for the autoscaler."""
        self.polls.labels("error").inc()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
