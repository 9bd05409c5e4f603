"""One platform's root filesystem, distroless-style, from an extracted Debian tree.

What goes in: the interpreter, the standard library less what a daemon never imports, the
shared libraries that the interpreter and every extension module need (their ELF
``NEEDED`` entries, read with ``readelf``, which reads any architecture), libgcc_s, a
virtual environment with the autoscaler (``python``), passwd/group entries for 65534,
``/LICENSES`` and ``/var/lib/dpkg/status.d`` (what image scanners read). No shell, no
package manager: nothing to exec but the autoscaler.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from ocibuild.debian import PYTHON, DebPackage
from ocibuild.platforms import Platform

STDLIB = f"/usr/lib/{PYTHON}"
# Kept although the program never imports them: what a person debugging the image asks
# the interpreter (``python -m sysconfig``: paths, the build's configuration; small).
ALWAYS_KEPT = ("sysconfig", "_sysconfigdata")
# Packages of which every module stays when the package does: none of them. ``encodings``
# keeps only the codecs the program names (importprobe.py: CODECS, INTERPRETER_CODECS).
# Loaded with dlopen(), so no NEEDED entry names it: glibc needs libgcc_s for
# pthread_exit/pthread_cancel (unwinding).
DLOPENED = ("libgcc_s.so.1",)


class Tree:
    """Paths inside an extracted tree, resolved as the target would resolve them."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def host(self, path: str) -> Path:
        return self.root / path.lstrip("/")

    def resolve(self, path: str) -> str:
        """The target path a symlink chain ends at (inside the tree)."""
        seen = 0
        parts = [p for p in path.split("/") if p]
        done: list[str] = []
        while parts:
            part = parts.pop(0)
            if part == "..":
                if done:
                    done.pop()
                continue
            if part == ".":
                continue
            candidate = "/" + "/".join([*done, part])
            host = self.host(candidate)
            if host.is_symlink():
                seen += 1
                if seen > 40:
                    raise SystemExit(f"ocibuild: symlink loop at {candidate}")
                target = os.readlink(host)
                if target.startswith("/"):
                    done = []
                parts = [p for p in target.split("/") if p] + parts
            else:
                done.append(part)
        return "/" + "/".join(done)


