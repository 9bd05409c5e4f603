"""Targets beyond upstream's, with the real daemon and API server: an HPA whose minReplicas
is the floor we write (clamped to its maxReplicas), and custom resources with and without a
scale subresource, found through API discovery at start-up. Each runs as a ServiceAccount
with exactly the rights the docs list for it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.controlplane import AdminClient, ApiError, ControlPlane
from tests.integration.support import (
    create_configmap,
    create_nodes,
    create_workload,
    explain_json,
    replicas,
    service_account,
    wait_polls,
    wait_until,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

CM = "target-params"
CONFIGMAPS = {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "create"]}
HPA_RIGHTS = {"apiGroups": ["autoscaling"], "resources": ["horizontalpodautoscalers"],
              "verbs": ["get", "patch"]}


def identity(plane: ControlPlane, namespace: str, name: str,
             rules: list[dict[str, Any]]) -> Path:
    """A ServiceAccount that may list Nodes, read and create its ConfigMap, and ``rules`` in
    the namespace (nothing else); returns its kubeconfig."""
    return service_account(plane, namespace, name, rules, rules=[CONFIGMAPS])


# --- the HPA floor ------------------------------------------------------------------------


def hpa_path(namespace: str, name: str) -> str:
    return f"/apis/autoscaling/v2/namespaces/{namespace}/horizontalpodautoscalers/{name}"


def create_hpa(admin: AdminClient, namespace: str, name: str, minimum: int,
               maximum: int) -> None:
    admin.post(f"/apis/autoscaling/v2/namespaces/{namespace}/horizontalpodautoscalers", {
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                    "name": name},
                 "minReplicas": minimum, "maxReplicas": maximum,
                 "metrics": [{"type": "Resource", "resource": {
                     "name": "cpu", "target": {"type": "Utilization",
                                               "averageUtilization": 80}}}]}})


def coredns_under_hpa(admin: AdminClient, namespace: str, maximum: int) -> None:
    """coredns at 1 replica and an HPA of it from 1 to ``maximum``: the HPA floor target's
    setting."""
    create_workload(admin, namespace, "deployment", "coredns", replicas=1)
    create_hpa(admin, namespace, "coredns", 1, maximum)


def floor(admin: AdminClient, namespace: str, name: str) -> int:
    return int(admin.get(hpa_path(namespace, name))["spec"]["minReplicas"])


@pytest.mark.api_paths
def test_the_hpa_floor_target(controlplane: ControlPlane, namespace: str, no_nodes: None,
                              start: Any) -> None:
    admin = controlplane.admin()
    coredns_under_hpa(admin, namespace, 4)
    create_nodes(admin, "hpa", 3, cpu="4")
    create_configmap(admin, namespace, CM, {"linear": '{"nodesPerReplica":1}'})
    kubeconfig = identity(controlplane, namespace, "hpa-floor", [HPA_RIGHTS])
    proc = start(f"--namespace={namespace}", f"--configmap={CM}", "--target=hpa/coredns",
                 kubeconfig=kubeconfig)
    wait_until("minReplicas 3", lambda: floor(admin, namespace, "coredns") == 3)
    hpa = admin.get(hpa_path(namespace, "coredns"))
    assert hpa["spec"]["maxReplicas"] == 4 and hpa["spec"]["metrics"]
    # The Deployment's replicas are the HPA controller's business, never ours.
    assert replicas(admin, namespace, "deployment", "coredns") == 1
    managers = [f["manager"] for f in hpa["metadata"]["managedFields"]]
    assert "cluster-proportional-autoscaler-py" in managers

    create_nodes(admin, "hpa", 3, cpu="4", start=3)  # 6 would be the floor: above max 4
    wait_until("a clamp warning", lambda: proc.events("hpa.floor_clamped"))
    assert floor(admin, namespace, "coredns") == 4
    warning = proc.events("hpa.floor_clamped")[0]
    assert (warning["wanted"], warning["min_replicas"], warning["max_replicas"]) == (6, 4, 4)
    target = 'target="horizontalpodautoscaler/coredns"'
    assert proc.metrics()[f"cpa_hpa_floor_clamped{{{target}}}"] == 1
    assert proc.metrics()[f"cpa_target_replicas{{{target}}}"] == 4
    # maxReplicas raised: the floor follows, the clamp ends.
    admin.patch(hpa_path(namespace, "coredns"), {"spec": {"maxReplicas": 10}})
    wait_until("minReplicas 6", lambda: floor(admin, namespace, "coredns") == 6)
    wait_until("the clamp ended", lambda: proc.events("hpa.floor_clamped.ended"))
    wait_polls(proc, count=1)
    assert proc.metrics()[f"cpa_hpa_floor_clamped{{{target}}}"] == 0
    proc.wait_poll_ok()

    doc = explain_json(controlplane.admin_kubeconfig, namespace, CM, "--target=hpa/coredns")
    assert doc["replicas"] == 6
    assert doc["target"] == {"target": "horizontalpodautoscaler/coredns",
                             "kind": "HorizontalPodAutoscaler", "api_version": "autoscaling/v2",
                             "writes": "spec.minReplicas", "current": 6, "replicas": 6,
                             "max_replicas": 10}
    assert doc["steps"][-1]["key"] == "target.hpa_floor"


def test_the_hpa_floor_needs_patch(controlplane: ControlPlane, namespace: str,
                                   no_nodes: None, start: Any) -> None:
    admin = controlplane.admin()
    create_hpa(admin, namespace, "coredns", 1, 4)
    create_nodes(admin, "hpa", 2, cpu="4")
    create_configmap(admin, namespace, CM, {"linear": '{"nodesPerReplica":1}'})
    get_only = {**HPA_RIGHTS, "verbs": ["get"]}
    kubeconfig = identity(controlplane, namespace, "hpa-get-only", [get_only])
    proc = start(f"--namespace={namespace}", f"--configmap={CM}", "--target=hpa/coredns",
                 kubeconfig=kubeconfig)
    body = proc.wait_poll_error("horizontalpodautoscaler/coredns")
    assert "cannot set minReplicas to 2" in body and "forbidden" in body.lower()
    assert floor(admin, namespace, "coredns") == 1


# --- any resource with a scale subresource ------------------------------------------------

GROUP = "cpa-test.example.com"


def crd(plural: str, kind: str, scale: bool) -> dict[str, Any]:
    subresources: dict[str, Any] = {"status": {}}
    if scale:
        subresources["scale"] = {"specReplicasPath": ".spec.replicas",
                                 "statusReplicasPath": ".status.replicas"}
    schema = {"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"replicas": {"type": "integer"}}},
        "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}}}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{GROUP}"},
            "spec": {"group": GROUP, "scope": "Namespaced",
                     "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "subresources": subresources,
                                   "schema": {"openAPIV3Schema": schema}}]}}


def ensure_crds(admin: AdminClient) -> None:
    """Two CRDs (cluster-wide, so created once per control plane): Clone with /scale, Noscale
    without; ready when discovery serves both."""
    for plural, kind, scale in (("clones", "Clone", True), ("noscales", "Noscale", False)):
        try:
            admin.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                       crd(plural, kind, scale))
        except ApiError as exc:
            if exc.status != 409:
                raise

    def served() -> bool:
        names = {r["name"] for r in admin.get(f"/apis/{GROUP}/v1")["resources"]}
        return {"clones", "clones/scale", "noscales"} <= names
    wait_until("the CRDs in discovery", served, timeout=60)


def clone_path(namespace: str, name: str) -> str:
    return f"/apis/{GROUP}/v1/namespaces/{namespace}/clones/{name}"


@pytest.mark.api_paths
def test_a_custom_resource_with_a_scale_subresource(controlplane: ControlPlane, namespace: str,
                                                    no_nodes: None, start: Any) -> None:
    admin = controlplane.admin()
    ensure_crds(admin)
    admin.post(f"/apis/{GROUP}/v1/namespaces/{namespace}/clones", {
        "apiVersion": f"{GROUP}/v1", "kind": "Clone", "metadata": {"name": "web"},
        "spec": {"replicas": 1}})
    create_nodes(admin, "crd", 4, cpu="4")
    create_configmap(admin, namespace, CM, {"linear": '{"nodesPerReplica":2}'})
    rights = {"apiGroups": [GROUP], "resources": ["clones/scale"], "verbs": ["get", "update"]}
    kubeconfig = identity(controlplane, namespace, "clones", [rights])
    proc = start(f"--namespace={namespace}", f"--configmap={CM}",
                 f"--target=Clones.{GROUP}/web", kubeconfig=kubeconfig)

    def clone_replicas() -> int:
        return int(admin.get(clone_path(namespace, "web"))["spec"]["replicas"])
    wait_until("the Clone at 2 replicas", lambda: clone_replicas() == 2)
    # The events up to the first poll are written just after its writes (cpa.logs.hold).
    resolved = wait_until("targets.resolved in the log",
                          lambda: proc.events("targets.resolved"))[0]["targets"]
    assert resolved == {f"clones.{GROUP}/web": f"{GROUP}/v1 Clone (clones/scale)"}
    create_nodes(admin, "crd", 2, cpu="4", start=4)
    wait_until("the Clone at 3 replicas", lambda: clone_replicas() == 3)
    assert proc.events("scale.changed")[-1]["target"] == f"clones.{GROUP}/web"
    proc.wait_poll_ok()

    doc = explain_json(controlplane.admin_kubeconfig, namespace, CM, f"--target=clones.{GROUP}/web")
    assert doc["replicas"] == 3 and doc["target"]["kind"] == "Clone"
    step = doc["steps"][-1]
    assert step["key"] == "target.resolved" and f"Clone in {GROUP}/v1" in step["text"]


@pytest.mark.parametrize(("target", "message"), [
    (f"noscales.{GROUP}/x", "has no scale subresource"),
    (f"clowns.{GROUP}/x", "has no resource 'clowns' (it has: clones, noscales"),
    ("rollouts.argoproj.io/web", "serves no API group 'argoproj.io'"),
])
def test_a_target_that_cannot_be_scaled_stops_the_daemon_at_start(
        controlplane: ControlPlane, namespace: str, start: Any, target: str,
        message: str) -> None:
    ensure_crds(controlplane.admin())
    proc = start(f"--namespace={namespace}", f"--configmap={CM}", f"--target={target}",
                 '--default-params={"linear":{"nodesPerReplica":1}}')
    assert proc.wait_exit(60) == 1
    log = proc.logs()
    assert message in log and "cluster-proportional-autoscaler: --target" in log
    assert not proc.events("scale.changed") and not proc.events("configmap.created")
