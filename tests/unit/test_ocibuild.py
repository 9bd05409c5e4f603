"""image/ocibuild without building an image: the layer writer is deterministic, the
platform table is consistent, licences are read from Debian's copyright format."""

from __future__ import annotations

import gzip
import io
import json
import os
import tarfile
from pathlib import Path

from ocibuild import debian, oci, sbom
from ocibuild.platforms import PLATFORMS, parse


def _tree(root: Path, names: list[str]) -> None:
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(name)
        os.utime(path, (12345, 12345 + len(name)))
    (root / "tmp").mkdir()
    (root / "link").symlink_to("a/b")


def test_layers_do_not_depend_on_creation_order_or_file_times(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    _tree(one, ["a/b", "a/c", "z", "m/n/o"])
    _tree(two, ["m/n/o", "z", "a/c", "a/b"])
    os.utime(two / "z", (999, 999))
    layers = [oci.layer(oci.Layout(tmp_path / f"out{i}"), root, lambda _: True, 1700000000)
              for i, root in enumerate((one, two))]
    assert layers[0] == layers[1]
    data = gzip.decompress((tmp_path / "out0" / "blobs" / "sha256" /
                            layers[0].blob.digest.removeprefix("sha256:")).read_bytes())
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = tar.getmembers()
    assert [m.name for m in members] == sorted(m.name for m in members)
    assert {m.mtime for m in members} == {1700000000}
    assert {(m.uid, m.gid, m.uname, m.gname) for m in members} == {(0, 0, "", "")}
    assert next(m for m in members if m.name == "link").linkname == "a/b"
    assert next(m for m in members if m.name == "tmp").isdir()


def test_index_lists_platforms_and_is_tagged(tmp_path: Path) -> None:
    layout = oci.Layout(tmp_path)
    root = tmp_path / "root"
    _tree(root, ["f"])
    lay = oci.layer(layout, root, lambda _: True, 0)
    plat = PLATFORMS["linux/arm/v7"].oci()
    man = oci.image(layout, [lay], plat, {"User": "65534"}, "1970-01-01T00:00:00Z", ["x"], {})
    idx = oci.index(layout, [(man, plat)], {})
    layout.tag(idx, "1.0")
    layout.tag(idx, "1.0")
    listed = json.loads((tmp_path / "index.json").read_text())["manifests"]
    assert [m["digest"] for m in listed] == [idx.digest]
    doc = json.loads(layout.read(idx.digest))
    assert doc["manifests"][0]["platform"] == {"architecture": "arm", "os": "linux",
                                               "variant": "v7"}
    config = json.loads(layout.read(json.loads(layout.read(man.digest))["config"]["digest"]))
    assert config["rootfs"]["diff_ids"] == [lay.diff_id] and config["architecture"] == "arm"


def test_platform_names() -> None:
    assert [p.name for p in parse("linux/arm64,linux/amd64")] == ["linux/amd64", "linux/arm64"]
    assert PLATFORMS["linux/arm/v7"].slug == "linux-arm-v7"
    assert {p.deb_arch for p in parse("all")} == {"amd64", "arm64", "armhf", "ppc64el",
                                                 "s390x"}


def test_dep5_licences_become_spdx() -> None:
    text = ("Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\n"
            "Files: *\nLicense: GPL-2+\n\nFiles: x\nLicense: Artistic or GPL-1+\n\n"
            "License: GPL-2+\n text\n")
    assert debian.licenses(text) == ["GPL-2+", "Artistic or GPL-1+"]
    pkg = debian.DebPackage("p", "1", "amd64", "p", "1", "")
    assert sbom.debian_license(pkg, text) == (
        "GPL-2.0-or-later AND (Artistic-1.0-Perl OR GPL-1.0-or-later)")
    glibc = debian.DebPackage("libc6", "2.36", "amd64", "glibc", "2.36", "")
    assert sbom.debian_license(glibc, "free text") == "LGPL-2.1-or-later AND GPL-2.0-or-later"


def test_control_parsing() -> None:
    fields = debian.parse_control("Package: a\nSource: b (1.2)\nDescription: x\n more\n")
    assert fields == {"Package": "a", "Source": "b (1.2)", "Description": "x\nmore"}
