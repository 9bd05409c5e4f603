"""``python3 -m ocibuild build|rootfs|cross-compilers|kind-images|kind-archive``: see the package
docstring, image/build.sh and image/kind-node/build.sh."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from ocibuild import debian, kindnode, oci, python, rootfs, sbom, wheels
from ocibuild.platforms import Platform, native, parse

APP_PATHS = ("opt/", "LICENSES/python/", "LICENSES/sbom.spdx.json")
"""The second layer: what changes with the autoscaler's code. The first holds what Debian
provides, so a new version of the autoscaler pulls only the small layer."""


def log(msg: str) -> None:
    print(f"[ocibuild] {msg}", file=sys.stderr, flush=True)


def project_wheel(repo: Path, dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                           "--disable-pip-version-check", "--wheel-dir", str(dest), str(repo)],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"ocibuild: building the project's wheel failed:\n{proc.stderr}")
    return next(dest.glob("*.whl"))


def requirements(repo: Path) -> list[str]:
    lines = (repo / "image" / "requirements.txt").read_text().splitlines()
    return [line.split("#")[0].strip() for line in lines if line.split("#")[0].strip()]


class Builder:
    def __init__(self, repo: Path, work: Path, epoch: int) -> None:
        self.repo = repo
        self.work = work
        self.epoch = epoch
        self.trees: dict[str, Path] = {}
        self.packages: dict[str, dict[str, debian.DebPackage]] = {}
        self._project_wheel: Path | None = None
        self._native: python.NativePython | None = None
        self._cross: wheels.CrossBuilder | None = None
        self.timings: dict[str, float] = {}

    def tree(self, plat: Platform) -> Path:
        if plat.name not in self.trees:
            tree = self.work / plat.slug / "tree"
            self.packages[plat.name] = debian.extract(plat, tree)
            self.trees[plat.name] = tree
        return self.trees[plat.name]

    def native(self) -> python.NativePython:
        """The build machine's Debian interpreter (bytecode, cross-built wheels)."""
        if self._native is None:
            host = native()
            self._native = python.NativePython(self.tree(host), host.triplet)
        return self._native

    def cross(self) -> wheels.CrossBuilder:
        if self._cross is None:
            self._cross = wheels.CrossBuilder(self.repo, self.work, self.native())
        return self._cross

    def project_wheel(self) -> Path:
        if self._project_wheel is None:
            self._project_wheel = project_wheel(self.repo, self.work / "project-wheel")
        return self._project_wheel

    def rootfs(self, plat: Platform, dest: Path, *, image_name: str, version: str) -> None:
        began = time.monotonic()
        tree = self.tree(plat)
        fs = rootfs.RootFs(plat, tree, dest)
        dest.mkdir(parents=True)
        fs.add_python()
        python.make_venv(dest, self.python_version(plat))
        wheel_dir = self.work / plat.slug / "wheels"
        for req in requirements(self.repo):
            wheel = python.pip_download(plat, req, wheel_dir)
            if wheel is None:
                python_deb = self.packages[plat.name][f"{debian.PYTHON}-minimal"].version
                wheel = self.cross().build(plat, req, tree, python_deb)
            python.install_wheel(wheel, dest)
        python.install_wheel(self.project_wheel(), dest)
        python.write_scripts(dest)
        fs.add_libraries()
        fs.add_accounts()
        shipped = fs.shipped_packages(self.packages[plat.name])
        fs.add_dpkg_status(shipped)
        sbom.write_licenses(dest, tree, shipped)
        created = iso(self.epoch)
        doc = sbom.spdx(plat, dest, tree, shipped, image_name=image_name, version=version,
                        created=created)
        (dest / "LICENSES" / "sbom.spdx.json").write_text(json.dumps(doc, indent=1,
                                                                     sort_keys=True) + "\n")
        python.compile_bytecode(self.native(), dest)
        self.timings[plat.name] = time.monotonic() - began

    def python_version(self, plat: Platform) -> str:
        pkg = self.packages[plat.name][f"{debian.PYTHON}-minimal"]
        return pkg.version.split("-")[0]


