"""``cpa advise``: the load axis's settings that a recorded load would have needed.

Why: ``targetPerReplica`` and the windows are a trade: a low target and long windows keep
every replica comfortable and cost replica-hours; a high target and short windows save
them and let a surge through. Given a recorded series of the load (a timeline CSV or JSON
with ``t`` and ``qps``, as ``cpa simulate`` reads, or a Prometheus range query) and the
rate one replica may serve at most, this replays a grid of settings through the daemon's
own window arithmetic (:mod:`cpa.horizontal.decide.windows`) and prints the settings that kept the
rate per Ready replica under that bound with the fewest replica-hours, with the figures.

The replay: every row is a scrape; a poll every ``--poll-period-seconds`` decides
``max(--min-replicas, load)``; a replica written at a poll serves from
``--startup-seconds`` later (a scale-down takes effect at once). The rate per replica at a
row is the row's rate over the replicas serving then.
"""

from __future__ import annotations

import argparse
import csv
import io
import itertools
import json
import math
import re
import time
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any, NamedTuple

from cpa import redact
from cpa.horizontal.decide.load import Load, Prometheus
from cpa.horizontal.decide.windows import PanicState, Sample, read_windows, scale
from cpa.horizontal.scrape.prometheus import PrometheusClient, PrometheusError
from cpa.tools.inputs import (
    InputError,
    ToolParser,
    object_count,
    read_text,
    run_command,
)

__all__ = ["Candidate", "PodsCandidate", "Series", "advise", "advise_main", "advise_pods",
           "load_series", "pods_bound", "replay", "replay_pods"]

