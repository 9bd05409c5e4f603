"""Wheels the package index lacks for an architecture, cross-compiled from the sdist.

PyPI has no msgspec 0.23.0 wheel for armv7l, ppc64le or s390x, and no PyYAML 6.0.3 wheel
for armv7l or ppc64le. Building them under emulation (qemu running the target's compiler)
would take many minutes per platform; Debian's cross compilers
(``gcc-arm-linux-gnueabihf``, ``gcc-powerpc64le-linux-gnu``, ``gcc-s390x-linux-gnu``) do it
natively in seconds. How:

1. the sdist, from the package index (``pip download --no-binary``), unpacked;
2. the target's interpreter headers: Debian's ``libpython3.11-dev`` for that architecture,
   extracted into a tree of its own like the image's packages (never part of the image), at
   exactly the version of the image's interpreter;
3. the sdist's PEP 517 build backend (setuptools for both), run by the build machine's
   Debian interpreter (``python.NativePython``: the image's CPython version, so the wheel's
   cp311 tags and ABI are the target's) with the build tools pinned in
   image/build-requirements.txt, unpacked on its path;
4. cross-compiling is setuptools' own mechanism: ``_PYTHON_HOST_PLATFORM`` names the target
   (``linux-armv7l``: the wheel's platform tag) and ``_PYTHON_SYSCONFIGDATA_NAME`` a copy of
   the TARGET's sysconfig data (extension suffix, sizes, SOABI) in which only the compiler,
   the flags and the include directory are replaced: ``<triplet>-gcc``, fixed flags (no
   debug info, stripped, ``-ffile-prefix-map`` so no build path is recorded) and the
   extracted headers;
5. the result is checked: every extension is an ELF file for the target's machine with the
   target's extension suffix; a distribution that is not in ``PURE`` must have one.

Reproducible: the same sdist, headers, tools and flags give the same bytes
(SOURCE_DATE_EPOCH for the zip entries; the wheel is unpacked into the image anyway).
"""

from __future__ import annotations

import hashlib
import os
import pprint
import runpy
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

from ocibuild import debian
from ocibuild.debian import PYTHON
from ocibuild.platforms import Platform
from ocibuild.python import NativePython

# Distributions built without their optional C extension, by normalized name, with the
# environment that says so to their build. PyYAML's extension binds libyaml (through
# Cython, which its sdist does not pre-generate); the daemon only ever calls
# yaml.safe_load on small documents (a kubeconfig, `cpa explain` input), and safe_load is
# the pure-Python loader whether or not the extension exists: the same parser on every
# platform, and no libyaml in the image.
PURE = {"pyyaml": {"PYYAML_FORCE_LIBYAML": "0"}}

# The compiler flags of every cross-built extension: Debian's defaults for Python
# extensions and its hardening flags, without debug information (-g0, and the linker
# strips), and no build path recorded (-ffile-prefix-map, added per build).
CFLAGS = ("-Wsign-compare", "-DNDEBUG", "-g0", "-fwrapv", "-O2", "-Wall",
          "-fstack-protector-strong", "-Wformat", "-Werror=format-security", "-Wdate-time",
          "-D_FORTIFY_SOURCE=2")
LDFLAGS = ("-shared", "-Wl,-O1", "-Wl,-Bsymbolic-functions", "-Wl,-z,relro", "-Wl,-z,now",
           "-s")

# Run by the build machine's interpreter in the unpacked sdist: checks that the pinned
# tools cover the backend's requirements, then calls its build_wheel hook (PEP 517).
BACKEND = """
import importlib, os, sys, tomllib
from packaging.requirements import Requirement
out, have, skip = sys.argv[1], set(sys.argv[2].split(",")), set(sys.argv[3].split(","))
system = {"requires": ["setuptools"], "build-backend": "setuptools.build_meta:__legacy__"}
if os.path.exists("pyproject.toml"):
    with open("pyproject.toml", "rb") as f:
        system.update(tomllib.load(f).get("build-system", {}))
def norm(name): return name.lower().replace("_", "-").replace(".", "-")
for spec in system["requires"]:
    req = Requirement(spec)
    name = norm(req.name)
    if (req.marker is None or req.marker.evaluate()) and name not in have | skip:
        sys.exit(f"the build needs {spec!r}: pin it in image/build-requirements.txt")
sys.path[:0] = [os.path.abspath(p) for p in system.get("backend-path", [])]
module, _, attrs = system["build-backend"].partition(":")
backend = importlib.import_module(module)
for attr in filter(None, attrs.split(".")):
    backend = getattr(backend, attr)
print("WHEEL " + backend.build_wheel(out))
"""
# Build requirements that the builds in PURE do without (PyYAML's Cython).
UNNEEDED = {"pyyaml": ("cython",)}


