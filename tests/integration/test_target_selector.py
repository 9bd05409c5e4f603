"""``--target-selector=KIND:SELECTOR`` on the real API server: the real daemon, as a
ServiceAccount allowed to list Deployments, scales the workloads the selector matches, a
workload labelled later from the next poll on; a selector matching nothing fails the poll
naming it; without ``list`` the poll names the rule."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.controlplane import ControlPlane
from tests.controlplane.client import AdminClient
from tests.integration.support import (
    AutoscalerProcess,
    create_configmap,
    create_nodes,
    create_workload,
    replicas,
    service_account,
    wait_polls,
    wait_replicas,
)

pytestmark = pytest.mark.integration

CM = "selected"
LIST_DEPLOYMENTS = {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["list"]}


def label(admin: AdminClient, namespace: str, name: str, value: str) -> None:
    admin.patch(
        f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}",
        {"metadata": {"labels": {"k8s-app": value}}})


def nodes_and_params(plane: ControlPlane, namespace: str, nodes: int,
                     nodes_per_replica: int) -> AdminClient:
    """``nodes`` Nodes and the linear parameters; the admin client for the rest."""
    admin = plane.admin()
    create_nodes(admin, "sel", nodes)
    create_configmap(admin, namespace, CM,
                     {"linear": f'{{"nodesPerReplica":{nodes_per_replica}}}'})
    return admin


def test_a_workload_labelled_later_becomes_a_target(
        controlplane: ControlPlane, namespace: str, no_nodes: None,
        start: Callable[..., AutoscalerProcess]) -> None:
    admin = nodes_and_params(controlplane, namespace, 17, 16)
    for name in ("first", "later", "other"):
        create_workload(admin, namespace, "deployment", name)
    label(admin, namespace, "first", "dns")
    label(admin, namespace, "other", "web")
    kubeconfig = service_account(controlplane, namespace, "selector",
                                 extra=[LIST_DEPLOYMENTS])
    proc = start(f"--namespace={namespace}", f"--configmap={CM}",
                 "--target-selector=deployment:k8s-app=dns", kubeconfig=kubeconfig)
    wait_replicas(admin, namespace, "deployment", "first", 2, proc=proc)
    proc.wait_poll_ok()
    (started,) = proc.events("starting")
    assert started["target_selectors"] == ["deployment:k8s-app=dns"]
    assert started["targets"] == []
    assert replicas(admin, namespace, "deployment", "later") == 1

    label(admin, namespace, "later", "dns")
    wait_replicas(admin, namespace, "deployment", "later", 2, proc=proc)
    label(admin, namespace, "first", "gone")  # no longer a target: left as it is
    admin.patch(f"/apis/apps/v1/namespaces/{namespace}/deployments/first/scale",
                {"spec": {"replicas": 5}})
    wait_polls(proc, count=2)
    assert replicas(admin, namespace, "deployment", "first") == 5
    assert replicas(admin, namespace, "deployment", "other") == 1
    proc.wait_poll_ok()


def test_a_selector_matching_nothing_or_not_allowed_fails_the_poll_naming_it(
        controlplane: ControlPlane, namespace: str, no_nodes: None,
        start: Callable[..., AutoscalerProcess]) -> None:
    admin = nodes_and_params(controlplane, namespace, 2, 1)
    create_workload(admin, namespace, "deployment", "coredns")
    allowed = service_account(controlplane, namespace, "allowed", extra=[LIST_DEPLOYMENTS])
    typo = start(f"--namespace={namespace}", f"--configmap={CM}", "--target=deployment/coredns",
                 "--target-selector=deployment:k8s-app=kube-dsn", kubeconfig=allowed)
    body = typo.wait_poll_error("--target-selector=deployment:k8s-app=kube-dsn: no deployment")
    assert f"namespace {namespace} matches" in body
    wait_replicas(admin, namespace, "deployment", "coredns", 2)  # --target still written

    denied = service_account(controlplane, namespace, "denied")
    proc = start(f"--namespace={namespace}", f"--configmap={CM}",
                 "--target-selector=deployment:k8s-app=dns", kubeconfig=denied)
    body = proc.wait_poll_error("--target-selector=deployment:k8s-app=dns lists")
    assert "apiGroups [apps] resources [deployments] verbs [list]" in body
