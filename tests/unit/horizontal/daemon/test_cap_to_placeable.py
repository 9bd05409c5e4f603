"""``capToPlaceable`` in the poll: the count written capped after every other step (min,
behavior) at the Nodes the Pods can be placed on, or only reported; the gauge, the Event
and the log line once per change; nothing of it without the key."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cpa import logs
from cpa.horizontal.cpa_flags import parse_args, validate
from cpa.horizontal.daemon.cpa_events import EventRecorder
from cpa.horizontal.daemon.cpa_loop import Autoscaler
from cpa.horizontal.daemon.cpa_main import loop_config
from cpa.horizontal.daemon.cpa_metrics import Metrics
from cpa.kube.api import ApiError
from cpa.kube.targets import Target
from cpa.nodes.records import ALL_LABELS, NodeInfo
from cpa.nodes.store import NodeStore
from cpa.tools.explain import explain_main
from tests.fakes import FakeApi
from tests.unit.horizontal.daemon.test_metrics import value

NS = "kube-system"
CM = f"/api/v1/namespaces/{NS}/configmaps/params"
DEPLOY = f"/apis/apps/v1/namespaces/{NS}/deployments"
HOST = "kubernetes.io/hostname"
DNS = Target("deployment", "coredns")
ANTI = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchLabels": {"k8s-app": "kube-dns"}}, "topologyKey": HOST}]}}


def cluster(nodes: int) -> NodeStore:
    store = NodeStore()
    for i in range(nodes):
        store.upsert(NodeInfo(f"n{i}", "1", False, True, "4", (),
                              labels=((HOST, f"n{i}"),), taint_details=()))
    store.labels_listed(ALL_LABELS)
    return store


def deployment(api: FakeApi, affinity: dict[str, Any] | None = ANTI, replicas: int = 1) -> None:
    spec: dict[str, Any] = {"containers": []}
    if affinity is not None:
        spec["affinity"] = affinity
    api.put(f"{DEPLOY}/coredns", {"kind": "Deployment", "spec": {
        "replicas": replicas, "template": {"metadata": {"labels": {"k8s-app": "kube-dns"}},
                                           "spec": spec}}})
    api.add_scale(f"{DEPLOY}/coredns/scale", replicas)


def make(api: FakeApi, store: NodeStore, *extra: str) -> Autoscaler:
    opts = parse_args([f"--namespace={NS}", "--configmap=params", "--target=deployment/coredns",
                       *extra], {})
    assert validate(opts) == []
    return Autoscaler(loop_config(opts), api, store.counts, count_by=store.set_policy,
                      placements=store)


def params(api: FakeApi, **extra: Any) -> None:
    api.set_configmap(CM, {"linear": json.dumps({"nodesPerReplica": 1, "coresPerReplica": 1e6,
                                                 **extra})})


def logged(capsys: pytest.CaptureFixture[str], name: str) -> list[dict[str, Any]]:
    return [doc for line in capsys.readouterr().err.splitlines() if line.startswith("{")
            for doc in [json.loads(line)] if doc["event"] == name]


@pytest.mark.parametrize(("cap", "extra", "nodes", "written", "unplaceable"), [
    (True, {"min": 5}, 3, 3, 2),  # min asks for more than the Nodes: capped after it
    (True, {}, 3, 3, 0),  # one per Node fits
    ("report", {"min": 5}, 3, 5, 2),  # only reported
    (False, {"min": 5}, 3, 5, None),  # upstream's
    (True, {"max": 2}, 3, 2, 0),  # max below the room: nothing to cap
    (True, {"min": 4}, 0, 1, 4),  # no Node at all: never below one replica
])
def test_the_cap_comes_last(cap: object, extra: dict[str, Any], nodes: int, written: int,
                            unplaceable: int | None) -> None:
    api, store = FakeApi(), cluster(nodes)
    deployment(api)
    params(api, capToPlaceable=cap, **extra)
    metrics = Metrics([DNS])
    a = make(api, store)
    a.add_observer(metrics.observe)
    result = a.poll_once()
    assert result.error is None, result.error
    assert api.replicas(f"{DEPLOY}/coredns/scale") == written
    text = metrics.exposition().decode()
    series = 'cpa_target_unplaceable_replicas{target="deployment/coredns"}'
    if unplaceable is None:
        assert "cpa_target_unplaceable_replicas{" not in text
        assert ("GET", f"{DEPLOY}/coredns") not in api.calls, "no template read without it"
    else:
        assert value(text, series) == unplaceable


def test_after_behavior_too() -> None:
    api, store = FakeApi(), cluster(3)
    deployment(api, replicas=1)
    params(api, min=6, capToPlaceable=True,
           behavior={"scaleUp": {"policies": [{"type": "Pods", "value": 4,
                                               "periodSeconds": 60}]}})
    result = make(api, store).poll_once()
    assert result.error is None, result.error
    outcome = result.placeable[DNS]
    assert (outcome.wanted, outcome.replicas) == (5, 3), "behavior's 1+4, then the cap"


def test_without_self_anti_affinity_nothing_is_capped() -> None:
    api, store = FakeApi(), cluster(3)
    other = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "other"}}, "topologyKey": HOST}]}}
    deployment(api, other)
    params(api, min=5, capToPlaceable=True)
    result = make(api, store).poll_once()
    assert api.replicas(f"{DEPLOY}/coredns/scale") == 5
    assert result.placeable == {}


def test_a_log_line_and_an_event_once_per_change(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure(0, "json")
    api, store = FakeApi(), cluster(3)
    deployment(api)
    params(api, min=5, capToPlaceable=True)
    a = make(api, store)
    events = EventRecorder(api, NS, "params", "cpa-0")
    a.add_observer(events.observe)
    capsys.readouterr()
    a.poll_once()
    a.poll_once()
    lines = logged(capsys, "scale.unplaceable")
    assert [(d["wanted"], d["placeable"], d["replicas"], d["mode"]) for d in lines] == [
        (5, 3, 3, "cap")]
    warned = [b for _, b in api.created if b.get("reason") == "ReplicasCapped"]
    assert len(warned) == 1 and warned[0]["type"] == "Warning"
    assert warned[0]["regarding"]["name"] == "coredns"
    assert warned[0]["note"] == ("5 replicas wanted, but a required anti-affinity of the Pods "
                                 f"against each other on {HOST} lets them be placed on 3 "
                                 "only: capped to 3")
    store.upsert(NodeInfo("n3", "1", False, True, "4", (), labels=((HOST, "n3"),),
                          taint_details=()))
    a.poll_once()  # a fourth Node: 4 of 5, a new number
    assert [d["placeable"] for d in logged(capsys, "scale.unplaceable")] == [4]
    store.upsert(NodeInfo("n4", "1", False, True, "4", (), labels=((HOST, "n4"),),
                          taint_details=()))
    a.poll_once()  # all five fit: said once
    assert [d["replicas"] for d in logged(capsys, "scale.placeable")] == [5]
    a.poll_once()
    assert logged(capsys, "scale.placeable") == []
    assert api.replicas(f"{DEPLOY}/coredns/scale") == 5
    assert len([b for _, b in api.created if b.get("reason") == "ReplicasCapped"]) == 2


class NoWorkloadReads(FakeApi):
    """An API server whose RBAC grants the scale but not ``get`` on the Deployment."""

    def get_json(self, path: str, query: Any = None, *,
                 deadline: float | None = None) -> dict[str, Any]:
        if path == f"{DEPLOY}/coredns":
            raise ApiError(403, "Forbidden", "deployments.apps is forbidden")
        return super().get_json(path, query, deadline=deadline)


def test_the_templates_rbac_rule_is_named_on_403() -> None:
    api, store = NoWorkloadReads(), cluster(3)
    deployment(api)
    params(api, capToPlaceable=True)
    result = make(api, store).poll_once()
    assert result.error is not None
    assert ("capToPlaceable reads the Pod template of Deployment kube-system/coredns and may "
            "not: add the RBAC rule apiGroups [apps] resources [deployments] verbs [get]"
            ) in result.error
    assert api.replicas(f"{DEPLOY}/coredns/scale") == 1, "nothing written"


def test_with_target_placement_the_room_is_the_templates_own_nodes() -> None:
    api, store = FakeApi(), NodeStore()
    for i in range(4):
        store.upsert(NodeInfo(f"n{i}", "1", False, True, "4", (), labels=(
            (HOST, f"n{i}"), ("pool", "core" if i < 2 else "other")), taint_details=()))
    store.labels_listed(ALL_LABELS)
    deployment(api, {**ANTI, "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["core"]}]}]}}})
    params(api, min=3, capToPlaceable=True, targetPlacement=True)
    result = make(api, store).poll_once()
    assert result.error is None, result.error
    assert result.target_counts[DNS].total_nodes == 2
    assert api.replicas(f"{DEPLOY}/coredns/scale") == 2
    # the same placement without targetPlacement: counts are the cluster's, the room the same
    params(api, min=3, capToPlaceable="report")
    result = make(api, store).poll_once()
    assert result.target_counts == {}
    outcome = result.placeable[DNS]  # 4 Nodes counted: 4 wanted, 2 placeable, 4 written
    assert (outcome.room.domains, outcome.replicas, outcome.unplaceable) == (2, 4, 2)


def test_explain_without_the_cluster_says_the_cap_is_not_judged(
        capsys: pytest.CaptureFixture[str]) -> None:
    data = json.dumps({"linear": json.dumps({"nodesPerReplica": 1, "capToPlaceable": True})})
    assert explain_main(["--data", data, "--nodes", "3", "--cores", "12"]) == 0
    out = capsys.readouterr().out
    assert out.rstrip().endswith("capToPlaceable: not judged here; --from-cluster --target "
                                 "KIND/NAME reads the Pod template's anti-affinity and the "
                                 "Nodes its Pods can be placed on.")
    assert explain_main(["--data", data, "--nodes", "3", "--cores", "12", "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["replicas"] == 3 and "not judged" in doc["placeable"]["note"]