def normalize(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def _log(msg: str) -> None:
    print(f"[ocibuild] {msg}", file=sys.stderr, flush=True)


class CrossBuilder:
    """Cross-builds wheels; one per build, sharing the tools and sdists between platforms."""

    def __init__(self, repo: Path, work: Path, native: NativePython) -> None:
        self.repo = repo
        self.work = work
        self.native = native
        self._tools: tuple[Path, set[str]] | None = None
        self._sysroots: dict[str, Path] = {}
        self._sysroot_packages: dict[str, dict[str, debian.DebPackage]] = {}
        self._sdists: dict[str, Path] = {}
        # (platform, requirement) -> what the wheel was built from (image/lock.json)
        self.inputs: dict[tuple[str, str], dict[str, object]] = {}

    # -------------------------------------------------------------------- inputs
    def tools(self) -> tuple[Path, set[str]]:
        """The pinned build tools, unpacked into one directory for the backend's path;
        returns it and the distribution names it holds."""
        if self._tools is None:
            wheels = self.work / "build-tools" / "wheels"
            site = self.work / "build-tools" / "site"
            wheels.mkdir(parents=True, exist_ok=True)
            pins = requirement_lines(self.repo / "image" / "build-requirements.txt")
            _pip("download", "--no-deps", "--only-binary=:all:", f"--dest={wheels}", *pins)
            names = set()
            for wheel in sorted(wheels.glob("*.whl")):
                with zipfile.ZipFile(wheel) as zf:
                    zf.extractall(site)
                names.add(normalize(wheel.name.split("-")[0]))
            self._tools = (site, names)
        return self._tools

    def sysroot(self, plat: Platform, python_deb_version: str) -> Path:
        """The target's Debian libpython3.11-dev and its dependencies (libc6-dev among
        them) extracted for ``plat``: the compiler's --sysroot, so every header and the
        C library linked against are the target's Debian ones, at the image's versions."""
        if plat.name not in self._sysroots:
            tree = self.work / plat.slug / "cross" / "sysroot"
            packages = debian.extract(plat, tree, (debian.HEADERS,))
            found = packages[debian.HEADERS].version
            if found != python_deb_version:
                raise SystemExit(
                    f"ocibuild: {debian.HEADERS} {found} for {plat.deb_arch} does not match "
                    f"the image's interpreter {python_deb_version}: the Debian mirror "
                    "changed between the two downloads; build again")
            relative_symlinks(tree)
            self._sysroots[plat.name] = tree
            self._sysroot_packages[plat.name] = packages
        return self._sysroots[plat.name]

    def sdist(self, requirement: str) -> Path:
        if requirement not in self._sdists:
            name = normalize(requirement.split("==")[0])
            dest = self.work / "sdists" / name
            dest.mkdir(parents=True, exist_ok=True)
            # Only this distribution's sdist: pip still prepares its metadata, and the build
            # requirements it installs for that may come as wheels (`:all:` would compile
            # PyYAML's Cython from its source first, for minutes).
            _pip("download", "--no-deps", f"--no-binary={name}", f"--dest={dest}", requirement)
            archives = sorted(dest.glob("*.tar.gz"))
            if len(archives) != 1:
                raise SystemExit(f"ocibuild: expected one sdist of {requirement} in {dest}, "
                                 f"found {[a.name for a in archives]}")
            self._sdists[requirement] = archives[0]
        return self._sdists[requirement]

    # -------------------------------------------------------------------- the build
    def build(self, plat: Platform, requirement: str, tree: Path, python_deb_version: str
              ) -> Path:
        """``requirement``'s wheel for ``plat`` (``tree``: the target's extracted Debian
        tree, whose sysconfig data describes the target interpreter;
        ``python_deb_version``: the Debian version of its interpreter)."""
        name = normalize(requirement.split("==")[0])
        pure = name in PURE
        if shutil.which(plat.cc) is None:
            raise SystemExit(f"ocibuild: {plat.cc} missing to build {requirement} for "
                             f"{plat.name}: apt-get install --no-install-recommends "
                             f"{plat.cross_gcc} (image/env.sh installs it when root)")
        began = time.monotonic()
        cross = self.work / plat.slug / "cross"
        src = unpack(self.sdist(requirement), cross / "src")
        sysroot = self.sysroot(plat, python_deb_version)
        sysconfig_dir = cross / "sysconfig"
        module = write_sysconfigdata(plat, tree, sysroot, sysconfig_dir,
                                     prefix_map=f"{cross}=/build")
        site, tools = self.tools()
        dist = cross / "dist" / name
        dist.mkdir(parents=True, exist_ok=True)
        log = cross / f"{name}.log"
        env = self.native.env(
            PYTHONPATH=f"{site}:{sysconfig_dir}",
            _PYTHON_HOST_PLATFORM=f"linux-{plat.wheel_machine}",
            _PYTHON_SYSCONFIGDATA_NAME=module,
            **PURE.get(name, {}))
        inputs = time.monotonic() - began
        with log.open("w") as out:
            proc = subprocess.run(
                self.native.argv("-S", "-c", BACKEND, str(dist), ",".join(sorted(tools)),
                                 ",".join(UNNEEDED.get(name, ()))),
                cwd=src, env=env, stdout=out, stderr=subprocess.STDOUT, check=False)
        text = log.read_text()
        if proc.returncode != 0:
            raise SystemExit(f"ocibuild: cross-building {requirement} for {plat.name} failed "
                             f"(full log {log}):\n{text[-4000:]}")
        wheel = dist / text.rsplit("WHEEL ", 1)[1].strip()
        extensions = check_wheel(wheel, plat, tree, pure=pure)
        compiler = subprocess.run([plat.cc, "--version"], capture_output=True, text=True,
                                  check=True).stdout.splitlines()[0]
        self.inputs[(plat.name, requirement)] = {
            "cross-built from the sdist": "sha256:" + hashlib.sha256(
                self.sdist(requirement).read_bytes()).hexdigest(),
            "compiler": compiler,
            "build tools": {w.name: "sha256:" + hashlib.sha256(w.read_bytes()).hexdigest()
                            for w in sorted((self.work / "build-tools" / "wheels").glob("*.whl"))},
            "sysroot": {p.name: f"{p.version} sha256:{p.sha256}"
                        for p in self._sysroot_packages[plat.name].values()},
        }
        built = time.monotonic() - began - inputs
        _log(f"{plat.name}: cross-built {wheel.name} with {plat.cc} "
             f"(sdist, sysroot, tools {inputs:.0f}s; build {built:.0f}s)"
             + (f": {', '.join(extensions)}" if extensions else
                ": pure Python, see wheels.PURE"))
        return wheel


def relative_symlinks(root: Path) -> None:
    """Rewrite the absolute symlinks under ``root`` relative, so that they resolve inside
    it: the linker opens files that the C library's linker scripts name (such as
    ppc64el's /lib64/ld64.so.2, a link to /lib/powerpc64le-linux-gnu/ld64.so.2) inside the
    sysroot, and an absolute link would lead it out to the build machine's files."""
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            if path.is_symlink() and (target := os.readlink(path)).startswith("/"):
                path.unlink()
                os.symlink(os.path.relpath(root / target.lstrip("/"), path.parent), path)


def requirement_lines(path: Path) -> list[str]:
    lines = [line.split("#")[0].strip() for line in path.read_text().splitlines()]
    return [line for line in lines if line]


def _pip(*args: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "pip", *args[:1], "--quiet",
                           "--disable-pip-version-check", *args[1:]],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"ocibuild: pip {' '.join(args)} failed:\n{proc.stderr}")


