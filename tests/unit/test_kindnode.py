"""image/ocibuild/kindnode.py without a node: the component images kubeadm starts (named as
kubeadm names them, the binary in a layer of its own over what it needs from the tree, a
lower layer shared byte for byte between images that need the same), and the one-platform
archive `kind load image-archive` takes."""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from pathlib import Path

import pytest
from ocibuild import kindnode, oci
from ocibuild.platforms import PLATFORMS, native


def _tree(root: Path) -> Path:
    """A tiny merged-/usr tree: /lib -> usr/lib, a tool with an alternatives link, and the
    libgcc_s that every image gets (glibc dlopen()s it)."""
    (root / "usr" / "lib" / native().triplet).mkdir(parents=True)
    (root / "usr" / "lib" / native().triplet / "libgcc_s.so.1").write_text("not an ELF")
    (root / "usr" / "sbin").mkdir(parents=True)
    (root / "etc" / "alternatives").mkdir(parents=True)
    (root / "lib").symlink_to("usr/lib")
    (root / "usr" / "sbin" / "tool-nft").write_text("#!/bin/sh\n")
    (root / "etc" / "alternatives" / "tool").symlink_to("/usr/sbin/tool-nft")
    (root / "usr" / "sbin" / "tool").symlink_to("/etc/alternatives/tool")
    (root / "etc" / "protocols").write_text("tcp 6 TCP\n")
    return root


def _binary(path: Path, text: str) -> Path:
    path.write_text(f"#!/bin/sh\necho {text}\n")
    return path


def _files(layout: Path, manifest_digest: str) -> list[list[str]]:
    manifest = json.loads((layout / "blobs/sha256" / manifest_digest[7:]).read_bytes())
    out = []
    for layer in manifest["layers"]:
        data = gzip.decompress((layout / "blobs/sha256" / layer["digest"][7:]).read_bytes())
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            out.append([m.name for m in tar.getmembers() if not m.isdir()])
    return out


def test_components_are_named_as_kubeadm_names_them_and_share_their_lower_layer(
        tmp_path: Path) -> None:
    tree = _tree(tmp_path / "tree")
    comps = [
        kindnode.Component("registry.k8s.io/kube-scheduler:v1.35.4",
                           _binary(tmp_path / "sched", "s"), "/usr/local/bin/kube-scheduler"),
        kindnode.Component("registry.k8s.io/etcd:3.6.6-0", _binary(tmp_path / "etcd", "e"),
                           "/usr/local/bin/etcd"),
        kindnode.Component("registry.k8s.io/kube-proxy:v1.35.4", _binary(tmp_path / "kp", "p"),
                           "/usr/local/bin/kube-proxy",
                           extra=("/usr/sbin/tool", "/etc/alternatives/tool", "/etc/protocols")),
        kindnode.Component("registry.k8s.io/pause:3.10.1", _binary(tmp_path / "pause", "z"),
                           "/pause", entrypoint=("/pause", "pause")),
    ]
    out = tmp_path / "layout"
    built = kindnode.build(tree, tmp_path / "work", out, comps, 0)
    assert [ref for ref, _ in built] == [c.ref for c in comps]

    index = json.loads((out / "index.json").read_text())
    assert [m["annotations"][kindnode.NAME_KEY] for m in index["manifests"]] == \
        [c.ref for c in comps]
    assert {m["platform"]["architecture"] for m in index["manifests"]} == {native().oci_arch}

    sched, etcd, proxy, pause = (_files(out, digest) for _, digest in built)
    assert sched[1] == ["usr/local/bin/kube-scheduler"]
    assert etcd[1] == ["usr/local/bin/etcd"]
    # The same needs, the same lower layer: stored once in the node's containerd.
    sched_layers = json.loads((out / "blobs/sha256" / built[0][1][7:]).read_bytes())["layers"]
    etcd_layers = json.loads((out / "blobs/sha256" / built[1][1][7:]).read_bytes())["layers"]
    assert sched_layers[0] == etcd_layers[0] and sched_layers[1] != etcd_layers[1]
    # kube-proxy's tool resolves as on the node: every link of the chain comes along, and
    # the tree's /lib -> usr/lib link is there for the ELF interpreter's path.
    assert {"usr/sbin/tool", "etc/alternatives/tool", "usr/sbin/tool-nft",
            "etc/protocols", "lib", "etc/passwd"} <= set(proxy[0])
    manifest = json.loads((out / "blobs/sha256" / built[3][1][7:]).read_bytes())
    config = json.loads((out / "blobs/sha256" / manifest["config"]["digest"][7:]).read_bytes())
    assert config["config"]["Entrypoint"] == ["/pause", "pause"]
    assert pause[1] == ["pause"]


def test_bad_component_spec_is_refused() -> None:
    with pytest.raises(SystemExit):
        kindnode.components_from_spec([{"ref": "x", "binary": "b", "path": "/p",
                                        "extra": "not-a-list"}])
    [comp] = kindnode.components_from_spec([{"ref": "r:1", "binary": "/b", "path": "/p",
                                             "entrypoint": ["/p"]}])
    assert comp.entrypoint == ("/p",) and comp.extra == ()


def _index_of_two(tmp_path: Path) -> Path:
    layout_dir = tmp_path / "layout"
    layout = oci.Layout(layout_dir)
    manifests = []
    for name in ("linux/amd64", "linux/arm64"):
        root = tmp_path / name.replace("/", "-")
        root.mkdir()
        (root / "arch").write_text(name)
        lay = oci.layer(layout, root, lambda _: True, 0)
        plat = PLATFORMS[name].oci()
        manifests.append((oci.image(layout, [lay], plat, {}, "1970-01-01T00:00:00Z",
                                    ["x"], {}), plat))
    layout.tag(oci.index(layout, manifests, {}), "0.1.0")
    return layout_dir


def test_archive_holds_one_platform_under_the_name_the_nodes_use(tmp_path: Path) -> None:
    layout_dir = _index_of_two(tmp_path)
    out = tmp_path / "image.tar"
    digest = kindnode.archive(layout_dir, "0.1.0", "linux/arm64", "localhost/x:e2e", out)
    with tarfile.open(out) as tar:
        names = tar.getnames()
        top = json.loads(tar.extractfile("index.json").read())  # type: ignore[union-attr]
    [entry] = top["manifests"]
    assert entry["digest"] == digest
    assert entry["annotations"] == {kindnode.NAME_KEY: "localhost/x:e2e",
                                    kindnode.REF_KEY: "localhost/x:e2e"}
    assert entry["platform"]["architecture"] == "arm64"
    # The manifest, its config and its one layer: nothing of the other platform.
    assert len([n for n in names if n.startswith("blobs/")]) == 3
    assert {"oci-layout", "index.json"} <= set(names)


def test_archive_says_what_is_missing(tmp_path: Path) -> None:
    layout_dir = _index_of_two(tmp_path)
    with pytest.raises(SystemExit, match="no image tagged"):
        kindnode.archive(layout_dir, "9.9", "linux/amd64", "x", tmp_path / "a.tar")
    with pytest.raises(SystemExit, match="no linux/s390x image"):
        kindnode.archive(layout_dir, "0.1.0", "linux/s390x", "x", tmp_path / "a.tar")
