"""The load axis in the daemon: a scraper per target, the panic state, what was logged.

Why a stage of its own: the poll loop asks one question per target and poll, "what does
the load say now?" (:meth:`LoadStage.axis`), and gets a
:class:`~cpa.horizontal.decide.windows.LoadAxis` to hand to
:func:`cpa.horizontal.decide.decision.decide`. The
scrapers (threads of :mod:`cpa.horizontal.scrape.scraper`) start when a ConfigMap version first has
a
``load`` key and stop when none has; the windows and the panic rule are the pure
functions of :mod:`cpa.horizontal.decide.windows`. Faults fail safe: no sample in the stable window
makes the axis drop out (logged once per episode) and the proportional count decides.

A scrape that makes panic likely (the panic window over the threshold, above what the
axis gave at the last poll) wakes the loop, so a surge is answered within a scrape rather
than at the next poll period.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import NamedTuple

from cpa import logs
from cpa.horizontal.decide.load import Load
from cpa.horizontal.decide.windows import LoadAxis, PanicState, read_windows, scale, unavailable
from cpa.horizontal.scrape.scraper import Scraper, ScrapeStatus
from cpa.kube.api import Api
from cpa.kube.targets import Target, scale_path
from cpa.kube.writers import writer_for
from cpa.redact import redact_url

__all__ = ["LoadStage", "TargetLoad"]


class TargetLoad(NamedTuple):
    """One target's load axis as ``/metrics`` reads it."""

    target: Target
    axis: LoadAxis | None
    scrape: ScrapeStatus


class LoadStage:
    """The load axis of every target whose parameters have a ``load`` key."""

    def __init__(self, api: Callable[[], Api], namespace: str,
                 clock: Callable[[], float] = time.monotonic,
                 wake: Callable[[], None] | None = None) -> None:
        """``api`` makes each scraper's own API client (its own connection: the scrapes
        never queue behind a poll's requests)."""
        self._make_api = api
        self._namespace = namespace
        self._clock = clock
        self.wake = wake
        """Called (in a scraper's thread) when a scrape makes panic likely: the loop's
        ``wake``."""
        self._lock = threading.Lock()
        self._scrapers: dict[Target, Scraper] = {}
        self._states: dict[Target, PanicState] = {}
        self._axes: dict[Target, LoadAxis] = {}
        self._out: dict[Target, str] = {}  # why the axis is out (logged once per episode)
        self._log = logs.get_logger("load")

    def axis(self, target: Target, load: Load, now: float) -> LoadAxis:
        """The load axis of ``target`` for the poll at ``now``."""
        if not writer_for(target).has_pods:
            return self._drop(target, "hpa_target", (
                f"{target} is an HPA floor target: the load axis scales a target with Pods "
                "of its own (give the Deployment as --target)"))
        scraper = self._scraper(target, load)
        status = scraper.status()
        reading = read_windows(status.samples, now, load)
        if reading is None:
            if status.fault_reason in (None, "warming"):
                axis = unavailable("no sample yet: the first rate needs two scrapes")
                with self._lock:
                    self._axes[target] = axis
                return axis
            return self._drop(target, status.fault_reason or "no_sample",
                              status.fault or "no sample in the stable window")
        state = self._states.setdefault(target, PanicState())
        outcome = scale(load, state, reading, now)
        axis = LoadAxis(outcome.replicas, outcome.steps, outcome)
        with self._lock:
            self._axes[target] = axis
            was_out = self._out.pop(target, None)
        if was_out is not None:
            self._log.info("load.available", target=str(target), after=was_out,
                           rate=round(reading.stable, 3), replicas=outcome.replicas)
        if outcome.event == "started":
            self._log.info("load.panic.started", target=str(target),
                           panic_rate=round(reading.panic or 0.0, 3), ready=reading.ready,
                           replicas=outcome.replicas,
                           threshold_percent=load.panic_threshold_percentage)
        elif outcome.event == "ended":
            self._log.info("load.panic.ended", target=str(target),
                           stable_rate=round(reading.stable, 3), replicas=outcome.replicas)
        return axis

    def _drop(self, target: Target, reason: str, message: str) -> LoadAxis:
        axis = unavailable(message)
        with self._lock:
            self._axes[target] = axis
            first = self._out.get(target) != reason
            self._out[target] = reason
        if first:
            self._log.warning("load.unavailable", target=str(target), reason=reason,
                              error=message, hint="the proportional count holds")
        return axis

    def _scraper(self, target: Target, load: Load) -> Scraper:
        scraper = self._scrapers.get(target)
        if scraper is None:
            scraper = Scraper(self._make_api(), self._namespace,
                              scale_path(self._namespace, target), str(target), load,
                              clock=self._clock, on_sample=self._sampled(target))
            self._scrapers[target] = scraper
            self._log.info("load.scraping", target=str(target), source=load.source,
                           interval_seconds=load.scrape_interval_seconds,
                           **({"metric": load.metric, "port": load.port, "path": load.path}
                              if load.prometheus is None
                              else {"url": redact_url(load.prometheus.url)}))
            scraper.start()
        elif scraper.load != load:
            scraper.update(load)
        return scraper

    def _sampled(self, target: Target) -> Callable[[Scraper], None]:
        def check(scraper: Scraper) -> None:
            """In the scraper's thread: wake the loop when the panic window asks for more
            than the axis gave last (the poll decides; this only makes it come sooner)."""
            wake = self.wake
            if wake is None:
                return
            load = scraper.load
            status = scraper.status()
            reading = read_windows(status.samples, self._clock(), load)
            if reading is None or reading.panic is None:
                return
            wanted = math.ceil(reading.panic / load.target_per_replica)
            with self._lock:
                last = self._axes.get(target)
            given = last.replicas if last is not None and last.replicas is not None else 0
            if wanted > given and wanted / max(1, reading.ready) >= load.panic_threshold:
                wake()
        return check

    def retire(self, keep: frozenset[Target] = frozenset()) -> None:
        """Stop the scrapers of the targets not in ``keep`` and forget their state (the
        parameters no longer have a ``load`` key)."""
        for target in [t for t in self._scrapers if t not in keep]:
            self._scrapers.pop(target).stop()
            self._states.pop(target, None)
            with self._lock:
                self._axes.pop(target, None)
                self._out.pop(target, None)
            self._log.info("load.stopped", target=str(target))

    def stop(self) -> None:
        self.retire()

    def view(self) -> list[TargetLoad]:
        """Every scraped target's axis and scrape status, for ``/metrics``."""
        with self._lock:
            axes = dict(self._axes)
        return [TargetLoad(target, axes.get(target), scraper.status())
                for target, scraper in list(self._scrapers.items())]
