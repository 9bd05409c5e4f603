"""``capToPlaceable`` with the real daemon, the real API server, and a real kube-scheduler
binding the Pods that a real kube-controller-manager makes for the Deployment: with a
required anti-affinity of the DNS Pods against each other on ``kubernetes.io/hostname`` and
a formula asking for more replicas than there are Nodes, the cap writes exactly the Nodes'
number and the scheduler binds every Pod; ``"report"`` writes the uncapped number, the
extra Pods stay Pending, and the gauge says how many."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.controlplane import ControlPlane
from tests.controlplane.client import AdminClient
from tests.integration.scheduling import Scheduling
from tests.integration.support import (
    create_configmap,
    explain_json,
    node_object,
    put_configmap_data,
    replicas,
    service_account,
    wait_polls,
    wait_replicas,
    wait_until,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

CM = "dns-params"
NODES = 3
HOST = "kubernetes.io/hostname"
WANTED = 5  # the formula's count: min 5, more than the Nodes
PARAMS = {"nodesPerReplica": 1, "coresPerReplica": 1e6, "min": WANTED}
READ_WORKLOADS = {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"]}
POST_EVENTS = {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create"]}
GAUGE = 'cpa_target_unplaceable_replicas{target="deployment/dns"}'


def dns_deployment(admin: AdminClient, namespace: str) -> None:
    labels = {"k8s-app": "dns"}
    admin.post(f"/apis/apps/v1/namespaces/{namespace}/deployments", {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "dns", "namespace": namespace},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
                     "affinity": {"podAntiAffinity": {
                         "requiredDuringSchedulingIgnoredDuringExecution": [
                             {"labelSelector": {"matchLabels": labels},
                              "topologyKey": HOST}]}}}}}})


def pods(admin: AdminClient, namespace: str) -> list[dict[str, Any]]:
    """The namespace's Pods that are not being deleted."""
    items = admin.get(f"/api/v1/namespaces/{namespace}/pods")["items"]
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


def bound(admin: AdminClient, namespace: str) -> tuple[list[str], int]:
    """The Nodes the Pods are bound to, and how many Pods are bound to none (Pending)."""
    found = pods(admin, namespace)
    nodes = [p["spec"]["nodeName"] for p in found if p["spec"].get("nodeName")]
    return nodes, len(found) - len(nodes)


def unschedulable(admin: AdminClient, namespace: str) -> int:
    """Pods the scheduler tried and could not place (PodScheduled False, Unschedulable)."""
    return sum(1 for p in pods(admin, namespace) for c in p.get("status", {}).get(
        "conditions", []) if c["type"] == "PodScheduled" and c["status"] == "False"
        and c.get("reason") == "Unschedulable")


def capped_events(admin: AdminClient, namespace: str) -> list[dict[str, Any]]:
    items = admin.get(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")["items"]
    return [e for e in items if e.get("reason") == "ReplicasCapped"]


def test_the_cap_is_what_the_scheduler_binds(
        controlplane: ControlPlane, namespace: str, no_nodes: None, start: Any,
        scheduling: Scheduling) -> None:
    admin = controlplane.admin()
    for i in range(NODES):
        admin.post("/api/v1/nodes", node_object(f"sched-{i}", "4"))
    dns_deployment(admin, namespace)
    create_configmap(admin, namespace, CM, {"linear": json.dumps(
        {**PARAMS, "capToPlaceable": True})})
    kubeconfig = service_account(controlplane, namespace, "capped",
                                 [READ_WORKLOADS, POST_EVENTS])
    proc = start(f"--namespace={namespace}", f"--configmap={CM}", "--target=deployment/dns",
                 "--events", kubeconfig=kubeconfig)

    # capped: exactly the Nodes' number written, and every Pod bound, one per Node
    wait_replicas(admin, namespace, "deployment", "dns", NODES, proc=proc)
    wait_until("3 Pods bound", lambda: (lambda b: len(b[0]) == NODES and b[1] == 0)(
        bound(admin, namespace)), 90, interval=0.5)
    scheduling.check_alive()
    wait_polls(proc, count=2)
    nodes, pending = bound(admin, namespace)
    assert sorted(nodes) == [f"sched-{i}" for i in range(NODES)] and pending == 0
    assert replicas(admin, namespace, "deployment", "dns") == NODES
    assert proc.metrics()[GAUGE] == WANTED - NODES
    [line] = proc.events("scale.unplaceable")  # once, however many polls
    assert (line["wanted"], line["placeable"], line["replicas"], line["mode"]) == (
        WANTED, NODES, NODES, "cap")
    [event] = wait_until("the ReplicasCapped Event", lambda: capped_events(admin, namespace))
    assert event["type"] == "Warning" and event["regarding"]["name"] == "dns"
    assert explain_json(controlplane.admin_kubeconfig, namespace, CM,
                        "--target=deployment/dns")["replicas"] == NODES

    # "report": the uncapped count written; the scheduler leaves the extra Pods Pending
    put_configmap_data(admin, namespace, CM, {"linear": json.dumps(
        {**PARAMS, "capToPlaceable": "report"})})
    wait_replicas(admin, namespace, "deployment", "dns", WANTED, proc=proc)
    wait_until("5 Pods, 2 of them unschedulable", lambda: len(pods(admin, namespace)) == WANTED
               and unschedulable(admin, namespace) == WANTED - NODES, 90, interval=0.5)
    scheduling.check_alive()
    wait_polls(proc, count=2)
    nodes, pending = bound(admin, namespace)
    assert len(nodes) == NODES and pending == WANTED - NODES
    assert proc.metrics()[GAUGE] == WANTED - len(nodes)
    assert [e["mode"] for e in proc.events("scale.unplaceable")] == ["cap", "report"]
    doc = explain_json(controlplane.admin_kubeconfig, namespace, CM, "--target=deployment/dns")
    assert (doc["replicas"], doc["placeable"]["domains"]) == (WANTED, NODES)

    # without the key: upstream's count, and no gauge
    put_configmap_data(admin, namespace, CM, {"linear": json.dumps(PARAMS)})
    wait_until("no gauge without the key", lambda: GAUGE not in proc.metrics())
    assert replicas(admin, namespace, "deployment", "dns") == WANTED
    proc.stop()
    admin.patch(f"/apis/apps/v1/namespaces/{namespace}/deployments/dns",
                {"spec": {"replicas": 0}})
    admin.delete(f"/api/v1/namespaces/{namespace}/pods?gracePeriodSeconds=0")
