"""The replica formulas of upstream's linear and ladder controllers, with their reasoning.

Each mode's formula is one function here (:func:`linear`, :func:`ladder`); which one runs
for a ConfigMap is :mod:`cpa.decide.modes.registry`' business, and so is the whole decision
(:func:`cpa.decide.modes.registry.decide`).

Why one function that always records steps: the number written to the scale
subresource and the explanation shown to the operator must never disagree, so there is
no separate fast path.  The arithmetic mirrors upstream exactly, quirks included:

* linear divides in float64 and takes IEEE ``ceil``; clamps to ``max`` then ``min``; an
  axis whose per-replica value is 0/absent yields 1 (not ``min``); the
  single-point-failure floor of 2 comes AFTER the ``max`` clamp, so it can exceed ``max``;
* ladder takes, per table, the last step whose threshold is <= the count, the FIRST step
  when the count is below every threshold, 0 for an empty table; it has no min, max or
  floor, so it may give 0.

A result above 2**31-1 does not fit the scale subresource's int32: the decision then
carries an ``error`` (with the reasoning that led there) and nothing may be written. Upstream
writes garbage instead (its conversion overflows: ladder 2**62 becomes 0) or has the PUT
fail.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass
from typing import Final

from cpa.decide.gojson import format_go_float
from cpa.decide.params import LadderParams, LinearParams
from cpa.decide.steps import Step
from cpa.nodes.counts import ClusterCounts

__all__ = ["INT32_MAX", "ClusterCounts", "Decision", "Step", "counts_step", "ladder", "linear",
           "range_error"]

INT32_MAX: Final = 2**31 - 1

# Stands for a float64 ``ceil`` that overflowed to +Inf (e.g. coresPerReplica 1e-320):
# larger than any finite result, so every comparison still orders it correctly.
_INFINITE: Final = 2**1100


@dataclass(frozen=True, slots=True)
class Decision:
    """The expected replica count, the counts it was computed from, and why."""

    mode: str
    replicas: int
    nodes: int
    cores: int
    steps: tuple[Step, ...]
    error: str | None = None
    """Set when ``replicas`` cannot be written (it does not fit an int32)."""


def _show(number: float | int) -> str:
    """A number as an operator would write it: 16, 0.5, 1e+300, infinity."""
    if number == _INFINITE or (isinstance(number, float) and math.isinf(number)):
        return "infinity"
    if isinstance(number, int) and abs(number) < 10**16:
        return str(number)
    return format_go_float(float(number))


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def counts_step(include: bool, counts: ClusterCounts) -> tuple[int, int, Step]:
    """The nodes and cores a mode counts: all of them, or only the schedulable ones."""
    if include:
        text = (
            "includeUnschedulableNodes is true, so every listed Node counts, cordoned and "
            f"NotReady ones included: {_plural(counts.total_nodes, 'Node')} and "
            f"{_plural(counts.total_cores, 'core')}."
        )
        return counts.total_nodes, counts.total_cores, Step("counts.total", text)
    text = (
        "includeUnschedulableNodes is false, so only schedulable Nodes count (not cordoned, "
        f"and Ready): {counts.schedulable_nodes} of {_plural(counts.total_nodes, 'Node')} and "
        f"{counts.schedulable_cores} of {_plural(counts.total_cores, 'core')}."
    )
    return counts.schedulable_nodes, counts.schedulable_cores, Step("counts.schedulable", text)


def _linear_axis(
    axis: str, label: str, count: int, per_replica: float, params: LinearParams,
    steps: list[Step],
) -> int:
    """upstream ``getExpectedReplicasFromParam``: float division, ceil, max clamp, min clamp."""
    field = f"{axis}PerReplica"
    if per_replica == 0:
        steps.append(Step(
            f"{axis}.unset",
            f"{field} is 0 or absent, so the {label} axis gives 1 (not min: upstream does the "
            "same).",
        ))
        return 1
    quotient = count / per_replica  # Python true division is IEEE float64, as in Go
    result = math.ceil(quotient) if math.isfinite(quotient) else quotient
    steps.append(Step(
        f"{axis}.ceil",
        f"The {label} axis gives ceil of {count} over {_show(per_replica)}, which is "
        f"{_show(result)}.",
    ))
    # Go compares in float64: math.Min(float64(max), res), then math.Max(float64(min), res).
    value = float(result)
    if params.max == 0:
        steps.append(Step(f"{axis}.clamp.max", f"No max is set, so nothing caps the {label} axis."))
    elif float(params.max) < value:
        value = float(params.max)
        steps.append(Step(
            f"{axis}.clamp.max",
            f"max {params.max} caps the {label} axis from {_show(result)} down to {params.max}.",
        ))
    else:
        steps.append(Step(
            f"{axis}.clamp.max",
            f"max {params.max} changes nothing on the {label} axis, which stays at "
            f"{_show(result)}.",
        ))
    before = value
    value = max(float(params.min), value)
    if value > before:
        steps.append(Step(
            f"{axis}.clamp.min",
            f"min {params.min} lifts the {label} axis from {_show(before)} to {params.min}.",
        ))
    else:
        steps.append(Step(
            f"{axis}.clamp.min",
            f"min {params.min} lifts nothing on the {label} axis, which stays at "
            f"{_show(value)}.",
        ))
    return int(value) if math.isfinite(value) else _INFINITE


def _spof_step(params: LinearParams, nodes: int, from_nodes: int) -> tuple[int, Step]:
    """The single-point-failure floor, applied to the Nodes axis after its clamps."""
    if not params.prevent_single_point_failure:
        return from_nodes, Step(
            "floor.spof", "preventSinglePointFailure is off, so no floor of 2 applies."
        )
    if nodes <= 1:
        return from_nodes, Step(
            "floor.spof",
            f"preventSinglePointFailure is on, but with {_plural(nodes, 'Node')} there is no "
            "second Node to spread over, so no floor of 2 applies.",
        )
    if from_nodes >= 2:
        return from_nodes, Step(
            "floor.spof",
            "preventSinglePointFailure holds at least 2 replicas while the cluster has more "
            f"than one Node, and the Nodes axis already gives {_show(from_nodes)}.",
        )
    beyond_max = (
        f" The floor comes after the max clamp, so it overrides max {params.max}."
        if 0 < params.max < 2
        else ""
    )
    return 2, Step(
        "floor.spof",
        "preventSinglePointFailure holds at least 2 replicas while the cluster has more "
        f"than one Node ({nodes} here), so the Nodes axis is lifted from {from_nodes} to 2."
        + beyond_max,
    )


def _winner_step(mode: str, from_cores: int, from_nodes: int) -> tuple[int, Step]:
    """Upstream keeps the larger of the two readings (cores win only if strictly larger)."""
    winner = max(from_cores, from_nodes)
    what = "axis" if mode == "linear" else "table"
    if from_cores == from_nodes:
        text = f"Both {what.replace('axis', 'axe')}s give {_show(winner)}, so the expected "
        text += f"replica count is {_show(winner)}."
    else:
        lead = "The larger reading" if mode == "linear" else "The lookup yielding more replicas"
        text = (
            f"{lead} wins: {_show(from_cores)} from the cores {what} against "
            f"{_show(from_nodes)} from the Nodes {what}, so the expected replica count is "
            f"{_show(winner)}."
        )
    if winner == 0:
        text += " A ladder may name 0 replicas, which linear may not."
    return winner, Step("winner", text)


def _lookup(
    axis: str, noun: str, count: int, table: tuple[tuple[int, int], ...], steps: list[Step]
) -> int:
    """upstream ``getExpectedReplicasFromEntries``: binary search on the sorted table."""
    field = f"{axis}ToReplicas"
    label = f"{noun}s"
    if not table:
        steps.append(Step(
            f"{axis}.lookup", f"{field} is empty, so the {label} table gives 0 replicas."
        ))
        return 0
    position = bisect_right([threshold for threshold, _ in table], count)
    if position == 0:
        threshold, replicas = table[0]
        steps.append(Step(
            f"{axis}.lookup",
            f"With {_plural(count, noun)} the count is below the first {field} threshold, "
            f"{threshold}, and a ladder then uses its first step anyway, so the {label} table "
            f"gives {replicas}.",
        ))
        return replicas
    threshold, replicas = table[position - 1]
    after = (
        f" (the next starts at {table[position][0]})" if position < len(table) else
        " (the last one)"
    )
    steps.append(Step(
        f"{axis}.lookup",
        f"With {_plural(count, noun)} the {field} step at {threshold} applies{after}, so "
        f"the {label} table gives {replicas}.",
    ))
    return replicas


def range_error(replicas: int, steps: list[Step]) -> str | None:
    """A count the API cannot hold is an error, never a clamp: writing 2**31-1 replicas
    (or upstream's wrapped-around value) is always wrong."""
    if replicas <= INT32_MAX:
        return None
    error = (f"the parameters give {_show(replicas)} replicas, more than a scale subresource "
             f"can hold ({INT32_MAX}); nothing is written: set a max, or raise "
             "coresPerReplica/nodesPerReplica, or lower min or the ladder's replicas")
    steps.append(Step("range.int32", f"{_show(replicas)} does not fit the API's 32-bit "
                                     "replica count, so this is an error and nothing is "
                                     "written."))
    return error


def linear(params: LinearParams, nodes: int, cores: int, steps: list[Step]) -> int:
    """upstream's linear controller: both axes, the single-point-failure floor, the larger."""
    from_cores = _linear_axis("cores", "cores", cores, params.cores_per_replica, params, steps)
    from_nodes = _linear_axis("nodes", "Nodes", nodes, params.nodes_per_replica, params, steps)
    from_nodes, spof = _spof_step(params, nodes, from_nodes)
    steps.append(spof)
    replicas, winner = _winner_step("linear", from_cores, from_nodes)
    steps.append(winner)
    return replicas


def ladder(params: LadderParams, nodes: int, cores: int, steps: list[Step]) -> int:
    """upstream's ladder controller: one lookup per table, the larger."""
    from_cores = _lookup("cores", "core", cores, params.cores_to_replicas, steps)
    from_nodes = _lookup("nodes", "Node", nodes, params.nodes_to_replicas, steps)
    replicas, winner = _winner_step("ladder", from_cores, from_nodes)
    steps.append(winner)
    return replicas
