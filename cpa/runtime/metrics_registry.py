"""What both daemons' ``/metrics`` have in common: a registry with the process metrics, the
series every poll sets, and the node watch's state read at scrape time.

Each daemon names its series with its own prefix (``cpa_``, ``cpvpa_``) and registers them
in its own order (the exposition lists them in that order); the names, help texts and
buckets of the shared ones are made here once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from cpa import logs
from cpa.nodes.watch import WatchStatus

if TYPE_CHECKING:
    from cpa.runtime.leaderelection import LeaseStatus

__all__ = ["POLL_BUCKETS", "LeaseCollector", "LogCollector", "NodeWatchCollector",
           "last_success_gauge", "leader_gauge", "new_registry", "poll_duration_histogram",
           "polls_counter"]

# No *_created series: one series per counter, as operators expect.
disable_created_metrics()  # type: ignore[no-untyped-call]
POLL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


def new_registry() -> CollectorRegistry:
    """A daemon's registry of its own, with the library's process, platform and GC
    metrics."""
    reg = CollectorRegistry(auto_describe=True)
    ProcessCollector(registry=reg)
    PlatformCollector(registry=reg)
    GCCollector(registry=reg)
    return reg


def polls_counter(prefix: str, reg: CollectorRegistry) -> Counter:
    """``<prefix>_polls_total{result}``, both results present from the start."""
    polls = Counter(f"{prefix}_polls", "Polls by result.", ["result"], registry=reg)
    for result in ("success", "error"):
        polls.labels(result)
    return polls


def poll_duration_histogram(prefix: str, reg: CollectorRegistry) -> Histogram:
    return Histogram(f"{prefix}_poll_duration_seconds", "How long a poll took.",
                     buckets=POLL_BUCKETS, registry=reg)


def last_success_gauge(prefix: str, reg: CollectorRegistry) -> Gauge:
    return Gauge(f"{prefix}_last_successful_poll_timestamp_seconds",
                 "Unix time of the last poll that succeeded.", registry=reg)


def leader_gauge(prefix: str, reg: CollectorRegistry, leading: bool = True) -> Gauge:
    """``<prefix>_leader``: ``leading`` (1 without leader election, 0 with it) until leader
    election says otherwise. Made 0 under ``--leader-elect``: a scrape before the Lease is
    first acquired must not see 1."""
    leader = Gauge(f"{prefix}_leader", "1 while this process may write (the leader, or no "
                   "leader election), 0 while it is a follower.", registry=reg)
    leader.set(1 if leading else 0)
    return leader


class LeaseCollector(Collector):
    """The Lease as this replica sees it, read at scrape time (only with ``--leader-elect``):
    the record unchanged for a few lease durations means no replica renews it (no leader,
    or this replica cannot read it); a holder's huge duration is a ghost Lease."""

    def __init__(self, prefix: str, status: Callable[[], LeaseStatus]) -> None:
        self._prefix = prefix
        self._status = status

    def collect(self) -> Iterable[Metric]:
        status = self._status()
        p = self._prefix
        unchanged = GaugeMetricFamily(
            f"{p}_leader_lease_unchanged_seconds", "How long the Lease record has gone "
            "unchanged as this replica saw it (renewed by its holder, or by this replica; "
            "since start when never read): a few lease durations means no replica leads, "
            "or this one cannot read the Lease.")
        unchanged.add_metric([], status.unchanged_seconds)
        yield unchanged
        duration = GaugeMetricFamily(
            f"{p}_leader_lease_duration_seconds", "This replica's "
            "--leader-elect-lease-duration.")
        duration.add_metric([], status.lease_duration)
        yield duration
        holder = GaugeMetricFamily(
            f"{p}_leader_lease_holder_duration_seconds", "The leaseDurationSeconds of the "
            "Lease record last read (0 before any): more than an hour is a ghost holder "
            "that followers wait out (log event leader.lease_ghost).")
        holder.add_metric([], status.holder_duration)
        yield holder
        errors = CounterMetricFamily(
            f"{p}_leader_lease_errors", "Lease requests (get, create, update) that failed.")
        errors.add_metric([], status.errors)
        yield errors


class LogCollector(Collector):
    """Log lines dropped because stderr did not take them (a log pipe nobody reads):
    logging never blocks the daemon, it drops and counts (cpa.logs)."""

    def __init__(self, prefix: str) -> None:
        self._prefix = prefix

    def collect(self) -> Iterable[Metric]:
        dropped = CounterMetricFamily(
            f"{self._prefix}_log_lines_dropped", "Log lines dropped because stderr was "
            "not taken for long enough to fill the log buffer.")
        dropped.add_metric([], logs.dropped())
        yield dropped


class NodeWatchCollector(Collector):
    """Reads the node watch's status when Prometheus scrapes, so the figures are current
    even between polls (and while the daemon is a follower that does not poll).
    ``watching`` False (the counts come from one list per poll): down for 0 seconds."""

    def __init__(self, prefix: str, status: Callable[[], WatchStatus],
                 clock: Callable[[], float], stale_help: str,
                 watching: Callable[[], bool] = lambda: True) -> None:
        self._prefix = prefix
        self._status = status
        self._clock = clock
        self._stale_help = stale_help
        self._watching = watching

    def collect(self) -> Iterable[Metric]:
        status = self._status()
        restarts = CounterMetricFamily(
            f"{self._prefix}_node_watch_restarts", "Node watches that failed and were replaced.")
        restarts.add_metric([], status.restarts)
        yield restarts
        stale = GaugeMetricFamily(f"{self._prefix}_node_counts_stale_seconds", self._stale_help)
        stale.add_metric([], status.stale_seconds(self._clock()) if self._watching() else 0.0)
        yield stale
