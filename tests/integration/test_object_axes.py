"""Ours, opt-in: the Pods and Services axes with the real daemon and API server.

Thousands of Pods and Services created, finished and deleted across namespaces; the
replicas follow each axis; a 403 names the RBAC rule; removing the keys stops the watches."""

from __future__ import annotations

import contextlib
import json
import math
import secrets
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.controlplane import ControlPlane
from tests.controlplane.client import AdminClient, ApiError
from tests.integration.support import (
    create_configmap,
    create_workload,
    put_configmap_data,
    run_cli,
    wait_replicas,
    wait_until,
)
from tests.integration.test_vertical import (
    config_dir,
    create_target,
    template_resources,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

CM = "object-axes"
RBAC = "rbac.authorization.k8s.io/v1"
ROLE = "cpa-tests-object-axes"
NOT_FINISHED = "fieldSelector=status.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed"


def _parallel(fn: Callable[[str], object], items: Sequence[str]) -> None:
    with ThreadPoolExecutor(8) as pool:
        for _ in pool.map(fn, items):
            pass


def _pod(namespace: str, name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}


def _service(key: str) -> dict[str, Any]:
    """A Service ``namespace/name``; headless unless its name ends in 00 (the test control
    plane has a few hundred cluster IPs)."""
    namespace, name = key.split("/")
    headless = not name.endswith("00")
    spec: dict[str, Any] = {"ports": [{"port": 53, "protocol": "UDP"}],
                            "selector": {"app": name}}
    if headless:
        spec["clusterIP"] = "None"
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def _count(admin: AdminClient, path: str) -> int:
    return len(admin.get(path)["items"])


def _pods(admin: AdminClient) -> int:
    """The Pods the axis counts: not finished and not being deleted. Another test on this
    control plane may leave Pods bound to a Node deleted (no kubelet ends them), which the
    API server still lists."""
    return sum(1 for pod in admin.get(f"/api/v1/pods?{NOT_FINISHED}")["items"]
               if not pod["metadata"].get("deletionTimestamp"))


@pytest.fixture
def namespaces(controlplane: ControlPlane) -> Iterator[list[str]]:
    """Four namespaces; their Pods and Services deleted at the end (no controller-manager
    would), with the RBAC rule the test grants."""
    admin = controlplane.admin()
    names = [f"objects-{i}-{secrets.token_hex(3)}" for i in range(4)]
    for name in names:
        admin.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                          "metadata": {"name": name}})
    yield names
    for name in names:
        admin.delete(f"/api/v1/namespaces/{name}/pods")
        for item in admin.get(f"/api/v1/namespaces/{name}/services")["items"]:
            admin.delete(f"/api/v1/namespaces/{name}/services/{item['metadata']['name']}")
    for path in (f"/apis/{RBAC}/clusterrolebindings/{ROLE}", f"/apis/{RBAC}/clusterroles/{ROLE}"):
        with contextlib.suppress(ApiError):  # not granted: the test failed before
            admin.delete(path)


