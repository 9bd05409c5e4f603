"""The test control plane itself: version, identities, least-privilege RBAC, restarts, cleanup.

Why: every other integration test trusts this harness; in particular the RBAC checks prove the
autoscaler identity has exactly the manifest's rules, so a test passing here would also pass
in a real cluster with the same manifest.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.controlplane import (
    AUTOSCALER_GROUPS,
    AUTOSCALER_USER,
    K8S_VERSION,
    AdminClient,
    ApiError,
    ControlPlane,
    pid_alive,
)
from tests.rbac import BASE_RULES, Rule, grant

pytestmark = pytest.mark.integration


def autoscaler(cp: ControlPlane) -> AdminClient:
    """A client using the token from the autoscaler kubeconfig (what the daemon will use)."""
    config = yaml.safe_load(cp.autoscaler_kubeconfig.read_text())
    assert config["clusters"][0]["cluster"]["server"] == cp.server
    return cp.client(config["users"][0]["user"]["token"])


def can(
    client: AdminClient,
    verb: str,
    resource: str,
    group: str = "",
    namespace: str = "kube-system",
    subresource: str = "",
) -> bool:
    review = client.post(
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {
                "resourceAttributes": {
                    "verb": verb,
                    "resource": resource,
                    "group": group,
                    "namespace": namespace,
                    "subresource": subresource,
                }
            },
        },
    )
    return bool(review["status"]["allowed"])


def whoami(client: AdminClient) -> dict[str, Any]:
    review = client.post(
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
    )
    info: dict[str, Any] = review["status"]["userInfo"]
    return info


def deployment(name: str, namespace: str, replicas: int = 1) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
            },
        },
    }


@pytest.mark.api_paths
def test_version_is_pinned(controlplane: ControlPlane) -> None:
    version = controlplane.admin().get("/version")
    assert version["gitVersion"] == K8S_VERSION
    assert controlplane.apiserver_pid is not None
    assert controlplane.etcd_pid is not None


def test_system_namespaces_and_priority_classes_exist(controlplane: ControlPlane) -> None:
    admin = controlplane.admin()
    for ns in ("default", "kube-system", "kube-public"):
        assert admin.get(f"/api/v1/namespaces/{ns}")["metadata"]["name"] == ns
    admin.get("/apis/scheduling.k8s.io/v1/priorityclasses/system-cluster-critical")


def test_autoscaler_identity(controlplane: ControlPlane) -> None:
    info = whoami(autoscaler(controlplane))
    assert info["username"] == AUTOSCALER_USER
    assert set(info["groups"]) == set(AUTOSCALER_GROUPS)


def access_check(rule: Rule) -> tuple[str, str, str, str]:
    """(verb, resource, group, subresource) of a manifest rule, as SubjectAccessReview asks."""
    group, resource, verb = rule
    name, _, sub = resource.partition("/")
    return verb, name, group, sub


ALLOWED = sorted(map(access_check, BASE_RULES))  # each rule the manifest grants
DENIED = sorted(map(access_check, (
    grant("", "nodes", "get")
    | grant("", "configmaps", "list", "watch", "update", "patch", "delete")
    | grant("apps", "deployments", "get", "update")
    | grant("apps", "deployments/scale", "patch")
    | grant("apps", "statefulsets/scale", "get")
    | grant("", "pods", "list")
    | grant("", "secrets", "get")
    | grant("", "events", "create"))))


@pytest.mark.parametrize(("verb", "resource", "group", "sub"), ALLOWED)
def test_autoscaler_allowed(
    controlplane: ControlPlane, verb: str, resource: str, group: str, sub: str
) -> None:
    assert can(autoscaler(controlplane), verb, resource, group, subresource=sub)


@pytest.mark.parametrize(("verb", "resource", "group", "sub"), DENIED)
def test_autoscaler_denied(
    controlplane: ControlPlane, verb: str, resource: str, group: str, sub: str
) -> None:
    assert not can(autoscaler(controlplane), verb, resource, group, subresource=sub)


def granted_to_every_service_account(admin: AdminClient) -> set[tuple[str, str, str]]:
    """(group, resource, verb) that the API server's default bindings give every
    ServiceAccount: to ``system:authenticated`` or ``system:serviceaccounts``. They change
    with the release (1.37 binds ``system:cluster-trust-bundle-discovery``, reading
    ClusterTrustBundles, to every ServiceAccount), and the manifest cannot take them away."""
    everyone = {"system:authenticated", "system:serviceaccounts"}
    bindings = admin.get("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"
                         "?labelSelector=kubernetes.io/bootstrapping%3Drbac-defaults")["items"]
    roles = {b["roleRef"]["name"] for b in bindings
             if any(s.get("kind") == "Group" and s.get("name") in everyone
                    for s in b.get("subjects") or [])}
    return {(group, resource, verb)
            for role in sorted(roles)
            for rule in admin.get(f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{role}")
            .get("rules") or []
            for group in rule.get("apiGroups", [])
            for resource in rule.get("resources", [])
            for verb in rule["verbs"]}


@pytest.mark.api_paths
def test_autoscaler_rules_are_exactly_the_manifest(controlplane: ControlPlane) -> None:
    """SelfSubjectRulesReview: the manifest's rules plus only what the API server's default
    bindings give every ServiceAccount (the self-reviews, and more on newer releases)."""
    everyone = granted_to_every_service_account(controlplane.admin())
    assert ("authorization.k8s.io", "selfsubjectaccessreviews", "create") in everyone
    review = autoscaler(controlplane).post(
        "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectRulesReview",
            "spec": {"namespace": "kube-system"},
        },
    )
    granted = {
        (group, resource, verb)
        for rule in review["status"]["resourceRules"]
        for group in rule.get("apiGroups", [])
        for resource in rule.get("resources", [])
        for verb in rule["verbs"]
    }
    expected = set(BASE_RULES)
    assert granted - everyone == expected


def test_autoscaler_really_scales_and_is_denied_the_rest(
    controlplane: ControlPlane, namespace: str
) -> None:
    admin, client = controlplane.admin(), autoscaler(controlplane)
    admin.apply(deployment("target", namespace, replicas=1))
    apps = f"/apis/apps/v1/namespaces/{namespace}/deployments"

    scale = client.get(f"{apps}/target/scale")
    assert scale["spec"]["replicas"] == 1
    scale["spec"]["replicas"] = 3
    client.put(f"{apps}/target/scale", scale)
    assert admin.get(f"{apps}/target")["spec"]["replicas"] == 3

    cms = f"/api/v1/namespaces/{namespace}/configmaps"
    client.post(cms, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "params"}})
    assert client.get(f"{cms}/params")["metadata"]["name"] == "params"
    client.get("/api/v1/nodes")

    forbidden: list[Callable[[], object]] = [
        lambda: client.get(cms),
        lambda: client.delete(f"{cms}/params"),
        lambda: client.put(f"{apps}/target", admin.get(f"{apps}/target")),
        lambda: client.get(f"/api/v1/namespaces/{namespace}/pods"),
    ]
    for attempt in forbidden:
        with pytest.raises(ApiError) as err:
            attempt()
        assert err.value.status == 403


def test_apply_file_and_node_status(controlplane: ControlPlane, tmp_path: Path) -> None:
    admin = controlplane.admin()
    manifest = tmp_path / "nodes.yaml"
    manifest.write_text(
        "---\n"
        "apiVersion: v1\nkind: List\nitems:\n"
        "- {apiVersion: v1, kind: Node, metadata: {name: cp-test-node-a},"
        "   status: {capacity: {cpu: '4'}, allocatable: {cpu: '4'}}}\n"
        "---\n"
        "apiVersion: v1\nkind: Node\nmetadata: {name: cp-test-node-b}\n"
    )
    applied = admin.apply_file(manifest)
    assert [obj["metadata"]["name"] for obj in applied] == ["cp-test-node-a", "cp-test-node-b"]
    assert admin.get("/api/v1/nodes/cp-test-node-a")["status"]["capacity"]["cpu"] == "4"
    admin.patch("/api/v1/nodes/cp-test-node-b/status", {"status": {"capacity": {"cpu": "8"}}})
    assert admin.get("/api/v1/nodes/cp-test-node-b")["status"]["capacity"]["cpu"] == "8"
    for name in ("cp-test-node-a", "cp-test-node-b"):
        admin.delete(f"/api/v1/nodes/{name}")
    with pytest.raises(ValueError, match="unsupported kind"):
        admin.apply({"apiVersion": "v1", "kind": "Frobnicator", "metadata": {"name": "x"}})


def test_kubeconfig_for_service_account_uses_token_request(
    controlplane: ControlPlane, namespace: str
) -> None:
    user = f"system:serviceaccount:{namespace}:someone"
    path = controlplane.kubeconfig_for(user, ["system:serviceaccounts"])
    token = yaml.safe_load(path.read_text())["users"][0]["user"]["token"]
    pid = controlplane.apiserver_pid
    info = whoami(controlplane.client(token))
    assert info["username"] == user
    assert f"system:serviceaccounts:{namespace}" in info["groups"]
    assert controlplane.apiserver_pid == pid  # no restart needed


def test_apiserver_restart_keeps_data_and_registers_new_identity(
    controlplane: ControlPlane, namespace: str
) -> None:
    admin = controlplane.admin()
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "keep", "namespace": namespace},
    }
    admin.apply(cm)
    old_pid, server = controlplane.apiserver_pid, controlplane.server

    controlplane.stop_apiserver()
    assert controlplane.apiserver_pid is None
    assert old_pid is not None and not pid_alive(old_pid)
    with pytest.raises(Exception):  # noqa: B017 - connection refused, any urllib3 error
        admin.get("/version")
    controlplane.start_apiserver()
    assert controlplane.server == server
    assert admin.get(f"/api/v1/namespaces/{namespace}/configmaps/keep")["metadata"]["name"]

    # A non-ServiceAccount identity needs a token-file entry, i.e. a restart.
    path = controlplane.kubeconfig_for("alice", ["devs"])
    assert controlplane.apiserver_pid not in (None, old_pid)
    token = yaml.safe_load(path.read_text())["users"][0]["user"]["token"]
    info = whoami(controlplane.client(token))
    assert info["username"] == "alice"
    assert "devs" in info["groups"]
    # The pre-registered identities survive restarts.
    assert whoami(autoscaler(controlplane))["username"] == AUTOSCALER_USER


def test_etcd_restart(controlplane: ControlPlane, namespace: str) -> None:
    admin = controlplane.admin()
    old_pid = controlplane.etcd_pid
    controlplane.stop_etcd()
    assert controlplane.etcd_pid is None
    controlplane.start_etcd()
    assert controlplane.etcd_pid not in (None, old_pid)
    deadline = time.monotonic() + 60
    while True:
        try:
            admin.post(
                f"/api/v1/namespaces/{namespace}/configmaps",
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "after-etcd"}},
            )
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def test_metrics(controlplane: ControlPlane) -> None:
    assert "apiserver_request_total" in controlplane.metrics()


def test_stop_leaves_no_processes(controlplane: ControlPlane) -> None:
    """A second, private control plane: stop() kills both PIDs and removes its temp dir."""
    plane = ControlPlane(bin_dir=controlplane.bin_dir)
    with plane:
        pids = [plane.apiserver_pid, plane.etcd_pid]
        workdir = plane.workdir
        assert plane.admin().get("/version")["gitVersion"] == K8S_VERSION
    assert all(pid is not None and not pid_alive(pid) for pid in pids)
    assert plane.apiserver_pid is None and plane.etcd_pid is None
    assert not workdir.exists()
    plane.stop()  # idempotent