TARGET_FRACTIONS = (0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
STABLE_WINDOWS = (30, 60, 120, 300)
PANIC_PERCENTAGES = (5.0, 10.0, 20.0)
PANIC_THRESHOLDS = (150.0, 200.0, 300.0)


class Series(NamedTuple):
    times: list[float]
    rates: list[float | None]
    pods: list[int | None] | None = None
    """Ours: the timeline's ``pods`` column (None: it has none); a None cell: not counted."""


class Candidate(NamedTuple):
    load: Load
    replica_hours: float
    over_seconds: float
    """Time the rate per serving replica was above the bound."""
    worst: float
    """The highest rate per serving replica."""
    peak_replicas: int
    writes: int


class PodsCandidate(NamedTuple):
    """``podsPerReplica`` alone (no load axis), judged as a :class:`Candidate`."""

    pods_per_replica: int
    replica_hours: float
    over_seconds: float
    worst: float
    peak_replicas: int
    writes: int


POD_FRACTIONS = (0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5)
"""The ``podsPerReplica`` values replayed, as fractions of :func:`pods_bound`'s."""


def _rows_csv(text: str, name: str) -> list[dict[str, Any]]:
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        return [{(k or "").strip(): v for k, v in row.items()} for row in reader]
    except csv.Error as exc:
        raise InputError(f"{name}: not CSV ({exc})") from None


def load_series(path: str) -> Series:
    """``t`` and ``qps`` (or ``rate``) of a timeline, and ``pods`` when it has that column
    (ours); other columns are ignored."""
    text = read_text(path, "--timeline")
    if text.lstrip().startswith("["):
        try:
            rows = json.loads(text)
        except ValueError as exc:
            raise InputError(f"{path}: not valid JSON: {exc}") from None
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise InputError(f'{path}: a JSON timeline is a list of objects such as '
                             '[{"t": 0, "qps": 1200}]')
    else:
        rows = _rows_csv(text, path)
    times: list[float] = []
    rates: list[float | None] = []
    pods = [object_count(row.get("pods"), f"{path} row {index}: pods")
            for index, row in enumerate(rows, 2)]
    for index, row in enumerate(rows, 2):
        column = "qps" if "qps" in row else "rate" if "rate" in row else None
        if "t" not in row or column is None:
            raise InputError(f"{path}: each row needs t and qps (or rate)")
        try:
            t = float(row["t"])
            cell = row[column]
            rate = None if cell in (None, "") else float(cell)
        except (TypeError, ValueError):
            raise InputError(f"{path} row {index}: t and qps must be numbers") from None
        if not math.isfinite(t) or (rate is not None and not (math.isfinite(rate)
                                                                and rate >= 0)):
            raise InputError(f"{path} row {index}: t must be finite and qps 0 or more")
        if times and t <= times[-1]:
            raise InputError(f"{path} row {index}: t must increase from row to row")
        times.append(t)
        rates.append(rate)
    if len(times) < 2:
        raise InputError(f"{path}: the series needs at least two rows")
    has_pods = any("pods" in row for row in rows)
    return Series(times, rates, pods if has_pods else None)


class _Fleet:
    """The replicas over a replay: written at a poll, serving from ``startup`` later (a
    scale-down at once), and the figures a candidate is judged by."""

    def __init__(self, min_replicas: int, startup: float) -> None:
        self.startup = startup
        self.written = self.serving = self.peak = min_replicas
        self.pending: list[tuple[float, int]] = []  # (serving from, replicas) in flight
        self.writes = 0
        self.replica_seconds = self.over = self.worst = 0.0

    def advance(self, t: float) -> None:
        while self.pending and self.pending[0][0] <= t:
            self.serving = max(self.serving, self.pending.pop(0)[1])

    def write(self, t: float, wanted: int) -> None:
        if wanted == self.written:
            return
        self.writes += 1
        if wanted > self.written:
            self.pending.append((t + self.startup, wanted))
            self.advance(t)  # without a start-up they serve from the write on
        else:
            self.pending = [(at, n) for at, n in self.pending if n <= wanted]
            self.serving = min(self.serving, wanted)
        self.written = wanted
        self.peak = max(self.peak, wanted)

    def account(self, series: Series, index: int, bound: float) -> None:
        """The row's share: written replicas until the next row, and the rate per serving
        replica against the bound."""
        if index + 1 >= len(series.times):
            return
        span = series.times[index + 1] - series.times[index]
        self.replica_seconds += self.written * span
        rate = series.rates[index]
        if rate is not None:
            per = rate / max(1, self.serving)
            self.worst = max(self.worst, per)
            if per > bound:
                self.over += span

    def figures(self) -> tuple[float, float, float, int, int]:
        return (self.replica_seconds / 3600, self.over, self.worst, self.peak, self.writes)


def replay(series: Series, load: Load, bound: float, min_replicas: int,
           poll_period: float, startup: float) -> Candidate:
    """One setting over the whole series."""
    state = PanicState()
    samples: list[Sample] = []
    fleet = _Fleet(min_replicas, startup)
    last_poll = -math.inf
    for index, (t, rate) in enumerate(zip(series.times, series.rates, strict=True)):
        fleet.advance(t)
        if rate is not None:
            samples.append(Sample(t, rate, fleet.serving))
            if samples[0].at <= t - load.stable_window_seconds:
                samples = [s for s in samples if s.at > t - load.stable_window_seconds]
        if t - last_poll >= poll_period:
            last_poll = t
            reading = read_windows(samples, t, load)
            wanted = min_replicas
            if reading is not None:
                wanted = max(min_replicas, scale(load, state, reading, t).replicas)
            fleet.write(t, wanted)
        fleet.account(series, index, bound)
    return Candidate(load, *fleet.figures())


def replay_pods(series: Series, per_replica: int, bound: float, min_replicas: int,
                poll_period: float, startup: float) -> PodsCandidate:
    """``podsPerReplica`` alone over the series: ``max(min, ceil(pods / per_replica))`` at
    each poll (a row without a Pods count leaves the replicas as they are)."""
    pods = series.pods or []
    fleet = _Fleet(min_replicas, startup)
    last_poll = -math.inf
    for index, t in enumerate(series.times):
        fleet.advance(t)
        if t - last_poll >= poll_period:
            last_poll = t
            count = pods[index] if index < len(pods) else None
            if count is not None:
                fleet.write(t, max(min_replicas, -(-count // per_replica)))
        fleet.account(series, index, bound)
    return PodsCandidate(per_replica, *fleet.figures())


def pods_bound(series: Series, bound: float, min_replicas: int) -> int | None:
    """The largest whole ``podsPerReplica`` whose count, read at every row at once, has
    the row's rate under ``bound`` per replica: ceil(pods / x) >= ceil(rate / bound), that
    is x < pods / (ceil(rate / bound) - 1), at every row that needs more than the floor.
    None when no such count exists (a row needs replicas with no Pods to count); the
    largest Pods count when no row needs more than the floor."""
    best: Fraction | None = None
    largest = 1
    for rate, pods in zip(series.rates, series.pods or [], strict=False):
        if pods is None:
            continue
        largest = max(largest, pods)
        if rate is None:
            continue
        need = _replicas_for(rate, bound)
        if need <= min_replicas or need <= 1:
            continue
        if pods == 0:
            return None
        limit = Fraction(pods, need - 1)
        best = limit if best is None else min(best, limit)
    if best is None:
        return largest
    return max(1, math.ceil(best) - 1)


def advise(series: Series, bound: float, min_replicas: int = 1, poll_period: float = 10.0,
           startup: float = 5.0, tolerance: float = 0.0) -> tuple[list[Candidate], int]:
    """Every setting of the grid, best first (within the bound, then fewest replica-hours),
    and the fixed count that the series' peak needs."""
    found = []
    for fraction, stable, panic, threshold in itertools.product(
            TARGET_FRACTIONS, STABLE_WINDOWS, PANIC_PERCENTAGES, PANIC_THRESHOLDS):
        load = Load(target_per_replica=bound * fraction, metric="m", port=1,
                    stable_window_seconds=stable, panic_window_percentage=panic,
                    panic_threshold_percentage=threshold)
        found.append(replay(series, load, bound, min_replicas, poll_period, startup))
    found.sort(key=_ranking(series, tolerance))
    peak = max((r for r in series.rates if r is not None), default=0.0)
    return found, max(min_replicas, _replicas_for(peak, bound))


def _replicas_for(rate: float, bound: float) -> int:
    """The replicas a rate needs at ``bound`` each; an error, not a crash, for a rate and
    bound too far apart to count."""
    ratio = rate / bound
    if not math.isfinite(ratio) or ratio > 2**63:
        raise InputError(f"a rate of {rate:g} over a bound of {bound:g} per replica is more "
                         "replicas than can be counted; check the qps column and "
                         "--max-per-replica")
    return math.ceil(ratio)


def _ranking(series: Series, tolerance: float) -> Callable[[Candidate | PodsCandidate],
                                                           tuple[bool, float, float]]:
    """Best first: within the bound (over it no longer than the tolerance allows), then
    the fewest replica-hours."""
    allowed = (series.times[-1] - series.times[0]) * tolerance / 100

    def key(c: Candidate | PodsCandidate) -> tuple[bool, float, float]:
        over = c.over_seconds > allowed
        return (over, c.over_seconds if over else 0.0, c.replica_hours)
    return key


def advise_pods(series: Series, bound: float, min_replicas: int = 1,
                poll_period: float = 10.0, startup: float = 5.0,
                tolerance: float = 0.0) -> list[PodsCandidate]:
    """Ours: ``podsPerReplica`` alone, for a timeline with a ``pods`` column: the largest
    count that keeps every row's rate under the bound as it stands (:func:`pods_bound`)
    and values around it, replayed with the polls and start-ups; best first, as
    :func:`advise`, and of the same cost the larger value (the count the record asks for;
    the smaller ones beside it are headroom). Empty when no value can (a row needs
    replicas and has no Pods)."""
    if series.pods is None:
        return []
    if all(p is None for p in series.pods):
        raise InputError("the pods column has no count at all; fill it in, or leave it out")
    largest = pods_bound(series, bound, min_replicas)
    if largest is None:
        return []
    values = sorted({max(1, round(largest * f)) for f in POD_FRACTIONS}, reverse=True)
    found = [replay_pods(series, v, bound, min_replicas, poll_period, startup)
             for v in values]
    found.sort(key=_ranking(series, tolerance))
    return found


def _describe(c: Candidate) -> str:
    load = c.load
    return (f"targetPerReplica {load.target_per_replica:g}, stableWindowSeconds "
            f"{load.stable_window_seconds}, panicWindowPercentage "
            f"{load.panic_window_percentage:g}, panicThresholdPercentage "
            f"{load.panic_threshold_percentage:g}")


def render(found: Sequence[Candidate], fixed: int, series: Series, bound: float,
           tolerance: float, top: int) -> str:
    hours = (series.times[-1] - series.times[0]) / 3600
    allowed = (series.times[-1] - series.times[0]) * tolerance / 100
    lines = [f"{len(series.times)} samples over {hours * 60:.1f} min; peak "
             f"{max(r for r in series.rates if r is not None):g}/s; bound {bound:g}/s per "
             f"Ready replica; {len(found)} settings replayed."]
    header = ("rank", "target", "stable", "panic%", "threshold%", "replica-h", "over s",
              "worst/s", "peak", "writes")
    table = [header] + [(str(i), f"{c.load.target_per_replica:g}",
                         str(c.load.stable_window_seconds),
                         f"{c.load.panic_window_percentage:g}",
                         f"{c.load.panic_threshold_percentage:g}", f"{c.replica_hours:.3f}",
                         f"{c.over_seconds:g}", f"{c.worst:.0f}", str(c.peak_replicas),
                         str(c.writes)) for i, c in enumerate(found[:top], 1)]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    lines += ["  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True))
              for row in table]
    best = found[0]
    lines.append(f"A fixed {fixed} replicas (the peak over the bound) would take "
                 f"{fixed * hours:.3f} replica-hours.")
    if best.over_seconds > allowed:
        lines.append(f"=> no setting kept every replica under {bound:g}/s (the best was over "
                     f"for {best.over_seconds:g} s): a step faster than a poll and a "
                     "start-up cannot be absorbed by any reactive setting; allow it with "
                     "--tolerance-percent, raise the bound, or raise --min-replicas")
        return "\n".join(lines)
    saved = fixed * hours - best.replica_hours
    lines.append(f"=> {_describe(best)}: {best.replica_hours:.3f} replica-hours "
                 f"({saved:.3f} fewer than the fixed count), the rate per replica at most "
                 f"{best.worst:.0f}/s, {best.writes} scale writes.")
    lines.append('   "load": ' + json.dumps({
        "targetPerReplica": best.load.target_per_replica,
        "stableWindowSeconds": best.load.stable_window_seconds,
        "panicWindowPercentage": best.load.panic_window_percentage,
        "panicThresholdPercentage": best.load.panic_threshold_percentage}))
    return "\n".join(lines)


def render_pods(found: Sequence[PodsCandidate], series: Series, bound: float,
                tolerance: float) -> str:
    """Ours: the ``podsPerReplica`` replays, after the load axis's."""
    if not found:
        return ("podsPerReplica: no value keeps the rate under the bound: a row needs more "
                "replicas than the floor and counts no Pods.")
    allowed = (series.times[-1] - series.times[0]) * tolerance / 100
    header = ("podsPerReplica", "replica-h", "over s", "worst/s", "peak", "writes")
    table = [header] + [(str(c.pods_per_replica), f"{c.replica_hours:.3f}",
                         f"{c.over_seconds:g}", f"{c.worst:.0f}", str(c.peak_replicas),
                         str(c.writes)) for c in found]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    lines = [f"podsPerReplica alone (the pods column, no load axis): {len(found)} values "
             "replayed."]
    lines += ["  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True))
              for row in table]
    best = found[0]
    if best.over_seconds > allowed:
        lines.append(f"=> no podsPerReplica kept every replica under {bound:g}/s (the best "
                     f"was over for {best.over_seconds:g} s): a step faster than a poll "
                     "and a start-up, or a rate that does not follow the Pods; allow it "
                     "with --tolerance-percent, raise --min-replicas, or use the load axis")
    else:
        lines.append(f"=> podsPerReplica {best.pods_per_replica}: {best.replica_hours:.3f} "
                     f"replica-hours, the rate per replica at most {best.worst:.0f}/s, "
                     f"{best.writes} scale writes.")
    return "\n".join(lines)


def _pods_json(found: Sequence[PodsCandidate]) -> list[dict[str, Any]]:
    return [{"podsPerReplica": c.pods_per_replica, "replica_hours": round(c.replica_hours, 6),
             "over_seconds": c.over_seconds, "worst_per_replica": round(c.worst, 3),
             "peak_replicas": c.peak_replicas, "writes": c.writes} for c in found]


def _positive(text: str | None, flag: str, default: float, allow_zero: bool = False) -> float:
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"{flag} {text[:40]!r} is not a number") from None
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise InputError(f"{flag} {text[:40]}: give a positive number")
    return value


def _parser() -> ToolParser:
    p = ToolParser(
        prog="cpa advise",
        description="Find the load axis's targetPerReplica and windows that would have kept "
                    "a recorded load under a rate per replica with the fewest replica-hours.")
    p.add_argument("--timeline", metavar="FILE",
                   help="CSV or JSON with t (seconds) and qps (or rate), as cpa simulate "
                        "reads; with a pods column, podsPerReplica is advised too")
    p.add_argument("--prometheus-url", metavar="URL", help="instead: a Prometheus server")
    p.add_argument("--query", help="with --prometheus-url: the rate, e.g. "
                                   "sum(rate(coredns_dns_requests_total[1m]))")
    p.add_argument("--hours", metavar="H", help="with --prometheus-url: how far back "
                                                "(default 24)")
    p.add_argument("--step", metavar="SECONDS", help="with --prometheus-url: default 10")
    p.add_argument("--max-per-replica", required=True, metavar="RATE",
                   help="the rate one Ready replica may serve at most")
    p.add_argument("--min-replicas", metavar="N", help="the floor (the proportional count), "
                                                       "default 1")
    p.add_argument("--poll-period-seconds", metavar="SECONDS", help="default 10")
    p.add_argument("--startup-seconds", metavar="SECONDS",
                   help="how long a new replica takes to serve (default 5)")
    p.add_argument("--tolerance-percent", metavar="P",
                   help="share of the time the bound may be exceeded (default 0)")
    p.add_argument("--top", metavar="N", help="rows of the table (default 10)")
    p.add_output_argument()
    return p


def _series(args: argparse.Namespace) -> Series:
    if (args.timeline is None) == (args.prometheus_url is None):
        raise InputError("give --timeline FILE or --prometheus-url URL --query Q (one of them)")
    if args.timeline is not None:
        return load_series(args.timeline)
    if not args.query:
        raise InputError("--prometheus-url needs --query")
    if not re.fullmatch(r"https?://[^\s/?#]+(/[^\s?#]*)?", args.prometheus_url):
        shown = redact.redact_url(args.prometheus_url)[:60]
        raise InputError(f"--prometheus-url {shown!r}: give the server's "
                         "base URL such as http://prometheus.monitoring:9090")
    hours = _positive(args.hours, "--hours", 24.0)
    step = _positive(args.step, "--step", 10.0)
    end = time.time()
    try:
        client = PrometheusClient(Prometheus(args.prometheus_url, args.query))
        points = client.range_query(end - hours * 3600, end, step)
    except PrometheusError as exc:
        raise InputError(str(exc)) from None
    if len(points) < 2:
        raise InputError("the range query gave fewer than two points")
    return Series([p[0] - points[0][0] for p in points], [p[1] for p in points])


def _run(args: argparse.Namespace) -> str:
    bound = _positive(args.max_per_replica, "--max-per-replica", 0.0)
    minimum = int(_positive(args.min_replicas, "--min-replicas", 1.0))
    poll = _positive(args.poll_period_seconds, "--poll-period-seconds", 10.0)
    startup = _positive(args.startup_seconds, "--startup-seconds", 5.0, allow_zero=True)
    tolerance = _positive(args.tolerance_percent, "--tolerance-percent", 0.0,
                          allow_zero=True)
    top = int(_positive(args.top, "--top", 10.0))
    series = _series(args)
    if all(r is None for r in series.rates):
        raise InputError("the series has no rate at all")
    found, fixed = advise(series, bound, minimum, poll, startup, tolerance)
    pods = advise_pods(series, bound, minimum, poll, startup, tolerance)
    if args.output == "json":
        by_pods = {} if series.pods is None else {"pods_per_replica": _pods_json(pods)}
        return json.dumps({"fixed_replicas": fixed, **by_pods, "candidates": [
            {"targetPerReplica": c.load.target_per_replica,
             "stableWindowSeconds": c.load.stable_window_seconds,
             "panicWindowPercentage": c.load.panic_window_percentage,
             "panicThresholdPercentage": c.load.panic_threshold_percentage,
             "replica_hours": round(c.replica_hours, 6), "over_seconds": c.over_seconds,
             "worst_per_replica": round(c.worst, 3), "peak_replicas": c.peak_replicas,
             "writes": c.writes} for c in found[:top]]}, indent=2)
    text = render(found, fixed, series, bound, tolerance, top)
    if series.pods is not None:
        text += "\n" + render_pods(pods, series, bound, tolerance)
    return text


def advise_main(argv: Sequence[str]) -> int:
    """Exit 0 with the advice; 1 with one line saying what is wrong."""
    return run_command(_parser(), argv, lambda args: (_run(args), 0))
