"""From each Pod's scraped metric to one estimated total rate per scrape.

Counters become rates series by series, as PromQL's ``sum(rate(m[w]))`` does. A series is
its label set (:func:`cpa.horizontal.scrape.exposition.series_key`: the order the page wrote the
labels
in does not make another series), and each Pod's series are remembered with the value and
time each was last seen:

* a series seen before gives the increase since then, over the time since then; a value
  lower than the last is a reset and the increase since it is the new value (Prometheus'
  ``rate``/``increase``);
* a series first seen gives no rate until its second sample, as ``rate`` needs two: a
  counter read for the first time says how much it counted, not when;
* a series missing from a page adds nothing to it, and when it is back it continues from
  its last value, over its own gap: its increase is never put into one scrape (a series
  taken for a new one would count its whole counter at once, a surge the size of the
  counter). A series gone for longer than the stable window is forgotten (a rate older
  than the window is never used); back, it is a first sample again.

A Pod whose page has no series of the metric yet is at rate 0, not a fault: an idle
CoreDNS has no ``coredns_dns_requests_total`` until its first query. A Pod that had the
metric and loses it (same process) is a fault (``missing_metric``).

The process (``process_start_time_seconds``) tells resets apart. A new start time is a
restart: every series is counted from 0 (the new process started after the Pod's last
page), and the old process's vanished series are forgotten. The same start time: a
series seen on the Pod's last page and now lower is not a reset but a counter going
backwards (a broken exporter, two processes behind one address), and that Pod is left out
of the sample (``counter_backwards``); a series back after a gap and lower was deleted and
made again by the process, a reset. A page without a start time: every decrease is a
reset, as Prometheus takes it.

A gauge (the metric's ``# TYPE``) is taken as it is: its sum is the load (for instance
requests in flight, Knative's concurrency).

A value that cannot be a load is that Pod's fault for the scrape, never the axis's: NaN or
infinite (``not_finite``), below zero (``negative``: a negative gauge would cancel the
other Pods' load, a counter is never negative), or a total too large for a float
(``overflow``). The Pod is left out and its memory kept as it was.

The estimate of one scrape is Knative's (``pkg/autoscaler/metrics/stats_scraper.go``
``scrapePods``): the mean over the Pods that gave a rate, times the Ready Pods. When every
Ready Pod answered that is exactly their sum; a Pod that failed or is new (no rate yet) is
left out of the mean, not counted as zero load. Knative fails the scrape
(``errPodsExhausted``) when fewer Pods answer than its sample size for the Ready Pods
(``pkg/autoscaler/metrics/sample_size.go``, ``populationMeanSampleSize``); so does this,
with at least half of the Ready Pods on top (:func:`answers_needed`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, NamedTuple

from cpa.horizontal.scrape.exposition import Family

__all__ = ["CounterBook", "PodRate", "answers_needed", "estimate", "page_fault"]

# Knative's sample size: X = C^2 * sigma^2 / MOE^2 with C = 1.96 (95 %), sigma^2 = 100, MOE = 5.
_SAMPLE_X: Final = 1.96 * 1.96 * 100.0 / 25.0


class PodRate(NamedTuple):
    """One Pod's contribution to a scrape: a rate, or why there is none."""

    rate: float | None
    fault: str | None = None
    """Why the Pod is left out (a metric key such as ``missing_metric``); None with no
    rate means the Pod is new (its first sample) or has no series with a second sample."""


@dataclass(slots=True)
class _Seen:
    at: float
    """When the Pod's last page (with or without the metric) was read."""
    start_time: float | None
    series: dict[str, tuple[float, float]]
    """Each series's last value and when it was read, also of series the last page lacked
    (until they are older than the horizon)."""
    had_metric: bool = False
    """This process has shown the metric: a page without it is a fault."""


def page_fault(family: Family) -> str | None:
    """Why no series of this page can be a load (``not_finite``, ``negative``), else None."""
    values = family.series.values()
    if not all(math.isfinite(value) for value in values):
        return "not_finite"
    if any(value < 0 for value in values):
        return "negative"
    return None


def _total(parts: Iterable[float]) -> float | None:
    """The exact sum, None when it is no finite number."""
    try:
        total = math.fsum(parts)
    except OverflowError:
        return None
    return total if math.isfinite(total) else None


def _known_restart(before: float | None, now: float | None) -> bool:
    return before is not None and now is not None and before != now


def _same_process(before: float | None, now: float | None) -> bool:
    return before is not None and now is not None and before == now


