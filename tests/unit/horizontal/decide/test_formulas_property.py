"""Property tests: decide() against a deliberately plain re-implementation, and round trips.

The reference functions below share no code with ``cpa`` on purpose: plain loops and
comparisons written straight from the contract, so a bug would have to be made twice.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from cpa.go.quantity import cores_rounded_up, cpu_millicores
from cpa.horizontal.decide.decision import Decision, decide
from cpa.horizontal.decide.modes.ladder import LadderParams
from cpa.horizontal.decide.modes.linear import LinearParams
from cpa.horizontal.decide.modes.mode import Configured
from cpa.nodes.counts import ClusterCounts
from tests.unit.configured import ladder_params, linear_params, parse_ladder, parse_linear

LIMIT = 2147483647

# ------------------------------------------------------------------ reference formulas


def counted(configured: Configured[LinearParams] | Configured[LadderParams],
            c: ClusterCounts) -> tuple[int, int]:
    """(nodes, cores): all of them, or only the schedulable ones."""
    if configured.shared.include_unschedulable_nodes:
        return c.total_nodes, c.total_cores
    return c.schedulable_nodes, c.schedulable_cores


def reference_linear(configured: Configured[LinearParams], c: ClusterCounts) -> int | None:
    """The replicas, or None when they do not fit the API's int32 (an error)."""
    p = configured.params
    nodes, cores = counted(configured, c)

    def per(count: int, per_replica: float) -> float:
        if per_replica == 0:
            return 1
        quotient = count / per_replica
        result = quotient if math.isinf(quotient) else float(math.ceil(quotient))
        if p.max != 0 and p.max < result:
            result = p.max
        if result < p.min:
            result = p.min
        return result

    from_cores = per(cores, p.cores_per_replica)
    from_nodes = per(nodes, p.nodes_per_replica)
    if p.prevent_single_point_failure and nodes > 1 and from_nodes < 2:
        from_nodes = 2
    answer = from_cores if from_cores > from_nodes else from_nodes
    if answer > LIMIT:
        return None
    return int(answer)


def reference_lookup(count: int, table: Sequence[tuple[int, int]]) -> int:
    if len(table) == 0:
        return 0
    answer = table[0][1]
    for threshold, replicas in table:
        if threshold <= count:
            answer = replicas
    return answer


def reference_ladder(configured: Configured[LadderParams], c: ClusterCounts) -> int | None:
    p = configured.params
    nodes, cores = counted(configured, c)
    a = reference_lookup(cores, p.cores_to_replicas)
    b = reference_lookup(nodes, p.nodes_to_replicas)
    answer = a if a > b else b
    return None if answer > LIMIT else answer


