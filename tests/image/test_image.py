"""The built container image, run as a kubelet would run it, against a real API server.

``make image-test`` runs this after ``make image``. The container gets the exact command of
``manifests/kube-dns-autoscaler.yaml``, in-cluster configuration only (no kubeconfig), a
real ServiceAccount token of ``kube-system/kube-dns-autoscaler`` (the manifest's RBAC and
nothing else), a read-only root filesystem without any tmpfs, uid 65534, no capabilities
and the manifest's 64Mi memory limit. Figures (image size, RSS, stop time) are printed.
"""

from __future__ import annotations

import json
import os
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import urllib3
import yaml

from tests.controlplane import ControlPlane, ensure_binaries
from tests.image.pod import (
    PodContainer,
    PodNetwork,
    ServiceAccountFiles,
    podman,
)
from tests.integration.support import create_nodes, replicas, wait_replicas, wait_until

REPO = Path(__file__).resolve().parents[2]
MANIFEST = REPO / "manifests" / "kube-dns-autoscaler.yaml"
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
IMAGE = os.environ.get("CPA_IMAGE", f"localhost/cluster-proportional-autoscaler-py:{VERSION}")
NS = "kube-system"

pytestmark = pytest.mark.timeout(300)


def manifest_docs() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d]


def manifest_container() -> dict[str, Any]:
    deployment = next(d for d in manifest_docs() if d["kind"] == "Deployment")
    container: dict[str, Any] = deployment["spec"]["template"]["spec"]["containers"][0]
    return container


def report(**figures: object) -> None:
    print("\n[image-test] " + " ".join(f"{k}={v}" for k, v in figures.items()), flush=True)


@pytest.fixture(scope="module")
def image() -> str:
    if podman("image", "exists", IMAGE, check=False).returncode != 0:
        pytest.fail(f"image {IMAGE} not found: run `make image` first (or set CPA_IMAGE)")
    return IMAGE


@pytest.fixture(scope="module")
def network() -> Iterator[PodNetwork]:
    net = PodNetwork()
    try:
        net.create()
        yield net
    finally:
        net.close()
    assert net.leftovers() == [], f"left on the host: {net.leftovers()}"


@pytest.fixture(scope="module")
def plane(network: PodNetwork) -> Iterator[ControlPlane]:
    """A control plane listening on the host end of the Pod's veth, with the manifest's
    ServiceAccount and RBAC (not its Deployment: the container stands for that)."""
    cp = ControlPlane(bin_dir=ensure_binaries(), bind_address=network.host_ip)
    try:
        cp.start()
        for doc in manifest_docs():
            if doc["kind"] != "Deployment":
                cp.admin().apply(doc)
        yield cp
    finally:
        cp.stop()


@pytest.fixture
def sa_files(plane: ControlPlane) -> Iterator[ServiceAccountFiles]:
    token = plane.service_account_token(NS, "kube-dns-autoscaler")
    files = ServiceAccountFiles(token, plane.ca_file.read_bytes(), NS)
    yield files
    files.close()


def coredns(plane: ControlPlane) -> None:
    plane.admin().apply({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "coredns", "namespace": NS},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"k8s-app": "kube-dns"}},
                 "template": {"metadata": {"labels": {"k8s-app": "kube-dns"}},
                              "spec": {"containers": [{"name": "coredns",
                                                       "image": "coredns:stand-in"}]}}},
    })


def test_image_metadata(image: str) -> None:
    info = json.loads(podman("image", "inspect", image).stdout)[0]
    config = info["Config"]
    assert config["Entrypoint"] == ["/cluster-proportional-autoscaler"]
    assert config["User"] == "65534:65534"
    assert "8080/tcp" in config.get("ExposedPorts", {})
    labels = config["Labels"]
    assert labels["org.opencontainers.image.version"] == VERSION
    assert labels["org.opencontainers.image.title"] == "cluster-proportional-autoscaler-py"
    report(image=image, size_bytes=info["Size"], size_mib=round(info["Size"] / 2**20, 1))