def unpack(sdist: Path, dest: Path) -> Path:
    """The sdist's top directory, unpacked under ``dest`` (members outside it refused)."""
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(sdist) as tar:
        members = tar.getmembers()
        for member in members:
            parts = Path(member.name).parts
            if member.name.startswith("/") or ".." in parts or not (
                    member.isfile() or member.isdir() or member.issym()):
                raise SystemExit(f"ocibuild: {sdist.name}: refusing member {member.name}")
        tops = {Path(m.name).parts[0] for m in members}
        if len(tops) != 1:
            raise SystemExit(f"ocibuild: {sdist.name}: expected one top directory, "
                             f"found {sorted(tops)}")
        tar.extractall(dest)  # members checked above
    return dest / tops.pop()


def write_sysconfigdata(plat: Platform, tree: Path, sysroot: Path, dest: Path, *,
                        prefix_map: str) -> str:
    """A module with the target interpreter's ``build_time_vars``, the compiler, its flags
    and sysroot and the include directory replaced; returns its name (for
    ``_PYTHON_SYSCONFIGDATA_NAME``)."""
    original = tree / "usr" / "lib" / PYTHON / f"_sysconfigdata__linux_{plat.triplet}.py"
    if not original.exists():
        raise SystemExit(f"ocibuild: {original} missing: the target's sysconfig data comes "
                         f"with Debian's lib{PYTHON}-stdlib")
    variables = dict(runpy.run_path(str(original))["build_time_vars"])
    cflags = " ".join((f"--sysroot={sysroot}", *CFLAGS, f"-ffile-prefix-map={prefix_map}"))
    ldshared = " ".join((plat.cc, f"--sysroot={sysroot}", *LDFLAGS))
    include = str(sysroot / "usr" / "include" / PYTHON)
    variables.update({
        "CC": plat.cc, "CXX": f"{plat.triplet}-g++", "CFLAGS": cflags, "PY_CFLAGS": cflags,
        "OPT": "", "CPPFLAGS": "", "CCSHARED": "-fPIC", "LDSHARED": ldshared,
        "BLDSHARED": ldshared, "LDCXXSHARED": ldshared.replace(plat.cc, f"{plat.triplet}-g++"),
        "LDFLAGS": "", "AR": f"{plat.triplet}-ar", "ARFLAGS": "rcD",
        "INCLUDEPY": include, "CONFINCLUDEPY": include,
        # An extension never links libpython: the image's interpreter is one static binary
        # (and without this setuptools would add -lpython3.11 when cross-compiling).
        "Py_ENABLE_SHARED": 0,
    })
    name = f"_sysconfigdata_cross_{plat.triplet.replace('-', '_')}"
    dest.mkdir(parents=True, exist_ok=True)
    (dest / f"{name}.py").write_text(
        "# The target interpreter's sysconfig data for cross-compiling (image/ocibuild/"
        "wheels.py)\nbuild_time_vars = " + pprint.pformat(variables, width=100) + "\n")
    return name


