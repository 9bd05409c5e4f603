"""The replica formulas: every rule and worked example of the contract, plus the steps."""

from __future__ import annotations

import pytest

from cpa.horizontal.decide.decision import INT32_MAX, Decision, decide
from cpa.horizontal.decide.modes.linear import LinearParams
from cpa.horizontal.decide.modes.mode import Configured, Params
from cpa.nodes.counts import ClusterCounts
from tests.unit.configured import ladder_params, parse_ladder, parse_linear
from tests.unit.configured import linear_params as lin

KUBE_DNS = parse_linear(
    '{"coresPerReplica":256,"nodesPerReplica":16,'
    '"preventSinglePointFailure":true,"includeUnschedulableNodes":true}'
)
AKS_LADDER = parse_ladder(
    '{"coresToReplicas":[[1,1],[64,3],[512,5],[1024,7],[2048,10],[4096,15]],'
    '"nodesToReplicas":[[1,1],[2,2]]}'
)


def counts(nodes: int, cores: int) -> ClusterCounts:
    """All nodes schedulable."""
    return ClusterCounts(nodes, cores, nodes, cores)


def keys(decision: Decision) -> list[str]:
    return [step.key for step in decision.steps]


def text(decision: Decision) -> str:
    return "\n".join(step.text for step in decision.steps)


# -------------------------------------------------------------------- worked examples


@pytest.mark.parametrize(
    ("params", "cluster", "replicas"),
    [
        # kube-dns defaults: 16 nodes / 128 cores -> 1 and 1, SPOF floor -> 2
        (KUBE_DNS, counts(16, 128), 2),
        # 48 nodes x 32 cores = 1536 -> nodes 3, cores 6
        (KUBE_DNS, counts(48, 48 * 32), 6),
        (parse_linear('{"coresPerReplica":2,"nodesPerReplica":1,"min":1,"max":100,'
                      '"preventSinglePointFailure":true}'), counts(4, 13), 7),
        (AKS_LADDER, counts(100, 400), 3),
        # max 1 on 3 nodes with SPOF gives 2: the floor comes after the clamp
        (lin(nodes=1, max=1, spof=True), counts(3, 12), 2),
    ],
)
def test_worked_examples(params: Params, cluster: ClusterCounts,
                         replicas: int) -> None:
    assert decide(params, cluster).replicas == replicas


@pytest.mark.parametrize(("nodes", "replicas"), [(0, 0), (1, 0), (5, 0), (6, 1), (100, 1)])
def test_ladder_zero_below_six_nodes(nodes: int, replicas: int) -> None:
    params = parse_ladder('{"nodesToReplicas":[[0,0],[6,1]]}')
    assert decide(params, counts(nodes, nodes * 4)).replicas == replicas


# ------------------------------------------------------------------------- linear rules


@pytest.mark.parametrize(
    ("params", "nodes", "cores", "replicas"),
    [
        # ceil of float division
        (lin(cores=256), 1, 1, 1),
        (lin(cores=256), 1, 256, 1),
        (lin(cores=256), 1, 257, 2),
        (lin(cores=0.5), 1, 3, 6),
        (lin(cores=3), 1, 10, 4),
        (lin(nodes=0.1), 3, 0, 30),
        # zero counts give ceil(0) = 0, then min lifts to 1
        (lin(nodes=16), 0, 0, 1),
        (lin(nodes=16, min=3), 0, 0, 3),
        # an absent per-replica value yields 1, not min
        (lin(nodes=16, min=5), 100, 0, 7),
        (lin(nodes=1, min=5), 2, 0, 5),
        # max clamps each axis; min applies after max
        (lin(nodes=1, max=10), 50, 0, 10),
        (lin(cores=1, nodes=1, max=10), 50, 500, 10),
        (lin(cores=1, min=3, max=3), 1, 1, 3),
        # the larger axis wins
        (lin(cores=10, nodes=10), 5, 95, 10),
        (lin(cores=10, nodes=10), 95, 5, 10),
        # SPOF floor: only with more than one node, only lifts the nodes axis to 2
        (lin(cores=1000, nodes=16, spof=True), 2, 8, 2),
        (lin(cores=1000, nodes=16, spof=True), 1, 8, 1),
        (lin(cores=1000, nodes=16, spof=True), 0, 0, 1),
        (lin(cores=1000, nodes=16, spof=False), 2, 8, 1),
        (lin(cores=1, spof=True), 5, 1, 2),  # nodes axis unset gives 1, then floor 2
        (lin(cores=1, nodes=1, max=1, spof=True), 3, 3, 2),  # floor beats max
        (lin(nodes=1, max=1, spof=True), 1, 100, 1),
    ],
)
def test_linear_rules(params: Configured[LinearParams], nodes: int, cores: int,
                      replicas: int) -> None:
    assert decide(params, counts(nodes, cores)).replicas == replicas


