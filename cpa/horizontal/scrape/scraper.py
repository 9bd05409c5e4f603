"""The load axis's scraper: one thread per target, on its own short interval.

Every ``scrapeIntervalSeconds`` (2 s by default, independent of the poll period, so the
panic window has samples), it reads the target's Ready Pods (by the ``/scale``
``status.selector``), GETs ``http://<podIP>:<port><path>`` from each, at most
``maxConcurrentScrapes`` at once and each within ``scrapeTimeoutSeconds``, turns the
metric into one estimated total rate (:mod:`cpa.horizontal.scrape.rates`) and keeps it as a
:class:`~cpa.horizontal.decide.windows.Sample`. With a ``prometheus`` source it runs the query
instead. The poll loop reads the samples (:meth:`Scraper.status`); it never waits on a
scrape.

Faults never make a sample: a Pod that fails is left out of that scrape (and counted); a
scrape with no rate at all (no Ready Pod, every Pod failing, the metric missing,
Prometheus down), or with rates from fewer Pods than an estimate needs
(:func:`~cpa.horizontal.scrape.rates.answers_needed`), leaves a gap. Samples older than the stable
window are dropped, so a rate older than that is never used.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from cpa import logs
from cpa.horizontal.decide.load import Load
from cpa.horizontal.decide.windows import Sample
from cpa.horizontal.scrape.exposition import ExpositionError, parse_family
from cpa.horizontal.scrape.pages import Answer, PodPages, Request
from cpa.horizontal.scrape.prometheus import PrometheusClient, PrometheusError
from cpa.horizontal.scrape.rates import CounterBook, answers_needed, estimate
from cpa.kube.api import Api, ApiError
from cpa.kube.pods import ReadyPod, list_ready_pods, read_selection

__all__ = ["SELECTOR_REFRESH_SECONDS", "UNSEEN_SCRAPES", "ScrapeStatus", "Scraper"]

SELECTOR_REFRESH_SECONDS = 30.0
"""How often the target's ``/scale`` is read again for its selector (a changed selector
is rare: a Deployment's is immutable)."""
UNSEEN_SCRAPES = 15
"""Scrapes after which a metric no Pod has shown yet is logged once (``load.metric.unseen``)."""


class ScrapeStatus(NamedTuple):
    """What the scraper has, as the poll loop and ``/metrics`` read it."""

    samples: tuple[Sample, ...]
    fault: str | None
    """Why the last scrape gave no sample (the operator's sentence), else None."""
    fault_reason: str | None
    """The same as one word (``no_ready_pods``, ``missing_metric``, ...)."""
    ready: int
    """Ready Pods at the last scrape (the target's replicas for the Prometheus source)."""
    answered: int
    """Pods that gave a rate at the last scrape."""
    errors: dict[str, int]
    """Pods (or queries) that failed, by reason, since the start."""
    scrapes: int
    duration: float
    """Seconds the last scrape took."""
    left_out: tuple[tuple[str, str], ...] = ()
    """The Pods the last scrape left out, with the reason: (name, reason), by name."""


