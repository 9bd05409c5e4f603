"""``zones`` (ours, opt-in): parsing, the decision's zone steps, how they meet min, max,
maxReplicasPerNode and behavior, and what explain and simulate make of them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cpa.go.json import parse
from cpa.horizontal.decide.behavior import BehaviorState, apply, parse_behavior
from cpa.horizontal.decide.decision import decide
from cpa.horizontal.decide.params import ParamsError
from cpa.horizontal.decide.zones import DEFAULT_TOPOLOGY_KEY, Zones
from cpa.nodes.counts import DEFAULT_POLICY, ClusterCounts, CountingPolicy
from cpa.tools.explain import explain_main
from cpa.tools.simulate import simulate_main
from tests.unit.configured import parse_ladder, parse_linear


def counts(nodes: int, zones: int | None, sched_nodes: int | None = None,
           sched_zones: int | None = None, cores: int = 0) -> ClusterCounts:
    return ClusterCounts(nodes, cores, nodes if sched_nodes is None else sched_nodes, cores,
                         total_zones=zones,
                         schedulable_zones=zones if sched_zones is None else sched_zones)


# --- parsing ------------------------------------------------------------------------------


def test_absent_is_upstreams_decision() -> None:
    params = parse_linear('{"nodesPerReplica":16}')
    assert params.shared.zones is None and "zones" not in params.fields()
    assert params.shared.policy() is DEFAULT_POLICY
    plain = decide(params, counts(40, None))
    assert not any(s.key.startswith("zones.") for s in plain.steps)
    assert (plain.replicas, plain.floor, plain.zones, plain.error) == (3, 0, None, None)


def test_defaults_and_go_json_rules() -> None:
    assert parse_linear('{"nodesPerReplica":16,"zones":{}}').shared.zones == Zones()
    params = parse_ladder('{"nodesToReplicas":[[1,1]],"ZONES":{"TopologyKey":"x/y",'
                          '"minperzone":2,"roundUpToZones":true},"zones":{"minPerZone":null}}')
    # The repeated key decodes over the earlier one; null resets minPerZone to its default.
    assert params.shared.zones == Zones("x/y", 1, True)
    assert params.fields()["zones"] == {"topologyKey": "x/y", "minPerZone": 1,
                                        "roundUpToZones": True}
    assert params.shared.policy() == CountingPolicy(zone_key="x/y")
    assert parse_linear('{"nodesPerReplica":1,"zones":null}').shared.zones is None
    with_counting = parse_linear('{"nodesPerReplica":1,"zones":{},'
                                 '"excludeNodesWithTaints":["vk"]}')
    assert with_counting.shared.policy() == CountingPolicy(frozenset({"vk"}), None,
                                                           DEFAULT_TOPOLOGY_KEY)


@pytest.mark.parametrize(("zones", "message"), [
    ('"a"', "expected a JSON object"),
    ('{"minPerZone":1.5}', "expected an integer"),
    ('{"minPerZone":-1}', "zones.minPerZone is -1; it must be between 0 and 1000"),
    ('{"minPerZone":1001}', "between 0 and 1000"),
    ('{"roundUpToZones":"yes"}', "expected true or false"),
    ('{"topologyKey":""}', 'zones.topologyKey is the string ""; it must be a Node label key'),
    ('{"topologyKey":"a b"}', "must be a Node label key"),
    ('{"topologyKey":"Bad_Prefix/zone"}', "must be a Node label key"),
    ('{"topologyKey":7}', "expected a string"),
])
def test_invalid_zones_make_the_configmap_invalid(zones: str, message: str) -> None:
    with pytest.raises(ParamsError, match=message):
        parse_linear('{"nodesPerReplica":16,"zones":' + zones + "}")


# --- the decision ---------------------------------------------------------------------------


def test_the_floor_and_the_round_up_follow_the_formula() -> None:
    params = parse_linear('{"nodesPerReplica":16,"preventSinglePointFailure":true,'
                          '"includeUnschedulableNodes":true,"zones":{"minPerZone":1}}')
    d = decide(params, counts(6, 3))  # the formula gives 2 (the single-point floor)
    assert (d.replicas, d.floor, d.zones) == (3, 3, 3)
    keys = [s.key for s in d.steps]
    assert keys[-3:] == ["winner", "zones.count", "zones.floor"]
    assert "raised to 3" in d.steps[-1].text
    d = decide(params, counts(80, 3))  # 5 by the formula: above the floor
    assert (d.replicas, d.floor) == (5, 3) and "already" in d.steps[-1].text

    rounded = parse_linear('{"nodesPerReplica":16,"includeUnschedulableNodes":true,'
                           '"zones":{"roundUpToZones":true}}')
    d = decide(rounded, counts(80, 3))
    assert d.replicas == 6 and d.steps[-1].key == "zones.round_up"
    assert "rounds 5 up to 6, the next multiple of 3, so every zone can hold 2" \
        in d.steps[-1].text
    assert decide(rounded, counts(96, 3)).replicas == 6  # already a multiple
    assert decide(rounded, counts(0, 0)).replicas == 1  # no Node, no zone: the formula's


def test_the_floor_goes_above_max_and_min_is_applied_first() -> None:
    params = parse_linear('{"nodesPerReplica":16,"min":2,"max":2,'
                          '"includeUnschedulableNodes":true,"zones":{"minPerZone":2}}')
    d = decide(params, counts(10, 3))
    assert d.replicas == 6, "minPerZone x zones is a floor, like preventSinglePointFailure"
    assert "after the formula's min and max" in d.steps[-1].text


def test_max_replicas_per_node_still_caps_and_lowers_the_floor() -> None:
    params = parse_linear('{"nodesPerReplica":1,"includeUnschedulableNodes":true,'
                          '"maxReplicasPerNode":1,"zones":{"minPerZone":2}}')
    d = decide(params, counts(3, 3))
    assert (d.replicas, d.floor) == (3, 3), "replicas no Node can run are never asked for"
    assert [s.key for s in d.steps][-3:] == ["zones.count", "zones.floor",
                                             "counting.replicas_per_node"]


def test_schedulable_zones_unless_include_unschedulable_nodes() -> None:
    params = parse_ladder('{"nodesToReplicas":[[0,0]],"zones":{}}')  # a ladder may give 0
    d = decide(params, counts(9, 3, sched_nodes=4, sched_zones=2))
    assert (d.replicas, d.zones) == (2, 2)
    included = parse_ladder('{"nodesToReplicas":[[0,0]],"includeUnschedulableNodes":true,'
                            '"zones":{}}')
    assert decide(included, counts(9, 3, sched_nodes=4, sched_zones=2)).replicas == 3


def test_zones_not_counted_yet_is_an_error_and_nothing_is_written() -> None:
    params = parse_linear('{"nodesPerReplica":16,"zones":{}}')
    d = decide(params, counts(6, None))
    assert d.error is not None and "not counted yet" in d.error
    assert d.steps[-1].key == "zones.count" and "nothing is written" in d.steps[-1].text


# --- behavior ------------------------------------------------------------------------------


def test_the_zone_floor_is_enforced_past_a_behavior() -> None:
    behavior = parse_behavior(parse('{"scaleUp":{"stabilizationWindowSeconds":600,'
                                    '"policies":[{"type":"Pods","value":1,"periodSeconds":60}]}}'))
    state = BehaviorState()
    held = apply(behavior, state, 2, 2, 0.0)
    assert held.replicas == 2
    # A fourth zone appears: the floor is 4, the formula's count too; the window and the
    # 1-pod policy would give 3 at most (2 now) but the floor is raised at once.
    outcome = apply(behavior, state, 4, 2, 10.0, floor=4)
    assert outcome.replicas == 4 and not outcome.shaped
    assert [s.key for s in outcome.steps][-2:] == ["behavior.floor", "behavior.result"]
    assert "zone floor is 4" in outcome.steps[-2].text
    assert apply(behavior, BehaviorState(), 4, 2, 10.0).replicas == 3, "without: 1 pod/min"
    # Above the floor the behavior shapes the rest as before: round-up to 6 from 2.
    state = BehaviorState()
    apply(behavior, state, 2, 2, 0.0)
    outcome = apply(behavior, state, 6, 2, 10.0, floor=4)
    assert outcome.replicas == 4 and outcome.reason == "zone floor 4"
    assert apply(behavior, BehaviorState(), 6, 5, 0.0, floor=4).replicas == 6


# --- explain and simulate -------------------------------------------------------------------

ZONED = json.dumps({"linear": json.dumps({"nodesPerReplica": 16, "includeUnschedulableNodes":
                                          True, "zones": {"roundUpToZones": True}})})


def test_explain_shows_each_zone_step(capsys: pytest.CaptureFixture[str]) -> None:
    assert explain_main(["--data", ZONED, "--nodes", "40", "--cores", "160", "--zones", "3",
                         "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["replicas"] == 3 and doc["zone_floor"] == 3
    assert doc["counts"]["total_zones"] == doc["counts"]["schedulable_zones"] == 3
    assert [s["key"] for s in doc["steps"] if s["key"].startswith("zones.")] == [
        "zones.count", "zones.floor", "zones.round_up"]
    assert explain_main(["--data", ZONED, "--nodes", "40", "--cores", "160"]) == 1
    assert "give --zones N" in capsys.readouterr().err
    assert explain_main(["--data", ZONED, "--nodes", "40", "--cores", "160", "--zones",
                         "4"]) == 0
    text = capsys.readouterr().out
    assert "The Nodes are in 4 zones" in text and "=> 4 replicas" in text


def test_explain_without_zones_prints_what_it_printed(capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    plain = json.dumps({"linear": '{"nodesPerReplica":16}'})
    assert explain_main(["--data", plain, "--nodes", "40", "--cores", "160", "-o",
                         "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert "zone_floor" not in doc and "total_zones" not in doc["counts"]


def test_simulate_takes_a_zones_column(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    timeline = tmp_path / "t.csv"
    timeline.write_text("t,nodes,cores,zones\n0,20,80,2\n60,20,80,3\n120,40,160,3\n")
    assert simulate_main(["--timeline", str(timeline), "--data", ZONED, "-o", "json"]) == 0
    steps = json.loads(capsys.readouterr().out)["steps"]
    assert [(s["zones"], s["desired"]) for s in steps] == [(2, 2), (3, 3), (3, 3)]
    assert simulate_main(["--timeline", str(timeline), "--data", ZONED]) == 0
    assert capsys.readouterr().out.splitlines()[0].split()[:4] == ["t", "nodes", "zones",
                                                                  "cores"]
    bare = tmp_path / "bare.csv"
    bare.write_text("t,nodes,cores\n0,20,80\n")
    assert simulate_main(["--timeline", str(bare), "--data", ZONED]) == 1
    assert "give the timeline a zones column" in capsys.readouterr().err
    odd = tmp_path / "odd.csv"
    odd.write_text("t,nodes,cores,zones,schedulable_zones\n0,20,80,2,3\n")
    assert simulate_main(["--timeline", str(odd), "--data", ZONED]) == 1
    assert "schedulable_zones 3 is more than zones 2" in capsys.readouterr().err
    plain = json.dumps({"linear": '{"nodesPerReplica":16}'})
    assert simulate_main(["--timeline", str(bare), "--data", plain, "-o", "json"]) == 0
    assert "zones" not in json.loads(capsys.readouterr().out)["steps"][0]