def test_float_division_matches_go() -> None:
    # 21 / 0.7 is 30.000000000000004 in float64, so IEEE ceil gives 31 -- as in Go.
    assert decide(lin(nodes=0.7), counts(21, 0)).replicas == 31
    assert decide(lin(cores=0.35), counts(1, 21)).replicas == 61
    # and 7 / 0.07 is 99.99999999999999, so ceil gives 100
    assert decide(lin(cores=0.07), counts(1, 7)).replicas == 100


def test_counts_beyond_int32_are_an_error_not_a_clamp() -> None:
    decision = decide(lin(cores=1e-320), counts(1, 1000))  # overflows to +Inf
    assert decision.error is not None and "nothing is written" in decision.error
    assert keys(decision)[-1] == "range.int32"
    assert "infinity" in text(decision)
    decision = decide(lin(cores=0.001), counts(1, 2**31))
    assert decision.replicas == 2**31 * 1000
    assert decision.error is not None
    decision = decide(lin(cores=0.5, max=2**40), counts(1, 2**30))
    assert decision.replicas == 2**31
    assert decision.error is not None
    decision = decide(lin(nodes=16, min=2**31), counts(3, 3))  # min alone
    assert decision.replicas == 2**31
    assert decision.error is not None and "2147483648 replicas" in decision.error
    # exactly the limit fits
    decision = decide(lin(cores=1), counts(1, INT32_MAX))
    assert decision.replicas == INT32_MAX
    assert decision.error is None
    assert "range.int32" not in keys(decision)


def test_ladder_beyond_int32_is_an_error() -> None:
    """Upstream's conversion wraps 2**62 to 0 and writes it; we write nothing."""
    for huge in (2**31, 2**40, 2**62):
        decision = decide(ladder_params(((0, huge),), (), False), counts(1, 1))
        assert decision.replicas == huge
        assert decision.error is not None
        assert keys(decision)[-1] == "range.int32"


# ----------------------------------------------------- counts: includeUnschedulableNodes


def test_schedulable_counts_by_default() -> None:
    cluster = ClusterCounts(total_nodes=10, total_cores=40, schedulable_nodes=4,
                            schedulable_cores=16)
    decision = decide(lin(nodes=1), cluster)
    assert (decision.replicas, decision.nodes, decision.cores) == (4, 4, 16)
    assert decision.steps[0].key == "counts.schedulable"
    assert "4 of 10 Nodes and 16 of 40 cores" in decision.steps[0].text


def test_total_counts_with_include_unschedulable() -> None:
    cluster = ClusterCounts(10, 40, 4, 16)
    decision = decide(lin(nodes=1, include=True), cluster)
    assert (decision.replicas, decision.nodes, decision.cores) == (10, 10, 40)
    assert decision.steps[0].key == "counts.total"
    ladder = ladder_params((), ((0, 1), (8, 5)), True)
    assert decide(ladder, cluster).replicas == 5
    assert decide(ladder_params((), ((0, 1), (8, 5)), False), cluster).replicas == 1


def test_spof_uses_the_counted_nodes() -> None:
    # 3 nodes listed but only 1 schedulable: no floor unless unschedulable ones count.
    cluster = ClusterCounts(3, 12, 1, 4)
    assert decide(lin(nodes=16, spof=True), cluster).replicas == 1
    assert decide(lin(nodes=16, spof=True, include=True), cluster).replicas == 2


# ------------------------------------------------------------------------- ladder rules


@pytest.mark.parametrize(
    ("table", "count", "replicas"),
    [
        ((), 5, 0),  # empty table gives 0
        (((10, 3),), 0, 3),  # below the first threshold: the FIRST step's replicas
        (((10, 3),), 9, 3),
        (((10, 3),), 10, 3),
        (((1, 1), (64, 3), (512, 5)), 63, 1),
        (((1, 1), (64, 3), (512, 5)), 64, 3),
        (((1, 1), (64, 3), (512, 5)), 511, 3),
        (((1, 1), (64, 3), (512, 5)), 10**6, 5),
        (((5, 9), (5, 2)), 5, 2),  # equal thresholds: the later one wins
        (((5, 9), (5, 2)), 4, 9),  # ... but below them, the first
        (((0, 0), (6, 1)), 0, 0),
        (((1, 5), (10, 2)), 12, 2),  # tables need not be monotonic
    ],
)
def test_ladder_lookup(table: tuple[tuple[int, int], ...], count: int, replicas: int) -> None:
    assert decide(ladder_params(table, (), False), counts(0, count)).replicas == replicas
    assert decide(ladder_params((), table, False), counts(count, 0)).replicas == replicas


def test_ladder_takes_the_larger_lookup() -> None:
    params = ladder_params(((0, 3),), ((0, 5),), False)
    assert decide(params, counts(1, 1)).replicas == 5
    params = ladder_params(((0, 6),), ((0, 5),), False)
    assert decide(params, counts(1, 1)).replicas == 6


