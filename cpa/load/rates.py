"""From each Pod's scraped metric to one estimated total rate per scrape.

Counters become rates series by series, as PromQL's ``sum(rate(m[w]))`` does: a value
lower than the previous one is a counter reset, and the increase since the reset is the
new value (Prometheus' ``rate``/``increase``); a series that vanished adds nothing.
Summing the series first and taking the rate of the sum would turn a vanished series into
a false reset: a spike the size of the whole counter. One difference from Prometheus: a
series that appears on a Pod scraped a moment ago counts from 0 (Prometheus skips its
first sample), because client libraries create a labelled counter's series at its first
increment: on CoreDNS a surge of a new query type would otherwise be missed for a scrape.

A Pod whose page has no series of the metric yet is at rate 0, not a fault: an idle
CoreDNS has no ``coredns_dns_requests_total`` until its first query. A Pod that had the
metric and loses it (same process) is a fault (``missing_metric``).

A decrease is believed to be a reset when the Pod's process restarted (its
``process_start_time_seconds`` changed) or when the page does not say. A decrease while the
process start time stayed the same is not a reset but a counter going backwards (a broken
exporter, two processes behind one address): that Pod is left out of the sample, never
counted as a huge increase.

A gauge (the metric's ``# TYPE``) is taken as it is: its sum is the load (for instance
requests in flight, Knative's concurrency).

The estimate of one scrape is Knative's (``pkg/autoscaler/metrics/stats_scraper.go``
``scrapePods`` and ``computeAverages``): the mean over the Pods that gave a rate, times the
Ready Pods. When every Ready Pod answered that is exactly their sum; a Pod that failed or
is new (no rate yet) is left out of the mean, not counted as zero load.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from cpa.load.exposition import Family
from cpa.namedtuple import NamedTuple

__all__ = ["CounterBook", "PodRate", "estimate"]


class PodRate(NamedTuple):
    """One Pod's contribution to a scrape: a rate, or why there is none."""

    rate: float | None
    fault: str | None = None
    """Why the Pod is left out (a metric key such as ``missing_metric``); None with no
    rate means the Pod is new (its first sample)."""


@dataclass(slots=True)
class _Seen:
    at: float
    series: dict[str, float]
    start_time: float | None
    lost: bool = False
    """The Pod had the metric and its page lost it: when it is back, its values are the old
    counters', not new series from 0."""


class CounterBook:
    """The previous sample of each Pod, keyed by the Pod's UID."""

    __slots__ = ("_seen",)

    def __init__(self) -> None:
        self._seen: dict[str, _Seen] = {}

    def __len__(self) -> int:
        return len(self._seen)

    def observe(self, pod: str, at: float, family: Family) -> PodRate:
        """One Pod's page at ``at`` -> its rate (per second) since its previous page."""
        previous = self._seen.get(pod)
        restarted = (previous is None or family.start_time is None
                     or previous.start_time is None
                     or family.start_time != previous.start_time)
        lost = previous is not None and not restarted and (previous.lost or bool(
            previous.series))
        if not family.series:
            if lost:  # it had the metric: a page without it is a fault
                self._seen[pod] = _Seen(at, {}, family.start_time, lost=True)
                return PodRate(None, "missing_metric")
            # Not yet: a labelled counter gets its series at its first event (an idle
            # CoreDNS has no coredns_dns_requests_total until its first query).
            self._seen[pod] = _Seen(at, {}, family.start_time)
            return PodRate(0.0 if previous is not None and at > previous.at else None)
        if any(not math.isfinite(value) for value in family.series.values()):
            self._seen.pop(pod, None)
            return PodRate(None, "not_finite")
        if not family.counter:
            return PodRate(math.fsum(family.series.values()))
        self._seen[pod] = _Seen(at, family.series, family.start_time)
        if previous is None or previous.lost:
            return PodRate(None)  # the first sample, or back after a loss: a new base
        elapsed = at - previous.at
        if elapsed <= 0:
            return PodRate(None)
        increase = 0.0
        for labels, value in family.series.items():
            before = previous.series.get(labels)
            if before is None:
                # A series the same process did not have a scrape ago started at 0 since
                # (a labelled counter's child is made at its first increment). After a
                # restart, everything starts at 0 anyway.
                increase += value
                continue
            if value >= before:
                increase += value - before
            elif restarted:
                increase += value  # a reset: the increase since it is the new value
            else:
                return PodRate(None, "counter_backwards")
        return PodRate(increase / elapsed)

    def keep_only(self, pods: Iterable[str]) -> None:
        """Forget the Pods no longer Ready (a Pod that comes back starts afresh)."""
        keep = set(pods)
        for pod in [p for p in self._seen if p not in keep]:
            del self._seen[pod]


def estimate(rates: Iterable[float], ready: int) -> float | None:
    """Knative's estimate: the mean of the Pods' rates times the Ready Pods; None without
    any rate."""
    values = list(rates)
    if not values:
        return None
    return math.fsum(values) / len(values) * max(ready, len(values))
