"""``/metrics`` of ``/cpvpa`` (``--health-port``): what was computed and what was written.

An observer of :class:`~cpa.vertical.daemon.loop.VerticalPollResult`, as the autoscaler's
metrics observe its polls. Every name is prefixed ``cpvpa_``. The per-value families are
labelled by container, kind (``requests``/``limits``) and resource, all from the config,
so the series count is bounded by the config; a value the config no longer has is removed.
Values are in the resource's base unit (cores, bytes), as Prometheus prefers.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from prometheus_client import Counter, Gauge, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric

from cpa.nodes.watch import WatchStatus
from cpa.runtime import metrics as common
from cpa.vertical.daemon.loop import VerticalPollResult
from cpa.vertical.formula import Requirements
from cpa.vertical.resize_errors import RETRY_REASONS

if TYPE_CHECKING:
    from cpa.runtime.leaderelection import LeaseStatus

__all__ = ["VerticalMetrics"]

_Labels = tuple[str, str, str]


def _by_label(values: Requirements) -> dict[_Labels, float]:
    out: dict[_Labels, float] = {}
    for name, req in values.items():
        for kind, found in (("requests", req.requests), ("limits", req.limits)):
            for res, q in found.items():
                out[(name, kind, res)] = q.milli_value() / 1000
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


class VerticalMetrics:
    """The vertical daemon's metrics in a registry of their own."""

    def __init__(self, watch_status: Callable[[], WatchStatus] | None = None,
                 node_source: Callable[[], str] = lambda: "",
                 clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time, leader_elect: bool = False) -> None:
        """``leader_elect``: ``cpvpa_leader`` starts at 0, until the Lease is acquired."""
        self.registry = common.new_registry()
        reg = self.registry
        self._wall = wall
        labels = ["container", "kind", "resource"]
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
        self.writes = Counter("cpvpa_writes", "Template PATCHes by result (success, error, "
                              "dry_run).", ["result"], registry=reg)
        self.resizes = Counter("cpvpa_pod_resizes", "Pods resized in place (pods/resize "
                               "PATCHes accepted).", registry=reg)
        self.pending = Gauge("cpvpa_pod_resizes_pending", "Pods whose in-place resize the "
                             "kubelet defers or is applying.", registry=reg)
        self.fallbacks = Counter(
            "cpvpa_resize_fallbacks", "In-place resizes refused, by reason, counted once per "
            "change of the computed values; the template is patched instead.", ["reason"],
            registry=reg)
        self.retries = Counter(
            "cpvpa_resize_retries", "In-place resizes that failed transiently (reason: "
            "server_error, conflict, too_many_requests, connection, other); the Pod is "
            "tried again at a later poll, after a backoff, and nothing falls back.",
            ["reason"], registry=reg)
        self.retrying = Gauge("cpvpa_pod_resizes_retrying", "Pods whose in-place resize "
                              "failed transiently and waits for its retry.", registry=reg)
        for reason in RETRY_REASONS:
            self.retries.labels(reason)
        self.last_success = common.last_success_gauge("cpvpa", reg)
        self.leader = common.leader_gauge("cpvpa", reg, not leader_elect)
        for result in ("success", "error", "dry_run"):
            self.writes.labels(result)
        if watch_status is not None:
            reg.register(_NodesCollector(watch_status, node_source, clock))
        reg.register(common.LogCollector("cpvpa"))
        self._shown: dict[Gauge, set[_Labels]] = {}

    def _set(self, gauge: Gauge, values: dict[_Labels, float]) -> None:
        """Set ``values`` and remove the series a previous poll had and this one has not."""
        for labels in self._shown.get(gauge, set()) - set(values):
            gauge.remove(*labels)
        for labels, value in values.items():
            gauge.labels(*labels).set(value)
        self._shown[gauge] = set(values)

    def observe(self, result: VerticalPollResult) -> None:
        """A poll observer."""
        self.polls.labels("success" if result.ok else "error").inc()
        self.poll_duration.observe(result.duration)
        if result.ok:
            self.last_success.set(self._wall())
        if result.nodes is not None and result.cores is not None:
            self.cluster_nodes.set(result.nodes)
            self.cluster_cores.set(result.cores)
        plan = result.plan
        if plan is not None and plan.computed is not None:
            self._set(self.computed, _by_label(plan.computed))
        if result.written is not None:
            if result.dry_run:
                self.writes.labels("dry_run").inc()
            else:
                self.writes.labels("success").inc()
                self._set(self.written, _by_label(result.written))
        elif result.write_failed:
            self.writes.labels("error").inc()
        inplace = result.inplace
        if inplace is not None:
            self.resizes.inc(len(inplace.resized))
            self.pending.set(len(inplace.pending))
            self.retrying.set(len(inplace.retries))
            for retry in inplace.retries:
                if retry.failed_now:
                    self.retries.labels(retry.reason).inc()
            if plan is not None and plan.computed is not None:
                drift = dict.fromkeys(_by_label(plan.computed), 0.0)
                drift.update({(d.container, d.kind, d.resource): 1.0 for d in result.drift})
                self._set(self.drift, drift)
        for reason in result.fallbacks:
            self.fallbacks.labels(reason).inc()

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