class CounterBook:
    """Each Pod's last page, keyed by the Pod's UID; ``horizon`` is how long a series
    missing from the pages is remembered (the stable window)."""

    __slots__ = ("_seen", "horizon")

    def __init__(self, horizon: float = math.inf) -> None:
        self._seen: dict[str, _Seen] = {}
        self.horizon = horizon

    def __len__(self) -> int:
        return len(self._seen)

    def observe(self, pod: str, at: float, family: Family) -> PodRate:
        """One Pod's page at ``at`` -> its rate (per second) since its previous pages."""
        fault = page_fault(family)
        if fault is not None:
            return PodRate(None, fault)  # the page is not believed: nothing learnt from it
        previous = self._seen.get(pod)
        if previous is not None and at <= previous.at:
            return PodRate(None)  # no time has passed: nothing to measure
        if not family.series:
            return self._empty(pod, at, family, previous)
        if not family.counter:
            self._seen[pod] = _Seen(at, family.start_time, {}, had_metric=True)
            total = _total(family.series.values())
            return PodRate(total) if total is not None else PodRate(None, "overflow")
        return self._counter(pod, at, family, previous)

    def _empty(self, pod: str, at: float, family: Family, previous: _Seen | None) -> PodRate:
        """A page without the metric: a fault when this process had it, else idle."""
        remembered = {} if previous is None else self._recent(previous, at)
        if previous is not None and previous.had_metric and _same_process(
                previous.start_time, family.start_time):
            self._seen[pod] = _Seen(at, family.start_time, remembered, had_metric=True)
            return PodRate(None, "missing_metric")
        # Not yet: a labelled counter gets its series at its first event (an idle CoreDNS
        # has no coredns_dns_requests_total until its first query).
        if previous is not None and _known_restart(previous.start_time, family.start_time):
            remembered = {}
        self._seen[pod] = _Seen(at, family.start_time, remembered)
        return PodRate(0.0 if previous is not None else None)

    def _recent(self, seen: _Seen, at: float) -> dict[str, tuple[float, float]]:
        """The series remembered for ``seen`` that are not older than the horizon."""
        oldest = at - self.horizon
        return {key: last for key, last in seen.series.items() if last[1] > oldest}

    def _counter(self, pod: str, at: float, family: Family, previous: _Seen | None
                 ) -> PodRate:
        remembered = {} if previous is None else self._recent(previous, at)
        restarted = previous is not None and _known_restart(previous.start_time,
                                                            family.start_time)
        same = previous is not None and _same_process(previous.start_time, family.start_time)
        parts: list[float] = []
        backwards = False
        for key, value in family.series.items():
            last = remembered.get(key)
            if last is None:
                continue  # first seen: the base of its next sample
            before, then = last
            if restarted:
                increase = value  # the new process counted it from 0
            elif value >= before:
                increase = value - before
            elif same and previous is not None and then == previous.at:
                backwards = True  # lower than a scrape ago, in the same process
                break
            else:
                increase = value  # a reset
            parts.append(increase / (at - then))
        kept = {} if restarted else {k: v for k, v in remembered.items()
                                     if k not in family.series}
        kept.update((key, (value, at)) for key, value in family.series.items())
        self._seen[pod] = _Seen(at, family.start_time, kept, had_metric=True)
        if backwards:
            return PodRate(None, "counter_backwards")
        if not parts:
            return PodRate(None)  # a first sample of every series on the page
        total = _total(parts)
        return PodRate(total) if total is not None else PodRate(None, "overflow")

    def keep_only(self, pods: Iterable[str]) -> None:
        """Forget the Pods no longer Ready (a Pod that comes back starts afresh)."""
        keep = set(pods)
        for pod in [p for p in self._seen if p not in keep]:
            del self._seen[pod]


def answers_needed(ready: int) -> int:
    """How many Pods must give a rate for an estimate of ``ready`` Ready Pods: Knative's
    sample size (``populationMeanSampleSize``: all of them up to 3, then
    ``ceil(N*X / (N+X-1))``, at most 16), and at least half of them. Half bounds the
    factor the mean is multiplied by to 2: the Pods that give no rate are often not a
    random sample of the load (new Pods, which need a second scrape and were not serving
    yet, or broken ones), and the mean of the others times all of them would be a surge."""
    if ready <= 3:
        return max(ready, 0)
    knative = math.ceil(ready * _SAMPLE_X / (ready + _SAMPLE_X - 1))
    return max(knative, (ready + 1) // 2)


def estimate(rates: Iterable[float], ready: int) -> float | None:
    """Knative's estimate: the mean of the Pods' rates times the Ready Pods. None without
    enough rates (:func:`answers_needed`, and at least one) or when the total is no finite
    number."""
    values = list(rates)
    if not values or len(values) < answers_needed(ready):
        return None
    total = _total(values)
    if total is None:
        return None
    if len(values) >= ready:
        return total  # everyone answered: the sum
    result = total / len(values) * ready
    return result if math.isfinite(result) else None