def test_ladder_sorting_in_parse_drives_lookup() -> None:
    params = parse_ladder('{"coresToReplicas":[[512,5],[1,1],[64,3]]}')
    assert decide(params, counts(1, 100)).replicas == 3
    params = parse_ladder('{"coresToReplicas":[[5,9],[1,1],[5,2]]}')
    assert decide(params, counts(1, 5)).replicas == 2


# --------------------------------------------------------------------------- the steps


def test_linear_steps_walk_through_the_seed_example() -> None:
    decision = decide(KUBE_DNS, counts(16, 128))
    assert decision.mode == "linear"
    assert keys(decision) == [
        "counts.total",
        "cores.ceil", "cores.clamp.max", "cores.clamp.min",
        "nodes.ceil", "nodes.clamp.max", "nodes.clamp.min",
        "floor.spof", "winner",
    ]
    steps = {step.key: step.text for step in decision.steps}
    assert steps["nodes.ceil"] == "The Nodes axis gives ceil of 16 over 16, which is 1."
    assert steps["cores.ceil"] == "The cores axis gives ceil of 128 over 256, which is 1."
    assert "No max is set" in steps["cores.clamp.max"]
    assert "min 1 lifts nothing" in steps["nodes.clamp.min"]
    assert "at least 2 replicas" in steps["floor.spof"]
    assert "from 1 to 2" in steps["floor.spof"]
    assert steps["winner"].endswith("the expected replica count is 2.")
    assert all(step.text.endswith(".") and step.text[0].isalpha() for step in decision.steps)


def test_linear_steps_say_whether_clamps_changed_anything() -> None:
    steps = {s.key: s.text for s in decide(lin(nodes=1, min=5, max=8), counts(20, 0)).steps}
    assert steps["nodes.clamp.max"] == "max 8 caps the Nodes axis from 20 down to 8."
    assert steps["nodes.clamp.min"] == "min 5 lifts nothing on the Nodes axis, which stays at 8."
    assert steps["cores.unset"].startswith("coresPerReplica is 0 or absent")
    steps = {s.key: s.text for s in decide(lin(nodes=16, min=5, max=8), counts(2, 0)).steps}
    assert steps["nodes.clamp.max"] == "max 8 changes nothing on the Nodes axis, which stays at 1."
    assert steps["nodes.clamp.min"] == "min 5 lifts the Nodes axis from 1 to 5."


def test_spof_step_mentions_overriding_max() -> None:
    decision = decide(lin(nodes=1, max=1, spof=True), counts(3, 0))
    spof = next(step.text for step in decision.steps if step.key == "floor.spof")
    assert "overrides max 1" in spof


@pytest.mark.parametrize(
    ("params", "nodes", "fragment"),
    [
        (lin(nodes=16), 3, "preventSinglePointFailure is off"),
        (lin(nodes=16, spof=True), 1, "with 1 Node there is no second Node"),
        (lin(nodes=1, spof=True), 5, "already gives 5"),
    ],
)
def test_spof_step_variants(params: Configured[LinearParams], nodes: int,
                            fragment: str) -> None:
    spof = next(s.text for s in decide(params, counts(nodes, 0)).steps if s.key == "floor.spof")
    assert fragment in spof


def test_ladder_steps() -> None:
    decision = decide(AKS_LADDER, counts(100, 400))
    assert decision.mode == "ladder"
    assert keys(decision) == ["counts.schedulable", "cores.lookup", "nodes.lookup", "winner"]
    steps = {s.key: s.text for s in decision.steps}
    assert "coresToReplicas step at 64 applies (the next starts at 512)" in steps["cores.lookup"]
    assert "gives 3" in steps["cores.lookup"]
    assert "nodesToReplicas step at 2 applies (the last one)" in steps["nodes.lookup"]
    assert "3 from the cores table against 2 from the Nodes table" in steps["winner"]


def test_ladder_steps_below_first_and_empty_and_zero() -> None:
    decision = decide(ladder_params((), ((6, 1),), False), counts(3, 0))
    steps = {s.key: s.text for s in decision.steps}
    assert steps["cores.lookup"] == "coresToReplicas is empty, so the cores table gives 0 replicas."
    assert "below the first nodesToReplicas threshold, 6" in steps["nodes.lookup"]
    assert "first step anyway" in steps["nodes.lookup"]
    decision = decide(ladder_params((), ((0, 0), (6, 1)), False), counts(3, 0))
    assert decision.replicas == 0
    assert "may name 0 replicas" in decision.steps[-1].text


def test_winner_tie_text() -> None:
    decision = decide(lin(cores=1, nodes=1), counts(4, 4))
    assert decision.steps[-1].text == "Both axes give 4, so the expected replica count is 4."
