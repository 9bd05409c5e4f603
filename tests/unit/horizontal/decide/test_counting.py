"""Smarter node counting (ours, opt-in): the keys' parsing, the policy, the decision step."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest

from cpa.horizontal.decide.counting import NO_COUNTING, PRESETS, Counting, expand_taints
from cpa.horizontal.decide.decision import decide
from cpa.horizontal.decide.modes.registry import parse_configmap_data
from cpa.horizontal.decide.params import ParamsError
from cpa.nodes.counts import DEFAULT_POLICY, ClusterCounts, CountingPolicy
from tests.unit.configured import parse_ladder, parse_linear

KUBE_DNS = '"coresPerReplica":256,"nodesPerReplica":16,"preventSinglePointFailure":true'


def linear(extra: str) -> str:
    return "{" + KUBE_DNS + ("," + extra if extra else "") + "}"


def test_absent_keys_are_upstreams_counting() -> None:
    params = parse_linear(linear(""))
    assert params.shared.counting == NO_COUNTING and not params.shared.counting.active
    assert params.shared.counting.policy() is DEFAULT_POLICY
    assert "excludeNodesWithTaints" not in params.fields()


def test_the_three_keys_in_linear_and_ladder() -> None:
    extra = ('"excludeNodesWithTaints":["virtual-kubelet.io/provider","x"],'
             '"maxCoresPerNode":64,"maxReplicasPerNode":1.5')
    for params in (parse_linear(linear(extra)),
                   parse_ladder('{"nodesToReplicas":[[1,1]],' + extra + "}")):
        c = params.shared.counting
        assert c == Counting(("virtual-kubelet.io/provider", "x"), 64.0, 1.5)
        assert c.policy() == CountingPolicy(frozenset({"virtual-kubelet.io/provider", "x"}),
                                            64_000)
        assert params.fields()["maxCoresPerNode"] == 64.0
    assert Counting(max_cores_per_node=0.5).policy().max_millicores_per_node == 500
    assert Counting(max_cores_per_node=1e-4).policy().max_millicores_per_node == Fraction(1, 10)


def test_go_json_rules_apply_to_the_new_keys_too() -> None:
    # case-insensitive keys, null resets, last duplicate wins
    params = parse_linear(linear('"MAXCORESPERNODE":8,"maxcorespernode":null,'
                                 '"excludenodeswithtaints":["a"]'))
    assert params.shared.counting == Counting(("a",), None, None)


@pytest.mark.parametrize(("extra", "message"), [
    ('"excludeNodesWithTaints":"virtual-kubelet.io/provider"', "expected an array of taint keys"),
    ('"excludeNodesWithTaints":[1]', "expected a string"),
    ('"excludeNodesWithTaints":[""]', "empty taint key"),
    ('"maxCoresPerNode":0', "maxCoresPerNode is 0; it must be positive"),
    ('"maxCoresPerNode":"64"', "expected a number"),
    ('"maxReplicasPerNode":-1', "maxReplicasPerNode is -1; it must be positive"),
    ('"maxReplicasPerNode":1e400', "out of range"),
])
def test_invalid_keys_make_the_configmap_invalid(extra: str, message: str) -> None:
    with pytest.raises(ParamsError, match=message):
        parse_linear(linear(extra))


def counts(nodes: int, cores: int, excluded: int | None = None,
           capped: int | None = None) -> ClusterCounts:
    return ClusterCounts(nodes, cores, nodes, cores, excluded, capped)


def test_decision_steps_and_the_replicas_per_node_cap() -> None:
    data = {"linear": json.dumps({"nodesPerReplica": 1, "includeUnschedulableNodes": True,
                                  "excludeNodesWithTaints": ["vk"], "maxCoresPerNode": 64,
                                  "maxReplicasPerNode": 1})}
    params = parse_configmap_data(data)
    decision = decide(params, counts(3, 24, excluded=1, capped=0))
    keys = [s.key for s in decision.steps]
    assert keys[:3] == ["counts.total", "counting.exclude", "counting.cap"]
    assert "leaves 1 Node out" in decision.steps[1].text
    assert decision.replicas == 3 and keys[-1] == "counting.replicas_per_node"

    capped = parse_configmap_data({"linear": json.dumps(
        {"coresPerReplica": 1, "includeUnschedulableNodes": True, "maxReplicasPerNode": 2})})
    decision = decide(capped, counts(3, 100))
    assert decision.replicas == 6
    assert "lowered to 6" in decision.steps[-1].text
    assert decide(capped, counts(0, 0)).replicas == 1, "never below 1"


def test_counts_given_by_hand_are_taken_as_counted() -> None:
    params = parse_linear(linear('"excludeNodesWithTaints":["vk"],"maxCoresPerNode":8'))
    decision = decide(params, counts(16, 128))
    texts = [s.text for s in decision.steps if s.key.startswith("counting.")]
    assert all("taken as counted already" in t for t in texts) and len(texts) == 2


def test_without_the_keys_the_decision_is_unchanged() -> None:
    """Same replicas and the very same steps as before the keys existed."""
    plain = parse_linear(linear(""))
    for cluster in (counts(1, 4), counts(16, 128), counts(3000, 96_000)):
        decision = decide(plain, cluster)
        assert not any(s.key.startswith("counting.") for s in decision.steps)


def test_the_lifecycle_preset_expands_to_the_projects_taints() -> None:
    params = parse_linear(linear('"excludeNodesWithTaints":["@lifecycle","vk",'
                                 '"karpenter.sh/disrupted"]'))
    counting = params.shared.counting
    assert counting.exclude_taints == ("@lifecycle", "vk", "karpenter.sh/disrupted")
    assert params.fields()["excludeNodesWithTaints"] == ["@lifecycle", "vk",
                                                         "karpenter.sh/disrupted"]
    keys = expand_taints(counting.exclude_taints)
    assert keys == (*PRESETS["@lifecycle"], "vk"), "in order, each key once"
    assert counting.policy().exclude_taints == frozenset(keys)
    assert set(PRESETS["@lifecycle"]) == {
        "ToBeDeletedByClusterAutoscaler", "karpenter.sh/disrupted", "karpenter.sh/disruption",
        "karpenter.sh/unregistered", "node.cloudprovider.kubernetes.io/uninitialized",
        "node.cloudprovider.kubernetes.io/shutdown"}
    step = decide(params, counts(3, 12, excluded=2)).steps[1]
    assert step.key == "counting.exclude"
    assert step.text.startswith(
        "excludeNodesWithTaints (@lifecycle = ToBeDeletedByClusterAutoscaler + "
        "karpenter.sh/disrupted + ")
    assert "node.cloudprovider.kubernetes.io/shutdown, vk, karpenter.sh/disrupted) leaves " \
           "2 Nodes out" in step.text


def test_an_unknown_preset_makes_the_configmap_invalid() -> None:
    with pytest.raises(ParamsError, match="unknown preset '@lifecyle'; the presets are "
                                          "@lifecycle"):
        parse_linear(linear('"excludeNodesWithTaints":["@lifecyle"]'))
