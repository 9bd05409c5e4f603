"""``targetPlacement`` with the real daemon on the real API server: Nodes in two pools (one
labelled, one labelled and tainted) and a spare Node; a Deployment pinned by a
``nodeSelector``, one by a required node affinity, one tolerating the pool's taint and an
HPA floor over the first; each target's replicas follow its own Nodes, an edited template
moves its count within two polls, and without the key every count is upstream's again."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.controlplane import ControlPlane
from tests.controlplane.client import AdminClient
from tests.integration.support import (
    create_configmap,
    create_workload,
    explain_json,
    node_object,
    put_configmap_data,
    replicas,
    service_account,
    wait_polls,
    wait_replicas,
    wait_until,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

CM = "placement-params"
PER_NODE = {"nodesPerReplica": 1, "coresPerReplica": 100000, "min": 1}
GPU_TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
READ_WORKLOADS = {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"]}
HPA_FLOOR = {"apiGroups": ["autoscaling"], "resources": ["horizontalpodautoscalers"],
             "verbs": ["get", "patch"]}
DEPLOYMENTS = "/apis/apps/v1/namespaces/{ns}/deployments/{name}"


def add_node(admin: AdminClient, name: str, labels: dict[str, str],
             taints: list[dict[str, str]] | None = None) -> None:
    node = node_object(name, "4", labels=labels)
    if taints:
        node["spec"]["taints"] = taints
    admin.post("/api/v1/nodes", node)


def pin(admin: AdminClient, namespace: str, name: str, pod_spec: dict[str, Any]) -> None:
    """Merge ``pod_spec`` into the Deployment's Pod template (a rollout's edit)."""
    admin.patch(DEPLOYMENTS.format(ns=namespace, name=name),
                {"spec": {"template": {"spec": pod_spec}}})


def create_hpa(admin: AdminClient, namespace: str, name: str, target: str) -> None:
    admin.post(f"/apis/autoscaling/v2/namespaces/{namespace}/horizontalpodautoscalers", {
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                    "name": target},
                 "minReplicas": 1, "maxReplicas": 50}})


def hpa_floor(admin: AdminClient, namespace: str, name: str) -> int:
    path = f"/apis/autoscaling/v2/namespaces/{namespace}/horizontalpodautoscalers/{name}"
    return int(admin.get(path)["spec"]["minReplicas"])


def test_each_target_counts_the_nodes_its_template_fits(
        controlplane: ControlPlane, namespace: str, no_nodes: None, start: Any) -> None:
    admin = controlplane.admin()
    for i in range(3):
        add_node(admin, f"core-{i}", {"pool": "core"})
    for i in range(2):
        add_node(admin, f"gpu-{i}", {"pool": "gpu"}, [GPU_TAINT])
    add_node(admin, "spare-0", {"pool": "spare"})
    # A soft taint never keeps a Pod off: the spare Node counts for every target.
    admin.patch("/api/v1/nodes/spare-0", {"spec": {"taints": [
        {"key": "soft", "effect": "PreferNoSchedule"}]}})
    for name in ("selected", "affine", "tolerant", "floored"):
        create_workload(admin, namespace, "deployment", name)
    pin(admin, namespace, "selected", {"nodeSelector": {"pool": "core"}})
    pin(admin, namespace, "affine", {"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "pool", "operator": "NotIn", "values": ["core"]}]}]}}}})
    pin(admin, namespace, "tolerant", {"tolerations": [
        {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]})
    pin(admin, namespace, "floored", {"nodeSelector": {"pool": "gpu"}, "tolerations": [
        {"operator": "Exists"}]})
    create_hpa(admin, namespace, "floored", "floored")
    targets = "deployment/selected,deployment/affine,deployment/tolerant,hpa/floored"

    # Without the key: upstream's count, 6 Nodes for every target.
    create_configmap(admin, namespace, CM, {"linear": json.dumps(PER_NODE)})
    kubeconfig = service_account(controlplane, namespace, "placed", [READ_WORKLOADS, HPA_FLOOR])
    proc = start(f"--namespace={namespace}", f"--configmap={CM}", f"--target={targets}",
                 kubeconfig=kubeconfig)
    for name in ("selected", "affine", "tolerant"):
        wait_replicas(admin, namespace, "deployment", name, 6, proc=proc)
    wait_until("the HPA floor at 6", lambda: hpa_floor(admin, namespace, "floored") == 6)
    assert not any(k.startswith("cpa_target_nodes") for k in proc.metrics())

    put_configmap_data(admin, namespace, CM, {"linear": json.dumps(
        {**PER_NODE, "targetPlacement": True})})
    # selected: the 3 core Nodes; affine: the spare one (the gpu pool's taint is not
    # tolerated); tolerant: all 6; floored: its Deployment's 2 gpu Nodes.
    wait_replicas(admin, namespace, "deployment", "selected", 3, proc=proc)
    wait_replicas(admin, namespace, "deployment", "affine", 1, proc=proc)
    wait_replicas(admin, namespace, "deployment", "tolerant", 6, proc=proc)
    wait_until("the HPA floor at 2", lambda: hpa_floor(admin, namespace, "floored") == 2)
    metrics = proc.metrics()
    assert metrics['cpa_target_nodes{set="all",target="deployment/selected"}'] == 3
    assert metrics['cpa_target_nodes{set="schedulable",target="deployment/affine"}'] == 1
    assert metrics['cpa_target_nodes{set="all",target="horizontalpodautoscaler/floored"}'] == 2
    assert metrics['cpa_cluster_nodes{scope="all"}'] == 6, "the cluster's count unchanged"
    assert proc.events("nodes.relist_for_label")[-1]["label"] == "*"

    # An edited template moves its count within two polls.
    wait_polls(proc, count=1)
    pin(admin, namespace, "selected", {"nodeSelector": {"pool": "spare"}})
    wait_polls(proc, count=2)
    assert replicas(admin, namespace, "deployment", "selected") == 1
    changed = [e for e in proc.events("placement.changed")
               if e["target"] == "deployment/selected"]
    assert changed[-1]["node_selector"] == {"pool": "spare"}

    # Nodes added and taints changed through the watch: each target follows its own.
    add_node(admin, "core-3", {"pool": "core"})
    add_node(admin, "spare-1", {"pool": "spare"})
    wait_replicas(admin, namespace, "deployment", "selected", 2, proc=proc)
    wait_replicas(admin, namespace, "deployment", "affine", 2, proc=proc)
    wait_replicas(admin, namespace, "deployment", "tolerant", 8, proc=proc)
    admin.patch("/api/v1/nodes/spare-1", {"spec": {"taints": [
        {"key": "maintenance", "effect": "NoExecute"}]}})
    wait_replicas(admin, namespace, "deployment", "selected", 1, proc=proc)
    wait_replicas(admin, namespace, "deployment", "tolerant", 7, proc=proc)
    assert hpa_floor(admin, namespace, "floored") == 2

    doc = explain_json(controlplane.admin_kubeconfig, namespace, CM, "--target=deployment/affine")
    assert doc["replicas"] == 1
    assert doc["placement"]["excluded"] == {"nodeAffinity": 4, "taint dedicated": 2,
                                            "taint maintenance": 1}

    # Present from the start: the first poll waits for the list with every label and
    # decides on the target's own Nodes (no failed poll).
    create_workload(admin, namespace, "deployment", "fresh")
    pin(admin, namespace, "fresh", {"nodeSelector": {"pool": "core"}})
    fresh = start(f"--namespace={namespace}", f"--configmap={CM}", "--target=deployment/fresh",
                  kubeconfig=kubeconfig)
    wait_replicas(admin, namespace, "deployment", "fresh", 4, proc=fresh)
    fresh.wait_poll_ok()
    assert not fresh.events("poll.failed")
    assert fresh.events("scale.changed")[0]["total_nodes"] == 4

    # The key removed: upstream's counts again, and no per-target series.
    put_configmap_data(admin, namespace, CM, {"linear": json.dumps(PER_NODE)})
    for name in ("selected", "affine", "tolerant"):
        wait_replicas(admin, namespace, "deployment", name, 8, proc=proc)
    wait_until("the HPA floor at 8", lambda: hpa_floor(admin, namespace, "floored") == 8)
    wait_polls(proc, count=1)
    assert not any(k.startswith("cpa_target_nodes") for k in proc.metrics())
    proc.wait_poll_ok()


def test_a_403_on_the_workload_names_the_rule(
        controlplane: ControlPlane, namespace: str, no_nodes: None, start: Any) -> None:
    admin = controlplane.admin()
    add_node(admin, "core-0", {"pool": "core"})
    create_workload(admin, namespace, "deployment", "coredns")
    create_configmap(admin, namespace, CM, {"linear": json.dumps(
        {**PER_NODE, "targetPlacement": True})})
    kubeconfig = service_account(controlplane, namespace, "placement")
    proc = start(f"--namespace={namespace}", f"--configmap={CM}",
                 "--target=deployment/coredns", kubeconfig=kubeconfig)
    body = proc.wait_poll_error("targetPlacement reads the Pod template")
    assert "resources [deployments] verbs [get]" in body
    assert replicas(admin, namespace, "deployment", "coredns") == 1, "nothing written"


def lifecycle_taints(*keys: str) -> list[dict[str, str]]:
    """The taints the node lifecycle controller puts on a Node for its state: NoSchedule
    (TaintNodesByCondition), and NoExecute as well for not-ready and unreachable (taint
    based eviction). The test's control plane runs no controller manager: the test writes
    them as it would."""
    out = [{"key": f"node.kubernetes.io/{k}", "effect": "NoSchedule"} for k in keys]
    out += [{"key": f"node.kubernetes.io/{k}", "effect": "NoExecute"} for k in keys
            if k in ("not-ready", "unreachable")]
    return out


def test_cordoned_and_not_ready_nodes_count_as_without_the_key(
        controlplane: ControlPlane, namespace: str, no_nodes: None, start: Any) -> None:
    """16 Nodes, 6 cordoned and 2 NotReady with the taints Kubernetes adds for that: with
    ``includeUnschedulableNodes`` every target counts all 16, without it the 8 schedulable
    ones, with ``targetPlacement`` exactly as without it."""
    admin = controlplane.admin()
    for i in range(8):
        add_node(admin, f"ok-{i}", {"pool": "core"})
    for i in range(6):
        node = node_object(f"cordoned-{i}", "4", unschedulable=True, labels={"pool": "core"})
        node["spec"]["taints"] = lifecycle_taints("unschedulable")
        admin.post("/api/v1/nodes", node)
    for name, (status, key) in {"down-0": ("False", "not-ready"),
                                "down-1": ("Unknown", "unreachable")}.items():
        node = node_object(name, "4", labels={"pool": "core"})
        node["spec"]["taints"] = lifecycle_taints(key)
        node["status"]["conditions"][0]["status"] = status
        admin.post("/api/v1/nodes", node)
    create_workload(admin, namespace, "deployment", "coredns")
    kubeconfig = service_account(controlplane, namespace, "lifecycle", [READ_WORKLOADS])

    def params(include: bool, placement: bool) -> dict[str, str]:
        return {"linear": json.dumps({**PER_NODE, "includeUnschedulableNodes": include,
                                      "targetPlacement": placement})}

    create_configmap(admin, namespace, CM, params(include=True, placement=False))
    proc = start(f"--namespace={namespace}", f"--configmap={CM}", "--target=deployment/coredns",
                 kubeconfig=kubeconfig)
    wait_replicas(admin, namespace, "deployment", "coredns", 16, proc=proc)
    target = 'cpa_target_nodes{{set="{}",target="deployment/coredns"}}'

    put_configmap_data(admin, namespace, CM, params(include=True, placement=True))
    metrics = wait_until("the target's own counts", lambda: (
        m if target.format("all") in (m := proc.metrics()) else None))
    assert (metrics[target.format("all")], metrics[target.format("schedulable")]) == (16, 8)
    wait_polls(proc, count=2)
    assert replicas(admin, namespace, "deployment", "coredns") == 16

    put_configmap_data(admin, namespace, CM, params(include=False, placement=True))
    wait_replicas(admin, namespace, "deployment", "coredns", 8, proc=proc)
    doc = explain_json(controlplane.admin_kubeconfig, namespace, CM, "--target=deployment/coredns")
    assert (doc["replicas"], doc["placement"]["excluded"]) == (8, {})

    put_configmap_data(admin, namespace, CM, params(include=False, placement=False))
    wait_polls(proc, count=2)
    assert replicas(admin, namespace, "deployment", "coredns") == 8
    proc.wait_poll_ok()
