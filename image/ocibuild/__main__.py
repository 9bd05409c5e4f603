"""``python3 -m ocibuild build|rootfs|cross-compilers|kind-images|kind-archive``: see the package
docstring, image/build.sh and image/kind-node/build.sh."""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ocibuild import attest, debian, kindnode, lock, oci, python, rootfs, sbom, wheels
from ocibuild.platforms import Platform, native, parse

# The image's three layers, from the least to the most often changed:
#   debian  Debian's files (the interpreter, the standard library the program imports, the
#           shared libraries), /etc, /LICENSES/debian, /var/lib/dpkg/status.d;
#   python  the venv with the third-party distributions, /LICENSES/python of those;
#   code    the autoscaler's own distribution, its commands, its licence, the SBOM.
# The first two depend only on the inputs that image/lock.json pins (and are written with
# INPUT_EPOCH): the same on every machine and for every commit of the code. The third
# changes with every commit (SOURCE_DATE_EPOCH: the commit's time).
LAYERS = ("debian", "python", "code")
INPUT_EPOCH = 0
PYTHON_PATHS = ("opt/", "LICENSES/python/")
PROBE = Path(__file__).resolve().parent / "importprobe.py"
ALL_MODULES = "(every module of the project)"


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
        self.shipped: dict[str, list[debian.DebPackage]] = {}
        self.wheels: dict[str, dict[str, object]] = {}   # platform -> requirement -> input
        self._project_wheel: Path | None = None
        self._native: python.NativePython | None = None
        self._cross: wheels.CrossBuilder | None = None
        self._imports: dict[str, Any] | None = None
        self.timings: dict[str, float] = {}

    def tree(self, plat: Platform) -> Path:
        if plat.name not in self.trees:
            tree = self.work / plat.slug / "tree"
            if (tree / debian.ARCHIVES).is_dir():   # extracted by the build being checked
                self.packages[plat.name] = debian.read_tree(tree)
            else:
                self.packages[plat.name] = debian.extract(plat, tree)
            self.trees[plat.name] = tree
        return self.trees[plat.name]

    def native(self) -> python.NativePython:
        """The build machine's Debian interpreter (bytecode, cross-built wheels, imports)."""
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

    def wheel(self, plat: Platform, req: str) -> Path:
        """That platform's wheel of a pinned requirement: the package index's, or
        cross-built from the sdist."""
        wheel = python.pip_download(plat, req, self.work / plat.slug / "wheels")
        if wheel is None:
            tree = self.tree(plat)
            python_deb = self.packages[plat.name][f"{debian.PYTHON}-minimal"].version
            wheel = self.cross().build(plat, req, tree, python_deb)
            self.wheels.setdefault(plat.name, {})[req] = self.cross().inputs[(plat.name, req)]
        else:
            self.wheels.setdefault(plat.name, {})[req] = (
                f"{wheel.name} sha256:{hashlib.sha256(wheel.read_bytes()).hexdigest()}")
        return wheel

    def imports(self) -> dict[str, Any]:
        """What the program can import (importprobe.py), found once per build with the
        build machine's Debian interpreter over its FULL standard library and that
        platform's venv: per entry point (the closure of its module) and for every module
        of the project. Nothing in it is dropped from any platform's image."""
        if self._imports is None:
            began = time.monotonic()
            host = native()
            root = self.work / "imports" / "root"
            shutil.rmtree(root, ignore_errors=True)
            for req in requirements(self.repo):
                python.install_wheel(self.wheel(host, req), root,
                                     extensions=wheels.normalize(req.split("==")[0])
                                     not in wheels.PURE)
            written = python.install_wheel(self.project_wheel(), root)
            site = root / python.SITE.lstrip("/")
            scripts = python.console_scripts(site)
            project = sorted({".".join(Path(w).relative_to(python.SITE.lstrip("/"))
                                       .with_suffix("").parts).removesuffix(".__init__")
                              for w in written if w.endswith(".py")
                              and not w.endswith("__main__.py")})
            runs = {ALL_MODULES: project}
            runs.update({spec.partition(":")[0]: [spec.partition(":")[0]]
                         for spec in scripts.values()})
            closures = {}
            for label, roots in runs.items():
                proc = subprocess.run(
                    self.native().argv("-P", "-s", str(PROBE), "closure", *roots),
                    env=self.native().env(PYTHONPATH=str(site)), cwd=self.work,
                    capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL)
                if proc.returncode != 0 or "\nIMPORTPROBE " not in proc.stdout:
                    raise SystemExit(f"ocibuild: finding what {label} imports failed:\n"
                                     f"{proc.stderr[-3000:]}")
                closures[label] = json.loads(proc.stdout.rsplit("\nIMPORTPROBE ", 1)[1])
            union = sorted({m for c in closures.values() for m in c["importable"]})
            self._imports = {
                "entry_points": {name: {"spec": spec, "closure": spec.partition(":")[0]}
                                 for name, spec in sorted(scripts.items())},
                "closures": {label: {"roots": runs[label],
                                     "importable": c["importable"],
                                     "absent": c["absent"], "via": c["via"]}
                             for label, c in closures.items()},
                "importable": union,
            }
            log(f"imports: {len(union)} modules importable from {len(scripts)} entry points "
                f"and {len(project)} project modules ({time.monotonic() - began:.0f}s)")
        return self._imports

    def rootfs(self, plat: Platform, dest: Path, code: Path, *, image_name: str,
               version: str) -> None:
        """The root filesystem in two trees: ``dest`` (the debian and python layers) and
        ``code`` (the code layer, see LAYERS)."""
        began = time.monotonic()
        tree = self.tree(plat)
        fs = rootfs.RootFs(plat, tree, dest)
        dest.mkdir(parents=True)
        fs.add_python()
        python.make_venv(dest, self.python_version(plat))
        for req in requirements(self.repo):
            pure = wheels.normalize(req.split("==")[0]) in wheels.PURE
            python.install_wheel(self.wheel(plat, req), dest, extensions=not pure)
        dropped = fs.prune(set(self.imports()["importable"]))
        fs.add_libraries()
        fs.add_accounts()
        shipped = fs.shipped_packages(self.packages[plat.name])
        self.shipped[plat.name] = shipped
        (self.work / plat.slug / "shipped.json").write_text(
            json.dumps([p.name for p in shipped]) + "\n")
        fs.add_dpkg_status(shipped)
        sbom.write_licenses(dest, tree, shipped)
        self.code(plat, code, dest, image_name=image_name, version=version)
        removed = python.compile_bytecode(self.native(), dest)
        python.compile_bytecode(self.native(), code, (python.SITE.lstrip("/"),))
        self.timings[plat.name] = time.monotonic() - began
        log(f"{plat.name}: {len(dropped)} standard-library modules and packages the program "
            f"cannot import dropped; {removed / 2**20:.1f} MiB of sources replaced by "
            "their bytecode")

    def code(self, plat: Platform, code: Path, base: Path, *, image_name: str,
             version: str) -> None:
        """The code layer's tree: the project's wheel, its commands, its licence and the
        SBOM of the whole image (``base``: the tree of the other two layers)."""
        code.mkdir(parents=True)
        python.install_wheel(self.project_wheel(), code)
        (code / python.VENV.lstrip("/") / "bin").mkdir(parents=True, exist_ok=True)
        python.write_scripts(code)
        sbom.write_python_licenses(code)
        doc = sbom.spdx(plat, [base, code], self.tree(plat), self.shipped[plat.name],
                        image_name=image_name, version=version, created=iso(self.epoch))
        (code / "LICENSES" / "sbom.spdx.json").write_text(json.dumps(doc, indent=1,
                                                                     sort_keys=True) + "\n")

    def python_version(self, plat: Platform) -> str:
        pkg = self.packages[plat.name][f"{debian.PYTHON}-minimal"]
        return pkg.version.split("-")[0]

    def inputs(self, plat: Platform) -> dict[str, Any]:
        """What the debian and python layers of ``plat`` were made from (image/lock.json)."""
        return {
            "debian": {p.name: f"{p.version} sha256:{p.sha256}"
                       for p in self.shipped[plat.name]},
            "wheels": self.wheels.get(plat.name, {}),
        }


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


