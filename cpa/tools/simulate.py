"""``cpa simulate``: replay a timeline of cluster sizes through the formula and ``behavior``.

Why: a stabilization window or a rate policy is easy to write and hard to picture; an
operator should see what it does to their own cluster's history before applying it. Each
timeline row is one poll; the target follows every write (no other writer, no failed
write). The formula is :func:`cpa.horizontal.decide.decision.decide` and the behavior is
:func:`cpa.horizontal.decide.behavior.apply` with a
:class:`cpa.horizontal.decide.behavior.BehaviorState`, the
very code the daemon runs, so what this shows is what the daemon would do (given the same
polls).

The timeline is CSV with a header, or a JSON list of objects, with ``t`` (seconds, strictly
increasing), ``nodes``, ``cores`` and optionally ``schedulable_nodes``/``schedulable_cores``
(default: all of them), and ``zones``/``schedulable_zones`` (for parameters with a ``zones``
key; default: ``zones``), ``pods``/``services`` (ours, for parameters with a Pods or
Services axis: the Pods not finished, the Services), and ``qps`` (or ``rate``) for
parameters with a ``load`` key: the
load's rate at that row (per second; an empty cell is a failed scrape). With a load key
each row is one scrape sample, and a poll unless ``--poll-period-seconds`` spaces the polls
out (then a row is a poll when that much time has passed since the last one, as the
daemon's scrapes come every couple of seconds and its polls every ten): the windows and
the panic rule are :mod:`cpa.horizontal.decide.windows`, the code the daemon runs, and the Ready
Pods
of a sample are the replicas written before it (a new replica is taken as ready at once).
``--plot`` needs matplotlib (``pip install '.[plot]'``).
"""

from __future__ import annotations

import argparse
import csv
import io
import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final, NamedTuple

from cpa.horizontal.decide.behavior import BehaviorState, apply
from cpa.horizontal.decide.decision import decide
from cpa.horizontal.decide.modes.mode import Params
from cpa.horizontal.decide.windows import (
    LoadAxis,
    PanicState,
    Sample,
    read_windows,
    scale,
    unavailable,
)
from cpa.nodes.counts import ClusterCounts
from cpa.tools.inputs import (
    InputError,
    ToolParser,
    add_flags,
    add_parameter_arguments,
    cluster_counts,
    object_count,
    parameters_from_flags,
    read_text,
    replica_count,
    run_command,
)

__all__ = ["Compared", "Row", "SimStep", "changed", "figure", "load_timeline", "render_text",
           "simulate", "simulate_main"]

REQUIRED: Final = ("t", "nodes", "cores")
OPTIONAL: Final = ("schedulable_nodes", "schedulable_cores", "zones", "schedulable_zones",
                   "pods", "services", "qps", "rate")


@dataclass(frozen=True, slots=True)
class Row:
    """One poll of the timeline."""

    t: float
    counts: ClusterCounts
    qps: float | None = None
    """The load's rate (a ``qps`` or ``rate`` cell); None: no sample at this row."""


@dataclass(frozen=True, slots=True)
class SimStep:
    """What one poll decided: ``desired`` by the formula, ``replicas`` written after behavior."""

    t: float
    nodes: int
    cores: int
    desired: int
    replicas: int
    reason: str
    zones: int | None = None
    """The zones counted (parameters with a ``zones`` key), else None."""
    qps: float | None = None
    """With a ``load`` key: the row's rate (None: no sample)."""
    proportional: int | None = None
    """With a ``load`` key: the formula's count before the load axis."""
    load: int | None = None
    """With a ``load`` key: the load axis's count (None: the axis is out)."""
    panic: bool = False
    """With a ``load`` key: the load axis is in panic mode."""
    pods: int | None = None
    """Ours, with a Pods axis: the row's Pods, else None."""
    services: int | None = None
    """Ours, with a Services axis: the row's Services, else None."""


# ----------------------------------------------------------------------------- timeline


def _time(value: object, where: str) -> float:
    """``t``: seconds, any finite number (JSON, or CSV text such as ``30.5``)."""
    if isinstance(value, bool) or value is None or value == "":
        raise InputError(f"{where}: t is {'missing' if value in (None, '') else value}; give "
                         "a number of seconds")
    if isinstance(value, int | float):
        number = float(value) if abs(value) < 1e300 else math.inf
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            raise InputError(f"{where}: t is {value[:40]!r}, not a number") from None
    else:
        raise InputError(f"{where}: t is {json.dumps(value)[:40]}, not a number")
    if not math.isfinite(number) or abs(number) >= 1e300:
        raise InputError(f"{where}: t is {str(value)[:40]}; give a finite number of seconds")
    return number


