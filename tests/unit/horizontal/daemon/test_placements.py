"""``targetPlacement`` in the poll: one GET of each workload per poll, per-target decisions
on the node store's per-placement totals, a target without a Pod template an invalid
ConfigMap naming it, and nothing of it without the key."""

from __future__ import annotations

import json
from typing import Any

from cpa.horizontal.cpa_flags import parse_args, validate
from cpa.horizontal.daemon.cpa_loop import Autoscaler
from cpa.horizontal.daemon.cpa_main import loop_config
from cpa.kube.targets import Target
from cpa.nodes.records import ALL_LABELS, NodeInfo
from cpa.nodes.store import NodeStore
from tests.fakes import FakeApi

NS = "kube-system"
CM = f"/api/v1/namespaces/{NS}/configmaps/params"
DEPLOY = f"/apis/apps/v1/namespaces/{NS}/deployments"
HPA = f"/apis/autoscaling/v2/namespaces/{NS}/horizontalpodautoscalers"
PER_NODE = {"nodesPerReplica": 1, "coresPerReplica": 100000}


def node(name: str, pool: str, taints: tuple[tuple[str, str, str], ...] = ()) -> NodeInfo:
    return NodeInfo(name, "1", False, True, "4", tuple(t[0] for t in taints),
                    labels=(("pool", pool),), taint_details=taints)


def cluster() -> NodeStore:
    store = NodeStore()
    for i in range(3):
        store.upsert(node(f"core-{i}", "core"))
    store.upsert(node("gpu-0", "gpu", (("gpu", "", "NoSchedule"),)))
    store.labels_listed(ALL_LABELS)  # as the reflector's list with every label would
    return store


def deployment(api: FakeApi, name: str, pod_spec: dict[str, Any]) -> None:
    api.put(f"{DEPLOY}/{name}", {"kind": "Deployment", "spec": {
        "replicas": 1, "template": {"spec": {"containers": [], **pod_spec}}}})
    api.add_scale(f"{DEPLOY}/{name}/scale", 1)


def make(api: FakeApi, store: NodeStore, targets: str) -> Autoscaler:
    opts = parse_args([f"--namespace={NS}", "--configmap=params", f"--target={targets}"], {})
    assert validate(opts) == []
    return Autoscaler(loop_config(opts), api, store.counts, count_by=store.set_policy,
                      placements=store)


def params(api: FakeApi, **extra: Any) -> None:
    api.set_configmap(CM, {"linear": json.dumps({**PER_NODE, **extra})})


def test_each_target_decides_on_its_own_nodes_with_one_get_per_workload() -> None:
    api, store = FakeApi(), cluster()
    deployment(api, "core", {"nodeSelector": {"pool": "core"}})
    deployment(api, "any", {"tolerations": [{"operator": "Exists"}]})
    params(api, targetPlacement=True)
    a = make(api, store, "deployment/core,deployment/any")
    result = a.poll_once()
    assert result.error is None, result.error
    assert api.replicas(f"{DEPLOY}/core/scale") == 3
    assert api.replicas(f"{DEPLOY}/any/scale") == 4
    assert {str(t): c.total_nodes for t, c in result.target_counts.items()} == {
        "deployment/core": 3, "deployment/any": 4}
    assert result.decisions[Target("deployment", "core")].replicas == 3
    api.calls.clear()
    a.poll_once()
    assert api.calls == [("GET", CM), ("GET", f"{DEPLOY}/core"), ("GET", f"{DEPLOY}/any"),
                         ("GET", f"{DEPLOY}/core/scale"), ("GET", f"{DEPLOY}/any/scale")]
    # the template edited (a rollout): the next poll counts the new placement
    deployment(api, "core", {"nodeSelector": {"pool": "gpu"}})
    api.add_scale(f"{DEPLOY}/core/scale", 3)
    a.poll_once()
    assert api.replicas(f"{DEPLOY}/core/scale") == 1  # min 1: the gpu Node is tainted


def test_without_the_key_no_workload_is_read_and_counts_are_the_clusters() -> None:
    api, store = FakeApi(), cluster()
    deployment(api, "core", {"nodeSelector": {"pool": "core"}})
    params(api)
    a = make(api, store, "deployment/core")
    result = a.poll_once()
    assert result.error is None and not result.target_counts and not result.decisions
    assert api.replicas(f"{DEPLOY}/core/scale") == 4
    assert ("GET", f"{DEPLOY}/core") not in api.calls
    assert store.label_key == ""
    # on, then off again: the store keeps no placement and lists without labels
    params(api, targetPlacement=True)
    a.poll_once()
    assert store.label_key == ALL_LABELS and api.replicas(f"{DEPLOY}/core/scale") == 3
    params(api)
    a.poll_once()
    assert store.placements == [] and store.label_key == ""
    assert api.replicas(f"{DEPLOY}/core/scale") == 4


def test_an_hpa_counts_by_its_scale_target_refs_template() -> None:
    api, store = FakeApi(), cluster()
    deployment(api, "dns", {"nodeSelector": {"pool": "core"}})
    api.put(f"{HPA}/dns", {"kind": "HorizontalPodAutoscaler", "spec": {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "dns"},
        "minReplicas": 1, "maxReplicas": 10}})
    params(api, targetPlacement=True)
    result = make(api, store, "hpa/dns").poll_once()
    assert result.error is None, result.error
    assert api.objects[f"{HPA}/dns"]["spec"]["minReplicas"] == 3


def test_a_target_without_a_pod_template_is_an_invalid_configmap_naming_it() -> None:
    api, store = FakeApi(), cluster()
    deployment(api, "core", {"nodeSelector": {"pool": "core"}})
    api.put(f"{HPA}/odd", {"kind": "HorizontalPodAutoscaler", "spec": {
        "scaleTargetRef": {"apiVersion": "example.com/v1", "kind": "Widget", "name": "w"},
        "maxReplicas": 10}})
    params(api, targetPlacement=True)
    result = make(api, store, "deployment/core,hpa/odd").poll_once()
    assert result.params_invalid is not None
    assert "targetPlacement" in result.params_invalid
    assert "horizontalpodautoscaler/odd" in result.params_invalid
    assert "Widget/w" in result.params_invalid
    assert api.replicas(f"{DEPLOY}/core/scale") == 1, "nothing written, no cluster-wide count"
    api.put(f"{DEPLOY}/bare", {"kind": "Deployment", "spec": {"replicas": 1}})
    api.add_scale(f"{DEPLOY}/bare/scale", 1)
    result = make(api, store, "deployment/bare").poll_once()
    assert result.params_invalid is not None
    assert "target deployment/bare has no Pod template" in result.params_invalid


def test_the_first_poll_waits_for_the_list_with_every_label() -> None:
    api, store = FakeApi(), NodeStore()
    store.upsert(NodeInfo("a", "1", False, True, "4"))
    deployment(api, "core", {})
    params(api, targetPlacement=True)
    result = make(api, store, "deployment/core").poll_once()
    assert result.error is not None and "not complete yet" in result.error
    assert api.replicas(f"{DEPLOY}/core/scale") == 1