def build_args(args: argparse.Namespace) -> dict[str, Any]:
    """What the configs, manifests and the index are made of besides the layers."""
    return {"name": args.name, "version": args.version, "revision": args.revision,
            "epoch": args.epoch, "source": args.source, "tag": args.tag,
            "compression": args.compression}


def write_image(layout: oci.Layout, plat: Platform, layers: list[oci.Layer],
                a: dict[str, Any]) -> oci.Blob:
    """One platform's config and manifest."""
    created = iso(a["epoch"])
    labels = {
        "org.opencontainers.image.title": "cluster-proportional-autoscaler-py",
        "org.opencontainers.image.description": "Drop-in replacement for the Kubernetes "
                                                "cluster-proportional-autoscaler, in Python",
        "org.opencontainers.image.licenses": "Apache-2.0",
        "org.opencontainers.image.version": a["version"],
        "org.opencontainers.image.revision": a["revision"],
        "org.opencontainers.image.created": created,
        "org.opencontainers.image.source": a["source"],
        "org.opencontainers.image.base.name": f"debian:{debian.SUITE} (packages, extracted)",
    }
    return oci.image(
        layout, layers, plat.oci(), image_config(labels), created,
        [f"Debian {debian.SUITE} packages for {plat.deb_arch}: the interpreter, the standard "
         "library the program imports and the shared libraries they need",
         "the virtualenv /opt/venv with the third-party distributions",
         "the autoscaler, its commands, /LICENSES/python of it, the SBOM"],
        {"org.opencontainers.image.version": a["version"],
         "org.opencontainers.image.revision": a["revision"],
         "org.opencontainers.image.created": created})