def iso(epoch: int) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def image_config(labels: dict[str, str]) -> dict[str, object]:
    """What the Dockerfile's runtime stage says, as an OCI image config."""
    return {
        "Entrypoint": [f"/{python.ENTRYPOINTS[0]}"],
        "User": "65534:65534",
        "WorkingDir": "/tmp",
        "ExposedPorts": {"8080/tcp": {}},
        "Env": ["PATH=/opt/venv/bin:/usr/bin", "PYTHONDONTWRITEBYTECODE=1",
                "PYTHONUNBUFFERED=1", "PYTHONUTF8=1", "HOME=/tmp"],
        "Labels": labels,
    }


def cmd_build(args: argparse.Namespace) -> int:
    repo = Path(args.repo).resolve()
    # Absolute: the cross builds run tools from the work dir with another working directory.
    work, out = Path(args.work).resolve(), Path(args.out).resolve()
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    work.mkdir(parents=True)
    os.environ["SOURCE_DATE_EPOCH"] = str(args.epoch)
    builder = Builder(repo, work, args.epoch)
    layout = oci.Layout(out / "layout")
    created = iso(args.epoch)
    labels = {
        "org.opencontainers.image.title": "cluster-proportional-autoscaler-py",
        "org.opencontainers.image.description": "Drop-in replacement for the Kubernetes "
                                                "cluster-proportional-autoscaler, in Python",
        "org.opencontainers.image.licenses": "Apache-2.0",
        "org.opencontainers.image.version": args.version,
        "org.opencontainers.image.revision": args.revision,
        "org.opencontainers.image.created": created,
        "org.opencontainers.image.source": args.source,
        "org.opencontainers.image.base.name": f"debian:{debian.SUITE} (packages, extracted)",
    }
    manifests = []
    plats = parse(args.platforms)
    # The build machine's platform first: its interpreter compiles everyone's bytecode.
    plats.sort(key=lambda p: p != native())
    for plat in plats:
        dest = work / plat.slug / "rootfs"
        builder.rootfs(plat, dest, image_name=args.name, version=args.version)
        sbom_out = out / "sbom" / f"{plat.slug}.spdx.json"
        sbom_out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(dest / "LICENSES" / "sbom.spdx.json", sbom_out)
        began = time.monotonic()

        def is_app(rel: str) -> bool:
            return rel.startswith(APP_PATHS) or rel in python.ENTRYPOINTS

        base = oci.layer(layout, dest, lambda rel: not is_app(rel), args.epoch)
        app = oci.layer(layout, dest, is_app, args.epoch)
        manifest = oci.image(
            layout, [base, app], plat.oci(), image_config(labels), created,
            [f"Debian {debian.SUITE} packages for {plat.deb_arch}: the interpreter, its "
             "standard library and the shared libraries they need",
             "the virtualenv /opt/venv with the autoscaler, /LICENSES"],
            {"org.opencontainers.image.version": args.version,
             "org.opencontainers.image.revision": args.revision,
             "org.opencontainers.image.created": created})
        manifests.append((manifest, plat.oci()))
        log(f"{plat.name}: {manifest.digest} (rootfs {builder.timings[plat.name]:.0f}s, "
            f"layers {time.monotonic() - began:.0f}s; "
            f"{(base.uncompressed + app.uncompressed) / 2**20:.1f} MiB uncompressed, "
            f"{(base.blob.size + app.blob.size) / 2**20:.1f} MiB compressed)")
    # Index entries in the table's order, whatever order they were built in.
    order = [p.oci() for p in parse(args.platforms)]
    manifests.sort(key=lambda m: order.index(m[1]))
    idx = oci.index(layout, manifests, {
        "org.opencontainers.image.version": args.version,
        "org.opencontainers.image.revision": args.revision,
        "org.opencontainers.image.created": created,
        "org.opencontainers.image.source": args.source})
    layout.tag(idx, args.tag)
    (out / "digests.json").write_text(json.dumps({
        "name": args.name, "version": args.version, "revision": args.revision,
        "epoch": args.epoch, "index": idx.digest,
        "platforms": {_pname(p): m.digest for m, p in manifests}}, indent=1) + "\n")
    log(f"index {idx.digest} ({len(manifests)} platforms) in {out / 'layout'}")
    print(f"oci:{(out / 'layout').resolve()}:{args.tag}")
    return 0


