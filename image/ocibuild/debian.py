"""Debian's packages for one architecture, extracted without running any of their code.

``mmdebstrap --variant=extract`` resolves the dependencies of the packages we name,
downloads them for the target architecture and unpacks them into a directory: no
maintainer script runs, so no emulation is needed. The downloaded ``.deb`` files stay in
the tree's apt cache; their control fields and file lists say which package owns each
file, for the SBOM, ``/LICENSES`` and ``/var/lib/dpkg/status.d``.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ocibuild import mirrorsync
from ocibuild.platforms import Platform

SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
SOURCES = (f"deb {MIRROR} {SUITE} main",
           f"deb {MIRROR} {SUITE}-updates main",
           f"deb http://deb.debian.org/debian-security {SUITE}-security main")
PYTHON = "python3.11"
# What the runtime needs: the interpreter, its standard library, and libgcc_s (glibc
# dlopen()s it for pthread_exit/pthread_cancel: without it a thread exit at shutdown aborts
# with "libgcc_s.so.1 must be installed for pthread_exit to work").
PACKAGES = (f"{PYTHON}-minimal", f"lib{PYTHON}-stdlib", "libgcc-s1")
# The interpreter's C headers (Python.h, that architecture's pyconfig.h): what a C extension
# is compiled against when the package index has no wheel for that platform (wheels.py).
# Extracted into a tree of its own: never part of the image.
HEADERS = f"lib{PYTHON}-dev"
ARCHIVES = "var/cache/apt/archives"


@dataclass
class DebPackage:
    name: str
    version: str
    arch: str
    source: str
    source_version: str
    control: str                      # the control paragraph, as dpkg-deb prints it
    files: set[str] = field(default_factory=set)   # absolute paths, as in the .deb
    sha256: str = ""                  # of the .deb file: the input, as the mirror served it

    @property
    def copyright(self) -> str:
        return f"/usr/share/doc/{self.name}/copyright"


def extract(plat: Platform, tree: Path, packages: tuple[str, ...] = PACKAGES
            ) -> dict[str, DebPackage]:
    """Unpack ``packages`` and their dependencies for ``plat`` into ``tree``; returns the
    packages by name with the files each owns.

    A mirror between two syncs (an architecture's index not the one its signed Release
    lists, which apt refuses) is read through :mod:`ocibuild.mirrorsync`'s proxy, which
    vouches for the served index; said on stderr, and the lock still checks every
    package."""
    tree.parent.mkdir(parents=True, exist_ok=True)
    command = ["mmdebstrap", "--quiet", "--variant=extract", f"--arch={plat.deb_arch}",
               "--skip=cleanup/apt/cache", "--skip=cleanup/apt/lists",
               f"--include={','.join(packages)}", SUITE, str(tree)]
    try:
        subprocess.run([*command, *SOURCES], check=True, stdout=subprocess.DEVNULL)
    except subprocess.CalledProcessError:
        unsynced = mirrorsync.unsynced(SOURCES, plat.deb_arch)
        if not unsynced:
            raise
        for suite in unsynced:
            print(f"[ocibuild] {plat.deb_arch}: {suite.dists} serves "
                  f"{', '.join(sorted(suite.served))} other than its signed Release lists "
                  "(a mirror between syncs): read as served, through a local proxy; "
                  "image/lock.json still checks every package", file=sys.stderr)
        shutil.rmtree(tree, ignore_errors=True)
        lines = {suite.line for suite in unsynced}
        with mirrorsync.Proxy(unsynced) as proxy:
            subprocess.run([*command[:2], f'--aptopt=Acquire::http::Proxy "{proxy.url}"',
                            *command[2:],
                            *(mirrorsync.trusted(s) if s in lines else s for s in SOURCES)],
                           check=True, stdout=subprocess.DEVNULL)
    return read_tree(tree)


def read_tree(tree: Path) -> dict[str, DebPackage]:
    """The packages extracted into ``tree`` (from the .deb files in its apt cache)."""
    found = {}
    for deb in sorted((tree / ARCHIVES).glob("*.deb")):
        pkg = read_deb(deb)
        found[pkg.name] = pkg
    if not found:
        raise SystemExit(f"ocibuild: mmdebstrap left no .deb in {tree / ARCHIVES}")
    return found


def read_deb(deb: Path) -> DebPackage:
    control = subprocess.run(["dpkg-deb", "-f", str(deb)], check=True, capture_output=True,
                             text=True).stdout
    fields = parse_control(control)
    listing = subprocess.run(["dpkg-deb", "--fsys-tarfile", str(deb)], check=True,
                             capture_output=True).stdout
    files = _tar_names(listing)
    source = fields.get("Source", fields["Package"])
    source_version = fields["Version"]
    match = re.fullmatch(r"(\S+) \((\S+)\)", source)
    if match:
        source, source_version = match.groups()
    return DebPackage(name=fields["Package"], version=fields["Version"],
                      arch=fields["Architecture"], source=source,
                      source_version=source_version, control=control.rstrip("\n") + "\n",
                      files=files, sha256=hashlib.sha256(deb.read_bytes()).hexdigest())


def _tar_names(data: bytes) -> set[str]:
    import io
    import tarfile
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {"/" + m.name.removeprefix("./").rstrip("/") for m in tar.getmembers()
                if m.name not in (".", "./")}


def parse_control(text: str) -> dict[str, str]:
    """One deb822 paragraph -> fields (continuation lines joined with newlines)."""
    fields: dict[str, str] = {}
    key = ""
    for line in text.splitlines():
        if line[:1] in (" ", "\t") and key:
            fields[key] += "\n" + line.strip()
        elif ":" in line:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return fields


def licenses(copyright_text: str) -> list[str]:
    """The licence short names of a machine-readable (DEP-5) copyright file, in order of
    first appearance; [] when the file is not machine-readable."""
    if "Format:" not in copyright_text.split("\n\n", 1)[0]:
        return []
    seen: list[str] = []
    for match in re.finditer(r"^License:[ \t]*(\S.*)$", copyright_text, re.M):
        name = match.group(1).strip()
        if name not in seen:
            seen.append(name)
    return seen
