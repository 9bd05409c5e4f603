"""image/ocibuild without building an image: the layer writer is deterministic, the
platform table is consistent, licences are read from Debian's copyright format."""

from __future__ import annotations

import gzip
import io
import json
import os
import runpy
import tarfile
import zipfile
from pathlib import Path

import pytest
from ocibuild import debian, oci, sbom, wheels
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


# --- wheels: cross-building what the package index lacks ---------------------------------

def _target_sysconfig(tree: Path, triplet: str) -> None:
    lib = tree / "usr" / "lib" / debian.PYTHON
    lib.mkdir(parents=True)
    (lib / f"_sysconfigdata__linux_{triplet}.py").write_text(
        "build_time_vars = " + repr({
            "CC": f"{triplet}-gcc", "CFLAGS": "-g -O2 -ffile-prefix-map=/build/python=.",
            "LDSHARED": f"{triplet}-gcc -shared -g", "Py_ENABLE_SHARED": 1,
            "INCLUDEPY": "/usr/include/python3.11", "SIZEOF_VOID_P": 4,
            "EXT_SUFFIX": f".cpython-311-{triplet}.so", "SOABI": f"cpython-311-{triplet}"}))


def test_cross_sysconfig_keeps_the_target_and_replaces_the_toolchain(tmp_path: Path) -> None:
    plat = PLATFORMS["linux/arm/v7"]
    _target_sysconfig(tmp_path / "tree", plat.triplet)
    name = wheels.write_sysconfigdata(plat, tmp_path / "tree", tmp_path / "sysroot",
                                      tmp_path / "out", prefix_map=f"{tmp_path}=/build")
    got = runpy.run_path(str(tmp_path / "out" / f"{name}.py"))["build_time_vars"]
    # The target's own facts stay: the extension suffix, pointer size, ABI.
    assert got["EXT_SUFFIX"] == ".cpython-311-arm-linux-gnueabihf.so"
    assert got["SIZEOF_VOID_P"] == 4
    assert got["SOABI"] == "cpython-311-arm-linux-gnueabihf"
    # The toolchain is the cross compiler with fixed flags, in the extracted sysroot.
    assert got["CC"] == "arm-linux-gnueabihf-gcc"
    cflags = got["CFLAGS"].split()
    assert f"--sysroot={tmp_path / 'sysroot'}" in cflags
    assert f"-ffile-prefix-map={tmp_path}=/build" in cflags
    assert "-g0" in cflags and "-g" not in cflags
    assert got["LDSHARED"].split()[:2] == ["arm-linux-gnueabihf-gcc",
                                          f"--sysroot={tmp_path / 'sysroot'}"]
    assert "-s" in got["LDSHARED"].split()
    assert got["INCLUDEPY"] == str(tmp_path / "sysroot" / "usr" / "include" / "python3.11")
    assert got["Py_ENABLE_SHARED"] == 0, "an extension must not link libpython"


def test_sysroot_symlinks_resolve_inside_it(tmp_path: Path) -> None:
    root = tmp_path / "sysroot"
    (root / "lib" / "powerpc64le-linux-gnu").mkdir(parents=True)
    (root / "lib" / "powerpc64le-linux-gnu" / "ld64.so.2").write_text("loader")
    (root / "lib64").mkdir()
    (root / "lib64" / "ld64.so.2").symlink_to("/lib/powerpc64le-linux-gnu/ld64.so.2")
    (root / "lib64" / "rel").symlink_to("../lib")
    wheels.relative_symlinks(root)
    assert os.readlink(root / "lib64" / "ld64.so.2") == "../lib/powerpc64le-linux-gnu/ld64.so.2"
    assert (root / "lib64" / "ld64.so.2").read_text() == "loader"
    assert os.readlink(root / "lib64" / "rel") == "../lib"


