"""The pure parts of the image's supply chain, without building an image: what the import
probe follows, what the standard library's pruning drops, how a build is judged against
image/lock.json, and how an attested SBOM is compared with an image's files."""

from __future__ import annotations

import ast
import base64
import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest
from ocibuild import attest, lock, oci
from ocibuild.platforms import PLATFORMS
from ocibuild.rootfs import STDLIB, RootFs

REPO = Path(__file__).resolve().parents[3]
PROBE = REPO / "image" / "ocibuild" / "importprobe.py"


def _probe_module() -> Any:
    import importlib.util
    spec = importlib.util.spec_from_file_location("importprobe", PROBE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_imports_in_script_only_code_are_not_followed() -> None:
    probe = _probe_module()
    tree = ast.parse(
        "import json\n"
        "def f():\n    import csv\n"
        "def _test():\n    import doctest\n"
        "def _shared():\n    import decimal\n"
        "x = _shared\n"
        "if __name__ == '__main__':\n    import pdb\n    _test()\n    _shared()\n")
    found = {name for name, _, _ in probe.imports_in_source(tree, "m")}
    # Function bodies count (a lazy import is an import); the __main__ block and a private
    # function only it calls do not; one used elsewhere too does.
    assert found == {"json", "csv", "decimal"}


def test_codec_names_in_the_code_are_found() -> None:
    probe = _probe_module()
    tree = ast.parse("b = s.encode('idna')\nopen(p, encoding='latin-1')\n"
                     "codecs.lookup('cp1252')\nx.encode(name)\n")
    assert sorted(probe.codec_names(tree)) == ["cp1252", "idna", "latin-1"]


def test_the_closure_of_a_real_package(tmp_path: Path) -> None:
    """The probe, run as the build runs it, over a small package: relative imports,
    submodules named by ``from . import``, lazy imports, and what cannot be imported."""
    pkg = tmp_path / "app"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from . import core\n")
    (pkg / "core.py").write_text("import json\ndef later():\n    from .extra import x\n"
                                 "    import not_installed_anywhere\n")
    (pkg / "extra.py").write_text("x = 1\nif __name__ == '__main__':\n    import tkinter\n")
    proc = subprocess.run([sys.executable, "-P", "-s", str(PROBE), "closure", "app"],
                          cwd=tmp_path, env={"PYTHONPATH": str(tmp_path)},
                          capture_output=True, text=True, check=True)
    doc = json.loads(proc.stdout.rsplit("IMPORTPROBE ", 1)[1])
    assert {"app", "app.core", "app.extra", "json", "json.decoder"} <= set(doc["importable"])
    assert "tkinter" not in doc["importable"]
    assert "not_installed_anywhere" in doc["absent"]
    assert "_winapi" in doc["absent"]   # json -> ... -> a Windows-only guarded import
    assert doc["via"]["app.extra"] == "app.core"


def test_prune_keeps_exactly_what_is_importable(tmp_path: Path) -> None:
    plat = PLATFORMS["linux/amd64"]
    dest = tmp_path / "rootfs"
    std = dest / STDLIB.lstrip("/")
    for rel in ("json/__init__.py", "json/decoder.py", "json/tests/__init__.py",
                "csv.py", "doctest.py", "sysconfig.py", "unittest/__init__.py",
                "encodings/__init__.py", "encodings/aliases.py", "encodings/utf_8.py",
                "encodings/cp1252.py", "lib-dynload/_json.cpython-311-x86_64-linux-gnu.so",
                "lib-dynload/_codecs_jp.cpython-311-x86_64-linux-gnu.so",
                "EXTERNALLY-MANAGED", "LICENSE.txt"):
        (std / rel).parent.mkdir(parents=True, exist_ok=True)
        (std / rel).write_text("")
    fs = RootFs(plat, tmp_path / "tree", dest)
    dropped = fs.prune({"json", "json.decoder", "_json", "csv", "encodings",
                        "encodings.utf_8"})
    left = sorted(str(p.relative_to(std)) for p in std.rglob("*") if p.is_file())
    assert left == ["LICENSE.txt", "csv.py", "encodings/__init__.py", "encodings/aliases.py",
                    "encodings/utf_8.py", "json/__init__.py", "json/decoder.py",
                    "lib-dynload/_json.cpython-311-x86_64-linux-gnu.so", "sysconfig.py"]
    assert "doctest.py" in dropped and "json/tests" in dropped


def _build(**changes: Any) -> dict[str, Any]:
    layer = {"diff_id": "sha256:aa", "digest": "sha256:bb", "size": 1}
    doc: dict[str, Any] = {
        "stdlib": ["json", "os"],
        "platforms": {"linux/amd64": {
            "debian": {"libc6": "2.36-9 sha256:11"},
            "wheels": {"msgspec==0.23.0": "m.whl sha256:22"},
            "layers": {"debian": dict(layer), "python": dict(layer), "code": dict(layer)}}}}
    for path, value in changes.items():
        *keys, last = path.split("__")
        target = doc
        for key in keys:
            target = target[key.replace("_", "/") if key.startswith("linux") else key]
        target[last] = value
    return lock.from_build(doc)


def test_the_lock_tells_changed_inputs_from_unreproduced_layers() -> None:
    base = _build()
    assert lock.compare(base, _build()) == ([], [])
    # Our code's layer is not pinned: a new commit changes nothing here.
    assert "code" not in base["platforms"]["linux/amd64"]["layers"]
    changed, broken = lock.compare(base, _build(
        platforms__linux_amd64__debian={"libc6": "2.36-10 sha256:33"}))
    assert changed == ["linux/amd64 debian libc6: 2.36-9 sha256:11 in the lock, "
                       "2.36-10 sha256:33 here"] and broken == []
    changed, _ = lock.compare(base, _build(stdlib=["json", "os", "zoneinfo"]))
    assert changed == ["standard library kept: +zoneinfo"]
    other = {"diff_id": "sha256:cc", "digest": "sha256:dd", "size": 1}
    changed, broken = lock.compare(base, _build(
        platforms__linux_amd64__layers={"debian": other, "python": other, "code": other}))
    assert changed == [] and len(broken) == 2 and "content sha256:cc" in broken[0]
    recompressed = {"diff_id": "sha256:aa", "digest": "sha256:ee", "size": 1}
    _, broken = lock.compare(base, _build(
        platforms__linux_amd64__layers={"debian": recompressed, "python": recompressed,
                                        "code": recompressed}))
    assert "the same content, compressed to sha256:ee" in broken[0]


def _image_tar(debs: dict[str, str], dists: dict[str, str]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        files = {f"var/lib/dpkg/status.d/{n}": f"Package: {n}\nVersion: {v}\n"
                 for n, v in debs.items()}
        files.update({f"opt/venv/lib/python3.11/site-packages/{n}-{v}.dist-info/METADATA":
                      f"Metadata-Version: 2.1\nName: {n}\nVersion: {v}\n"
                      for n, v in dists.items()})
        for name, text in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
    return raw.getvalue()


def _attestation(digest: str, doc: dict[str, Any], kind: str = attest.SPDX) -> str:
    st = {"_type": "https://in-toto.io/Statement/v0.1", "predicateType": kind,
          "subject": [{"name": "r", "digest": {"sha256": digest.removeprefix("sha256:")}}],
          "predicate": doc}
    return json.dumps({"payload": base64.b64encode(json.dumps(st).encode()).decode()})


def _spdx(platform: str, debs: dict[str, str], dists: dict[str, str]) -> dict[str, Any]:
    return {"name": f"img:0.1.0 {platform}", "packages": [
        *({"SPDXID": f"SPDXRef-deb-{n}", "name": n, "versionInfo": v} for n, v in debs.items()),
        *({"SPDXID": f"SPDXRef-pypi-{n}", "name": n, "versionInfo": v}
          for n, v in dists.items())]}


def test_an_attested_sbom_must_name_exactly_what_the_image_holds() -> None:
    debs, dists = {"libc6": "2.36-9", "libssl3": "3.0.17-1"}, {"msgspec": "0.23.0"}
    image = attest.export_packages(_image_tar(debs, dists))
    assert image == {"debian": debs, "python": dists}
    held = {"linux/amd64": image}
    good = _attestation("sha256:ab", _spdx("linux/amd64", debs, dists))
    assert attest.check([good], digest="sha256:ab", kind="spdxjson", images=held,
                        revision="") == []
    lying = _attestation("sha256:ab", _spdx("linux/amd64", {"libc6": "2.36-9"},
                                            {"msgspec": "0.22.0", "rich": "13"}))
    assert attest.check([lying], digest="sha256:ab", kind="spdxjson", images=held,
                        revision="") == [
        "linux/amd64: debian libssl3 3.0.17-1: in the image, not in the SBOM",
        "linux/amd64: python rich 13: in the SBOM, not in the image",
        "linux/amd64: python msgspec: 0.22.0 in the SBOM, 0.23.0 in the image"]
    assert attest.check([good], digest="sha256:cd", kind="spdxjson", images=held,
                        revision="")[0].startswith("an attestation's subject")
    assert attest.check([], digest="sha256:ab", kind="spdxjson", images=held,
                        revision="") == ["no spdxjson attestation of sha256:ab"]


def test_provenance_must_name_the_images_commit() -> None:
    prov = {"buildDefinition": {"externalParameters": {"source": {
        "digest": {"gitCommit": "a" * 40}}}}}
    line = _attestation("sha256:ab", prov, attest.SLSA)
    held: dict[str, dict[str, dict[str, str]]] = {"linux/amd64": {"debian": {}, "python": {}}}
    assert attest.check([line], digest="sha256:ab", kind="slsaprovenance1", images=held,
                        revision="a" * 40) == []
    assert "provenance of commit" in attest.check(
        [line], digest="sha256:ab", kind="slsaprovenance1", images=held,
        revision="b" * 40)[0]


@pytest.mark.parametrize("ref,expected", [
    ("127.0.0.1:5000/name@sha256:ab", ("127.0.0.1:5000/name", "sha256:ab")),
    ("127.0.0.1:5000/name:0.1.0", ("127.0.0.1:5000/name", "0.1.0")),
    ("ghcr.io/o/name", ("ghcr.io/o/name", "latest")),
])
def test_references(ref: str, expected: tuple[str, str]) -> None:
    assert attest.split_ref(ref) == expected


@pytest.mark.parametrize("compression", oci.COMPRESSIONS)
def test_layers_compress_deterministically_and_read_back(compression: str,
                                                         tmp_path: Path) -> None:
    if compression == "zstd":
        import shutil
        if shutil.which("zstd") is None:
            pytest.fail("zstd missing: apt-get install zstd (image/env.sh installs it)")
    data = b"layer" * 1000
    one, media_type = oci.compress(data, compression)
    two, _ = oci.compress(data, compression)
    assert one == two
    assert oci.decompress(one) == (media_type, data)
    assert media_type.endswith("+" + compression)
