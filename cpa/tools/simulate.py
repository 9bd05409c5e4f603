"""``cpa simulate``: replay a timeline of cluster sizes through the formula and ``behavior``.

Why: a stabilization window or a rate policy is easy to write and hard to picture; an
operator should see what it does to their own cluster's history before applying it. Each
timeline row is one poll; the target follows every write (no other writer, no failed
write). The formula is :func:`cpa.decide.decision.decide` and the behavior is
:func:`cpa.decide.behavior.apply` with a :class:`cpa.decide.behavior.BehaviorState`, the
very code the daemon runs, so what this shows is what the daemon would do (given the same
polls).

The timeline is CSV with a header, or a JSON list of objects, with ``t`` (seconds, strictly
increasing), ``nodes``, ``cores`` and optionally ``schedulable_nodes``/``schedulable_cores``
(default: all of them), and ``zones``/``schedulable_zones`` (for parameters with a ``zones``
key; default: ``zones``). ``--plot`` needs matplotlib (``pip install '.[plot]'``).
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
from typing import Any, Final

from cpa.decide.behavior import BehaviorState, apply
from cpa.decide.decision import decide
from cpa.decide.modes.mode import Params
from cpa.nodes.counts import ClusterCounts
from cpa.tools.inputs import InputError, add_parameter_arguments, answer, parameters_from_flags

__all__ = ["Row", "SimStep", "load_timeline", "render_text", "simulate", "simulate_main"]

REQUIRED: Final = ("t", "nodes", "cores")
OPTIONAL: Final = ("schedulable_nodes", "schedulable_cores", "zones", "schedulable_zones")


@dataclass(frozen=True, slots=True)
class Row:
    """One poll of the timeline."""

    t: float
    counts: ClusterCounts


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


# ----------------------------------------------------------------------------- timeline


def _number(value: object, column: str, where: str, whole: bool) -> float:
    """A cell as a number: JSON numbers, or CSV text such as ``12`` or ``30.5``."""
    if isinstance(value, bool) or value is None or value == "":
        raise InputError(f"{where}: {column} is {'missing' if value in (None, '') else value}"
                            f"; give a number")
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            raise InputError(f"{where}: {column} is {value!r}, not a number") from None
    else:
        raise InputError(f"{where}: {column} is {json.dumps(value)}, not a number")
    if not math.isfinite(number):
        raise InputError(f"{where}: {column} is {value}; give a finite number")
    if whole and (number != int(number) or number < 0):
        raise InputError(f"{where}: {column} is {value}; counts must be whole numbers, 0 or "
                            "more")
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
    t = _number(cells["t"], "t", where, whole=False)
    nodes = int(_number(cells["nodes"], "nodes", where, whole=True))
    cores = int(_number(cells["cores"], "cores", where, whole=True))
    sched_nodes, sched_cores = nodes, cores
    if cells.get("schedulable_nodes") not in (None, ""):
        sched_nodes = int(_number(cells["schedulable_nodes"], "schedulable_nodes", where, True))
    if cells.get("schedulable_cores") not in (None, ""):
        sched_cores = int(_number(cells["schedulable_cores"], "schedulable_cores", where, True))
    if sched_nodes > nodes or sched_cores > cores:
        raise InputError(f"{where}: more schedulable than total (schedulable_nodes "
                            f"{sched_nodes} of {nodes}, schedulable_cores {sched_cores} of "
                            f"{cores})")
    zones = sched_zones = None
    if cells.get("zones") not in (None, ""):
        zones = sched_zones = int(_number(cells["zones"], "zones", where, True))
    if cells.get("schedulable_zones") not in (None, ""):
        if zones is None:
            raise InputError(f"{where}: schedulable_zones without zones")
        sched_zones = int(_number(cells["schedulable_zones"], "schedulable_zones", where, True))
        if sched_zones > zones:
            raise InputError(f"{where}: schedulable_zones {sched_zones} is more than zones "
                             f"{zones}")
    return Row(t, ClusterCounts(nodes, cores, sched_nodes, sched_cores,
                                total_zones=zones, schedulable_zones=sched_zones))


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
    reader = csv.DictReader(io.StringIO(text))
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
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"--timeline: cannot read {path}: {exc}") from None
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


def simulate(params: Params, rows: Sequence[Row], start: int | None = None, *,
             with_behavior: bool = True) -> list[SimStep]:
    """Replay ``rows``; the target starts at ``start`` (default: the first row's formula
    result) and follows every write."""
    behavior = params.shared.behavior if with_behavior else None
    state = BehaviorState()
    current = start
    steps: list[SimStep] = []
    for row in rows:
        if params.shared.zones is not None and row.counts.total_zones is None:
            raise InputError(f"t {row.t:g}: the parameters have a zones key: give the "
                             "timeline a zones column (the zones the Nodes are in)")
        decision = decide(params, row.counts)
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
        steps.append(SimStep(row.t, row.counts.total_nodes, row.counts.total_cores,
                             decision.replicas, current, reason, decision.zones))
    return steps


def writes(steps: Sequence[SimStep], start: int) -> int:
    """How many scale writes the replay made."""
    count, current = 0, start
    for step in steps:
        count += step.replicas != current
        current = step.replicas
    return count


def render_text(steps: Sequence[SimStep], start: int, without: Sequence[SimStep]) -> str:
    zoned = any(s.zones is not None for s in steps)  # a zones column only when counted
    header = ("t", "nodes", *(("zones",) if zoned else ()), "cores", "desired", "replicas",
              "reason")
    table = [header] + [(f"{s.t:g}", str(s.nodes), *((str(s.zones),) if zoned else ()),
                         str(s.cores), str(s.desired), str(s.replicas), s.reason)
                        for s in steps]
    numbers = len(header) - 1
    widths = [max(len(r[i]) for r in table) for i in range(numbers)]
    lines = ["  ".join(cell.rjust(w) for cell, w in zip(r[:numbers], widths, strict=False))
             + "  " + r[numbers] for r in table]
    lines.append(f"{writes(steps, start)} scale writes from {start} replicas "
                 f"(without behavior: {writes(without, start)}).")
    return "\n".join(lines)


def plot(path: str, panels: Sequence[tuple[str, Sequence[SimStep]]], start: int) -> None:
    """Nodes, the formula's count and the written replicas over time; one panel each."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import MaxNLocator
    except ImportError:
        raise InputError("--plot needs matplotlib: pip install "
                            "'cluster-proportional-autoscaler-py[plot]' (or pip install "
                            "matplotlib)") from None
    fig, axes = plt.subplots(len(panels), 1, sharex=True, squeeze=False,
                             figsize=(10, 3.4 * len(panels)))
    for ax, (title, steps) in zip(axes[:, 0], panels, strict=True):
        minutes = [s.t / 60 for s in steps]
        nodes_ax = ax.twinx()
        nodes_ax.step(minutes, [s.nodes for s in steps], where="post", color="0.6",
                      linewidth=1, label="nodes")
        nodes_ax.set_ylabel("nodes", color="0.45")
        ax.step(minutes, [s.desired for s in steps], where="post", color="tab:orange",
                linestyle="--", linewidth=1.2, label="desired (formula)")
        ax.step(minutes, [s.replicas for s in steps], where="post", color="tab:blue",
                linewidth=2, label="written replicas")
        ax.set_zorder(nodes_ax.get_zorder() + 1)
        ax.patch.set_visible(False)
        ax.set_ylabel("replicas")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        # Headroom above the lines for the legend.
        ax.set_ylim(0, max(max(s.desired for s in steps), max(s.replicas for s in steps),
                           start) * 1.4 + 1)
        nodes_ax.set_ylim(0, max(s.nodes for s in steps) * 1.4 + 1)
        ax.set_title(f"{title}: {writes(steps, start)} scale writes", loc="left")
        handles = ax.get_legend_handles_labels()
        extra = nodes_ax.get_legend_handles_labels()
        ax.legend(handles[0] + extra[0], handles[1] + extra[1], loc="upper left",
                  fontsize="small")
    axes[-1, 0].set_xlabel("time (minutes)")
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=100)
    except OSError as exc:
        raise InputError(f"--plot: cannot write {path}: {exc}") from None
    finally:
        plt.close(fig)


