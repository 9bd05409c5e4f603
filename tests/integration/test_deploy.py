"""``make deploy IMAGE=... KUBECONFIG=...`` against the real API server: it applies
manifests/ through a kustomize overlay whose only change is the image, and the Deployment
then carries exactly the reference given (by digest, by tag, by tag and digest), every
other field as the manifest says. A later deploy changes the image of the same Deployment
in place. ``WAIT=0``: this API server has no nodes, so no rollout could complete (the
rollout wait runs for real in `make cluster-e2e`, where a kubelet pulls the image).

A control plane of its own: the manifest's objects live in kube-system under fixed names.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cluster.cluster import ensure_node_binaries
from tests.controlplane import ControlPlane, ensure_binaries

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
MANIFEST = REPO / "manifests" / "kube-dns-autoscaler.yaml"
DEPLOYMENT = "/apis/apps/v1/namespaces/kube-system/deployments/kube-dns-autoscaler"
DIGEST = "sha256:" + "0123456789abcdef" * 4


@pytest.fixture(scope="module")
def plane() -> Iterator[ControlPlane]:
    cp = ControlPlane(bin_dir=ensure_binaries())
    try:
        cp.start()
        yield cp
    finally:
        cp.stop()


def make_deploy(plane: ControlPlane, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", "deploy", *args,
         f"KUBECONFIG={plane.admin_kubeconfig}",
         f"KUBECTL={ensure_node_binaries() / 'kubectl'}", "WAIT=0"],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False)


def manifest_deployment() -> dict[str, Any]:
    doc: dict[str, Any] = next(d for d in yaml.safe_load_all(MANIFEST.read_text())
                               if d and d["kind"] == "Deployment")
    return doc


def holds(live: Any, want: Any) -> bool:
    """``live`` has every field of ``want`` with its value (the API server adds defaults)."""
    if isinstance(want, dict):
        return isinstance(live, dict) and all(k in live and holds(live[k], v)
                                              for k, v in want.items())
    if isinstance(want, list):
        return isinstance(live, list) and len(live) == len(want) and all(
            holds(a, b) for a, b in zip(live, want, strict=True))
    return bool(live == want)


def exists(plane: ControlPlane) -> bool:
    status, _ = plane.admin().raw("GET", DEPLOYMENT)
    return status == 200


@pytest.mark.parametrize("image", [
    f"registry.example:5000/team/cpa@{DIGEST}",
    "registry.example:5000/team/cpa:1.2.3",
    f"registry.example/cpa:0.1.0@{DIGEST}",
])
def test_deploy_sets_exactly_the_given_image(plane: ControlPlane, image: str) -> None:
    proc = make_deploy(plane, f"IMAGE={image}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "deployment.apps/kube-dns-autoscaler" in proc.stdout, proc.stdout
    live = plane.admin().get(DEPLOYMENT)
    containers = live["spec"]["template"]["spec"]["containers"]
    assert [c["image"] for c in containers] == [image]
    # Nothing but the image differs from the manifest's Deployment.
    want = manifest_deployment()
    want["spec"]["template"]["spec"]["containers"][0]["image"] = image
    assert holds(live["spec"], want["spec"]), (live["spec"], want["spec"])
    assert holds(live["metadata"], want["metadata"])


def test_a_second_deploy_updates_the_same_deployment(plane: ControlPlane) -> None:
    first = make_deploy(plane, "IMAGE=registry.example/cpa:1.0.0")
    assert first.returncode == 0, first.stdout + first.stderr
    live = plane.admin().get(DEPLOYMENT)
    uid, generation = live["metadata"]["uid"], live["metadata"]["generation"]
    second = make_deploy(plane, f"IMAGE=registry.example/cpa@{DIGEST}")
    assert second.returncode == 0, second.stdout + second.stderr
    live = plane.admin().get(DEPLOYMENT)
    assert live["metadata"]["uid"] == uid, "the Deployment was replaced, not updated"
    assert live["metadata"]["generation"] == generation + 1
    assert live["spec"]["template"]["spec"]["containers"][0]["image"] == \
        f"registry.example/cpa@{DIGEST}"
    for path in ("/api/v1/namespaces/kube-system/serviceaccounts/kube-dns-autoscaler",
                 "/apis/rbac.authorization.k8s.io/v1/clusterroles/system:kube-dns-autoscaler",
                 "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/"
                 "system:kube-dns-autoscaler"):
        assert plane.admin().get(path)["metadata"]["name"]


@pytest.mark.parametrize("image", ["registry.example:5000/cpa", ""])
def test_an_image_without_tag_or_digest_is_refused(plane: ControlPlane, image: str) -> None:
    before = plane.admin().get(DEPLOYMENT)["metadata"]["resourceVersion"] \
        if exists(plane) else None
    proc = make_deploy(plane, f"IMAGE={image}")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "usage" in proc.stdout or "give a tag" in proc.stderr, proc.stdout + proc.stderr
    after = plane.admin().get(DEPLOYMENT)["metadata"]["resourceVersion"] \
        if exists(plane) else None
    assert before == after, "a refused deploy changed the Deployment"