def _row(cells: Mapping[str, object], where: str) -> Row:
    unknown = sorted(set(cells) - set(REQUIRED) - set(OPTIONAL))
    if unknown:
        raise InputError(f"{where}: unknown column {', '.join(map(repr, unknown))}; the "
                            f"columns are {', '.join(REQUIRED + OPTIONAL)}")
    missing = [c for c in REQUIRED if c not in cells]
    if missing:
        raise InputError(f"{where}: missing column {', '.join(map(repr, missing))} (every "
                            "row needs t, nodes and cores)")
    t = _time(cells["t"], where)
    # The same validator as cpa explain's --nodes/--cores: one set of rules for counts.
    counts = cluster_counts(cells["nodes"], cells["cores"], cells.get("schedulable_nodes"),
                            cells.get("schedulable_cores"), cells.get("zones"),
                            cells.get("schedulable_zones"), where=where)
    counts = counts._replace(pods=object_count(cells.get("pods"), f"{where}: pods"),
                             services=object_count(cells.get("services"), f"{where}: services"))
    if "qps" in cells and "rate" in cells:
        raise InputError(f"{where}: give qps or rate, not both")
    return Row(t, counts, rate_cell(cells.get("qps", cells.get("rate")), where))


def rate_cell(value: object, where: str) -> float | None:
    """A ``qps``/``rate`` cell: a finite number >= 0, or empty (no sample at that row)."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise InputError(f"{where}: qps is {value}, not a number")
    try:
        number = float(value.strip() if isinstance(value, str) else value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InputError(f"{where}: qps is {str(value)[:40]!r}, not a number") from None
    if not math.isfinite(number) or number < 0:
        raise InputError(f"{where}: qps is {str(value)[:40]}; give a rate of 0 or more (or "
                         "leave the cell empty for a failed scrape)")
    return number


def _json_rows(text: str, name: str) -> list[Row]:
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InputError(f"{name}: not valid JSON: {exc}") from None
    if not isinstance(doc, list) or not all(isinstance(item, dict) for item in doc):
        raise InputError(f'{name}: a JSON timeline is a list of objects such as '
                            '[{"t": 0, "nodes": 3, "cores": 12}]')
    return [_row(item, f"{name} item {index}") for index, item in enumerate(doc)]


def _csv_rows(text: str, name: str) -> list[Row]:
    try:
        return _csv_table(text, name)
    except csv.Error as exc:
        raise InputError(f"{name}: not CSV ({exc}); write a header line t,nodes,cores and "
                         "one row per poll") from None


def _csv_table(text: str, name: str) -> list[Row]:
    # newline="": the csv module's own line handling, so \r and \r\n files read too.
    reader = csv.DictReader(io.StringIO(text, newline=""))
    header = [h.strip() for h in reader.fieldnames or []]
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise InputError(f"{name}: the CSV header must name t, nodes and cores (and "
                            f"optionally {', '.join(OPTIONAL)}); missing "
                            f"{', '.join(missing)}")
    reader.fieldnames = header
    rows = []
    for cells in reader:
        if None in cells:
            raise InputError(f"{name} line {reader.line_num}: more cells than columns")
        rows.append(_row({k: v for k, v in cells.items() if k is not None},
                         f"{name} line {reader.line_num}"))
    return rows


def load_timeline(path: str) -> list[Row]:
    """Read and check a timeline: CSV with a header, or a JSON list of objects."""
    text = read_text(path, "--timeline")
    is_json = text.lstrip().startswith(("[", "{"))
    rows = _json_rows(text, path) if is_json else _csv_rows(text, path)
    if not rows:
        raise InputError(f"{path}: the timeline has no rows")
    for before, after in itertools.pairwise(rows):
        if after.t <= before.t:
            raise InputError(f"{path}: t must increase from row to row; t {after.t:g} "
                                f"comes after t {before.t:g}")
    return rows


# ----------------------------------------------------------------------------- the replay


class _LoadReplay:
    """The load axis over a timeline: samples, windows and the panic state, as the daemon
    keeps them (rows are the scrapes)."""

    def __init__(self, params: Params) -> None:
        self.load = params.shared.load
        self.samples: list[Sample] = []
        self.state = PanicState()

    def sample(self, row: Row, ready: int | None) -> None:
        if self.load is not None and row.qps is not None:
            self.samples.append(Sample(row.t, row.qps, ready or 0))
            horizon = row.t - self.load.stable_window_seconds
            if self.samples[0].at <= horizon:
                self.samples = [s for s in self.samples if s.at > horizon]

    def axis(self, now: float) -> LoadAxis | None:
        if self.load is None:
            return None
        reading = read_windows(self.samples, now, self.load)
        if reading is None:
            return unavailable("no rate in the stable window")
        outcome = scale(self.load, self.state, reading, now)
        return LoadAxis(outcome.replicas, outcome.steps, outcome)


def simulate(params: Params, rows: Sequence[Row], start: int | None = None, *,
             with_behavior: bool = True, poll_period: float = 0.0,
             with_load: bool = True) -> list[SimStep]:
    """Replay ``rows``; the target starts at ``start`` (default: the first row's formula
    result) and follows every write. ``poll_period``: with a ``load`` key, decide only at
    rows that far apart (every row is a scrape). ``with_load`` False: the proportional
    count alone (upstream's)."""
    behavior = params.shared.behavior if with_behavior else None
    state = BehaviorState()
    current = start
    steps: list[SimStep] = []
    replay = _LoadReplay(params) if with_load else None
    if replay is not None and replay.load is not None and all(r.qps is None for r in rows):
        raise InputError("the parameters have a load key: give the timeline a qps (or rate) "
                         "column with the load's rate at each row")
    last_poll = -math.inf
    for row in rows:
        _check_columns(params, row)
        axis: LoadAxis | None = None
        if replay is not None and replay.load is not None:
            replay.sample(row, current)
            if poll_period and row.t - last_poll < poll_period:
                continue
            last_poll = row.t
            axis = replay.axis(row.t)
        decision = decide(params, row.counts, axis)
        if decision.error is not None:
            raise InputError(f"t {row.t:g}: {decision.error}")
        if current is None:
            current = decision.replicas
        outcome = apply(behavior, state, decision.replicas, current, row.t, decision.floor)
        if behavior is not None:
            reason = outcome.reason
        else:
            reason = "formula" if outcome.replicas != current else "unchanged"
        if outcome.replicas != current:
            state.record_scale(current, outcome.replicas, row.t)
            current = outcome.replicas
        panic = axis is not None and axis.outcome is not None and axis.outcome.panicking
        shown = axis is not None or (not with_load and params.shared.load is not None)
        steps.append(SimStep(row.t, row.counts.total_nodes, row.counts.total_cores,
                             decision.replicas, current, reason, decision.zones,
                             row.qps if shown else None,
                             decision.replicas if shown and axis is None
                             else decision.proportional, decision.load, panic,
                             *_objects(params, row.counts)))
    return steps


def _check_columns(params: Params, row: Row) -> None:
    """A key that needs a count the row lacks is an error naming the column to add."""
    if params.shared.zones is not None and row.counts.total_zones is None:
        raise InputError(f"t {row.t:g}: the parameters have a zones key: give the "
                         "timeline a zones column (the zones the Nodes are in)")
    for kind in sorted(params.object_kinds()):
        if getattr(row.counts, kind) is None:
            what = "Pods not finished" if kind == "pods" else "Services"
            raise InputError(f"t {row.t:g}: the parameters have a {kind} axis: give the "
                             f"timeline a {kind} column (the {what} in the cluster) with a "
                             "count in every row")


def _objects(params: Params, counts: ClusterCounts) -> tuple[int | None, int | None]:
    """The Pods and Services of a row, each only when the parameters count it."""
    kinds = params.object_kinds()
    return (counts.pods if "pods" in kinds else None,
            counts.services if "services" in kinds else None)


def writes(steps: Sequence[SimStep], start: int) -> int:
    """How many scale writes the replay made."""
    count, current = 0, start
    for step in steps:
        count += step.replicas != current
        current = step.replicas
    return count


def _cell(value: float | int | None) -> str:
    if value is None:
        return "-"
    return f"{value:g}" if isinstance(value, float) else str(value)


def changed(steps: Sequence[SimStep]) -> list[bool]:
    """Which rows the text shows by default: the first, and each where the formula's count
    (or a load axis's count, or the load's mode) or the written replicas differ from the
    row before. The rest decide what the row above decided (a timeline of a day has
    thousands of them, most with the same answer); ``--all-rows`` shows them too."""
    def key(s: SimStep) -> tuple[object, ...]:
        return (s.desired, s.replicas, s.proportional, s.load, s.panic)

    return [i == 0 or key(s) != key(steps[i - 1]) for i, s in enumerate(steps)]


class Compared(NamedTuple):
    """What the replay is compared with, for the summary and the plot's panels."""

    without: Sequence[SimStep]
    """The same parameters without behavior."""
    alone: Sequence[SimStep] | None = None
    """With a load key: the proportional count alone (upstream's)."""


def render_text(steps: Sequence[SimStep], start: int, compared: Compared, *,
                all_rows: bool = False) -> str:
    zoned = any(s.zones is not None for s in steps)  # a zones column only when counted
    objects = [k for k in ("pods", "services") if any(getattr(s, k) is not None for s in steps)]
    loaded = any(s.proportional is not None for s in steps)  # a load key
    load_header = ("qps", "proportional", "load", "mode") if loaded else ()
    header = ("t", "nodes", *(("zones",) if zoned else ()), "cores", *objects, *load_header,
              "desired", "replicas", "reason")
    shown = [s for s, keep in zip(steps, changed(steps), strict=True) if keep or all_rows]
    table = [header] + [(f"{s.t:g}", str(s.nodes), *((str(s.zones),) if zoned else ()),
                         str(s.cores), *(_cell(getattr(s, k)) for k in objects),
                         *((_cell(s.qps), _cell(s.proportional), _cell(s.load),
                            "panic" if s.panic else "stable") if loaded else ()),
                         str(s.desired), str(s.replicas), s.reason)
                        for s in shown]
    numbers = len(header) - 1
    widths = [max(len(r[i]) for r in table) for i in range(numbers)]
    lines = ["  ".join(cell.rjust(w) for cell, w in zip(r[:numbers], widths, strict=False))
             + "  " + r[numbers] for r in table]
    if len(shown) < len(steps):
        lines.append(f"{len(shown)} of {len(steps)} rows shown: the first and those where the "
                     "formula or the replicas changed (--all-rows: every row).")
    alone = ("" if compared.alone is None else
             f"; the proportional count alone, upstream's: {writes(compared.alone, start)}")
    lines.append(f"{writes(steps, start)} scale writes from {start} replicas "
                 f"(without behavior: {writes(compared.without, start)}{alone}).")
    if loaded:
        lines.append(f"{replica_seconds(steps) / 3600:.3g} replica-hours written; the "
                     f"proportional count alone: {proportional_seconds(steps) / 3600:.3g}.")
    return "\n".join(lines)


def replica_seconds(steps: Sequence[SimStep]) -> float:
    """The written replicas integrated over the timeline (each held until the next step)."""
    return sum(a.replicas * (b.t - a.t) for a, b in itertools.pairwise(steps))


def proportional_seconds(steps: Sequence[SimStep]) -> float:
    return sum((a.proportional if a.proportional is not None else a.desired) * (b.t - a.t)
               for a, b in itertools.pairwise(steps))


def _matplotlib() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
    except ImportError:
        raise InputError("--plot needs matplotlib: pip install "
                            "'cluster-proportional-autoscaler-py[plot]' (or pip install "
                            "matplotlib)") from None
    return matplotlib


def plot_format(path: str) -> str:
    """The picture format ``--plot`` names by its extension, checked before any work."""
    _matplotlib()
    from matplotlib.backend_bases import FigureCanvasBase

    supported = FigureCanvasBase.get_supported_filetypes()
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix not in supported:
        shown = f"ends in .{suffix}" if suffix else "has no extension"
        raise InputError(f"--plot {path}: the file name {shown}, which names no picture "
                         f"format matplotlib writes; end it in .png, .svg or .pdf (or one of "
                         f"{', '.join(sorted(supported))})")
    return suffix


Panel = tuple[str, Sequence[SimStep]]
"""A replica panel of the plot: its title and the replay it draws."""

# Lines over the written replicas (drawn wide and pale below them), so that a line equal to
# the written count still shows, and only lines with something to draw are in a legend.
_OVER: Final = (("desired", "desired (formula)", "tab:orange", "--"),
                ("proportional", "proportional", "tab:green", "--"),
                ("load", "load axis", "tab:red", ":"))
_HELD: Final = (("window", "held by a stabilization window", "tab:orange"),
                ("polic", "limited by a rate policy", "tab:purple"))


def plot(path: str, panels: Sequence[Panel], start: int) -> None:
    """Draw :func:`figure` into ``path`` (its extension names the format)."""
    plot_format(path)
    import matplotlib.pyplot as plt

    fig = figure(panels, start)
    try:
        fig.savefig(path, dpi=100)
    except OSError as exc:
        raise InputError(f"--plot: cannot write {path}: {exc.strerror or exc}") from None
    finally:
        plt.close(fig)


def figure(panels: Sequence[Panel], start: int) -> Any:
    """The timeline's input on top (nodes, or the load's rate), then one panel per replay:
    the formula's count (or the load's two axes), the written replicas and the stretches
    where a stabilization window held them or a rate policy limited them. The replica
    panels share one scale, so a comparison is read at a glance."""
    _matplotlib()
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, axes = plt.subplots(len(panels) + 1, 1, sharex=True, squeeze=False,
                             figsize=(10, 1.6 + 3.0 * len(panels)),
                             gridspec_kw={"height_ratios": [0.45] + [1.0] * len(panels)})
    _draw_input(axes[0, 0], panels[0][1])
    top = max(max(max(s.desired, s.replicas, s.load or 0) for s in steps)
              for _title, steps in panels)
    for ax, (title, steps) in zip(axes[1:, 0], panels, strict=True):
        _draw_replicas(ax, steps)
        ax.set_ylim(0, max(top, start) * 1.45 + 1)  # the same scale, headroom for the legend
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_title(f"{title}: {writes(steps, start)} scale writes", loc="left")
    axes[-1, 0].set_xlabel("time (minutes)")
    fig.tight_layout()
    return fig


def _draw_input(ax: Any, steps: Sequence[SimStep]) -> None:
    """The timeline itself: the load's rate with a load key, else the nodes."""
    minutes = [s.t / 60 for s in steps]
    if any(s.proportional is not None for s in steps):
        ax.plot(minutes, [s.qps if s.qps is not None else math.nan for s in steps],
                color="0.35", linewidth=1)
        ax.set_ylabel("queries/s")
        ax.set_ylim(0, max((s.qps or 0.0) for s in steps) * 1.15 + 1)
    else:
        ax.step(minutes, [s.nodes for s in steps], where="post", color="0.35", linewidth=1)
        ax.set_ylabel("nodes")
        ax.set_ylim(0, max(s.nodes for s in steps) * 1.15 + 1)
    ax.set_title("the timeline", loc="left")


def _draw_replicas(ax: Any, steps: Sequence[SimStep]) -> None:
    minutes = [s.t / 60 for s in steps]
    for _key, label, color, start, end in _held_spans(steps):
        ax.axvspan(start / 60, end / 60, color=color, alpha=0.12, linewidth=0, label=label)
    ax.step(minutes, [s.replicas for s in steps], where="post", color="tab:blue",
            linewidth=4, alpha=0.45, label="written replicas")
    for field, label, color, style in _OVER:
        values = [getattr(s, field) for s in steps]
        if field == "desired" and any(s.proportional is not None for s in steps):
            continue  # with a load key desired is the larger axis: both are drawn
        if all(v is None for v in values):
            continue
        ax.step(minutes, [math.nan if v is None else v for v in values], where="post",
                color=color, linestyle=style, linewidth=1.4, label=label)
    ax.set_ylabel("replicas")
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))  # one entry per kind of span
    ax.legend(unique.values(), unique.keys(), loc="upper left", fontsize="small",
              ncol=2)


