"""The poll loop with ``behavior`` (ours, opt-in), against the fake API of test_autoscaler.

What is checked: the window and the policies act on the target's current replicas across
polls, each target keeps its own history, the history survives ConfigMap edits but not the
removal of ``behavior``, and without ``behavior`` every write and every log field is as
before.
"""

from __future__ import annotations

from typing import Any

import pytest

from cpa import logs
from tests.fakes import FakeApi
from tests.unit.horizontal.daemon.test_autoscaler import (
    CM,
    COREDNS,
    counts,
    events,
    make,
    scale_path,
)

WINDOW = '"behavior":{"scaleDown":{"stabilizationWindowSeconds":600}}'


def linear(extra: str = "") -> dict[str, str]:
    return {"linear": '{"nodesPerReplica":1' + (f",{extra}" if extra else "") + "}"}


class Cluster:
    """A fake API with one or more targets, a settable node count and a settable clock."""

    def __init__(self, data: dict[str, str], *targets: str, replicas: int = 1) -> None:
        self.api = FakeApi()
        self.paths = [scale_path(kind + "s", name) for kind, name in
                      (t.split("/") for t in targets or ("deployment/coredns",))]
        for path in self.paths:
            self.api.add_scale(path, replicas)
        self.api.set_configmap(CM, data)
        self.nodes = 1
        self.now = 1000.0
        self.autoscaler = make(self.api, lambda: counts(self.nodes, self.nodes),
                               target=",".join(targets or ("deployment/coredns",)),
                               clock=lambda: self.now)

    def poll(self, nodes: int, at: float) -> Any:
        self.nodes, self.now = nodes, 1000.0 + at
        result = self.autoscaler.poll_once()
        assert result.error is None, result.error
        return result

    def replicas(self, path: str = COREDNS) -> int:
        return int(self.api.objects[path]["spec"]["replicas"])


def test_without_behavior_nothing_changes(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure(0, "json")
    cluster = Cluster(linear())
    for at, nodes in enumerate([5, 3, 5, 3]):
        result = cluster.poll(nodes, at * 10.0)
        assert result.behavior == {}
        assert cluster.replicas() == nodes  # flaps, as upstream does
    changed = events(capsys, "scale.changed")
    assert [(e["old"], e["new"]) for e in changed] == [(1, 5), (5, 3), (3, 5), (5, 3)]
    assert set(changed[0]) == {"event", "target", "old", "new", "mode", "nodes", "cores",
                               "total_nodes", "total_cores", "schedulable_nodes",
                               "schedulable_cores", "component", "level", "timestamp"}


def test_window_holds_scale_down_and_lets_scale_up_through(
        capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure(0, "json")
    cluster = Cluster(linear(WINDOW))
    cluster.poll(5, 0)
    assert cluster.replicas() == 5
    for at in (10, 20, 300, 599):
        result = cluster.poll(3, at)
        assert cluster.replicas() == 5, f"held at t={at}"
        outcome = result.behavior[result.scales[0].target]
        assert (outcome.desired, outcome.current, outcome.replicas) == (3, 5, 5)
    held = events(capsys, "scale.held")
    assert len(held) == 1, "a hold is logged once, not every poll"
    assert held[0]["replicas"] == 5 and held[0]["desired"] == 3
    assert "window 600 s" in held[0]["behavior"]
    cluster.poll(8, 605)
    assert cluster.replicas() == 8, "scale-up is not delayed"
    cluster.poll(3, 1000)
    assert cluster.replicas() == 8, "the 8 at t=605 is in the window"
    cluster.poll(3, 1205)
    assert cluster.replicas() == 3
    changed = events(capsys, "scale.changed")
    assert [(e["old"], e["new"]) for e in changed] == [(5, 8), (8, 3)]
    assert all("behavior" not in e for e in changed), "the formula's count: not shaped"


def test_policy_limited_writes_say_so(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure(0, "json")
    cluster = Cluster(linear('"behavior":{"scaleUp":{"policies":'
                             '[{"type":"Pods","value":2,"periodSeconds":60}]}}'))
    seen = [cluster.replicas()]
    for at in range(0, 190, 30):
        cluster.poll(9, float(at))
        seen.append(cluster.replicas())
    assert seen == [1, 3, 3, 5, 5, 7, 7, 9]
    changed = events(capsys, "scale.changed")
    assert changed[0]["desired"] == 9 and changed[0]["new"] == 3
    assert changed[0]["behavior"] == "scaleUp policies allow 3"
    assert "behavior" not in changed[-1], "the last step reaches the formula's count"


def test_each_target_is_limited_from_its_own_replicas() -> None:
    cluster = Cluster(linear('"behavior":{"scaleDown":{"policies":'
                             '[{"type":"Pods","value":1,"periodSeconds":60}]}}'),
                      "deployment/a", "statefulset/b", replicas=10)
    a, b = cluster.paths
    cluster.api.objects[b]["spec"]["replicas"] = 6  # someone else set b
    cluster.poll(2, 0)
    assert (cluster.replicas(a), cluster.replicas(b)) == (9, 5)
    cluster.poll(2, 30)
    assert (cluster.replicas(a), cluster.replicas(b)) == (9, 5), "one per 60 s each"
    cluster.poll(2, 61)
    assert (cluster.replicas(a), cluster.replicas(b)) == (8, 4)


def test_history_survives_edits_but_not_removal() -> None:
    cluster = Cluster(linear(WINDOW))
    cluster.poll(5, 0)
    cluster.poll(3, 10)
    assert cluster.replicas() == 5
    # A longer window (or a mode switch) is judged against the same history: still held.
    cluster.api.set_configmap(CM, {"ladder": '{"nodesToReplicas":[[0,0],[2,3]],"behavior":'
                                         '{"scaleDown":{"stabilizationWindowSeconds":900}}}'})
    cluster.poll(3, 700)
    assert cluster.replicas() == 5, "the 5 from t=0 is inside the new 900 s window"
    cluster.poll(3, 901)
    assert cluster.replicas() == 3
    # Without behavior: upstream's decision, and the history is gone.
    cluster.poll(6, 910)
    cluster.api.set_configmap(CM, linear())
    cluster.poll(2, 920)
    assert cluster.replicas() == 2
    cluster.api.set_configmap(CM, linear(WINDOW))
    cluster.poll(1, 930)
    assert cluster.replicas() == 1, "no history of the 6 from before the removal"


def test_a_conflict_retry_shapes_from_the_fresh_count() -> None:
    cluster = Cluster(linear('"behavior":{"scaleUp":{"policies":'
                             '[{"type":"Pods","value":1,"periodSeconds":60}]}}'))
    cluster.api.conflicts[COREDNS] = 1
    result = cluster.poll(9, 0)
    assert cluster.replicas() == 2
    assert cluster.api.calls.count(("GET", COREDNS)) == 2
    state = cluster.autoscaler.behavior.state(result.scales[0].target)
    assert state is not None
    assert state.recommendations == [(1000.0, 9)], "one recommendation per poll"
    assert state.scale_up_events == [(1000.0, 1)]


def test_a_failed_write_is_not_counted_as_a_change() -> None:
    cluster = Cluster(linear('"behavior":{"scaleUp":{"policies":'
                             '[{"type":"Pods","value":1,"periodSeconds":60}]}}'))
    cluster.api.conflicts[COREDNS] = 2
    cluster.nodes, cluster.now = 9, 1000.0
    assert cluster.autoscaler.poll_once().error is not None
    assert cluster.replicas() == 1
    cluster.poll(9, 10)
    assert cluster.replicas() == 2, "the failed write used none of the period's allowance"
