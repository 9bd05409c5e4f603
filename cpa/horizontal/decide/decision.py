"""The decision: from the node counts and the parameters in force to the replicas, and why.

One function (:func:`decide`) that always records its steps: the number written to the
scale subresource and the explanation shown to the operator must never disagree, so there
is no separate fast path. The stages, in order:

1. the counts the mode counts: every Node (``includeUnschedulableNodes``) or only the
   schedulable ones (not cordoned, Ready); and how the counting keys shaped them;
2. the mode's formula (:mod:`cpa.horizontal.decide.modes`): the proportional count;
2b. ``load`` (ours, opt-in): the load axis (:mod:`cpa.horizontal.decide.windows`), capped by the
mode's
   ``max`` (linear), and the larger of it and the proportional count goes on: the
   proportional count is the floor, so losing the metrics never shrinks the target below
   what upstream would run;
3. ``zones`` (ours, opt-in): the zone floor and the round-up (:mod:`cpa.horizontal.decide.zones`);
4. ``maxReplicasPerNode`` (ours, opt-in), applied to the count so far;
5. the int32 check: a result above 2**31-1 does not fit the scale subresource, so the
   decision then carries an ``error`` (with the reasoning that led there) and nothing may be
   written. Upstream writes garbage instead (its conversion overflows: ladder 2**62 becomes
   0) or has the PUT fail.

``behavior`` (ours) comes after the decision, per target, because it depends on each
target's current replicas (:mod:`cpa.horizontal.decide.behavior`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, NamedTuple

from cpa.horizontal.decide.modes.mode import Axes, Params
from cpa.horizontal.decide.steps import Step, plural, show
from cpa.nodes.counts import ClusterCounts

if TYPE_CHECKING:
    from cpa.horizontal.decide.windows import LoadAxis

__all__ = ["INT32_MAX", "ClusterCounts", "Decision", "combine", "counts_step", "decide",
           "range_error", "uncounted_error"]

INT32_MAX: Final = 2**31 - 1


class Decision(NamedTuple):
    """The expected replica count, the counts it was computed from, and why."""

    mode: str
    replicas: int
    nodes: int
    cores: int
    steps: tuple[Step, ...]
    error: str | None = None
    """Set when ``replicas`` cannot be written (it does not fit an int32, or the zones are
    not counted yet)."""
    floor: int = 0
    """Ours, with ``zones``: the zone floor (after ``maxReplicasPerNode``), which a
    ``behavior`` never holds a target below."""
    zones: int | None = None
    """Ours, with ``zones``: the zones the counted Nodes are in."""
    proportional: int | None = None
    """Ours, with ``load``: the formula's count before the load axis met it."""
    load: int | None = None
    """Ours, with ``load``: the load axis's count (None: the axis is out this poll)."""


def decide(params: Params, counts: ClusterCounts, load: LoadAxis | None = None) -> Decision:
    """The replica count upstream would write for these parameters and counts, and why;
    with ``load`` (ours), the load axis joins the formula's count."""
    shared = params.shared
    steps: list[Step] = []
    nodes, cores, first = counts_step(shared.include_unschedulable_nodes, counts)
    steps.append(first)
    steps.extend(shared.counting.count_steps(counts.excluded_nodes, counts.capped_nodes))
    kinds = params.object_kinds()
    replicas = params.replicas(
        Axes(nodes, cores, counts.pods or 0, counts.services or 0), steps)
    proportional: int | None = None
    if load is not None:
        proportional = replicas
        replicas = combine(replicas, load, params.ceiling(), steps)
    floor, zones, error = 0, None, None
    if shared.zones is not None:
        zones = (counts.total_zones if shared.include_unschedulable_nodes
                 else counts.schedulable_zones)
        replicas, floor = shared.zones.apply(replicas, zones, steps)
        if zones is None:
            error = (f'the zones are not counted yet: the Nodes are being listed again to '
                     f'read the label "{shared.zones.topology_key}"; nothing is written '
                     "until they are")
    replicas = shared.counting.cap_replicas(replicas, nodes, steps)
    error = error or uncounted_error(kinds, counts) or range_error(replicas, steps)
    return Decision(mode=params.name, replicas=replicas, nodes=nodes, cores=cores,
                    steps=tuple(steps), error=error, floor=min(floor, replicas), zones=zones,
                    proportional=proportional, load=None if load is None else load.replicas)


def combine(proportional: int, load: LoadAxis, ceiling: int, steps: list[Step]) -> int:
    """``max(proportional, load)``, the load capped by the mode's ``max`` first: the
    proportional count is the floor and ``max`` the ceiling of what the load may add."""
    steps.extend(load.steps)
    if load.replicas is None:
        return proportional
    wanted = load.replicas
    if 0 < ceiling < wanted:
        steps.append(Step("load.clamp.max", (
            f"max {ceiling} caps the load axis from {show(wanted)} down to {ceiling}.")))
        wanted = ceiling
    if wanted > proportional:
        steps.append(Step("load.combine", (
            f"The load axis's {show(wanted)} is more than the proportional "
            f"{show(proportional)}, so the count is {show(wanted)}.")))
        return wanted
    steps.append(Step("load.combine", (
        f"The proportional {show(proportional)} is at least the load axis's {show(wanted)}, "
        f"so the count stays {show(proportional)} (the proportional count is the floor).")))
    return proportional


def counts_step(include: bool, counts: ClusterCounts) -> tuple[int, int, Step]:
    """The nodes and cores a mode counts: all of them, or only the schedulable ones."""
    if include:
        text = (
            "includeUnschedulableNodes is true, so every listed Node counts, cordoned and "
            f"NotReady ones included: {plural(counts.total_nodes, 'Node')} and "
            f"{plural(counts.total_cores, 'core')}."
        )
        return counts.total_nodes, counts.total_cores, Step("counts.total", text)
    text = (
        "includeUnschedulableNodes is false, so only schedulable Nodes count (not cordoned, "
        f"and Ready): {counts.schedulable_nodes} of {plural(counts.total_nodes, 'Node')} and "
        f"{counts.schedulable_cores} of {plural(counts.total_cores, 'core')}."
    )
    return counts.schedulable_nodes, counts.schedulable_cores, Step("counts.schedulable", text)


def uncounted_error(kinds: frozenset[str], counts: ClusterCounts) -> str | None:
    """Ours: parameters with a Pods or Services axis decide nothing on a count not taken
    (the watch not listed yet): writing the axis as 0 could shrink the target."""
    missing = [kind for kind, count in (("pods", counts.pods), ("services", counts.services))
               if kind in kinds and count is None]
    if not missing:
        return None
    return (f"the {' and '.join(missing)} are not counted yet (their list is not complete); "
            "nothing is written until they are")


def range_error(replicas: int, steps: list[Step]) -> str | None:
    """A count the API cannot hold is an error, never a clamp: writing 2**31-1 replicas
    (or upstream's wrapped-around value) is always wrong."""
    if replicas <= INT32_MAX:
        return None
    error = (f"the parameters give {show(replicas)} replicas, more than a scale subresource "
             f"can hold ({INT32_MAX}); nothing is written: set a max, or raise "
             "coresPerReplica/nodesPerReplica, or lower min or the ladder's replicas")
    steps.append(Step("range.int32", f"{show(replicas)} does not fit the API's 32-bit "
                                     "replica count, so this is an error and nothing is "
                                     "written."))
    return error
