"""The images kubeadm starts on a kind node, written as one OCI image layout; and our own
image as the archive ``kind load image-archive`` takes.

A kind node runs its control plane, kube-proxy, CoreDNS and every pod sandbox from images
that must already be in its containerd: no registry is reached. Each image here is one of
our binaries, distroless-style: the binary in its own layer, and under it whatever that
binary needs from the node's Debian tree (its shared libraries, read from its ELF
``NEEDED`` entries; for kube-proxy also iptables and conntrack, which it runs), plus
passwd/group entries and ``/tmp``. Images whose binaries need the same libraries share
that lower layer byte for byte, so containerd stores it once.

The layout's ``index.json`` names every image by the reference kubeadm uses
(``io.containerd.image.name``), which is what ``ctr images import`` reads.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ocibuild import oci, rootfs
from ocibuild.platforms import native

NAME_KEY = "io.containerd.image.name"
REF_KEY = "org.opencontainers.image.ref.name"
PATH_ENV = "PATH=/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin"


@dataclass(frozen=True)
class Component:
    """One image: ``ref`` (``registry.k8s.io/kube-proxy:v1.35.4``), the host ``binary``
    and where it goes in the image, the Debian paths it also needs, its entrypoint."""

    ref: str
    binary: Path
    path: str
    extra: tuple[str, ...] = ()
    entrypoint: tuple[str, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)


class _MergedUsrFs(rootfs.RootFs):
    """The node's tree has a merged /usr (``/lib -> usr/lib``): a library is copied by its
    /usr path, because RootFs copies a symlinked directory on the way (``/lib``) by copying
    all it points to (all of /usr/lib)."""

    def _find_lib(self, name: str, dirs: list[str]) -> str:
        return super()._find_lib(name, [d if d.startswith("/usr/") else f"/usr{d}"
                                        for d in dirs])

    def link_merged_usr(self) -> None:
        """The tree's top-level links into /usr (``/lib``, ``/bin``, ...), so that paths
        such as the ELF interpreter ``/lib64/ld-linux-x86-64.so.2`` resolve in the image."""
        for top in sorted(self.tree.root.iterdir()):
            if top.is_symlink() and os.readlink(top).startswith("usr/"):
                link = self.out(f"/{top.name}")
                if not link.is_symlink():
                    os.symlink(os.readlink(top), link)


def components_from_spec(spec: list[dict[str, object]]) -> list[Component]:
    """The build script's JSON list (``ref``, ``binary``, ``path`` and optionally
    ``extra``, ``entrypoint``, ``labels``) as components."""
    out = []
    for item in spec:
        extra = item.get("extra", [])
        entry = item.get("entrypoint", [])
        labels = item.get("labels", {})
        if not (isinstance(extra, list) and isinstance(entry, list)
                and isinstance(labels, dict)):
            raise SystemExit(f"ocibuild: bad component {item!r}")
        out.append(Component(ref=str(item["ref"]), binary=Path(str(item["binary"])),
                             path=str(item["path"]), extra=tuple(map(str, extra)),
                             entrypoint=tuple(map(str, entry)),
                             labels={str(k): str(v) for k, v in labels.items()}))
    return out


def build(tree: Path, work: Path, out: Path, components: list[Component],
          epoch: int) -> list[tuple[str, str]]:
    """Write every component's image into the layout ``out``; returns (ref, digest)."""
    shutil.rmtree(out, ignore_errors=True)
    layout = oci.Layout(out)
    entries = []
    for comp in components:
        manifest = _image(layout, tree, work / comp.ref.replace("/", "_").replace(":", "_"),
                          comp, epoch)
        entries.append(manifest.descriptor(
            platform=native().oci(), annotations={NAME_KEY: comp.ref, REF_KEY: comp.ref}))
    (out / "index.json").write_bytes(oci.canonical(
        {"schemaVersion": 2, "mediaType": oci.MT_INDEX, "manifests": entries}))
    return [(e["annotations"][NAME_KEY], e["digest"]) for e in entries]


def _image(layout: oci.Layout, tree: Path, dest: Path, comp: Component, epoch: int) -> oci.Blob:
    """One component's root filesystem in ``dest`` (removed afterwards), as two layers."""
    plat = native()
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    fs = _MergedUsrFs(plat, tree, dest)
    fs.link_merged_usr()
    for path in comp.extra:
        fs.copy(path)
    target = fs.out(comp.path)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(comp.binary, target)
    target.chmod(0o755)
    fs.add_libraries()
    fs.add_accounts()
    binary = comp.path.lstrip("/")
    base = oci.layer(layout, dest, lambda p: p != binary, epoch)
    top = oci.layer(layout, dest, lambda p: p == binary, epoch)
    shutil.rmtree(dest)
    config: dict[str, object] = {"Env": [PATH_ENV], "User": "0:0", "Labels": comp.labels}
    if comp.entrypoint:
        config["Entrypoint"] = list(comp.entrypoint)
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))
    return oci.image(layout, [base, top], plat.oci(), config, created,
                     ["what the binary needs from the node's Debian tree",
                      f"{comp.path}, built from its Go module"], {})


def main(tree: str, work: str, out: str, spec_file: str, epoch: int) -> int:
    spec = json.loads(Path(spec_file).read_text())
    if not isinstance(spec, list):
        raise SystemExit(f"ocibuild: {spec_file}: a JSON list of components expected")
    for ref, digest in build(Path(tree), Path(work), Path(out), components_from_spec(spec),
                             epoch):
        print(f"{ref} {digest}")
    return 0


def archive(layout_dir: Path, tag: str, platform: str, name: str, out: Path) -> str:
    """One platform's image of the index tagged ``tag`` in ``layout_dir``, as an OCI
    archive (a tar of a layout) naming it ``name``: what ``kind load image-archive``
    streams into each node's ``ctr images import``. Returns the manifest's digest.

    One platform only: the node runs that one, and ``ctr import --all-platforms`` (kind's
    flags) would otherwise store every platform of the index on every node."""
    layout = oci.Layout(layout_dir)
    doc = json.loads((layout_dir / "index.json").read_text())
    tagged = [m for m in doc["manifests"] if m.get("annotations", {}).get(REF_KEY) == tag]
    if not tagged:
        raise SystemExit(f"ocibuild: {layout_dir} has no image tagged {tag!r}")
    index = json.loads(layout.read(tagged[0]["digest"]))
    wanted = dict(zip(("os", "architecture", "variant"), platform.split("/"), strict=False))
    chosen = [m for m in index["manifests"]
              if {k: m["platform"].get(k, "") for k in wanted} == wanted]
    if not chosen:
        raise SystemExit(f"ocibuild: the index tagged {tag!r} has no {platform} image")
    manifest = chosen[0]
    body = json.loads(layout.read(manifest["digest"]))
    blobs = [manifest["digest"], body["config"]["digest"],
             *(layer["digest"] for layer in body["layers"])]
    entry = {**manifest, "annotations": {NAME_KEY: name, REF_KEY: name}}
    top = oci.canonical({"schemaVersion": 2, "mediaType": oci.MT_INDEX, "manifests": [entry]})
    with tarfile.open(out, "w") as tar:
        for arcname, data in (("oci-layout", b'{"imageLayoutVersion":"1.0.0"}'),
                              ("index.json", top)):
            info = tarfile.TarInfo(arcname)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for digest in blobs:
            hexdigest = digest.removeprefix("sha256:")
            tar.add(layout_dir / "blobs" / "sha256" / hexdigest, f"blobs/sha256/{hexdigest}")
    return str(manifest["digest"])
