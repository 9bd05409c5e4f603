"""``"managePodDisruptionBudget": true`` on the real API server: the real daemon, as a
ServiceAccount with the manifest example's rules, keeps the target's budget in step with
its replicas and removes it with the key; without the rules, the poll names them."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.controlplane import ControlPlane
from tests.controlplane.client import AdminClient, ApiError
from tests.integration.support import (
    AutoscalerProcess,
    coredns_and_nodes,
    create_configmap,
    put_configmap_data,
    service_account,
    wait_replicas,
    wait_until,
)

pytestmark = pytest.mark.integration

CM = "budgets"
EXAMPLE = (Path(__file__).resolve().parents[2] / "manifests" / "examples"
           / "pod-disruption-budget-rbac.yaml")


def example_rules() -> list[dict[str, Any]]:
    """The rules manifests/examples/pod-disruption-budget-rbac.yaml grants."""
    (role,) = [d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d and d["kind"] == "Role"]
    rules: list[dict[str, Any]] = role["rules"]
    return rules


def linear(nodes_per_replica: int, manage: bool | None = True) -> dict[str, str]:
    value: dict[str, Any] = {"nodesPerReplica": nodes_per_replica}
    if manage is not None:
        value["managePodDisruptionBudget"] = manage
    return {"linear": json.dumps(value)}


def start_coredns(plane: ControlPlane, namespace: str, nodes: int, account: str,
                  start: Callable[..., AutoscalerProcess],
                  extra: Sequence[dict[str, Any]] = ()) -> tuple[AdminClient, AutoscalerProcess]:
    """coredns and ``nodes`` Nodes at 16 Nodes a replica with the key set, and the daemon
    running as the ServiceAccount ``account`` (the addon's rules plus ``extra``)."""
    admin = plane.admin()
    coredns_and_nodes(admin, namespace, "budget", nodes)
    create_configmap(admin, namespace, CM, linear(16))
    kubeconfig = service_account(plane, namespace, account, extra=extra)
    return admin, start(f"--namespace={namespace}", f"--configmap={CM}",
                        "--target=deployment/coredns", kubeconfig=kubeconfig)


def test_a_budget_in_step_with_the_replicas_and_gone_with_the_key(
        controlplane: ControlPlane, namespace: str, no_nodes: None,
        start: Callable[..., AutoscalerProcess]) -> None:
    admin, proc = start_coredns(controlplane, namespace, 33, "budgets", start,
                                extra=example_rules())
    path = f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/coredns-cpa"

    def budget() -> dict[str, Any] | None:
        try:
            return admin.get(path)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    wait_replicas(admin, namespace, "deployment", "coredns", 3, proc=proc)
    live = wait_until("coredns's budget", budget)
    deployment = admin.get(f"/apis/apps/v1/namespaces/{namespace}/deployments/coredns")
    assert live["spec"]["maxUnavailable"] == 1
    assert live["spec"]["selector"] == deployment["spec"]["selector"]
    (owner,) = live["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"]) == ("Deployment", deployment["metadata"]["uid"])
    assert live["metadata"]["labels"]["app.kubernetes.io/managed-by"] == (
        "cluster-proportional-autoscaler-py")

    put_configmap_data(admin, namespace, CM, linear(100))  # one replica: no budget
    wait_replicas(admin, namespace, "deployment", "coredns", 1, proc=proc)
    wait_until("no budget at one replica", lambda: budget() is None)
    put_configmap_data(admin, namespace, CM, linear(16))
    wait_until("the budget back with three replicas", budget)
    put_configmap_data(admin, namespace, CM, linear(16, manage=None))  # the key removed
    wait_until("the budget removed with the key", lambda: budget() is None)
    proc.wait_poll_ok()
    assert [e["action"] for e in proc.events("budget.changed")] == [
        "created", "deleted", "created", "deleted"]


def test_without_the_rules_the_poll_names_them(
        controlplane: ControlPlane, namespace: str, no_nodes: None,
        start: Callable[..., AutoscalerProcess]) -> None:
    admin, proc = start_coredns(controlplane, namespace, 17, "nobudgets", start)
    body = proc.wait_poll_error("managePodDisruptionBudget")
    assert "resources [poddisruptionbudgets] verbs [get, create, update, delete]" in body
    # The replicas are still written: the budget is the poll's second concern.
    wait_replicas(admin, namespace, "deployment", "coredns", 2)