def insertion_sort(pairs: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Go's sort for small slices: insertion sort, so equal thresholds keep their order."""
    out = list(pairs)
    for i in range(1, len(out)):
        j = i
        while j > 0 and out[j][0] < out[j - 1][0]:
            out[j], out[j - 1] = out[j - 1], out[j]
            j -= 1
    return tuple(out)


# -------------------------------------------------------------------------- strategies

per_replica = st.one_of(
    st.just(0.0),
    st.sampled_from([0.07, 0.1, 0.35, 0.5, 0.7, 1.0, 1.1, 2.0, 3.0, 16.0, 256.0, 1e-320]),
    st.floats(min_value=1e-6, max_value=1e6, allow_nan=False, allow_infinity=False),
    st.integers(min_value=1, max_value=5000).map(float),
)


@st.composite
def cluster_counts(draw: st.DrawFn) -> ClusterCounts:
    total_nodes = draw(st.integers(min_value=0, max_value=100_000))
    total_cores = draw(st.integers(min_value=0, max_value=10_000_000))
    return ClusterCounts(
        total_nodes=total_nodes,
        total_cores=total_cores,
        schedulable_nodes=draw(st.integers(min_value=0, max_value=total_nodes)),
        schedulable_cores=draw(st.integers(min_value=0, max_value=total_cores)),
    )


@st.composite
def linear_drawn(draw: st.DrawFn) -> Configured[LinearParams]:
    minimum = draw(st.integers(min_value=1, max_value=1000))
    maximum = draw(st.one_of(st.just(0), st.integers(min_value=minimum, max_value=10**6)))
    return linear_params(
        cores=draw(per_replica),
        nodes=draw(per_replica),
        min=minimum,
        max=maximum,
        spof=draw(st.booleans()),
        include=draw(st.booleans()),
    )


pair = st.tuples(
    st.one_of(st.integers(0, 20), st.integers(0, 10**7)),
    st.one_of(st.integers(0, 20), st.integers(0, 2**40)),
)
table = st.lists(pair, max_size=12)


# ------------------------------------------------------------------------------ tests


def written(decision: Decision) -> int | None:
    """What the daemon would write: the replicas, or nothing when the decision is an error."""
    return None if decision.error is not None else decision.replicas


@settings(max_examples=500, deadline=None)
@given(linear_drawn(), cluster_counts())
def test_linear_matches_reference(params: Configured[LinearParams], counts: ClusterCounts
                                  ) -> None:
    decision = decide(params, counts)
    assert written(decision) == reference_linear(params, counts)
    assert decision.mode == "linear"
    assert decision.replicas >= 1
    assert decision.steps[0].key.startswith("counts.")
    assert any(step.key == "winner" for step in decision.steps)
    if params.shared.include_unschedulable_nodes:
        assert (decision.nodes, decision.cores) == (counts.total_nodes, counts.total_cores)
    else:
        assert (decision.nodes, decision.cores) == (
            counts.schedulable_nodes, counts.schedulable_cores
        )


@settings(max_examples=500, deadline=None)
@given(table, table, st.booleans(), cluster_counts())
def test_ladder_matches_reference(
    cores_table: list[tuple[int, int]], nodes_table: list[tuple[int, int]],
    include: bool, counts: ClusterCounts,
) -> None:
    params = ladder_params(insertion_sort(cores_table), insertion_sort(nodes_table), include)
    decision = decide(params, counts)
    assert written(decision) == reference_ladder(params, counts)
    assert decision.mode == "ladder"
    assert decision.replicas >= 0


def _spell(name: str, style: int) -> str:
    """Key spellings Go matches to the same field."""
    return [name, name.upper(), name.lower(), name.replace("s", "\u017f")][style % 4]


@settings(max_examples=300, deadline=None)
@given(linear_drawn(), st.integers(0, 3), cluster_counts())
def test_linear_params_round_trip_through_json(
    params: Configured[LinearParams], style: int, counts: ClusterCounts
) -> None:
    own = params.params
    if own.cores_per_replica == 0 and own.nodes_per_replica == 0:
        own = own._replace(cores_per_replica=1.0)
        params = params._replace(params=own)
    document = {
        _spell("coresPerReplica", style): own.cores_per_replica,
        _spell("nodesPerReplica", style): own.nodes_per_replica,
        _spell("min", style): own.min,
        _spell("max", style): own.max,
        _spell("preventSinglePointFailure", style): own.prevent_single_point_failure,
        _spell("includeUnschedulableNodes", style): params.shared.include_unschedulable_nodes,
    }
    parsed = parse_linear(json.dumps(document, ensure_ascii=style % 2 == 0))
    assert parsed == params
    assert written(decide(parsed, counts)) == reference_linear(params, counts)


@settings(max_examples=300, deadline=None)
@given(table, table, st.booleans())
def test_ladder_params_round_trip_sorted_stably(
    cores_table: list[tuple[int, int]], nodes_table: list[tuple[int, int]], include: bool
) -> None:
    document = {
        "coresToReplicas": [list(p) for p in cores_table],
        "NodesToReplicas": [list(p) for p in nodes_table],
        "includeUnschedulableNodes": include,
    }
    parsed = parse_ladder(json.dumps(document))
    assert parsed == ladder_params(
        insertion_sort(cores_table), insertion_sort(nodes_table), include
    )


# ---------------------------------------------------------------------------- quantity

millicores = st.integers(min_value=0, max_value=10**15)


@given(millicores)
def test_quantity_millicore_round_trip(value: int) -> None:
    assert cpu_millicores(f"{value}m") == value
    assert cpu_millicores(f"-{value}m") == -value


@given(st.integers(min_value=0, max_value=10**12))
def test_quantity_core_round_trip(cores: int) -> None:
    assert cpu_millicores(str(cores)) == cores * 1000
    assert cpu_millicores(f"{cores}000m") == cores * 1000
    assert cores_rounded_up(cpu_millicores(str(cores))) == cores


@given(millicores)
def test_quantity_decimal_round_trip(value: int) -> None:
    assert cpu_millicores(f"{value // 1000}.{value % 1000:03d}") == value
    assert cpu_millicores(f"{value}e-3") == value


@given(st.integers(min_value=0, max_value=10**15))
def test_quantity_nanocores_are_exact(nanos: int) -> None:
    value = cpu_millicores(f"{nanos}n")
    assert value == Fraction(nanos, 10**6)
    assert isinstance(value, int) == (nanos % 10**6 == 0)


@given(st.lists(millicores, max_size=50))
def test_cores_rounded_up_is_ceiling_of_exact_sum(values: list[int]) -> None:
    total = sum(cpu_millicores(f"{v}m") for v in values)
    cores = cores_rounded_up(total)
    assert cores * 1000 >= total > (cores - 1) * 1000 or (total == 0 and cores == 0)