def test_version_and_no_shell(image: str) -> None:
    proc = podman("run", "--rm", "--network", "none", "--read-only", "--read-only-tmpfs=false",
                  "--cap-drop", "ALL", image, "--version")
    assert proc.stdout.strip() == VERSION
    # Distroless: there is nothing to exec but the autoscaler.
    for shell in ("/bin/sh", "/bin/bash"):
        proc = podman("run", "--rm", "--network", "none", "--entrypoint", shell, image, "-c",
                      "true", check=False)
        assert proc.returncode != 0, f"{shell} exists in the image"


def test_runs_as_the_manifest_says(image: str, network: PodNetwork, plane: ControlPlane,
                                   sa_files: ServiceAccountFiles) -> None:
    admin = plane.admin()
    coredns(plane)
    create_nodes(admin, "img", 2, cpu="4")
    command = manifest_container()["command"]
    health = urllib3.PoolManager(retries=False, timeout=2.0)

    def get(path: str) -> tuple[int, str]:
        resp = health.request("GET", f"http://{network.pod_ip}:8080{path}")
        return resp.status, resp.data.decode()

    container = PodContainer(image, command, network=network, sa=sa_files,
                             api_host=network.host_ip, api_port=plane.port)
    try:
        # 2 nodes x 4 cores: both axes give 1, preventSinglePointFailure lifts it to 2.
        wait_until("/healthz 200 on the Pod IP", lambda: get("/healthz")[0] == 200, 60)
        ready_after = time.monotonic() - container.started
        wait_replicas(admin, NS, "deployment", "coredns", 2, timeout=60)
        first_write = time.monotonic() - container.started
        cm = admin.get(f"/api/v1/namespaces/{NS}/configmaps/kube-dns-autoscaler")
        assert cm["data"] == {"linear": '{"coresPerReplica":256,"includeUnschedulableNodes":'
                                        'true,"nodesPerReplica":16,'
                                        '"preventSinglePointFailure":true}'}
        wait_until("/last-poll 200", lambda: get("/last-poll") == (200, ""), 30)
        status, metrics = get("/metrics")
        assert status == 200 and 'cpa_polls_total{result="success"}' in metrics
        assert 'cpa_target_replicas{target="deployment/coredns"} 2.0' in metrics

        # 40 nodes: ceil(40/16) = 3 replicas.
        changed = time.monotonic()
        create_nodes(admin, "img", 38, cpu="4", start=2)
        wait_replicas(admin, NS, "deployment", "coredns", 3, timeout=60)
        followed = time.monotonic() - changed

        proc_status = container.proc_status()
        assert proc_status["Uid"].split()[:2] == ["65534", "65534"]
        assert proc_status["Gid"].split()[:2] == ["65534", "65534"]
        assert int(proc_status["CapEff"], 16) == 0
        assert proc_status["NoNewPrivs"].strip() == "1"
        rss_kib = int(proc_status["VmRSS"].split()[0])
        hwm_kib = int(proc_status["VmHWM"].split()[0])
        assert container.changed_files() == [], "the container wrote to its filesystem"
        logs = container.logs()
        for event in ("nodes.synced", "configmap.created", "scale.changed", "params.loaded"):
            assert event in logs, f"{event} missing from the logs:\n{logs}"
        assert "in-cluster" in logs

        # A kubelet sends SIGTERM and kills after the grace period; with a 2 s grace, exit
        # code 0 (not 137) means it stopped by itself within 2 s.
        code, took = container.stop(grace_seconds=2)
        assert code == 0, f"exit code {code} after SIGTERM:\n{container.logs()[-3000:]}"
        assert "stopped" in container.logs()
        assert replicas(admin, NS, "deployment", "coredns") == 3
        report(healthz_after_s=round(ready_after, 2), first_write_after_s=round(first_write, 2),
               node_change_to_replicas_s=round(followed, 2), rss_mib=round(rss_kib / 1024, 1),
               peak_rss_mib=round(hwm_kib / 1024, 1), sigterm_to_exit_s=round(took, 2))
    finally:
        container.remove()
