"""The virtual environment at /opt/venv: that platform's wheels, unpacked, and the
console scripts, written for the image's interpreter (not the build machine's).

Wheels come from the package index for the target platform (``pip download --platform``);
where the index has none for an architecture, ``wheels.cross_build`` compiles the sdist
with Debian's cross compiler. A wheel is a zip file: installing one is unpacking it into
site-packages, which needs no interpreter of the target. Then every module of the image
is compiled to bytecode by the build machine's platform interpreter from its own
extracted tree (bytecode does not depend on the CPU), with ``unchecked-hash``
invalidation: valid whatever the file times, never rewritten at run time.
"""

from __future__ import annotations

import configparser
import os
import subprocess
import zipfile
from pathlib import Path

from ocibuild.debian import PYTHON
from ocibuild.platforms import Platform
from ocibuild.rootfs import Tree

VENV = "/opt/venv"
SITE = f"{VENV}/lib/{PYTHON}/site-packages"
# The image's root-level commands, each a symlink to its console script. Upstream's path
# first; a second program in the same image is one more name here.
ENTRYPOINTS = ("cluster-proportional-autoscaler", "cpvpa")
SCRIPT = """\
#!{venv}/bin/python3 -S
# Written by image/ocibuild for the image's interpreter. -S: no site module (work at every
# start, and the venv has no .pth file for it to run): its packages go on the path here,
# last, where site would put them.
import sys
{prelude}sys.path.append("{site}")
from {module} import {attr}
if __name__ == "__main__":
    sys.exit({attr}())
"""
PRELUDES = {
    # The autoscaler's daemon: no cyclic garbage collection while it imports and reads the
    # first Node list (its passes over objects that all stay alive are work at every start
    # before the daemon's own code runs); cpa.horizontal.daemon.cpa_main.run turns it back
    # on after the first poll, cpa.cli.vertical_main for a CPVA command line handed over.
    "cpa.cli:daemon_main": "import gc\ngc.disable()\n",
}
# glibc 2.36 in bookworm: any manylinux tag up to 2_36 runs there.
MANYLINUX = [f"manylinux_2_{minor}" for minor in range(17, 37)] + ["manylinux2014"]