def write_index(layout: oci.Layout, manifests: list[tuple[oci.Blob, dict[str, str]]],
                a: dict[str, Any]) -> oci.Blob:
    idx = oci.index(layout, manifests, {
        "org.opencontainers.image.version": a["version"],
        "org.opencontainers.image.revision": a["revision"],
        "org.opencontainers.image.created": iso(a["epoch"]),
        "org.opencontainers.image.source": a["source"]})
    layout.tag(idx, a["tag"])
    return idx


def make_layers(layout: oci.Layout, dest: Path, code: Path, epoch: int,
                compression: str) -> list[oci.Layer]:
    def is_python(rel: str) -> bool:
        return rel.startswith(PYTHON_PATHS)

    return [oci.layer(layout, dest, lambda rel: not is_python(rel), INPUT_EPOCH, compression),
            oci.layer(layout, dest, is_python, INPUT_EPOCH, compression),
            oci.layer(layout, code, lambda _rel: True, epoch, compression)]


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
    a = build_args(args)
    manifests = []
    layers_of: dict[str, list[oci.Layer]] = {}
    plats = parse(args.platforms)
    # The build machine's platform first: its interpreter compiles everyone's bytecode.
    plats.sort(key=lambda p: p != native())
    for plat in plats:
        dest, code = work / plat.slug / "rootfs", work / plat.slug / "code"
        builder.rootfs(plat, dest, code, image_name=args.name, version=args.version)
        sbom_out = out / "sbom" / f"{plat.slug}.spdx.json"
        sbom_out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(code / "LICENSES" / "sbom.spdx.json", sbom_out)
        began = time.monotonic()
        layers = make_layers(layout, dest, code, args.epoch, args.compression)
        layers_of[plat.name] = layers
        manifest = write_image(layout, plat, layers, a)
        manifests.append((manifest, plat.oci()))
        log(f"{plat.name}: {manifest.digest} (rootfs {builder.timings[plat.name]:.0f}s, "
            f"layers {time.monotonic() - began:.0f}s; "
            f"{sum(x.uncompressed for x in layers) / 2**20:.1f} MiB uncompressed, "
            f"{sum(x.blob.size for x in layers) / 2**20:.1f} MiB compressed)")
    # Index entries in the table's order, whatever order they were built in.
    order = [p.oci() for p in parse(args.platforms)]
    manifests.sort(key=lambda m: order.index(m[1]))
    idx = write_index(layout, manifests, a)
    (out / "imports.json").write_text(json.dumps(builder.imports(), indent=1,
                                                 sort_keys=True) + "\n")
    inputs = {p.name: {**builder.inputs(p), "layers": {
        name: {"diff_id": x.diff_id, "digest": x.blob.digest, "size": x.blob.size}
        for name, x in zip(LAYERS, layers_of[p.name], strict=True)}} for p in plats}
    (out / "inputs.json").write_text(json.dumps({
        "stdlib": sorted({m.split(".")[0] for m in builder.imports()["importable"]}),
        "platforms": inputs}, indent=1, sort_keys=True) + "\n")
    (out / "digests.json").write_text(json.dumps({
        **a, "index": idx.digest,
        "platforms": {_pname(p): m.digest for m, p in manifests},
        "layers": {p.name: [x.blob.digest for x in layers_of[p.name]] for p in plats},
        "sizes": {p.name: {"uncompressed": sum(x.uncompressed for x in layers_of[p.name]),
                           "compressed": sum(x.blob.size for x in layers_of[p.name])}
                  for p in plats}}, indent=1, sort_keys=True) + "\n")
    log(f"index {idx.digest} ({len(manifests)} platforms) in {out / 'layout'}")
    print(f"oci:{(out / 'layout').resolve()}:{args.tag}")
    return 0


