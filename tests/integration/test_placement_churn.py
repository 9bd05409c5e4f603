"""``targetPlacement`` under label churn, with the real daemon on the real API server: GPU
Feature Discovery rewrites a timestamp label on every GPU Node every minute and the
cluster-autoscaler writes a taint whose value is a time. The daemon keeps every label and
taint of every Node while a target counts by placement; its memory must follow the live
Nodes, not the number of changes they went through."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.controlplane import ControlPlane
from tests.controlplane.client import AdminClient
from tests.integration.support import (
    create_configmap,
    create_workload,
    node_object,
    peak_rss,
    service_account,
    wait_polls,
    wait_replicas,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

CM = "churn-params"
NODES = 20
CHANGES = 4_000
GROWTH_MIB = 3.0
"""What a daemon whose memory follows the live Nodes may still grow by over the changes:
the allocator's and the API client's noise, far below one record kept per change."""
READ_WORKLOADS = {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"]}
# A GPU Node's labels as GPU Feature Discovery and the cloud write them: some sixty (their
# names and values stand in; their number is what a record holds a slot for).
GFD_LABELS = {f"nvidia.com/gpu.feature-{i:02d}": f"value-{i:02d}" for i in range(40)}
CLOUD_LABELS = {f"cloud.example.com/property-{i:02d}": f"value-{i:02d}" for i in range(20)}


def gpu_node(name: str) -> dict[str, Any]:
    node = node_object(name, "8", labels={"pool": "gpu", **GFD_LABELS, **CLOUD_LABELS})
    node["spec"]["taints"] = [{"key": "nvidia.com/gpu", "value": "present",
                               "effect": "NoSchedule"}]
    return node


def touch(admin: AdminClient, name: str, tick: int) -> None:
    """What GFD and the cluster-autoscaler write: a new timestamp label, and on every other
    change the deletion-candidate taint with a time for its value."""
    stamp = str(1_700_000_000 + tick)
    taints = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    if tick % 2:
        taints.append({"key": "DeletionCandidateOfClusterAutoscaler", "value": stamp,
                       "effect": "PreferNoSchedule"})
    admin.patch(f"/api/v1/nodes/{name}", {
        "metadata": {"labels": {"nvidia.com/gfd.timestamp": stamp}},
        "spec": {"taints": taints}})


def churn(admin: AdminClient, namespace: str, proc: Any, first: int, last: int) -> None:
    """Changes ``first`` to ``last`` over the Nodes, then a change the count sees (a Node
    leaves the pool and comes back): once the replicas followed it, the daemon has read
    every change before it (a watch delivers in order)."""
    for tick in range(first, last):
        touch(admin, f"gpu-{tick % NODES:02d}", tick)
    for pool, count in (("drained", NODES - 1), ("gpu", NODES)):
        admin.patch("/api/v1/nodes/gpu-00", {"metadata": {"labels": {"pool": pool}}})
        wait_replicas(admin, namespace, "deployment", "dcgm", count, timeout=120, proc=proc)


def test_label_and_taint_churn_leaves_the_daemons_memory_where_it_was(
        controlplane: ControlPlane, namespace: str, no_nodes: None, start: Any) -> None:
    admin = controlplane.admin()
    for i in range(NODES):
        admin.post("/api/v1/nodes", gpu_node(f"gpu-{i:02d}"))
    create_workload(admin, namespace, "deployment", "dcgm")
    admin.patch(f"/apis/apps/v1/namespaces/{namespace}/deployments/dcgm", {"spec": {
        "template": {"spec": {"nodeSelector": {"pool": "gpu"}, "tolerations": [
            {"key": "nvidia.com/gpu", "operator": "Exists"}]}}}})
    create_configmap(admin, namespace, CM, {"linear": json.dumps(
        {"nodesPerReplica": 1, "min": 1, "targetPlacement": True})})
    kubeconfig = service_account(controlplane, namespace, "churn", [READ_WORKLOADS])
    proc = start(f"--namespace={namespace}", f"--configmap={CM}", "--target=deployment/dcgm",
                 kubeconfig=kubeconfig)
    wait_replicas(admin, namespace, "deployment", "dcgm", NODES, proc=proc)

    churn(admin, namespace, proc, 0, 300)  # warm-up: every path of the daemon run once
    wait_polls(proc, count=2)
    before = peak_rss(proc.pid, 3.0)
    churn(admin, namespace, proc, 300, 300 + CHANGES)
    wait_polls(proc, count=2)
    after = peak_rss(proc.pid, 3.0)
    print(f"daemon RSS {before:.1f} -> {after:.1f} MiB over {CHANGES} Node changes")
    assert after - before < GROWTH_MIB, (
        f"the daemon grew {after - before:.1f} MiB over {CHANGES} label and taint changes "
        f"of {NODES} Nodes ({before:.1f} -> {after:.1f} MiB)")
    proc.wait_poll_ok()
