"""The shipped autoscaler never blocks a node drain: its Pod is evicted through the Eviction
API, under the PodDisruptionBudget manifests/ ships, and the Deployment makes a new one.

The real kube-controller-manager of this build runs the disruption controller (which computes
the budget's ``disruptionsAllowed``, as in a cluster) and the Deployment and ReplicaSet
controllers (which make the Pods). There is no kubelet and no scheduler: the test binds
each Pod and reports it Running and Ready, as a kubelet would, because the Eviction API
checks a budget only for Pods that run (a Pending Pod is evicted whatever the budget says).

What this shows: the API server admits the eviction of the only autoscaler Pod under the
shipped budget, the same eviction is refused (429) under a ``minAvailable: 1`` budget (so
the budget is really consulted), and the ReplicaSet makes a replacement Pod whose command
line, run by the real daemon, scales its target. What it cannot show: a kubelet stopping
the container, or cluster-autoscaler reading the ``safe-to-evict`` annotation (checked
statically in tests/repo/test_manifests.py).
"""

from __future__ import annotations

import copy
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.controlplane import ControlPlane
from tests.controlplane.client import AdminClient
from tests.integration.support import (
    AutoscalerProcess,
    coredns_and_nodes,
    wait_replicas,
    wait_until,
)

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
MAIN = REPO / "manifests" / "kube-dns-autoscaler.yaml"
Doc = dict[str, Any]


@pytest.fixture
def controllers(controlplane: ControlPlane, tmp_path: Path) -> Iterator[None]:
    """kube-controller-manager with only the disruption, Deployment and ReplicaSet
    controllers; stopped by PID."""
    binary = controlplane.bin_dir / "kube-controller-manager"
    if not os.access(binary, os.X_OK):
        pytest.skip(f"no kube-controller-manager in {controlplane.bin_dir}")
    log = (tmp_path / "kube-controller-manager.log").open("wb")
    proc = subprocess.Popen(
        [str(binary), f"--kubeconfig={controlplane.admin_kubeconfig}",
         "--controllers=disruption,deployment,replicaset", "--leader-elect=false",
         "--secure-port=0", "--v=1"], stdout=log, stderr=subprocess.STDOUT)
    try:
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()


def shipped(kind: str, namespace: str) -> Doc:
    """The main manifest's object of ``kind``, moved into ``namespace``."""
    (doc,) = [d for d in yaml.safe_load_all(MAIN.read_text()) if d and d["kind"] == kind]
    moved: Doc = copy.deepcopy(doc)
    moved["metadata"]["namespace"] = namespace
    return moved


def live_pods(admin: AdminClient, namespace: str) -> list[Doc]:
    items: list[Doc] = admin.get(f"/api/v1/namespaces/{namespace}/pods?labelSelector="
                                 "k8s-app%3Dkube-dns-autoscaler")["items"]
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


def run_as_kubelet(admin: AdminClient, namespace: str, pod: Doc) -> None:
    """Bind the Pod and report it Running and Ready, as a scheduler and a kubelet would."""
    name = pod["metadata"]["name"]
    base = f"/api/v1/namespaces/{namespace}/pods/{name}"
    admin.post(f"{base}/binding", {"apiVersion": "v1", "kind": "Binding",
                                   "metadata": {"name": name},
                                   "target": {"apiVersion": "v1", "kind": "Node",
                                              "name": "drain-node"}})
    now = "2026-11-30T00:00:00Z"
    admin.patch(f"{base}/status", {"status": {"phase": "Running", "conditions": [
        {"type": t, "status": "True", "lastTransitionTime": now}
        for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")]}})


def one_running_pod(admin: AdminClient, namespace: str, not_uid: str = "") -> Doc:
    pod: Doc = wait_until("an autoscaler Pod from the ReplicaSet", lambda: next(
        (p for p in live_pods(admin, namespace) if p["metadata"]["uid"] != not_uid), None), 60)
    run_as_kubelet(admin, namespace, pod)
    return pod


def budget_allows(admin: AdminClient, namespace: str, allowed: int) -> None:
    """Wait for the disruption controller's verdict on the current budget."""
    path = f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/kube-dns-autoscaler"

    def seen() -> bool:
        pdb = admin.get(path)
        status = pdb.get("status", {})
        return bool(status.get("observedGeneration") == pdb["metadata"]["generation"]
                and status.get("currentHealthy") == 1
                and status.get("disruptionsAllowed") == allowed)
    wait_until(f"the budget to allow {allowed} disruption(s)", seen, 60)


def evict(admin: AdminClient, namespace: str, pod: Doc) -> tuple[int, str]:
    name = pod["metadata"]["name"]
    status, body = admin.raw(
        "POST", f"/api/v1/namespaces/{namespace}/pods/{name}/eviction",
        yaml.safe_dump({"apiVersion": "policy/v1", "kind": "Eviction",
                        "metadata": {"name": name, "namespace": namespace}}).encode(),
        {"Content-Type": "application/yaml"})
    return status, body.decode(errors="replace")


def test_the_shipped_budget_lets_the_autoscaler_be_evicted(
        controlplane: ControlPlane, controllers: None, namespace: str, no_nodes: None,
        start: Callable[..., AutoscalerProcess]) -> None:
    admin = controlplane.admin()
    deployment = shipped("Deployment", namespace)
    admin.apply(deployment)
    admin.apply(shipped("PodDisruptionBudget", namespace))
    first = one_running_pod(admin, namespace)
    budget_allows(admin, namespace, 1)

    status, body = evict(admin, namespace, first)
    assert status == 201, body
    replacement = one_running_pod(admin, namespace, not_uid=first["metadata"]["uid"])

    # A budget that would block every drain of a single replica: the same eviction is
    # refused, so the one above was the shipped budget's doing.
    strict = shipped("PodDisruptionBudget", namespace)
    strict["spec"] = {"minAvailable": 1, "selector": strict["spec"]["selector"]}
    admin.put(f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/"
              "kube-dns-autoscaler", {**admin.get(
                  f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/"
                  "kube-dns-autoscaler"), "spec": strict["spec"]})
    budget_allows(admin, namespace, 0)
    status, body = evict(admin, namespace, replacement)
    assert status == 429, body

    # The replacement is the same autoscaler: its command line, run by the real daemon,
    # scales its target.
    (container,) = replacement["spec"]["containers"]
    args = [a for a in container["command"][1:]
            if not a.startswith(("--namespace=", "--v=", "--logtostderr"))]
    coredns_and_nodes(admin, namespace, "drain", 17)
    proc = start(f"--namespace={namespace}", *args)
    wait_replicas(admin, namespace, "deployment", "coredns", 2, proc=proc)