def _grant(admin: AdminClient) -> None:
    """What manifests/examples/coredns-pods-services.yaml adds to the addon's rules."""
    admin.apply({"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": ROLE},
                 "rules": [{"apiGroups": [""], "resources": ["pods", "services"],
                            "verbs": ["list", "watch"]}]})
    admin.apply({"apiVersion": RBAC, "kind": "ClusterRoleBinding", "metadata": {"name": ROLE},
                 "subjects": [{"kind": "ServiceAccount", "name": "kube-dns-autoscaler",
                               "namespace": "kube-system"}],
                 "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                             "name": ROLE}})


def test_replicas_follow_the_pods_and_services(
        controlplane: ControlPlane, namespace: str, namespaces: list[str], no_nodes: None,
        start: Any) -> None:
    admin = controlplane.admin()
    create_workload(admin, namespace, "deployment", "coredns", 1)
    pods0 = _pods(admin)
    services0 = _count(admin, "/api/v1/services")
    create_configmap(admin, namespace, CM, {"linear": json.dumps(
        {"nodesPerReplica": 16, "podsPerReplica": 100})})
    proc = start(f"--namespace={namespace}", f"--configmap={CM}",
                 "--target=deployment/coredns")
    # Without the rule the poll fails and says which rule to add.
    error = proc.wait_poll_error('resources ["pods"], verbs ["list", "watch"]', timeout=60)
    assert "403" in error
    _grant(admin)

    names = [(namespaces[i % 4], f"p-{i:05d}") for i in range(2000)]
    _parallel(lambda key: admin.post(f"/api/v1/namespaces/{key.split('/')[0]}/pods",
                                     _pod(*key.split("/"))), [f"{ns}/{n}" for ns, n in names])
    wait_replicas(admin, namespace, "deployment", "coredns",
                  math.ceil((pods0 + 2000) / 100), proc=proc, timeout=120)

    # 500 Pods finish (moved to Succeeded through the status subresource): they leave the
    # count; 300 others are deleted.
    finished, deleted = names[:500], names[500:800]
    _parallel(lambda key: admin.patch(f"/api/v1/namespaces/{key.split('/')[0]}/pods/"
                                      f"{key.split('/')[1]}/status",
                                      {"status": {"phase": "Succeeded"}}),
              [f"{ns}/{n}" for ns, n in finished])
    _parallel(lambda key: admin.delete(f"/api/v1/namespaces/{key.split('/')[0]}/pods/"
                                       f"{key.split('/')[1]}"),
              [f"{ns}/{n}" for ns, n in deleted])
    pods = pods0 + 1200
    assert _pods(admin) == pods
    wait_replicas(admin, namespace, "deployment", "coredns", math.ceil(pods / 100),
                  proc=proc, timeout=120)
    wait_until("cpa_cluster_objects{kind=\"pods\"}", lambda: proc.metrics().get(
        'cpa_cluster_objects{kind="pods"}') == pods, timeout=30)
    explained = run_cli(["explain", "--from-cluster", f"--namespace={namespace}",
                         f"--configmap={CM}", f"--kubeconfig={controlplane.admin_kubeconfig}",
                         "-o", "json"])
    assert explained.returncode == 0, explained.stderr
    doc = json.loads(explained.stdout)
    assert doc["counts"]["pods"] == pods and doc["replicas"] == math.ceil(pods / 100)

    # The Services axis in a ladder: headless Services count as any other.
    services = [f"{namespaces[i % 4]}/s-{i:05d}" for i in range(1500)]
    _parallel(lambda key: admin.post(f"/api/v1/namespaces/{key.split('/')[0]}/services",
                                     _service(key)),
              services)
    total = services0 + 1500
    put_configmap_data(admin, namespace, CM, {"ladder": json.dumps(
        {"nodesToReplicas": [[0, 1]], "servicesToReplicas": [[0, 1], [total, 7]],
         "podsToReplicas": [[0, 1], [pods + 1, 9]]})})
    wait_replicas(admin, namespace, "deployment", "coredns", 7, proc=proc, timeout=120)
    # One more Pod crosses the Pods table's step.
    admin.post(f"/api/v1/namespaces/{namespaces[0]}/pods", _pod(namespaces[0], "one-more"))
    wait_replicas(admin, namespace, "deployment", "coredns", 9, proc=proc, timeout=60)

    # Without the keys, the watches stop and the counts' series go away.
    put_configmap_data(admin, namespace, CM, {"linear": json.dumps({"nodesPerReplica": 16})})
    wait_replicas(admin, namespace, "deployment", "coredns", 1, proc=proc, timeout=60)
    wait_until("both watches stopped", lambda: {
        e["kind"] for e in proc.events("objects.watch_stopped")} >= {"pods", "services"} or None,
        timeout=30)
    assert not any(series.startswith("cpa_cluster_objects{") for series in proc.metrics())


# --- the vertical autoscaler: podsPerStep, servicesPerStep --------------------------------


def _memory(pods: int, services: int) -> str:
    """The example's memory: 54M + 2M per 1,000 of the larger count, as /cpvpa writes it."""
    steps = max(math.ceil(pods / 1000), math.ceil(services / 1000))
    return f"{54 + 2 * steps}M"


def test_cpvpa_sizes_memory_by_the_pods_and_services(
        controlplane: ControlPlane, namespace: str, namespaces: list[str], no_nodes: None,
        cpvpa: Any, tmp_path: Path) -> None:
    admin = controlplane.admin()
    create_target(admin, namespace, "deployment", "coredns")
    memory = {"base": "54M", "step": "2M", "podsPerStep": 1000, "servicesPerStep": 1000}
    config, update = config_dir(tmp_path, {"c": {"requests": {"memory": memory}}})
    pods0 = _pods(admin)
    services0 = _count(admin, "/api/v1/services")
    proc = cpvpa("--target=deployment/coredns", f"--namespace={namespace}",
                 f"--config-file={config}", "--logtostderr=true")

    def memory_is(pods: int, services: int) -> Callable[[], bool]:
        want = _memory(pods, services)
        return lambda: template_resources(admin, namespace, "deployment", "coredns").get(
            "requests", {}).get("memory") == want

    wait_until("memory for the Pods and Services there are", memory_is(pods0, services0), 60)
    pods = [f"{namespaces[i % 4]}/vp-{i:05d}" for i in range(2500)]
    _parallel(lambda key: admin.post(f"/api/v1/namespaces/{key.split('/')[0]}/pods",
                                     _pod(*key.split("/"))), pods)
    wait_until("memory for 2,500 more Pods", memory_is(pods0 + 2500, services0), 120)
    # Services outgrow the Pods: 1,500 finish, 3,100 Services are made.
    _parallel(lambda key: admin.patch(f"/api/v1/namespaces/{key.split('/')[0]}/pods/"
                                      f"{key.split('/')[1]}/status",
                                      {"status": {"phase": "Failed"}}), pods[:1500])
    services = [f"{namespaces[i % 4]}/vs-{i:05d}" for i in range(3100)]
    _parallel(lambda key: admin.post(f"/api/v1/namespaces/{key.split('/')[0]}/services",
                                     _service(key)), services)
    wait_until("memory for the Services", memory_is(pods0 + 1000, services0 + 3100), 120)
    assert proc.events("objects.synced")
    # Without the keys the watches stop; the template follows the plain config.
    update({"c": {"requests": {"memory": {"base": "54M"}}}})
    wait_until("memory without the counts", lambda: template_resources(
        admin, namespace, "deployment", "coredns")["requests"]["memory"] == "54M", 60)
    wait_until("both watches stopped", lambda: {
        e["kind"] for e in proc.events("objects.watch_stopped")} >= {"pods", "services"} or None,
        timeout=30)