def _held_spans(steps: Sequence[SimStep]) -> list[tuple[str, str, str, float, float]]:
    """The stretches of the timeline where the behavior kept the written replicas from the
    formula's count, by what held them (a row lasts until the next one)."""
    spans: list[tuple[str, str, str, float, float]] = []
    for i, step in enumerate(steps):
        kind = next((k for k in _HELD if k[0] in step.reason), None)
        if kind is None or step.replicas == step.desired:
            continue
        end = steps[i + 1].t if i + 1 < len(steps) else step.t
        if spans and spans[-1][0] == kind[0] and spans[-1][4] == step.t:
            spans[-1] = (*spans[-1][:4], end)
        else:
            spans.append((kind[0], kind[1], kind[2], step.t, end))
    return spans


# ----------------------------------------------------------------------------- the command


def _parser() -> ToolParser:
    p = ToolParser(
        prog="cpa simulate",
        description="Replay a timeline of node and core counts (one row per poll) through "
                    "the formula and the parameters' behavior. Nothing touches a cluster.")
    p.add_argument("--timeline", required=True, metavar="FILE",
                   help="CSV with a header, or a JSON list of objects: t (seconds, "
                        "increasing), nodes, cores[, schedulable_nodes, schedulable_cores, "
                        "zones, schedulable_zones, pods, services (with those axes), qps "
                        "(the load's rate, with a load key)]")
    add_parameter_arguments(p)
    add_flags(
        p.add_argument,
        ("--start-replicas", "N",
         "the target's replicas before the first row (default: the first row's formula "
         "result)"),
        ("--poll-period-seconds", "SECONDS",
         "with a load key: rows are scrapes, and a poll decides only when this long has "
         "passed since the last one (default: every row)"))
    p.add_output_argument()
    add_flags(
        p.add_argument,
        ("--all-rows", "",
         "print every row (default: the first and those where the formula's count or the "
         "written replicas changed; -o json has every row)"),
        ("--plot", "FILE.png",
         "draw the timeline, the formula's count, the written replicas and where the "
         "behavior held them, over time (matplotlib)"),
        ("--compare", "",
         "with --plot: add a panel for the same timeline without behavior (with a load key: "
         "the proportional count alone, upstream's)"))
    return p