class RootFs:
    """The root filesystem being assembled at ``dest`` from ``tree``."""

    def __init__(self, plat: Platform, tree: Path, dest: Path) -> None:
        self.plat = plat
        self.tree = Tree(tree)
        self.dest = dest
        self.copied: set[str] = set()   # target paths copied from the tree

    def out(self, path: str) -> Path:
        return self.dest / path.lstrip("/")

    def copy(self, path: str) -> None:
        """Copy ``path`` (file, symlink or directory tree) with its parent directories; for
        a symlink also what it points at."""
        src = self.tree.host(path)
        if path in self.copied or not (src.exists() or src.is_symlink()):
            if path not in self.copied:
                raise SystemExit(f"ocibuild: {path} missing from the {self.plat.name} tree")
            return
        parent = os.path.dirname(path)
        if parent != "/":
            self._mkdirs(parent)
        dst = self.out(path)
        self.copied.add(path)
        if src.is_symlink():
            target = os.readlink(src)
            if not dst.is_symlink():
                os.symlink(target, dst)
            self.copy(self.tree.resolve(path))
        elif src.is_dir():
            dst.mkdir(exist_ok=True)
            shutil.copymode(src, dst)
            for child in sorted(os.listdir(src)):
                self.copy(f"{path.rstrip('/')}/{child}")
        else:
            shutil.copy2(src, dst)

    def _mkdirs(self, path: str) -> None:
        parts = [p for p in path.split("/") if p]
        for i in range(1, len(parts) + 1):
            sub = "/" + "/".join(parts[:i])
            host = self.tree.host(sub)
            if host.is_symlink():  # e.g. /lib64 -> /lib on some layouts
                self.copy(sub)
                continue
            dst = self.out(sub)
            if not dst.exists():
                dst.mkdir()
                if host.is_dir():
                    shutil.copymode(host, dst)

    # ------------------------------------------------------------------ the interpreter
    def add_python(self) -> None:
        """The interpreter and its whole standard library (``prune`` drops what the
        program cannot import, once that is known)."""
        self.copy(f"/usr/bin/{PYTHON}")
        self.copy(STDLIB)
        self.copy(f"/etc/{PYTHON}")
        os.symlink(PYTHON, self.out("/usr/bin/python3"))

    def prune(self, importable: set[str]) -> list[str]:
        """Drop every module of the standard library that the program cannot import
        (``importable``: the import closure of its entry points, importprobe.py), at the
        granularity of a top-level module or package, plus the sub-packages of kept
        packages that nothing imports (their test suites) and the codecs of ``encodings``
        that nothing names. Returns the dropped paths (relative to the standard library)."""
        tops = {name.split(".")[0] for name in importable}
        std = self.out(STDLIB)
        victims: list[Path] = []

        def kept(module: str) -> bool:
            return module in tops or module.startswith(ALWAYS_KEPT)

        for entry in sorted(std.iterdir()):
            if entry.name == "lib-dynload":
                victims += [so for so in sorted(entry.iterdir())
                            if not kept(so.name.split(".")[0])]
            elif entry.name == "EXTERNALLY-MANAGED":
                victims.append(entry)   # pip's marker: no pip in the image
            elif module_name(entry) and not kept(module_name(entry)):
                victims.append(entry)
        for init in sorted(std.glob("*/**/__init__.py")):
            package = ".".join(init.parent.relative_to(std).parts)
            if (init.parent not in victims and package.split(".")[0] in tops
                    and not any(n == package or n.startswith(package + ".")
                                for n in importable)):
                victims.append(init.parent)
        victims += [codec for codec in sorted((std / "encodings").glob("*.py"))
                    if codec.stem not in ("__init__", "aliases")
                    and f"encodings.{codec.stem}" not in importable]
        dropped = []
        for victim in victims:
            if not victim.exists():
                continue   # inside a package dropped already
            dropped.append(str(victim.relative_to(std)))
            if victim.is_dir():
                shutil.rmtree(victim)
            else:
                victim.unlink()
        self.copied = {p for p in self.copied if self.out(p).exists() or
                       self.out(p).is_symlink()}
        return dropped

    # ------------------------------------------------------------------ shared libraries
    def add_libraries(self) -> None:
        """Every ELF file's NEEDED libraries and interpreter, until nothing new appears."""
        lib_dirs = [f"/lib/{self.plat.triplet}", f"/usr/lib/{self.plat.triplet}", "/lib",
                    "/usr/lib"]
        for name in DLOPENED:
            self.copy(self._find_lib(name, lib_dirs))
        done: set[Path] = set()
        while True:
            elves = [p for p in _files(self.dest) if p not in done and _is_elf(p)]
            if not elves:
                return
            for elf in elves:
                done.add(elf)
                needed, interp = _elf_deps(elf)
                if interp:
                    self.copy(interp)
                for lib in needed:
                    self.copy(self._find_lib(lib, lib_dirs))

    def _find_lib(self, name: str, dirs: list[str]) -> str:
        for d in dirs:
            path = f"{d}/{name}"
            if self.tree.host(path).exists():
                return path
        raise SystemExit(f"ocibuild: {name} not found in the {self.plat.name} tree "
                         f"({', '.join(dirs)}): add its Debian package to debian.PACKAGES")

    # ------------------------------------------------------------------ the rest
    def add_accounts(self) -> None:
        etc = self.out("/etc")
        etc.mkdir(exist_ok=True)
        (etc / "passwd").write_text("root:x:0:0:root:/root:/sbin/nologin\n"
                                    "nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n")
        (etc / "group").write_text("root:x:0:\nnogroup:x:65534:\n")
        tmp = self.out("/tmp")
        tmp.mkdir(exist_ok=True)
        tmp.chmod(0o1777)

    def shipped_packages(self, packages: dict[str, DebPackage]) -> list[DebPackage]:
        """The packages at least one of whose files is in the image."""
        shipped = {p for p in self.copied if not self.tree.host(p).is_dir()}
        return [pkg for _, pkg in sorted(packages.items()) if pkg.files & shipped]

    def add_dpkg_status(self, shipped: list[DebPackage]) -> None:
        """``/var/lib/dpkg/status.d/<package>``: the distroless convention through which
        image scanners (trivy, grype, syft) find the Debian packages of an image that has
        no dpkg database."""
        status = self.out("/var/lib/dpkg/status.d")
        status.mkdir(parents=True, exist_ok=True)
        for pkg in shipped:
            (status / pkg.name).write_text(pkg.control)


def module_name(entry: Path) -> str:
    """The top-level module a standard-library entry holds ("" if none)."""
    if entry.suffix == ".py":
        return entry.stem
    return entry.name if (entry / "__init__.py").exists() else ""


def _files(root: Path) -> list[Path]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if not path.is_symlink():
                out.append(path)
    return out


def _is_elf(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(4) == b"\x7fELF"


def _elf_deps(path: Path) -> tuple[list[str], str | None]:
    dynamic = subprocess.run(["readelf", "--dynamic", "--wide", str(path)],
                             capture_output=True, text=True, check=True).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dynamic)
    headers = subprocess.run(["readelf", "--program-headers", "--wide", str(path)],
                             capture_output=True, text=True, check=True).stdout
    interp = re.search(r"Requesting program interpreter: ([^\]]+)\]", headers)
    return needed, interp.group(1) if interp else None