# ----------------------------------------------------------------------------- the command


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="cpa simulate", allow_abbrev=False,
        description="Replay a timeline of node and core counts (one row per poll) through "
                    "the formula and the parameters' behavior. Nothing touches a cluster.")
    p.add_argument("--timeline", required=True, metavar="FILE",
                   help="CSV with a header, or a JSON list of objects: t (seconds, "
                        "increasing), nodes, cores[, schedulable_nodes, schedulable_cores, "
                        "zones, schedulable_zones]")
    add_parameter_arguments(p)
    p.add_argument("--start-replicas", type=int, metavar="N",
                   help="the target's replicas before the first row (default: the first "
                        "row's formula result)")
    p.add_argument("--output", "-o", choices=("text", "json"), default="text")
    p.add_argument("--plot", metavar="FILE.png",
                   help="draw nodes, desired and written replicas over time (matplotlib)")
    p.add_argument("--compare", action="store_true",
                   help="with --plot: add a panel for the same timeline without behavior")
    return p


def simulate_main(argv: Sequence[str]) -> int:
    """Exit 0 with the replay; 1 with one line saying what is wrong (never a traceback)."""
    args = _parser().parse_args(list(argv))
    return answer("cpa simulate", args.output, "simulate", lambda: (_run(args), 0))


def _run(args: argparse.Namespace) -> str:
    if args.compare and not args.plot:
        raise InputError("--compare adds a panel to the plot: give --plot FILE.png too")
    if args.start_replicas is not None and args.start_replicas < 0:
        raise InputError("--start-replicas cannot be negative")
    params, _origin = parameters_from_flags(args)
    rows = load_timeline(args.timeline)
    steps = simulate(params, rows, args.start_replicas)
    start = args.start_replicas if args.start_replicas is not None else steps[0].desired
    without = simulate(params, rows, start, with_behavior=False)
    if args.plot:
        label = ("with behavior" if params.shared.behavior is not None
                 else "no behavior in the parameters")
        panels: list[tuple[str, Sequence[SimStep]]] = [(label, steps)]
        if args.compare:
            panels.append(("without behavior (upstream)", without))
        plot(args.plot, panels, start)
    if args.output == "json":
        return json.dumps({"steps": [_json_step(s) for s in steps]}, indent=2)
    return render_text(steps, start, without)


def _json_step(step: SimStep) -> dict[str, Any]:
    doc = asdict(step)
    if float(step.t).is_integer():
        doc["t"] = int(step.t)
    if step.zones is None:  # only parameters with a zones key count them
        del doc["zones"]
    return doc
