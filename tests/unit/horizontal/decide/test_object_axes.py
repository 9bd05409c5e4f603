"""Ours, opt-in: the Pods and Services axes of linear (``podsPerReplica``,
``servicesPerReplica``) and ladder (``podsToReplicas``, ``servicesToReplicas``)."""

from __future__ import annotations

import pytest

from cpa.horizontal.decide.decision import decide
from cpa.horizontal.decide.params import ParamsError
from cpa.nodes.counts import ClusterCounts
from tests.unit.configured import parse_ladder, parse_linear


def counts(nodes: int = 3, cores: int = 12, pods: int | None = None,
           services: int | None = None) -> ClusterCounts:
    return ClusterCounts(nodes, cores, nodes, cores, pods=pods, services=services)


# --- linear ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "pods", "services", "expected"), [
    ('{"nodesPerReplica":16,"podsPerReplica":100}', 1001, None, 11),
    ('{"nodesPerReplica":16,"podsPerReplica":100}', 100, None, 1),
    ('{"nodesPerReplica":1,"podsPerReplica":100}', 100, None, 3),  # the Nodes axis wins
    ('{"nodesPerReplica":16,"servicesPerReplica":50}', None, 101, 3),
    ('{"nodesPerReplica":16,"podsPerReplica":1000,"servicesPerReplica":50}', 5000, 1000, 20),
    ('{"nodesPerReplica":16,"podsPerReplica":100,"max":5}', 1001, None, 5),  # max clamps it
    ('{"nodesPerReplica":16,"podsPerReplica":100,"min":4}', 10, None, 4),
    ('{"podsPerReplica":100}', 250, None, 3),  # an object axis alone is enough
    ('{"podsPerReplica":0.5}', 3, None, 6),
    ('{"podsPerReplica":1e308}', 150000, None, 1),  # huge: the min clamp's 1
])
def test_linear_object_axes(value: str, pods: int | None, services: int | None,
                            expected: int) -> None:
    decision = decide(parse_linear(value), counts(pods=pods, services=services))
    assert decision.error is None
    assert decision.replicas == expected


def test_linear_spof_floor_unchanged_with_pods_axis() -> None:
    params = parse_linear('{"nodesPerReplica":16,"podsPerReplica":1000,'
                          '"preventSinglePointFailure":true}')
    assert decide(params, counts(pods=10)).replicas == 2
    assert decide(params, counts(pods=5000)).replicas == 5


def test_linear_steps_name_each_axis() -> None:
    decision = decide(parse_linear('{"nodesPerReplica":16,"podsPerReplica":100,'
                                   '"servicesPerReplica":10}'), counts(pods=1001, services=5))
    keys = [step.key for step in decision.steps]
    assert "pods.ceil" in keys and "pods.winner" in keys
    assert "services.ceil" in keys and "services.winner" in keys
    text = " ".join(step.text for step in decision.steps)
    assert "ceil of 1001 over 100" in text


def test_without_the_keys_nothing_changes() -> None:
    """The steps and the count are upstream's: no step of ours, the counts ignored."""
    value = '{"coresPerReplica":256,"nodesPerReplica":16,"preventSinglePointFailure":true}'
    plain = decide(parse_linear(value), counts())
    with_counts = decide(parse_linear(value), counts(pods=10**6, services=10**6))
    assert plain.steps == with_counts.steps
    assert plain.replicas == with_counts.replicas == 2
    assert parse_linear(value).object_kinds() == frozenset()
    assert "podsPerReplica" not in parse_linear(value).fields()


def test_object_kinds() -> None:
    assert parse_linear('{"podsPerReplica":10}').object_kinds() == {"pods"}
    assert parse_linear('{"nodesPerReplica":1,"servicesPerReplica":10}').object_kinds() == {
        "services"}
    # null is Go's nil pointer: the axis is off again
    assert parse_linear('{"nodesPerReplica":1,"podsPerReplica":10,"podsPerReplica":null}'
                        ).object_kinds() == frozenset()
    # Go matches the key case-insensitively
    assert parse_linear('{"PODSPERREPLICA":10}').object_kinds() == {"pods"}