def cmd_check_code(args: argparse.Namespace) -> int:
    """The code layer, the manifests and the index made again from nothing but the
    build's pinned inputs (its extracted Debian trees and its debian and python layers,
    which image/lock.json checks): a fresh wheel of the project, a fresh tree, fresh
    bytecode and a fresh layout must give the digests the build wrote."""
    work, out = Path(args.work).resolve(), Path(args.out).resolve()
    built = json.loads((out / "digests.json").read_text())
    a = {k: built[k] for k in ("name", "version", "revision", "epoch", "source", "tag",
                               "compression")}
    os.environ["SOURCE_DATE_EPOCH"] = str(a["epoch"])
    check = work / "check"
    shutil.rmtree(check, ignore_errors=True)
    builder = Builder(Path(args.repo).resolve(), work, a["epoch"])
    builder._project_wheel = project_wheel(builder.repo, check / "project-wheel")
    layout = oci.Layout(check / "layout")
    first = oci.Layout(out / "layout")
    manifests, wrong = [], []
    for plat in parse(",".join(built["platforms"])):   # the index's order: the table's
        began = time.monotonic()
        name = plat.name
        dest = work / plat.slug / "rootfs"
        builder.tree(plat)
        names = json.loads((work / plat.slug / "shipped.json").read_text())
        builder.shipped[name] = [builder.packages[name][n] for n in names]
        code = check / plat.slug / "code"
        builder.code(plat, code, dest, image_name=a["name"], version=a["version"])
        python.compile_bytecode(builder.native(), code, (python.SITE.lstrip("/"),))
        code_layer = oci.layer(layout, code, lambda _rel: True, a["epoch"], a["compression"])
        layers = [layer_from(first, digest) for digest in built["layers"][name][:2]]
        for layer in layers:
            layout.put(first.read(layer.blob.digest), layer.blob.media_type)
        manifest = write_image(layout, plat, [*layers, code_layer], a)
        manifests.append((manifest, plat.oci()))
        same = manifest.digest == built["platforms"][name]
        if not same:
            wrong.append(name)
        log(f"{name}: code layer {code_layer.blob.digest} "
            f"{'=' if code_layer.blob.digest == built['layers'][name][2] else '!='} the "
            f"build's; manifest {'the same' if same else 'DIFFERENT'} "
            f"({time.monotonic() - began:.0f}s)")
    idx = write_index(layout, manifests, a)
    if wrong or idx.digest != built["index"]:
        log(f"NOT reproducible: the code layer of {', '.join(wrong) or 'no platform'} and the "
            f"index ({idx.digest} against {built['index']}) differ when made again; compare "
            f"{check / 'layout'} with {out / 'layout'}")
        return 1
    shutil.rmtree(check, ignore_errors=True)
    log(f"the same index {idx.digest}: the code layer made again from a fresh wheel gives "
        "the same digests")
    return 0