def _pname(p: dict[str, str]) -> str:
    return "/".join(x for x in (p["os"], p["architecture"], p.get("variant", "")) if x)


def cmd_rootfs(args: argparse.Namespace) -> int:
    """The Dockerfile's builder stage: one platform's root filesystem into --dest."""
    work = Path(args.work).resolve()
    os.environ["SOURCE_DATE_EPOCH"] = str(args.epoch)
    builder = Builder(Path(args.repo).resolve(), work, args.epoch)
    plat = parse(args.platform)[0]
    builder.rootfs(plat, Path(args.dest), image_name=args.name, version=args.version)
    return 0


def cmd_cross_compilers(args: argparse.Namespace) -> int:
    """``<command> <Debian package>`` per foreign platform of --platforms: the cross
    compilers a build may need (image/env.sh installs the missing ones)."""
    for plat in parse(args.platforms):
        if plat != native():
            print(plat.cc, plat.cross_gcc)
    return 0


def cmd_kind_images(args: argparse.Namespace) -> int:
    """The images kubeadm starts on a kind node, as one OCI layout (ocibuild.kindnode)."""
    return kindnode.main(args.tree, args.work, args.out, args.spec, args.epoch)


def cmd_kind_archive(args: argparse.Namespace) -> int:
    """One platform of a tagged index as an OCI archive for ``kind load image-archive``."""
    print(kindnode.archive(Path(args.layout), args.tag, args.platform, args.name,
                           Path(args.out)))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m ocibuild")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("cross-compilers").add_argument("--platforms", default="all")
    for name in ("build", "rootfs"):
        p = sub.add_parser(name)
        p.add_argument("--repo", default=".")
        p.add_argument("--work", required=True)
        p.add_argument("--epoch", type=int, required=True, help="SOURCE_DATE_EPOCH")
        p.add_argument("--name", required=True, help="the published image name")
        p.add_argument("--version", required=True)
    build = sub.choices["build"]
    build.add_argument("--out", required=True)
    build.add_argument("--platforms", default="all")
    build.add_argument("--tag", required=True)
    build.add_argument("--revision", default="unknown")
    build.add_argument("--source", default="")
    sub.choices["rootfs"].add_argument("--platform", required=True)
    sub.choices["rootfs"].add_argument("--dest", required=True)
    kind = sub.add_parser("kind-images")
    kind.add_argument("--tree", required=True, help="the node's root filesystem")
    kind.add_argument("--work", required=True)
    kind.add_argument("--out", required=True, help="the OCI layout to write")
    kind.add_argument("--spec", required=True, help="JSON list of components")
    kind.add_argument("--epoch", type=int, required=True, help="SOURCE_DATE_EPOCH")
    arch = sub.add_parser("kind-archive")
    arch.add_argument("--layout", required=True, help="the OCI layout `make image` wrote")
    arch.add_argument("--tag", required=True, help="the index's tag in that layout")
    arch.add_argument("--platform", default=f"linux/{native().oci_arch}")
    arch.add_argument("--name", required=True, help="the image's name on the nodes")
    arch.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    commands = {"build": cmd_build, "rootfs": cmd_rootfs,
                "cross-compilers": cmd_cross_compilers, "kind-images": cmd_kind_images,
                "kind-archive": cmd_kind_archive}
    return commands[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