def pip_download(plat: Platform, requirement: str, dest: Path) -> Path | None:
    """That platform's wheel of one pinned requirement, or None if the index has none."""
    dest.mkdir(parents=True, exist_ok=True)
    platforms = [f"--platform={tag}_{plat.wheel_machine}" for tag in MANYLINUX]
    before = set(dest.iterdir())
    proc = subprocess.run([
        "python3", "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
        "--no-deps", "--only-binary=:all:", *platforms, "--python-version=3.11",
        "--implementation=cp", "--abi=cp311", "--abi=abi3", "--abi=none",
        f"--dest={dest}", requirement,
    ], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        if "No matching distribution" in proc.stderr:
            return None
        raise SystemExit(f"ocibuild: pip download {requirement} for {plat.name} failed:\n"
                         f"{proc.stderr}")
    new = sorted(set(dest.iterdir()) - before) or sorted(
        p for p in dest.glob("*.whl") if _wheel_name(p) == _req_name(requirement))
    return new[0]


def _req_name(requirement: str) -> str:
    return requirement.split("==")[0].strip().lower().replace("-", "_")


def _wheel_name(wheel: Path) -> str:
    return wheel.name.split("-")[0].lower().replace("-", "_")


# What a wheel holds that a program never reads at run time: type stubs and their marker
# (for type checkers), and RECORD, the list of the wheel's files with their hashes, for
# pip, which the image has not (and which the sourceless bytecode would make untrue).
NOT_SHIPPED = (".pyi", "/py.typed", ".dist-info/RECORD")


def install_wheel(wheel: Path, root: Path, *, extensions: bool = True) -> list[str]:
    """Unpack a wheel into the image's site-packages (``*.data/purelib|platlib`` too),
    without NOT_SHIPPED, and without its C extensions if not ``extensions`` (a
    distribution built pure on every platform: wheels.PURE). Returns the paths written,
    relative to ``root``."""
    site = root / SITE.lstrip("/")
    site.mkdir(parents=True, exist_ok=True)
    written = []
    with zipfile.ZipFile(wheel) as zf:
        for info in sorted(zf.infolist(), key=lambda i: i.filename):
            if info.is_dir() or info.filename.endswith(NOT_SHIPPED):
                continue
            if not extensions and info.filename.endswith(".so"):
                continue
            name = info.filename
            parts = name.split("/")
            if parts[0].endswith(".data"):
                if parts[1] not in ("purelib", "platlib"):
                    raise SystemExit(f"ocibuild: {wheel.name} installs {name}: only "
                                     "site-packages content is supported")
                name = "/".join(parts[2:])
            target = site / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(zf.read(info))
            executable = (info.external_attr >> 16) & 0o111
            target.chmod(0o755 if executable else 0o644)
            written.append(str(target.relative_to(root)))
    dist_info = next(site.glob(f"{_dist_info_prefix(wheel)}-*.dist-info"))
    (dist_info / "INSTALLER").write_text("ocibuild\n")
    written.append(str((dist_info / "INSTALLER").relative_to(root)))
    return written


def _dist_info_prefix(wheel: Path) -> str:
    return wheel.name.split("-")[0]


def make_venv(root: Path, python_version: str) -> None:
    """pyvenv.cfg and the interpreter links, as ``python3 -m venv`` makes them."""
    venv = root / VENV.lstrip("/")
    (venv / "bin").mkdir(parents=True, exist_ok=True)
    (venv / "lib" / PYTHON / "site-packages").mkdir(parents=True, exist_ok=True)
    os.symlink("lib", venv / "lib64")
    (venv / "pyvenv.cfg").write_text(
        f"home = /usr/bin\ninclude-system-site-packages = false\nversion = {python_version}\n"
        f"executable = /usr/bin/{PYTHON}\ncommand = /usr/bin/{PYTHON} -m venv {VENV}\n")
    os.symlink(f"/usr/bin/{PYTHON}", venv / "bin" / "python")
    os.symlink("python", venv / "bin" / "python3")
    os.symlink("python", venv / "bin" / PYTHON)


def console_scripts(site: Path) -> dict[str, str]:
    """name -> ``module:attr`` of every console_scripts entry point under ``site``."""
    scripts = {}
    for eps in sorted(site.glob("*.dist-info/entry_points.txt")):
        parser = configparser.ConfigParser(delimiters=("=",))
        parser.optionxform = str  # type: ignore[assignment,method-assign]
        parser.read_string(eps.read_text())
        if parser.has_section("console_scripts"):
            scripts.update({k: v.strip() for k, v in parser.items("console_scripts")})
    return scripts


def write_scripts(root: Path) -> list[str]:
    """A script in /opt/venv/bin for every console_scripts entry point of the
    distributions installed under ``root``, and a root-level symlink for each of
    ENTRYPOINTS; returns the names."""
    site = root / SITE.lstrip("/")
    bin_dir = root / VENV.lstrip("/") / "bin"
    hooks = sorted(p.name for p in site.glob("*.pth"))
    if hooks:
        raise SystemExit(f"ocibuild: site-packages has .pth files ({', '.join(hooks)}); the "
                         "console scripts run without the site module (python3 -S), which "
                         "would skip them: put what they do in SCRIPT, or drop -S there")
    names = []
    for name, spec in sorted(console_scripts(site).items()):
        module, _, attr = spec.partition(":")
        script = bin_dir / name
        script.write_text(SCRIPT.format(venv=VENV, site=SITE, module=module,
                                        attr=attr.strip(), prelude=PRELUDES.get(spec, "")))
        script.chmod(0o755)
        names.append(name)
    for name in ENTRYPOINTS:
        if name not in names:
            raise SystemExit(f"ocibuild: no console script {name!r} in the wheels")
        os.symlink(f"{VENV}/bin/{name}", root / name)
    return names


class NativePython:
    """The build machine's own Debian interpreter, from its extracted tree, run through that
    tree's dynamic loader and libraries (no chroot, no host Python involved): it compiles
    every platform's bytecode and runs the build backends of cross-built wheels, so both
    depend on the Debian interpreter of the image, not on whichever Python the build machine
    has (the same input gives the same output on any build machine)."""

    def __init__(self, root: Path, triplet: str) -> None:
        self.root = root.resolve()
        self.triplet = triplet
        headers = subprocess.run(["readelf", "--program-headers", "--wide",
                                  str(root / "usr" / "bin" / PYTHON)],
                                 capture_output=True, text=True, check=True).stdout
        loader = headers.split("Requesting program interpreter: ")[1].split("]")[0]
        self.loader = root / Tree(root).resolve(loader).lstrip("/")

    def argv(self, *args: str) -> list[str]:
        libs = ":".join(str(self.root / d) for d in (f"lib/{self.triplet}",
                                                     f"usr/lib/{self.triplet}"))
        return [str(self.loader), "--library-path", libs,
                str(self.root / "usr" / "bin" / PYTHON), *args]

    def env(self, **extra: str) -> dict[str, str]:
        """A clean environment (nothing of the caller's: no CFLAGS, no PYTHONPATH)."""
        return {"PYTHONHOME": str(self.root / "usr"), "PATH": "/usr/bin:/bin",
                "LC_ALL": "C.UTF-8",
                "SOURCE_DATE_EPOCH": os.environ.get("SOURCE_DATE_EPOCH", "0"), **extra}


def compile_bytecode(native: NativePython, root: Path, dirs: tuple[str, ...] = (
        f"usr/lib/{PYTHON}", SITE.lstrip("/"))) -> int:
    """Compile every module under ``dirs`` of ``root`` with the build machine's
    interpreter (``native``), then remove the sources: each ``x.py`` becomes ``x.pyc`` in
    its place, which the interpreter imports without a source (a traceback still names
    the file and the line; only the line's text is not shown). The in-image path is
    recorded. Returns the bytes of source removed."""
    targets = [str(root / d) for d in dirs if (root / d).is_dir()]
    if not targets:
        return 0
    subprocess.run(native.argv(
        "-S", "-m", "compileall", "-q", "-f", "-b", "-j", "1",
        "--invalidation-mode", "unchecked-hash", "-s", str(root), "-p", "/", *targets,
    ), check=True, env=native.env(), stdout=subprocess.DEVNULL)
    removed = 0
    for target in targets:
        for source in sorted(Path(target).rglob("*.py")):
            if not source.with_suffix(".pyc").exists():
                continue
            removed += 0 if source.is_symlink() else source.stat().st_size
            source.unlink()
    return removed