def elf_machine(data: bytes) -> int | None:
    """e_machine of an ELF file (either byte order), None if not ELF."""
    if data[:4] != b"\x7fELF":
        return None
    return int.from_bytes(data[18:20], "little" if data[5] == 1 else "big")


def check_wheel(wheel: Path, plat: Platform, tree: Path, *, pure: bool) -> list[str]:
    """The wheel's extensions (``name sha256-prefix``), each checked to be ``plat``'s."""
    suffix = runpy.run_path(str(
        tree / "usr" / "lib" / PYTHON / f"_sysconfigdata__linux_{plat.triplet}.py"
    ))["build_time_vars"]["EXT_SUFFIX"]
    extensions = []
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            data = zf.read(info)
            machine = elf_machine(data)
            if machine is None:
                continue
            if machine != plat.elf_machine or not info.filename.endswith(suffix):
                raise SystemExit(f"ocibuild: {wheel.name}: {info.filename} is not a "
                                 f"{plat.name} extension (ELF machine {machine}, want "
                                 f"{plat.elf_machine} and the suffix {suffix})")
            extensions.append(f"{info.filename} {hashlib.sha256(data).hexdigest()[:16]}")
    if not pure and not extensions:
        raise SystemExit(f"ocibuild: {wheel.name} has no C extension: its build skipped it "
                         "(a compiler or header problem?); see the build log")
    if pure and extensions:
        raise SystemExit(f"ocibuild: {wheel.name} has extensions {extensions} although "
                         "wheels.PURE builds it without")
    return extensions