def simulate_main(argv: Sequence[str]) -> int:
    """Exit 0 with the replay; 1 with one line saying what is wrong (never a traceback)."""
    return run_command(_parser(), argv, lambda args: (_run(args), 0))


def _run(args: argparse.Namespace) -> str:
    if args.compare and not args.plot:
        raise InputError("--compare adds a panel to the plot: give --plot FILE.png too")
    given_start = None if args.start_replicas is None \
        else replica_count(args.start_replicas, "--start-replicas")
    if args.plot:
        plot_format(args.plot)
    poll_period = _poll_period(args.poll_period_seconds)
    params, _origin = parameters_from_flags(args)
    rows = load_timeline(args.timeline)
    steps = simulate(params, rows, given_start, poll_period=poll_period)
    start = given_start if given_start is not None else steps[0].desired
    compared = Compared(
        simulate(params, rows, start, with_behavior=False, poll_period=poll_period),
        None if params.shared.load is None else
        simulate(params, rows, start, with_behavior=False, poll_period=poll_period,
                 with_load=False))
    if args.plot:
        plot(args.plot, _panels(params, steps, compared, args.compare), start)
    if args.output == "json":
        return json.dumps({"steps": [_json_step(s) for s in steps]}, indent=2)
    return render_text(steps, start, compared, all_rows=args.all_rows)


