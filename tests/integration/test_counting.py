"""Smarter node counting with the real daemon: a virtual node of 20,000 cores, excluded by
its taint (upstream issue #153: virtual-kubelet nodes blow CoreDNS up)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.controlplane import ControlPlane
from tests.integration.support import (
    coredns_and_nodes,
    create_configmap,
    create_nodes,
    explain_json,
    node_object,
    put_configmap_data,
    wait_replicas,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

CM = "count-params"
KUBE_DNS = {"coresPerReplica": 256, "nodesPerReplica": 16, "preventSinglePointFailure": True,
            "includeUnschedulableNodes": True}


def virtual_node(name: str) -> dict[str, Any]:
    node = node_object(name, cpu="20000")
    node["spec"]["taints"] = [{"key": "virtual-kubelet.io/provider", "value": "azure",
                               "effect": "NoSchedule"}]
    return node


def test_a_virtual_node_excluded_by_taint(controlplane: ControlPlane, namespace: str,
                                          no_nodes: None, start: Any) -> None:
    admin = controlplane.admin()
    coredns_and_nodes(admin, namespace, "real", 16, cpu="8")
    admin.post("/api/v1/nodes", virtual_node("virtual-0"))
    create_configmap(admin, namespace, CM, {"linear": json.dumps(KUBE_DNS)})
    proc = start(f"--namespace={namespace}", f"--configmap={CM}",
                 "--target=deployment/coredns")
    # Upstream's counting: 128 + 20,000 cores -> ceil(20128 / 256) = 79 replicas of CoreDNS.
    wait_replicas(admin, namespace, "deployment", "coredns", 79, proc=proc)

    put_configmap_data(admin, namespace, CM, {"linear": json.dumps(
        {**KUBE_DNS, "excludeNodesWithTaints": ["virtual-kubelet.io/provider"]})})
    # 16 nodes, 128 cores: both axes give 1; preventSinglePointFailure lifts it to 2.
    wait_replicas(admin, namespace, "deployment", "coredns", 2, proc=proc)
    admin.post("/api/v1/nodes", virtual_node("virtual-1"))  # the totals keep excluding
    create_nodes(admin, "real", 16, cpu="8", start=16)  # 32 real nodes: 2
    create_nodes(admin, "real", 1, cpu="8", start=32)  # 33: ceil(33/16) = 3
    wait_replicas(admin, namespace, "deployment", "coredns", 3, proc=proc)

    doc = explain_json(controlplane.admin_kubeconfig, namespace, CM)
    assert doc["replicas"] == 3
    assert doc["counts"]["excluded_nodes"] == 2 and doc["counts"]["total_nodes"] == 33
    assert any(s["key"] == "counting.exclude" and "leaves 2 Nodes out" in s["text"]
               for s in doc["steps"])

    put_configmap_data(admin, namespace, CM, {"linear": json.dumps(
        {**KUBE_DNS, "excludeNodesWithTaints": ["virtual-kubelet.io/provider"],
         "maxReplicasPerNode": 0.05})})  # at most floor(0.05 * 33) = 1, never below 1
    wait_replicas(admin, namespace, "deployment", "coredns", 1, proc=proc)
    put_configmap_data(admin, namespace, CM, {"linear": json.dumps(
        {**KUBE_DNS, "maxCoresPerNode": 16})})  # the virtual nodes count 16 cores each
    # 35 nodes, 33 x 8 + 2 x 16 = 296 cores: max(ceil(296/256), ceil(35/16)) = 3
    wait_replicas(admin, namespace, "deployment", "coredns", 3, proc=proc)
    proc.wait_poll_ok()


def tainted_node(name: str, key: str, effect: str = "NoSchedule") -> dict[str, Any]:
    node = node_object(name, cpu="8")
    node["spec"]["taints"] = [{"key": key, "value": "x", "effect": effect}]
    return node


def test_nodes_leaving_or_not_ready_excluded_by_the_lifecycle_preset(
        controlplane: ControlPlane, namespace: str, no_nodes: None, start: Any) -> None:
    """Nodes tainted by Cluster Autoscaler, Karpenter and the cloud node lifecycle are left
    out with ``"@lifecycle"``; explain lists what the preset expanded to."""
    admin = controlplane.admin()
    coredns_and_nodes(admin, namespace, "ok", 3, cpu="8")
    for name, key, effect in [
            ("ca-0", "ToBeDeletedByClusterAutoscaler", "NoSchedule"),
            ("karp-0", "karpenter.sh/disrupted", "NoSchedule"),
            ("karp-1", "karpenter.sh/unregistered", "NoExecute"),
            ("cloud-0", "node.cloudprovider.kubernetes.io/uninitialized", "NoSchedule"),
            ("cloud-1", "node.cloudprovider.kubernetes.io/shutdown", "NoSchedule")]:
        admin.post("/api/v1/nodes", tainted_node(name, key, effect))
    params = {"nodesPerReplica": 1, "includeUnschedulableNodes": True}
    create_configmap(admin, namespace, CM, {"linear": json.dumps(params)})
    proc = start(f"--namespace={namespace}", f"--configmap={CM}",
                 "--target=deployment/coredns")
    wait_replicas(admin, namespace, "deployment", "coredns", 8, proc=proc)  # every Node

    put_configmap_data(admin, namespace, CM, {"linear": json.dumps(
        {**params, "excludeNodesWithTaints": ["@lifecycle"]})})
    wait_replicas(admin, namespace, "deployment", "coredns", 3, proc=proc)
    # A Node that Cluster Autoscaler marks while the daemon runs drops out of the counts.
    admin.patch("/api/v1/nodes/ok-0002", {"spec": {"taints": [
        {"key": "ToBeDeletedByClusterAutoscaler", "value": "1700000000",
         "effect": "NoSchedule"}]}})
    wait_replicas(admin, namespace, "deployment", "coredns", 2, proc=proc)

    doc = explain_json(controlplane.admin_kubeconfig, namespace, CM)
    assert doc["replicas"] == 2 and doc["counts"]["excluded_nodes"] == 6
    step = next(s for s in doc["steps"] if s["key"] == "counting.exclude")
    for key in ("ToBeDeletedByClusterAutoscaler", "karpenter.sh/disrupted",
                "karpenter.sh/disruption", "karpenter.sh/unregistered",
                "node.cloudprovider.kubernetes.io/uninitialized",
                "node.cloudprovider.kubernetes.io/shutdown"):
        assert key in step["text"]
    assert "@lifecycle = " in step["text"] and "leaves 6 Nodes out" in step["text"]
    proc.wait_poll_ok()