def test_uncounted_axis_is_an_error_not_a_zero() -> None:
    decision = decide(parse_linear('{"nodesPerReplica":1,"podsPerReplica":10}'), counts())
    assert decision.error is not None and "pods are not counted yet" in decision.error


@pytest.mark.parametrize(("value", "message"), [
    ('{"nodesPerReplica":16,"podsPerReplica":0}', "podsPerReplica is 0; it must be a number "
                                                  "greater than 0"),
    ('{"nodesPerReplica":16,"podsPerReplica":-5}', "podsPerReplica is -5"),
    ('{"nodesPerReplica":16,"servicesPerReplica":-0.5}', "servicesPerReplica is -0.5"),
    ('{"nodesPerReplica":16,"podsPerReplica":"100"}', "expected a number"),
    ('{"nodesPerReplica":16,"podsPerReplica":true}', "expected a number"),
    ('{"nodesPerReplica":16,"podsPerReplica":[100]}', "expected a number"),
    ('{"nodesPerReplica":16,"podsPerReplica":1e999}', "out of range"),
    ('{"podsPerReplica":null}', "are both 0 or absent"),
])
def test_linear_hostile_values(value: str, message: str) -> None:
    with pytest.raises(ParamsError, match="ConfigMap key \"linear\"") as caught:
        parse_linear(value)
    assert message in str(caught.value)


def test_tiny_per_replica_is_an_int32_error_not_a_write() -> None:
    decision = decide(parse_linear('{"podsPerReplica":1e-320}'), counts(pods=150000))
    assert decision.error is not None and "more than a scale subresource" in decision.error


# --- ladder ---------------------------------------------------------------------------------

LADDER = ('{"nodesToReplicas":[[1,1],[2,2]],'
          '"podsToReplicas":[[0,1],[1000,3],[5000,6]],"servicesToReplicas":[[100,4]]}')


@pytest.mark.parametrize(("pods", "services", "expected"), [
    (10, 0, 4),  # below the first services threshold: its first step anyway
    (1000, 0, 4),
    (5000, 0, 6),
    (10**6, 10**6, 6),
])
def test_ladder_largest_lookup_wins(pods: int, services: int, expected: int) -> None:
    params = parse_ladder(LADDER)
    assert params.object_kinds() == {"pods", "services"}
    decision = decide(params, counts(pods=pods, services=services))
    assert decision.replicas == expected
    assert "pods.lookup" in [step.key for step in decision.steps]


def test_ladder_pods_table_sorted_and_keys_kept() -> None:
    params = parse_ladder('{"nodesToReplicas":[[1,1]],"podsToReplicas":[[5000,6],[0,1]]}')
    assert params.fields()["podsToReplicas"] == [[0, 1], [5000, 6]]
    assert decide(params, counts(pods=4999, services=0)).replicas == 1


def test_ladder_without_the_keys_nothing_changes() -> None:
    value = '{"nodesToReplicas":[[1,1],[2,2]]}'
    assert parse_ladder(value).object_kinds() == frozenset()
    assert parse_ladder('{"nodesToReplicas":[[1,1]],"podsToReplicas":[]}').object_kinds() == (
        frozenset())
    assert "podsToReplicas" not in parse_ladder(value).fields()
    assert decide(parse_ladder(value), counts()).steps == decide(
        parse_ladder(value), counts(pods=9, services=9)).steps


@pytest.mark.parametrize(("value", "message"), [
    ('{"podsToReplicas":[[-1,1]]}', "podsToReplicas has the pair [-1,1]"),
    ('{"servicesToReplicas":[[1,-1]]}', "servicesToReplicas has the pair [1,-1]"),
    ('{"podsToReplicas":"many"}', "expected an array"),
    ('{"podsToReplicas":[["1",2]]}', "expected an integer"),
    ('{"podsToReplicas":[[1e30,2]]}', "expected an integer"),
    ('{"podsToReplicas":[[99999999999999999999,2]]}', "out of range"),
])
def test_ladder_hostile_values(value: str, message: str) -> None:
    with pytest.raises(ParamsError) as caught:
        parse_ladder(value)
    assert message in str(caught.value)
