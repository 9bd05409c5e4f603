"""Layers, image configs, manifests and the index, written as an OCI image layout.

Reproducible by construction: a layer is a tar of the tree with entries in sorted order,
every mtime set to SOURCE_DATE_EPOCH, owner root:root (numeric, no names), no hard links,
no extended attributes or pax headers that carry times; gzip with no name and mtime 0;
JSON with sorted keys. The same tree and epoch give the same bytes, whatever order the
filesystem lists the files in.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import stat
import subprocess
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MT_INDEX = "application/vnd.oci.image.index.v1+json"
MT_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MT_CONFIG = "application/vnd.oci.image.config.v1+json"
MT_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
MT_LAYER_ZSTD = "application/vnd.oci.image.layer.v1.tar+zstd"
COMPRESSIONS = ("gzip", "zstd")
# gzip: level 9 (zlib, no name, no time); zstd: level 19, one thread (the same bytes on
# every machine with the same zstd), with the content size in the frame header.
GZIP_LEVEL = 9
ZSTD = ("zstd", "-19", "-T1", "-q", "-c", "--no-progress")


def canonical(doc: Any) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


@dataclass(frozen=True)
class Blob:
    media_type: str
    digest: str
    size: int

    def descriptor(self, **extra: Any) -> dict[str, Any]:
        return {"mediaType": self.media_type, "digest": self.digest, "size": self.size,
                **extra}


class Layout:
    """An OCI image layout directory (``oci-layout``, ``index.json``, ``blobs/sha256``)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        (path / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
        (path / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')

    def put(self, data: bytes, media_type: str) -> Blob:
        digest = hashlib.sha256(data).hexdigest()
        blob = self.path / "blobs" / "sha256" / digest
        if not blob.exists():
            tmp = blob.with_suffix(".tmp")
            tmp.write_bytes(data)
            tmp.rename(blob)
        return Blob(media_type, f"sha256:{digest}", len(data))

    def read(self, digest: str) -> bytes:
        return (self.path / "blobs" / "sha256" / digest.removeprefix("sha256:")).read_bytes()

    def tag(self, blob: Blob, ref_name: str) -> None:
        """index.json names the image index ``ref_name`` (replacing that name's entry)."""
        path = self.path / "index.json"
        doc: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {
            "schemaVersion": 2, "mediaType": MT_INDEX, "manifests": []}
        key = "org.opencontainers.image.ref.name"
        doc["manifests"] = [m for m in doc["manifests"]
                            if m.get("annotations", {}).get(key) != ref_name]
        doc["manifests"].append(blob.descriptor(annotations={key: ref_name}))
        path.write_bytes(canonical(doc))


@dataclass(frozen=True)
class Layer:
    blob: Blob
    diff_id: str
    uncompressed: int


def compress(data: bytes, compression: str) -> tuple[bytes, str]:
    """The layer blob and its media type."""
    if compression == "gzip":
        packed = io.BytesIO()
        with gzip.GzipFile(filename="", mode="wb", compresslevel=GZIP_LEVEL, fileobj=packed,
                           mtime=0) as gz:
            gz.write(data)
        return packed.getvalue(), MT_LAYER
    if compression == "zstd":
        if shutil.which("zstd") is None:
            raise SystemExit("ocibuild: zstd missing for --compression zstd: apt-get install "
                             "zstd")
        proc = subprocess.run(ZSTD, input=data, capture_output=True, check=True)
        return proc.stdout, MT_LAYER_ZSTD
    raise SystemExit(f"ocibuild: unknown compression {compression!r}; one of {COMPRESSIONS}")


def decompress(blob: bytes) -> tuple[str, bytes]:
    """(media type, tar bytes) of a layer blob, by its magic number."""
    if blob[:2] == b"\x1f\x8b":
        return MT_LAYER, gzip.decompress(blob)
    if blob[:4] == b"\x28\xb5\x2f\xfd":
        return MT_LAYER_ZSTD, subprocess.run(["zstd", "-d", "-q", "-c"], input=blob,
                                             capture_output=True, check=True).stdout
    raise SystemExit("ocibuild: a layer blob neither gzip nor zstd")


def layer(layout: Layout, root: Path, include: Callable[[str], bool], epoch: int,
          compression: str = "gzip") -> Layer:
    """A compressed tar layer of the paths under ``root`` for which ``include(path)`` holds
    (path relative, no leading slash); directories come along when a child is included."""
    entries = _entries(root, include)
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for rel in entries:
            path = root / rel
            st = path.lstat()
            info = tarfile.TarInfo(rel)
            info.mtime = epoch
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISLNK(st.st_mode):
                info.type = tarfile.SYMTYPE
                info.linkname = os.readlink(path)
                info.mode = 0o777
                tar.addfile(info)
            elif stat.S_ISDIR(st.st_mode):
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif stat.S_ISREG(st.st_mode):
                info.size = st.st_size
                with path.open("rb") as f:
                    tar.addfile(info, f)
            else:
                raise SystemExit(f"ocibuild: {path}: only files, directories and symlinks "
                                 "belong in a layer")
    data = raw.getvalue()
    diff_id = "sha256:" + hashlib.sha256(data).hexdigest()
    blob, media_type = compress(data, compression)
    return Layer(layout.put(blob, media_type), diff_id, len(data))


def _entries(root: Path, include: Callable[[str], bool]) -> list[str]:
    chosen: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        names = list(filenames) + [d for d in dirnames if (Path(dirpath) / d).is_symlink()]
        dirnames[:] = [d for d in dirnames if not (Path(dirpath) / d).is_symlink()]
        for name in names:
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            if include(rel):
                chosen.add(rel)
        if rel_dir != "." and not os.listdir(dirpath) and include(rel_dir):
            chosen.add(rel_dir)
    for rel in list(chosen):  # parents, so every entry's directory has its mode
        parent = os.path.dirname(rel)
        while parent:
            chosen.add(parent)
            parent = os.path.dirname(parent)
    return sorted(chosen)


def image(layout: Layout, layers: list[Layer], platform: dict[str, str],
          config: dict[str, Any], created: str, history: list[str],
          annotations: dict[str, str]) -> Blob:
    """The image config and manifest of one platform; returns the manifest's blob."""
    doc = {
        **platform,
        "created": created,
        "config": config,
        "rootfs": {"type": "layers", "diff_ids": [lay.diff_id for lay in layers]},
        "history": [{"created": created, "created_by": h} for h in history],
    }
    cfg = layout.put(canonical(doc), MT_CONFIG)
    manifest = {
        "schemaVersion": 2,
        "mediaType": MT_MANIFEST,
        "config": cfg.descriptor(),
        "layers": [lay.blob.descriptor() for lay in layers],
        "annotations": annotations,
    }
    return layout.put(canonical(manifest), MT_MANIFEST)


def index(layout: Layout, manifests: list[tuple[Blob, dict[str, str]]],
          annotations: dict[str, str]) -> Blob:
    doc = {
        "schemaVersion": 2,
        "mediaType": MT_INDEX,
        "manifests": [blob.descriptor(platform=plat) for blob, plat in manifests],
        "annotations": annotations,
    }
    return layout.put(canonical(doc), MT_INDEX)