def _sdist(path: Path, names: list[str]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name in names:
            info = tarfile.TarInfo(name)
            info.size = 1
            tar.addfile(info, io.BytesIO(b"x"))
    return path


def test_sdist_unpacks_into_its_top_directory(tmp_path: Path) -> None:
    sdist = _sdist(tmp_path / "p-1.0.tar.gz", ["p-1.0/setup.py", "p-1.0/src/p/_c.c"])
    top = wheels.unpack(sdist, tmp_path / "src")
    assert top == tmp_path / "src" / "p-1.0"
    assert (top / "src" / "p" / "_c.c").read_text() == "x"


def test_sdist_members_outside_it_are_refused(tmp_path: Path) -> None:
    for bad in ("p-1.0/../../escape", "/etc/passwd"):
        sdist = _sdist(tmp_path / "bad.tar.gz", ["p-1.0/setup.py", bad])
        with pytest.raises(SystemExit, match="refusing member"):
            wheels.unpack(sdist, tmp_path / "src")
    assert not (tmp_path / "escape").exists()


def _elf(machine: int, big_endian: bool = False) -> bytes:
    header = bytearray(64)
    header[:4] = b"\x7fELF"
    header[4] = 1
    header[5] = 2 if big_endian else 1
    header[18:20] = machine.to_bytes(2, "big" if big_endian else "little")
    return bytes(header)


def test_elf_machine_in_either_byte_order() -> None:
    assert wheels.elf_machine(_elf(40)) == PLATFORMS["linux/arm/v7"].elf_machine
    assert wheels.elf_machine(_elf(22, big_endian=True)) == PLATFORMS["linux/s390x"].elf_machine
    assert wheels.elf_machine(b"#!/bin/sh\n") is None


def test_cross_built_wheel_is_checked(tmp_path: Path) -> None:

    plat = PLATFORMS["linux/ppc64le"]
    _target_sysconfig(tmp_path / "tree", plat.triplet)
    suffix = f".cpython-311-{plat.triplet}.so"

    def wheel(members: dict[str, bytes]) -> Path:
        path = tmp_path / "w.whl"
        with zipfile.ZipFile(path, "w") as zf:
            for name, data in members.items():
                zf.writestr(name, data)
        return path

    good = wheel({"m/__init__.py": b"", f"m/_core{suffix}": _elf(plat.elf_machine)})
    wheels.check_wheel(good, plat, tmp_path / "tree", pure=False)
    with pytest.raises(SystemExit, match="not a linux/ppc64le extension"):
        wheels.check_wheel(wheel({f"m/_core{suffix}": _elf(62)}), plat, tmp_path / "tree",
                           pure=False)
    with pytest.raises(SystemExit, match="not a linux/ppc64le extension"):
        wheels.check_wheel(wheel({"m/_core.cpython-311-x86_64-linux-gnu.so":
                                  _elf(plat.elf_machine)}), plat, tmp_path / "tree",
                           pure=False)
    with pytest.raises(SystemExit, match="has no C extension"):
        wheels.check_wheel(wheel({"m/__init__.py": b""}), plat, tmp_path / "tree", pure=False)
    wheels.check_wheel(wheel({"m/__init__.py": b""}), plat, tmp_path / "tree", pure=True)


def test_build_tools_are_pinned() -> None:
    repo = Path(__file__).resolve().parents[3]
    pins = wheels.requirement_lines(repo / "image" / "build-requirements.txt")
    assert pins and all("==" in pin for pin in pins), pins
    names = {wheels.normalize(pin.split("==")[0]) for pin in pins}
    assert {"setuptools", "setuptools-scm", "packaging"} <= names


def test_cross_compilers_of_the_foreign_platforms(capsys: pytest.CaptureFixture[str]) -> None:
    from ocibuild.__main__ import main
    from ocibuild.platforms import native

    assert main(["cross-compilers", "--platforms", "all"]) == 0
    lines = capsys.readouterr().out.splitlines()
    foreign = [p for p in PLATFORMS.values() if p != native()]
    assert lines == [f"{p.triplet}-gcc {p.cross_gcc}" for p in foreign]
    assert "s390x-linux-gnu-gcc gcc-s390x-linux-gnu" in lines or native().oci_arch == "s390x"


def test_sdist_download_asks_for_that_distribution_only_as_source(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the cross-built distribution comes as an sdist: with ``--no-binary=:all:`` pip
    would also compile from source the build requirements it installs to read the sdist's
    metadata (PyYAML's Cython: minutes of a cold build)."""
    calls: list[tuple[str, ...]] = []

    def pip(*args: str) -> None:
        calls.append(args)
        dest = Path(next(a for a in args if a.startswith("--dest=")).removeprefix("--dest="))
        (dest / "PyYAML-6.0.3.tar.gz").write_bytes(b"")

    monkeypatch.setattr(wheels, "_pip", pip)
    builder = wheels.CrossBuilder(tmp_path, tmp_path / "work", native=None)  # type: ignore[arg-type]
    assert builder.sdist("PyYAML==6.0.3").name == "PyYAML-6.0.3.tar.gz"
    (args,) = calls
    assert "--no-binary=pyyaml" in args
    assert not any(":all:" in a for a in args), args