def _panels(params: Params, steps: Sequence[SimStep], compared: Compared, compare: bool
            ) -> list[Panel]:
    """The replay's panel, and with ``--compare`` upstream's: without the behavior, or
    with a load key the proportional count alone (the summary line names both)."""
    label = ("with behavior" if params.shared.behavior is not None
             else "no behavior in the parameters")
    if params.shared.load is not None:
        label = "with the load axis" + (" and behavior" if params.shared.behavior
                                        is not None else "")
    panels: list[Panel] = [(label, steps)]
    if compare and compared.alone is not None:
        panels.append(("the proportional count alone (upstream)", compared.alone))
    elif compare:
        panels.append(("without behavior (upstream)", compared.without))
    return panels


def _poll_period(text: str | None) -> float:
    if text is None:
        return 0.0
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"--poll-period-seconds {text[:40]!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise InputError(f"--poll-period-seconds {text[:40]}: give 0 or more seconds")
    return value


def _json_step(step: SimStep) -> dict[str, Any]:
    doc = asdict(step)
    if float(step.t).is_integer():
        doc["t"] = int(step.t)
    for key in ("zones", "pods", "services"):  # only parameters that count them
        if doc[key] is None:
            del doc[key]
    if step.proportional is None:  # only parameters with a load key have these
        for key in ("qps", "proportional", "load", "panic"):
            del doc[key]
    return doc