def cmd_recompress(args: argparse.Namespace) -> int:
    """The same images with their layers compressed another way: the same configs (the
    layers' diff_ids do not change), new layer blobs and manifests, a new index tagged
    ``<tag>-<compression>``; with digests.json and sbom/ beside it, as `make image` writes."""
    out, dest = Path(args.out).resolve(), Path(args.dest).resolve()
    built = json.loads((out / "digests.json").read_text())
    a = {**built, "compression": args.compression, "tag": f"{built['tag']}-{args.compression}"}
    shutil.rmtree(dest, ignore_errors=True)
    first, layout = oci.Layout(out / "layout"), oci.Layout(dest / "layout")
    wanted = parse(args.platforms) if args.platforms else parse(",".join(built["platforms"]))
    manifests, layers_of = [], {}
    for plat in wanted:
        began = time.monotonic()
        manifest = json.loads(first.read(built["platforms"][plat.name]))
        layout.put(first.read(manifest["config"]["digest"]), oci.MT_CONFIG)
        layers = []
        for desc in manifest["layers"]:
            _, raw = oci.decompress(first.read(desc["digest"]))
            data, media_type = oci.compress(raw, args.compression)
            layers.append(layout.put(data, media_type))
        manifest["layers"] = [b.descriptor() for b in layers]
        written = layout.put(oci.canonical(manifest), oci.MT_MANIFEST)
        manifests.append((written, plat.oci()))
        layers_of[plat.name] = layers
        log(f"{plat.name}: {written.digest} ({args.compression}: "
            f"{sum(b.size for b in layers) / 2**20:.2f} MiB; "
            f"{time.monotonic() - began:.0f}s)")
    idx = write_index(layout, manifests, a)
    (dest / "sbom").mkdir()
    for plat in wanted:
        shutil.copyfile(out / "sbom" / f"{plat.slug}.spdx.json",
                        dest / "sbom" / f"{plat.slug}.spdx.json")
    (dest / "digests.json").write_text(json.dumps({
        **a, "index": idx.digest,
        "platforms": {_pname(p): m.digest for m, p in manifests},
        "layers": {n: [b.digest for b in x] for n, x in layers_of.items()},
        "sizes": {n: {"compressed": sum(b.size for b in x),
                      "uncompressed": built["sizes"][n]["uncompressed"]}
                  for n, x in layers_of.items()}}, indent=1, sort_keys=True) + "\n")
    print(f"oci:{dest / 'layout'}:{a['tag']}")
    return 0


def cmd_lock(args: argparse.Namespace) -> int:
    """Compare the build in --out with the lock (--update: write the build into it)."""
    build = lock.from_build(json.loads((Path(args.out) / "inputs.json").read_text()))
    lock_path = Path(args.lock)
    if args.update:
        lock.update(lock_path, build)
        log(f"{lock_path.name}: written for {', '.join(build['platforms'])}; commit it")
        return 0
    if not lock_path.exists():
        log(f"{lock_path} missing: `make image-lock` writes it from a build")
        return 1
    changed, broken = lock.compare(json.loads(lock_path.read_text()), build)
    for line in changed:
        log(f"lock: input changed: {line}")
    for line in broken:
        log(f"lock: NOT REPRODUCED: {line}")
    if changed:
        log(f"the inputs differ from {lock_path.name} (a new pin, a Debian update, a new "
            "import of a standard-library module?): if that is meant, `make image-lock` "
            "and commit the lock")
    if broken:
        log(f"the same inputs as {lock_path.name} gave other layers: the build is not "
            "reproducible across machines, or image/ocibuild changed what goes into them "
            "(then `make image-lock` and commit the lock)")
    if changed or broken:
        return 1
    log(f"lock: the inputs and the debian and python layers of "
        f"{', '.join(build['platforms'])} are those of {lock_path.name}")
    return 0


