"""Every shipped manifest is accepted by a real kube-apiserver (server-side apply, strict).

What this proves beyond the YAML checks in tests/repo/test_manifests.py: field names and
types are valid for the API (fieldValidation=Strict rejects typos such as
``readOnlyRootFileSystem``), RBAC objects are well-formed and reference what they should,
and the Helm chart's output is a valid set of objects too.

Isolation: the main manifest is applied as-is with dryRun=All (kube-system already holds
the harness's copy of its RBAC); everything is also applied for real into a fresh namespace,
with cluster-scoped names suffixed, so no object clashes with another test.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.controlplane import AdminClient, ApiError, ControlPlane, resource_path
from tests.monitoring import OPERATOR_CRDS, operator_crds

pytestmark = [pytest.mark.integration, pytest.mark.api_paths]

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "manifests"
MAIN = MANIFESTS / "kube-dns-autoscaler.yaml"
EXAMPLE_FILES = sorted((MANIFESTS / "examples").glob("*.yaml"))
CHART = REPO / "charts" / "cluster-proportional-autoscaler"
FIELD_MANAGER = "cpa-manifest-tests"
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "PriorityClass"}

Doc = dict[str, Any]


def load(path: Path) -> list[Doc]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def strict_apply(admin: AdminClient, obj: Doc, *, dry_run: bool = False) -> Doc:
    """Server-side apply with fieldValidation=Strict (unknown or duplicate fields fail)."""
    query = f"?fieldManager={FIELD_MANAGER}&force=true&fieldValidation=Strict"
    if dry_run:
        query += "&dryRun=All"
    status, body = admin.raw(
        "PATCH",
        resource_path(obj) + query,
        json.dumps(obj).encode(),
        {"Content-Type": "application/apply-patch+yaml"},
    )
    if not 200 <= status < 300:
        raise ApiError("PATCH", resource_path(obj), status, body.decode(errors="replace"))
    result: Doc = json.loads(body)
    return result


def relocate(docs: Iterable[Doc], namespace: str) -> list[Doc]:
    """Copies of docs moved into `namespace`, cluster-scoped names suffixed with it."""
    docs = [copy.deepcopy(d) for d in docs]
    renamed = {
        d["metadata"]["name"]: f"{d['metadata']['name']}-{namespace}"
        for d in docs
        if d["kind"] == "ClusterRole"
    }
    out: list[Doc] = []
    for doc in docs:
        kind, meta = doc["kind"], doc["metadata"]
        if kind == "Namespace":
            meta["name"] = namespace
        elif kind == "ClusterRole":
            meta["name"] = renamed[meta["name"]]
        elif kind == "ClusterRoleBinding":
            meta["name"] = f"{meta['name']}-{namespace}"
        elif kind not in CLUSTER_SCOPED:
            meta["namespace"] = namespace
        if kind.endswith("RoleBinding"):
            for subject in doc["subjects"]:
                if subject["kind"] == "ServiceAccount":
                    subject["namespace"] = namespace
            if doc["roleRef"]["kind"] == "ClusterRole":
                ref = doc["roleRef"]["name"]
                doc["roleRef"]["name"] = renamed.get(ref, ref)
        out.append(doc)
    return out


def apply_and_compare(admin: AdminClient, docs: list[Doc]) -> None:
    """Apply every doc for real, then read it back and compare what matters."""
    for doc in docs:
        applied = strict_apply(admin, doc)
        assert applied["metadata"]["name"] == doc["metadata"]["name"]
    for doc in docs:
        live = admin.get(resource_path(doc))
        kind = doc["kind"]
        if kind == "ConfigMap":
            assert live["data"] == doc["data"]
        elif kind in ("ClusterRole", "Role"):
            assert [_norm_rule(r) for r in live["rules"]] == [_norm_rule(r) for r in doc["rules"]]
        elif kind.endswith("RoleBinding"):
            assert live["roleRef"] == doc["roleRef"]
            assert live["subjects"] == doc["subjects"]
        elif kind in ("PodDisruptionBudget", "PrometheusRule", "PodMonitor", "ServiceMonitor"):
            assert live["spec"] == doc["spec"], kind
        elif kind == "Deployment":
            want = doc["spec"]["template"]["spec"]
            got = live["spec"]["template"]["spec"]
            for field in ("serviceAccountName", "priorityClassName", "securityContext",
                          "affinity", "topologySpreadConstraints"):
                if field in want:
                    assert got[field] == want[field], field
            for w, g in zip(want["containers"], got["containers"], strict=True):
                for field in ("command", "args", "image", "securityContext", "ports"):
                    if field in w:
                        assert g[field] == w[field], field


def _norm_rule(rule: Doc) -> Doc:
    return {k: rule.get(k, []) for k in ("apiGroups", "resources", "verbs", "resourceNames")}


# --- tests ------------------------------------------------------------------------------


def test_kube_system_and_the_priority_class_exist(controlplane: ControlPlane) -> None:
    """The main manifest relies on both; a real apiserver creates them at bootstrap."""
    admin = controlplane.admin()
    admin.get("/api/v1/namespaces/kube-system")
    pc = admin.get("/apis/scheduling.k8s.io/v1/priorityclasses/system-cluster-critical")
    assert pc["value"] >= 2_000_000_000


def test_main_manifest_applies_as_is(controlplane: ControlPlane) -> None:
    admin = controlplane.admin()
    for doc in load(MAIN):
        applied = strict_apply(admin, doc, dry_run=True)
        assert applied["kind"] == doc["kind"]


def test_main_manifest_applies_for_real(controlplane: ControlPlane, namespace: str) -> None:
    apply_and_compare(controlplane.admin(), relocate(load(MAIN), namespace))


def test_kustomize_output_applies(controlplane: ControlPlane) -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl not installed")
    result = subprocess.run(
        [kubectl, "kustomize", str(MANIFESTS)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    admin = controlplane.admin()
    for doc in yaml.safe_load_all(result.stdout):
        if doc:
            strict_apply(admin, doc, dry_run=True)


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.name)
def test_example_applies(controlplane: ControlPlane, namespace: str, path: Path) -> None:
    apply_and_compare(controlplane.admin(), relocate(load(path), namespace))


def _helm() -> str | None:
    for candidate in (os.environ.get("HELM"), str(REPO / ".cache" / "bin" / "helm")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("helm")


CHART_VALUES = {
    "dns": {
        "fullnameOverride": "kube-dns-autoscaler",
        "options": {
            "target": "Deployment/coredns",
            "logLevel": 2,
            "defaultParams": {"linear": {"coresPerReplica": 256, "nodesPerReplica": 16}},
        },
        "priorityClassName": "system-cluster-critical",
        "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}],
    },
    # Several replicas with leader election (PDB, anti-affinity, zone spread), another
    # health port, JSON logs, and every monitoring object (ours, opt-in).
    "ha-monitoring": {
        "replicaCount": 2,
        "healthPort": 9102,
        "logFormat": "json",
        "options": {
            "target": "deployment/coredns",
            "leaderElection": {"enabled": True, "leaseDuration": "20s"},
            "defaultParams": {"linear": {"nodesPerReplica": 16}},
        },
        "metrics": {
            "podMonitor": {"enabled": True, "labels": {"release": "kps"}},
            "serviceMonitor": {"enabled": True, "scrapeTimeout": "10s"},
            "prometheusRule": {"enabled": True},
            "grafanaDashboard": {"enabled": True},
        },
    },
    "ladder-statefulset-nodelabels": {
        "options": {
            "target": "deployment/a,statefulset/b",
            "nodeLabels": {"node-role.kubernetes.io/worker": "true"},
            "maxSyncFailures": 3,
            "pollPeriodSeconds": 5,
        },
        "config": {"ladder": {"nodesToReplicas": [[0, 0], [6, 1]]}},
        "extraArgs": ["--log-format=json"],
        "podAnnotations": {"example.com/a": "b"},
    },
}


@pytest.fixture(scope="module")
def monitoring_crds(controlplane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
                    ) -> None:
    """prometheus-operator's PodMonitor, ServiceMonitor and PrometheusRule CRDs, served by
    the API server (the chart's monitoring objects are validated against their schemas)."""
    try:
        crds = operator_crds(tmp_path_factory.mktemp("gomod"))
    except RuntimeError as exc:
        pytest.skip(f"prometheus-operator CRDs unavailable: {exc}")
    admin = controlplane.admin()
    for crd in crds:
        admin.apply(crd)

    def served() -> bool:
        for crd in crds:
            live = admin.get(resource_path(crd))
            # A CRD the API server has just stored can answer "conditions": null (or no
            # status at all) until its controller first looks at it: that is "not yet".
            status = live.get("status") or {}
            conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
            if conditions.get("Established") != "True":
                return False
        admin.get(f"/apis/monitoring.coreos.com/v1/namespaces/default/{OPERATOR_CRDS[0]}")
        return True

    deadline = time.monotonic() + 60
    while not _quietly(served):
        assert time.monotonic() < deadline, "the monitoring CRDs were not established in 60 s"
        time.sleep(0.2)


def _quietly(check: Callable[[], bool]) -> bool:
    try:
        return check()
    except ApiError:
        return False


@pytest.mark.parametrize("values_name", sorted(CHART_VALUES))
def test_helm_chart_output_applies(
    controlplane: ControlPlane, namespace: str, tmp_path: Path, values_name: str,
    request: pytest.FixtureRequest,
) -> None:
    if values_name == "ha-monitoring":
        request.getfixturevalue("monitoring_crds")
    helm = _helm()
    if helm is None:
        pytest.skip("helm not installed (scripts/install-helm.sh)")
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump(CHART_VALUES[values_name]))
    env = {
        **os.environ,
        "HELM_CACHE_HOME": str(tmp_path / "c"),
        "HELM_CONFIG_HOME": str(tmp_path / "g"),
        "HELM_DATA_HOME": str(tmp_path / "d"),
    }
    # The namespace is unique, so the release name makes cluster-scoped names unique too.
    result = subprocess.run(
        [helm, "template", namespace, str(CHART), "--namespace", namespace, "-f", str(values)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    cluster_names = [d["metadata"]["name"] for d in docs if d["kind"] in CLUSTER_SCOPED]
    if values_name == "dns":  # fullnameOverride: suffix the cluster-scoped names
        docs = relocate(docs, namespace)
        cluster_names = [d["metadata"]["name"] for d in docs if d["kind"] in CLUSTER_SCOPED]
    assert all(namespace in n for n in cluster_names), cluster_names
    apply_and_compare(controlplane.admin(), docs)
    if values_name == "ha-monitoring":
        kinds = {d["kind"] for d in docs}
        assert {"PodDisruptionBudget", "Service", "PodMonitor", "ServiceMonitor",
                "PrometheusRule"} <= kinds, kinds
