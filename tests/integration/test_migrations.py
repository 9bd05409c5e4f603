"""Migration from what each distribution runs (docs/migration.md), against the real API
server: the distribution's autoscaler is applied first (tests/integration/migrations/),
then our overlay or values file is rendered (kubectl kustomize, helm template) and applied
over it. Afterwards exactly one autoscaler Deployment targets CoreDNS (the old one was
replaced in place: same name, same immutable selector) and it runs our image; its command
line is then run by the real daemon, as the overlay's ServiceAccount (the overlay's RBAC,
nothing else), and it scales CoreDNS without the other-writer warning (scale.overwritten).

Isolation: every object moves into a fresh namespace and cluster-scoped names get a
suffix (test_manifests_apply.relocate), the daemon's --namespace follows.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cluster.cluster import ensure_node_binaries
from tests.controlplane import ControlPlane
from tests.integration.support import AutoscalerProcess, create_workload, wait_replicas
from tests.integration.test_manifests_apply import Doc, relocate, strict_apply

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
BEFORE = Path(__file__).parent / "migrations"
MIGRATIONS = REPO / "migrations"
CHART = REPO / "charts" / "cluster-proportional-autoscaler"
HELM = REPO / ".cache" / "bin" / "helm"
NAME = (REPO / "image" / "name.txt").read_text().strip()
OURS = f"{NAME}:0.1.0"
# Upstream chart values a user of the upstream chart has (its keys, unchanged).
UPSTREAM_VALUES = {
    "image": {"repository": "registry.k8s.io/cpa/cluster-proportional-autoscaler",
              "tag": "v1.10.3"},
    "config": {"linear": {"coresPerReplica": 256, "nodesPerReplica": 16, "min": 1,
                          "preventSinglePointFailure": True}},
    "options": {"target": "deployment/coredns", "logLevel": 2},
}


@dataclass(frozen=True)
class Case:
    name: str
    expected: int          # coredns replicas with no nodes (the formula's floor)


CASES = [Case("dns-addon", 1), Case("kops", 1), Case("kubespray", 2), Case("eks", 1),
         Case("upstream-helm", 1)]


def kustomize(path: Path) -> list[Doc]:
    kubectl = ensure_node_binaries() / "kubectl"
    out = subprocess.run([str(kubectl), "kustomize", str(path)], capture_output=True,
                         text=True, check=True, timeout=60).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def helm_template(values: list[dict[str, Any] | Path]) -> list[Doc]:
    if not HELM.exists():
        subprocess.run(["bash", str(REPO / "scripts" / "install-helm.sh")], check=True,
                       stdout=subprocess.DEVNULL)
    args = [str(HELM), "template", "dns-autoscaler", str(CHART), "--namespace", "kube-system"]
    files = []
    for v in values:
        if isinstance(v, Path):
            args += ["-f", str(v)]
        else:
            path = Path(subprocess.run(["mktemp"], capture_output=True, text=True,
                                       check=True).stdout.strip())
            path.write_text(yaml.safe_dump(v))
            files.append(path)
            args += ["-f", str(path)]
    try:
        out = subprocess.run(args, capture_output=True, text=True, check=True, timeout=60).stdout
    finally:
        for f in files:
            f.unlink()
    return [d for d in yaml.safe_load_all(out) if d]


def before_and_after(case: Case) -> tuple[list[Doc], list[Doc]]:
    if case.name == "upstream-helm":
        return (helm_template([UPSTREAM_VALUES]),
                helm_template([UPSTREAM_VALUES, MIGRATIONS / "upstream-helm" / "values.yaml"]))
    before = [d for d in yaml.safe_load_all((BEFORE / f"{case.name}.yaml").read_text()) if d]
    return before, kustomize(MIGRATIONS / case.name)


def container_argv(dep: Doc) -> list[str]:
    c = dep["spec"]["template"]["spec"]["containers"][0]
    argv: list[str] = [*c.get("command", []), *c.get("args", [])]
    return argv


def autoscalers(admin: Any, namespace: str) -> list[Doc]:
    """Deployments in ``namespace`` whose container runs an autoscaler of coredns."""
    items = admin.get(f"/apis/apps/v1/namespaces/{namespace}/deployments")["items"]
    return [d for d in items if d["metadata"]["name"] != "coredns" and any(
        a.lower().startswith("--target=") and "coredns" in a.lower()
        for a in container_argv(d))]


def kubeconfig_for_service_account(cp: ControlPlane, namespace: str, name: str,
                                   path: Path) -> Path:
    token = cp.service_account_token(namespace, name)
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "sa",
        "clusters": [{"name": "cp", "cluster": {"server": cp.server,
                                               "certificate-authority": str(cp.ca_file)}}],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "cp", "user": "sa"}}],
    }))
    return path


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_migration_replaces_the_distributions_autoscaler(
        case: Case, controlplane: ControlPlane, namespace: str, no_nodes: None,
        tmp_path: Path) -> None:
    admin = controlplane.admin()
    create_workload(admin, namespace, "deployment", "coredns", replicas=5)
    before, after = before_and_after(case)
    for doc in relocate(before, namespace):
        strict_apply(admin, doc)
    if case.name != "eks":
        old = autoscalers(admin, namespace)
        assert len(old) == 1
        assert old[0]["spec"]["template"]["spec"]["containers"][0]["image"].startswith(
            "registry.k8s.io/cpa/")

    # The migration: render, apply over what is there (a changed selector would be
    # rejected as immutable, a new name would leave two autoscalers).
    for doc in relocate(after, namespace):
        strict_apply(admin, doc)
    running = autoscalers(admin, namespace)
    assert len(running) == 1, [d["metadata"]["name"] for d in running]
    dep = running[0]
    spec = dep["spec"]["template"]["spec"]
    image = spec["containers"][0]["image"]
    assert image.startswith(NAME), image
    if case.name == "dns-addon":
        assert dep["metadata"]["labels"]["addonmanager.kubernetes.io/mode"] == "Reconcile"

    # Run that Deployment's command line with the real daemon, as its ServiceAccount.
    argv = container_argv(dep)
    args = [a for a in argv if not a.startswith("/")]
    args = [f"--namespace={namespace}" if a.startswith("--namespace=") else a for a in args]
    if not any(a.startswith("--namespace=") for a in args):
        args.append(f"--namespace={namespace}")
    args = [a for a in args if not a.startswith(("--v=", "--logtostderr"))]
    kubeconfig = kubeconfig_for_service_account(controlplane, namespace,
                                                spec["serviceAccountName"],
                                                tmp_path / "sa.kubeconfig")
    proc = AutoscalerProcess(kubeconfig, args, tmp_path / "autoscaler.log", poll_period=1)
    try:
        wait_replicas(admin, namespace, "deployment", "coredns", case.expected, timeout=30,
                      proc=proc)
        time.sleep(3)  # three more polls: nobody else writes
        assert proc.alive(), proc.logs()
        assert proc.events("scale.overwritten") == [], proc.logs()
        assert proc.events("scale.changed"), proc.logs()
        assert proc.last_poll()[0] == 200
    finally:
        proc.stop()


def _own_image_recipe() -> str:
    """The kustomization docs/migration.md ("Your own image") tells a user to write."""
    text = (REPO / "docs" / "migration.md").read_text()
    section = text[text.index("## Your own image"):]
    match = re.search(r"<<'EOF'\n(.*?)\nEOF\n", section, re.S)
    assert match, "docs/migration.md: no kustomization in 'Your own image'"
    return match.group(1)


@pytest.mark.parametrize("overlay", ["migrations/dns-addon", "migrations/kops",
                                     "migrations/kubespray", "migrations/eks", "manifests"])
def test_your_own_image_with_each_overlay(overlay: str, tmp_path: Path) -> None:
    """The documented kustomization over each overlay (in a checkout: mine/ beside
    migrations/) runs the given image in every container, and the published one nowhere."""
    recipe = _own_image_recipe()
    assert "resources: [../migrations/kops]" in recipe
    digest = "sha256:" + "ab" * 32
    mine = tmp_path / "mine"
    for name in ("migrations", "manifests"):
        shutil.copytree(REPO / name, tmp_path / name)
    mine.mkdir()
    (mine / "kustomization.yaml").write_text(
        recipe.replace("../migrations/kops", f"../{overlay}").replace("sha256:...", digest))
    images = {c["image"] for doc in kustomize(mine) if doc["kind"] == "Deployment"
              for c in doc["spec"]["template"]["spec"]["containers"]}
    assert images == {f"registry.example.com/you/cpa@{digest}"}, images