def cmd_sign(args: argparse.Namespace) -> int:
    attest.sign(cosign=args.cosign, crane=args.crane, ref=args.image, key=args.key or None,
                out=Path(args.out), builder_id=args.builder_id, repository=args.repository)
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    attest.verify(cosign=args.cosign, crane=args.crane, ref=args.image, key=args.key or None,
                  identity=args.identity, issuer=args.issuer)
    return 0


def layer_from(layout: oci.Layout, digest: str) -> oci.Layer:
    """A layer of an existing layout (its diff_id read back from the blob)."""
    data = layout.read(digest)
    media_type, raw = oci.decompress(data)
    return oci.Layer(oci.Blob(media_type, digest, len(data)),
                     "sha256:" + hashlib.sha256(raw).hexdigest(), len(raw))


def _pname(p: dict[str, str]) -> str:
    return "/".join(x for x in (p["os"], p["architecture"], p.get("variant", "")) if x)


def cmd_rootfs(args: argparse.Namespace) -> int:
    """The Dockerfile's builder stage: one platform's root filesystem into --dest."""
    work = Path(args.work).resolve()
    os.environ["SOURCE_DATE_EPOCH"] = str(args.epoch)
    builder = Builder(Path(args.repo).resolve(), work, args.epoch)
    plat = parse(args.platform)[0]
    dest = Path(args.dest)
    code = work / plat.slug / "code"
    shutil.rmtree(code, ignore_errors=True)
    builder.rootfs(plat, dest, code, image_name=args.name, version=args.version)
    # One tree for the Dockerfile's COPY: the code layer's files over the others.
    shutil.copytree(code, dest, symlinks=True, dirs_exist_ok=True)
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
    build.add_argument("--compression", choices=oci.COMPRESSIONS, default="gzip")
    check = sub.add_parser("check-code")
    check.add_argument("--repo", default=".")
    check.add_argument("--work", required=True)
    check.add_argument("--out", required=True)
    for name in ("sign", "verify"):
        p = sub.add_parser(name)
        p.add_argument("--image", required=True)
        p.add_argument("--key", default="", help="cosign key; none: keyless (OIDC)")
        p.add_argument("--cosign", required=True)
        p.add_argument("--crane", required=True)
    sub.choices["sign"].add_argument("--out", required=True)
    sub.choices["sign"].add_argument("--builder-id", required=True)
    sub.choices["sign"].add_argument("--repository", required=True)
    sub.choices["verify"].add_argument("--identity", default="")
    sub.choices["verify"].add_argument("--issuer", default="")
    recompress = sub.add_parser("recompress")
    recompress.add_argument("--out", required=True)
    recompress.add_argument("--dest", required=True)
    recompress.add_argument("--compression", choices=oci.COMPRESSIONS, required=True)
    recompress.add_argument("--platforms", default="")
    lock_cmd = sub.add_parser("lock")
    lock_cmd.add_argument("--out", required=True)
    lock_cmd.add_argument("--lock", required=True)
    lock_cmd.add_argument("--update", action="store_true")
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
    commands = {"build": cmd_build, "rootfs": cmd_rootfs, "check-code": cmd_check_code,
                "lock": cmd_lock, "recompress": cmd_recompress, "sign": cmd_sign,
                "verify": cmd_verify, "cross-compilers": cmd_cross_compilers,
                "kind-images": cmd_kind_images, "kind-archive": cmd_kind_archive}
    return commands[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
