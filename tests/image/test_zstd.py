"""The zstd variant (``make image-zstd``) is pullable as the default one is: pushed to the
real registry on loopback, pulled by podman and by containerd (Debian's, its own root,
state and socket under a temp dir, stopped by PID), unpacked and run. linux/amd64 only: the
layers hold the same tars as the gzip index (the configs, and so the image IDs, are the
same), so what this proves is that each client reads zstd layers."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.image.pod import podman
from tests.image.registry import OUT, Registry
from tests.integration.support import LoggedProcess

REPO = Path(__file__).resolve().parents[2]
ZSTD_OUT = REPO / ".cache" / "image" / "out-zstd"
PLATFORM = "linux/amd64"

pytestmark = pytest.mark.timeout(600)


def report(**figures: object) -> None:
    print("\n[image-test] " + " ".join(f"{k}={v}" for k, v in figures.items()), flush=True)


@pytest.fixture(scope="module")
def variant() -> Iterator[str]:
    """The variant's amd64 image pushed; ``host:port/name@sha256:<index>``."""
    if not (OUT / "digests.json").exists():
        pytest.fail(f"no image index in {OUT}: run `make image` first")
    began = time.monotonic()
    subprocess.run(["make", "-s", "--no-print-directory", "image-zstd",
                    f"ZSTD_PLATFORMS={PLATFORM}"], cwd=REPO, check=True,
                   capture_output=True, timeout=600)
    built = json.loads((ZSTD_OUT / "digests.json").read_text())
    gzip_built = json.loads((OUT / "digests.json").read_text())
    report(variant="zstd", made_in_s=round(time.monotonic() - began, 1),
           zstd_mib=round(built["sizes"][PLATFORM]["compressed"] / 2**20, 2),
           gzip_mib=round(gzip_built["sizes"][PLATFORM]["compressed"] / 2**20, 2))
    with Registry() as registry:
        yield registry.push("cpa-zstd", built["tag"], ZSTD_OUT / "layout")


def _layers_are_zstd(ref: str) -> None:
    blob = ZSTD_OUT / "layout" / "blobs" / "sha256"
    index = json.loads((blob / ref.rsplit("@sha256:", 1)[1]).read_text())
    manifest = json.loads((blob / index["manifests"][0]["digest"][7:]).read_text())
    assert {x["mediaType"] for x in manifest["layers"]} == {
        "application/vnd.oci.image.layer.v1.tar+zstd"}


def test_podman_pulls_and_runs_the_zstd_variant(variant: str) -> None:
    _layers_are_zstd(variant)
    image_id = podman("pull", "--quiet", "--tls-verify=false", "--platform", PLATFORM,
                      variant, timeout=300).stdout.strip().splitlines()[-1]
    try:
        out = podman("run", "--rm", "--network", "none", "--read-only", image_id,
                     "--version").stdout
        assert "follows cluster-proportional-autoscaler" in out
    finally:
        podman("rmi", "--force", image_id, check=False)
    report(client="podman", pulled_and_ran=variant)


@pytest.fixture
def containerd() -> Iterator[tuple[str, Path]]:
    if shutil.which("containerd") is None or shutil.which("ctr") is None:
        pytest.fail("containerd/ctr missing: tests/cluster/packages.sh installs them")
    work = Path(tempfile.mkdtemp(prefix="cpa-zstd-containerd-"))
    sock = work / "containerd.sock"
    (work / "config.toml").write_text(
        "version = 2\n"
        f'root = "{work / "root"}"\nstate = "{work / "state"}"\n'
        f'disabled_plugins = ["io.containerd.grpc.v1.cri"]\n'
        f'[grpc]\n  address = "{sock}"\n'
        f'[ttrpc]\n  address = "{work / "ttrpc.sock"}"\n'
        '[plugins."io.containerd.runtime.v1.linux"]\n  shim_debug = false\n')
    proc = LoggedProcess(["containerd", "--config", str(work / "config.toml")],
                         work / "containerd.log")
    try:
        deadline = time.monotonic() + 30
        while subprocess.run(["ctr", "--address", str(sock), "version"],
                             capture_output=True, check=False).returncode != 0:
            assert proc.alive(), proc.logs()[-2000:]
            assert time.monotonic() < deadline, "containerd did not start"
            time.sleep(0.2)
        yield str(sock), work
    finally:
        proc.stop(grace=20)
        subprocess.run(["umount", "-R", str(work / "state")], capture_output=True,
                       check=False)
        shutil.rmtree(work, ignore_errors=True)


def test_containerd_pulls_and_runs_the_zstd_variant(variant: str,
                                                    containerd: tuple[str, Path]) -> None:
    sock, _work = containerd

    def ctr(*args: str) -> str:
        proc = subprocess.run(["ctr", "--address", sock, "--namespace", "cpa-zstd", *args],
                              capture_output=True, text=True, check=False, timeout=300)
        assert proc.returncode == 0, f"ctr {' '.join(args)}: {proc.stderr}"
        return proc.stdout

    ctr("images", "pull", "--plain-http", "--platform", PLATFORM, variant)
    # As the image says: uid 65534 (its config), no network but loopback.
    out = ctr("run", "--rm", variant, "cpa-zstd-version",
              "/cluster-proportional-autoscaler", "--version")
    assert "follows cluster-proportional-autoscaler" in out, out
    report(client="containerd", pulled_and_ran=variant)
