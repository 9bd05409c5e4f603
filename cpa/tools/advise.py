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
from collections.abc import Sequence
from typing import Any, NamedTuple

from cpa import redact
from cpa.horizontal.decide.load import Load, Prometheus
from cpa.horizontal.decide.windows import PanicState, Sample, read_windows, scale
from cpa.horizontal.scrape.prometheus import PrometheusClient, PrometheusError
from cpa.tools.inputs import InputError, ToolParser, answer, parse_command_line, read_text

__all__ = ["Candidate", "Series", "advise", "advise_main", "load_series", "replay"]

TARGET_FRACTIONS = (0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
STABLE_WINDOWS = (30, 60, 120, 300)
PANIC_PERCENTAGES = (5.0, 10.0, 20.0)
PANIC_THRESHOLDS = (150.0, 200.0, 300.0)


class Series(NamedTuple):
    times: list[float]
    rates: list[float | None]


class Candidate(NamedTuple):
    load: Load
    replica_hours: float
    over_seconds: float
    """Time the rate per serving replica was above the bound."""
    worst: float
    """The highest rate per serving replica."""
    peak_replicas: int
    writes: int


def _rows_csv(text: str, name: str) -> list[dict[str, Any]]:
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        return [{(k or "").strip(): v for k, v in row.items()} for row in reader]
    except csv.Error as exc:
        raise InputError(f"{name}: not CSV ({exc})") from None


def load_series(path: str) -> Series:
    """``t`` and ``qps`` (or ``rate``) of a timeline; other columns are ignored."""
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
    return Series(times, rates)


def replay(series: Series, load: Load, bound: float, min_replicas: int,
           poll_period: float, startup: float) -> Candidate:
    """One setting over the whole series."""
    state = PanicState()
    samples: list[Sample] = []
    written = min_replicas
    pending: list[tuple[float, int]] = []  # (serving from, replicas), scale-ups in flight
    serving = min_replicas
    last_poll = -math.inf
    replica_seconds = over = worst = 0.0
    peak, writes = written, 0
    for index, (t, rate) in enumerate(zip(series.times, series.rates, strict=True)):
        while pending and pending[0][0] <= t:
            serving = max(serving, pending.pop(0)[1])
        if rate is not None:
            samples.append(Sample(t, rate, serving))
            if samples[0].at <= t - load.stable_window_seconds:
                samples = [s for s in samples if s.at > t - load.stable_window_seconds]
        if t - last_poll >= poll_period:
            last_poll = t
            reading = read_windows(samples, t, load)
            wanted = min_replicas
            if reading is not None:
                wanted = max(min_replicas, scale(load, state, reading, t).replicas)
            if wanted != written:
                writes += 1
                if wanted > written:
                    pending.append((t + startup, wanted))
                else:
                    pending = [(at, n) for at, n in pending if n <= wanted]
                    serving = min(serving, wanted)
                written = wanted
                peak = max(peak, written)
        if index + 1 < len(series.times):
            span = series.times[index + 1] - t
            replica_seconds += written * span
            if rate is not None:
                per = rate / max(1, serving)
                worst = max(worst, per)
                if per > bound:
                    over += span
    return Candidate(load, replica_seconds / 3600, over, worst, peak, writes)


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
    total = series.times[-1] - series.times[0]
    allowed = total * tolerance / 100
    found.sort(key=lambda c: (c.over_seconds > allowed,
                              c.over_seconds if c.over_seconds > allowed else 0.0,
                              c.replica_hours))
    peak = max((r for r in series.rates if r is not None), default=0.0)
    return found, max(min_replicas, math.ceil(peak / bound))


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
                   help="CSV or JSON with t (seconds) and qps (or rate), as cpa simulate reads")
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
    if args.output == "json":
        return json.dumps({"fixed_replicas": fixed, "candidates": [
            {"targetPerReplica": c.load.target_per_replica,
             "stableWindowSeconds": c.load.stable_window_seconds,
             "panicWindowPercentage": c.load.panic_window_percentage,
             "panicThresholdPercentage": c.load.panic_threshold_percentage,
             "replica_hours": round(c.replica_hours, 6), "over_seconds": c.over_seconds,
             "worst_per_replica": round(c.worst, 3), "peak_replicas": c.peak_replicas,
             "writes": c.writes} for c in found[:top]]}, indent=2)
    return render(found, fixed, series, bound, tolerance, top)


def advise_main(argv: Sequence[str]) -> int:
    """Exit 0 with the advice; 1 with one line saying what is wrong."""
    args = parse_command_line(_parser(), argv)
    if isinstance(args, int):
        return args
    return answer("cpa advise", args.output, lambda: (_run(args), 0))