@dataclass(eq=False, repr=False, slots=True)
class Scraper:
    """Scrapes one target's Pods (or Prometheus) until :meth:`stop`. ``load``: the
    parameters' load key in force (:meth:`update` changes it)."""

    api: Api
    namespace: str
    scale_path: str
    target: str
    load: Load
    clock: Callable[[], float] = time.monotonic
    on_sample: Callable[[Scraper], None] | None = None
    _lock: threading.Lock = field(init=False, default_factory=threading.Lock)
    _stop: threading.Event = field(init=False, default_factory=threading.Event)
    _thread: threading.Thread | None = field(init=False, default=None)
    _samples: deque[Sample] = field(init=False, default_factory=deque)
    _book: CounterBook = field(init=False)
    _selector: str | None = field(init=False, default=None)
    _selector_at: float = field(init=False, default=float("-inf"))
    _errors: Counter[str] = field(init=False, default_factory=Counter)
    _fault: tuple[str, str] | None = field(init=False, default=None)
    _failing: dict[str, str] = field(init=False, default_factory=dict)
    """Pod -> the reason it fails, logged once per episode."""
    _ready: int = field(init=False, default=0)
    _answered: int = field(init=False, default=0)
    _scrapes: int = field(init=False, default=0)
    _metric_seen: bool = field(init=False, default=False)
    """Some Pod's page has had the metric."""
    _unseen_logged: bool = field(init=False, default=False)
    _duration: float = field(init=False, default=0.0)
    _prometheus: PrometheusClient | None = field(init=False, default=None)
    _pages: PodPages = field(init=False)
    _log: Any = field(init=False, default_factory=lambda: logs.get_logger("load"))

    def __post_init__(self) -> None:
        self._book = CounterBook(self.load.stable_window_seconds)
        self._pages = PodPages(self.clock)

    def update(self, load: Load) -> None:
        """New parameters: a changed source or metric starts the samples afresh (old rates
        were of something else); changed windows keep them."""
        with self._lock:
            old, self.load = self.load, load
            if (old.source, old.metric, old.port, old.path, old.prometheus) != (
                    load.source, load.metric, load.port, load.path, load.prometheus):
                self._samples.clear()
                self._book = CounterBook()
            self._book.horizon = load.stable_window_seconds

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"load-{self.target}",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop now: the fetches in flight are cut, so the thread ends at once and never
        outlives the key that started it."""
        self._stop.set()
        self._pages.close()
        if self._prometheus is not None:
            self._prometheus.close()
        if self._thread is not None:
            self._thread.join(timeout=1)

    def status(self) -> ScrapeStatus:
        with self._lock:
            fault = self._fault
            return ScrapeStatus(tuple(self._samples), fault[1] if fault else None,
                                fault[0] if fault else None, self._ready, self._answered,
                                dict(self._errors), self._scrapes, self._duration,
                                tuple(sorted(self._failing.items())))

    def _run(self) -> None:
        next_at = self.clock()
        while not self._stop.is_set():
            try:
                self.scrape_once()
            except Exception as exc:  # a scraper thread must never die
                self._record_fault("internal", f"unexpected {type(exc).__name__}: {exc}")
            next_at += self.load.scrape_interval_seconds
            now = self.clock()
            if next_at <= now:  # a scrape overran: the next starts a whole interval later
                next_at = now + self.load.scrape_interval_seconds
            if self._stop.wait(next_at - now):
                return

    # --- one scrape ---------------------------------------------------------------
    def scrape_once(self) -> Sample | None:
        """Scrape now; keep and return the sample (None: a gap, the fault recorded)."""
        load = self.load
        started = self.clock()
        if load.prometheus is not None:
            sample = self._query(load, started)
        else:
            sample = self._pods(load, started)
        with self._lock:
            self._scrapes += 1
            self._duration = self.clock() - started
            if sample is not None:
                self._samples.append(sample)
                if self._fault is not None:
                    self._log.info("load.scrape.recovered", target=self.target,
                                   after=self._fault[0])
                self._fault = None
            horizon = started - load.stable_window_seconds - load.scrape_interval_seconds
            while self._samples and self._samples[0].at <= horizon:
                self._samples.popleft()
        if sample is not None and self.on_sample is not None:
            self.on_sample(self)
        return sample

    def _record_fault(self, reason: str, message: str) -> None:
        with self._lock:
            first = self._fault is None or self._fault[0] != reason
            self._fault = (reason, message)
            self._errors[reason] += 0  # the reason has a series from its first time
        if first:  # once per episode and reason
            self._log.warning("load.scrape.failed", target=self.target, reason=reason,
                              error=message)

    def _count(self, reason: str) -> None:
        with self._lock:
            self._errors[reason] += 1

    def _query(self, load: Load, started: float) -> Sample | None:
        assert load.prometheus is not None
        client = self._prometheus
        if client is None or client.source != load.prometheus:
            if client is not None:
                client.close()
            client = self._prometheus = PrometheusClient(load.prometheus)
        try:
            ready = read_selection(self.api, self.scale_path).replicas
            rate = client.instant(load.scrape_timeout_seconds)
        except ApiError as exc:
            self._count("scale")
            self._record_fault("scale", f"cannot read {self.target}'s scale: {exc}")
            return None
        except PrometheusError as exc:
            self._count(exc.reason)
            self._record_fault(exc.reason, str(exc))
            return None
        with self._lock:
            self._ready, self._answered = ready, 1
        return Sample(started, rate, ready)

    def _pods_now(self, started: float) -> list[ReadyPod] | None:
        if self._selector is None or started - self._selector_at >= SELECTOR_REFRESH_SECONDS:
            try:
                selection = read_selection(self.api, self.scale_path)
            except ApiError as exc:
                self._count("scale")
                self._record_fault("scale", f"cannot read {self.target}'s scale: {exc}")
                return None
            if not selection.selector:
                self._record_fault("no_selector", (
                    f"{self.target}'s /scale has no status.selector, so its Pods are "
                    "unknown (a custom resource must fill scale.status.selector)"))
                return None
            self._selector, self._selector_at = selection.selector, started
        try:
            pods, _selected = list_ready_pods(self.api, self.namespace, self._selector)
        except ApiError as exc:
            self._count("pods_list")
            self._record_fault("pods_list", str(exc))
            return None
        return pods

    def _pods(self, load: Load, started: float) -> Sample | None:
        pods = self._pods_now(started)
        if pods is None:
            return None
        if not pods:
            with self._lock:
                self._ready = self._answered = 0
            self._record_fault("no_ready_pods", (
                f"no Ready Pod matches {self.target}'s selector {self._selector!r}"))
            return None
        by_uid = {pod.uid: pod for pod in pods}
        answers = self._pages.fetch_all(
            [Request(pod.uid, pod.ip, load.port, load.path) for pod in pods],
            load.max_concurrent_scrapes, load.scrape_timeout_seconds)
        rates: list[float] = []
        faults: Counter[str] = Counter()
        failing: dict[str, str] = {}
        for answer in answers:
            pod = by_uid[answer.key]
            rate, reason, error = self._rate_of(answer, pod, load)
            if rate is not None:
                rates.append(rate)
                continue
            if reason is None:
                continue  # a new Pod: a rate from its next scrape on
            faults[reason] += 1
            failing[pod.name] = reason
            if self._failing.get(pod.name) != reason:
                self._log.warning("load.pod.failed", target=self.target, pod=pod.name,
                                  ip=pod.ip, reason=reason, error=error)
        self._book.keep_only(by_uid)
        self._say_unseen(load)
        with self._lock:
            self._failing = failing
            self._errors.update(faults)
            self._ready, self._answered = len(pods), len(rates)
        rate = estimate(rates, len(pods))
        if rate is None:
            self._no_estimate(len(pods), len(rates), faults)
            return None
        return Sample(started, rate, len(pods))

    def _no_estimate(self, ready: int, answered: int, faults: Counter[str]) -> None:
        """Record why a scrape gave no estimate: Pods failing (the most common reason when
        none gave a rate, ``too_few_pods`` when some did), new Pods only (``warming``, not
        a fault: a counter needs two scrapes), or rates adding up to no finite number."""
        needed = answers_needed(ready)
        listed = ", ".join(f"{n} {r}" for r, n in faults.most_common())
        new = ready - answered - sum(faults.values())
        if answered >= needed:
            self._record_fault("overflow", (
                f"the rates of {self.target}'s Pods add up to more than a number can hold"))
        elif faults and answered:
            self._count("too_few_pods")
            self._record_fault("too_few_pods", (
                f"{answered} of {ready} Ready Pods of {self.target} gave a rate, fewer than "
                f"the {needed} an estimate needs: {listed}" + (
                    f", {new} new (a rate from their second scrape)" if new else "")))
        elif faults:
            reason, _count = faults.most_common(1)[0]
            self._record_fault(reason, f"no Pod of {self.target} gave a rate: {ready} "
                                       f"Ready, {listed}")
        else:  # new Pods or new series only: a counter needs two scrapes
            message = "the first scrape: a counter needs two"
            if answered:
                message = (f"{answered} of {ready} Ready Pods of {self.target} gave a rate, "
                           f"fewer than the {needed} an estimate needs; {new} are new (a "
                           "rate from their second scrape)")
            with self._lock:
                self._fault = ("warming", message)


    def _rate_of(self, answer: Answer, pod: ReadyPod, load: Load
                 ) -> tuple[float | None, str | None, str | None]:
        """One Pod's answer: (its rate, None, None); (None, None, None) for a new Pod, whose
        rate comes from its next scrape on; else (None, the reason, the error)."""
        if answer.error is not None:
            assert answer.reason is not None
            return None, answer.reason, answer.error
        try:
            family = parse_family(answer.body.decode("utf-8", "replace"), load.metric)
        except ExpositionError as exc:
            return None, "parse", f"not the Prometheus text format: {exc}"
        self._metric_seen = self._metric_seen or bool(family.series)
        result = self._book.observe(pod.uid, answer.at, family)
        if result.rate is not None or result.fault is None:
            return result.rate, None, None
        return None, result.fault, _FAULTS[result.fault].format(metric=load.metric)

    def _say_unseen(self, load: Load) -> None:
        """No Pod's page has had the metric after a few scrapes: idle, or a wrong name; said
        once."""
        if not self._metric_seen and not self._unseen_logged and self._scrapes >= UNSEEN_SCRAPES:
            self._unseen_logged = True
            self._log.warning("load.metric.unseen", target=self.target, metric=load.metric,
                              scrapes=self._scrapes, hint=(
                                  "no Pod's page has had this metric yet: its rate counts as "
                                  "0; check the name (an idle CoreDNS shows "
                                  "coredns_dns_requests_total at its first query)"))


_FAULTS = {
    "missing_metric": "the page has lost {metric} (the same process had it)",
    "not_finite": "{metric} has a NaN or infinite value",
    "negative": "{metric} has a value below zero (no load is negative)",
    "overflow": "{metric}'s series add up to more than a number can hold",
    "counter_backwards": "{metric} went down while the process did not restart "
                         "(process_start_time_seconds unchanged): not a reset",
}
