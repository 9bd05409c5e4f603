"""The wrapper Go module that builds one Kubernetes release, made from that release's own go.mod.

Why: ``k8s.io/kubernetes`` requires its staging modules (``k8s.io/api``, ``client-go``, ...)
at ``v0.0.0`` and points them at ``./staging/...`` with ``replace`` lines, which only work
inside its own repository. A module that builds its commands from the Go module proxy must
replace each of them by its published release (``v0.<minor>.<patch>`` for Kubernetes
``v1.<minor>.<patch>``). The list differs between releases (1.36 added ``cri-streaming`` and
``streaming``), so it is read from the release's go.mod, never written by hand; so are the
etcd it requires, its ``go`` line and its ``godebug`` settings.

``build.sh`` runs this for any version but the default (whose module is committed in
``go/``, made the same way) and then ``go mod tidy`` fills in go.sum::

    python3 wrapper.py [--module PATH] v1.37.2 OUTDIR [PACKAGE...]   # go.mod (+ tools.go)

``tools.go`` imports only the packages asked for (the commands that build builds), so
``go mod tidy`` needs only their modules: the Go module proxy does not serve every staging
module at every patch release (at v0.32.13 it has no kubectl or cri-api), and the control
plane alone needs none of those. Without packages there is no tools.go: the module's own
Go files name what it builds (Kubernetes' e2e spec, tests/kind/k8s-e2e).

Standard library only: it runs before the project's venv exists.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

KUBERNETES = "k8s.io/kubernetes"
ETCD_SERVER = "go.etcd.io/etcd/server/v3"
MODULE_PATH = "cpa-tests/controlplane"
_VERSION = re.compile(r"^v1\.(\d+)\.(\d+)$")
_STAGING = re.compile(r"^\s*(?:replace\s+)?(k8s\.io/[\w.-]+)\s+=>\s+\./staging/", re.MULTILINE)


@dataclass(frozen=True)
class Release:
    """What the wrapper module takes from one Kubernetes release's go.mod."""

    version: str
    go: str
    godebug: tuple[str, ...]
    etcd: str
    staging: tuple[str, ...]


def staging_version(version: str) -> str:
    """The staging modules' published release for Kubernetes ``version``: v1.37.2 -> v0.37.2."""
    match = _VERSION.match(version)
    if match is None:
        raise ValueError(f"{version!r} is not a Kubernetes release version like v1.37.2")
    return f"v0.{match.group(1)}.{match.group(2)}"


def _required(gomod: str, module: str) -> str:
    """The version ``gomod`` requires of ``module`` (inside or outside a require block)."""
    match = re.search(rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\S+)", gomod, re.MULTILINE)
    if match is None:
        raise ValueError(f"the go.mod requires no {module}")
    return match.group(1)


def _godebug(gomod: str) -> tuple[str, ...]:
    """The ``godebug`` settings, one ``key=value`` each, from single lines and blocks."""
    settings: list[str] = []
    for block in re.findall(r"^godebug\s*\((.*?)^\)", gomod, re.MULTILINE | re.DOTALL):
        settings += [line.strip() for line in block.splitlines() if line.strip()]
    settings += re.findall(r"^godebug\s+([^\s(]\S*)\s*$", gomod, re.MULTILINE)
    return tuple(settings)


def parse_release(version: str, gomod: str) -> Release:
    """Read a ``k8s.io/kubernetes`` go.mod: its go line, godebug, etcd and staging modules."""
    staging_version(version)  # refuse what is not a release version, early
    go = re.search(r"^go\s+(\S+)\s*$", gomod, re.MULTILINE)
    staging = tuple(sorted(set(_STAGING.findall(gomod))))
    if go is None or not staging:
        raise ValueError(f"{KUBERNETES}@{version}'s go.mod has no go line or no staging replace")
    return Release(version=version, go=go.group(1), godebug=_godebug(gomod),
                   etcd=_required(gomod, ETCD_SERVER), staging=staging)


def replaces(release: Release) -> list[tuple[str, str]]:
    """(module, published version) for every staging module of the release."""
    published = staging_version(release.version)
    return [(module, published) for module in release.staging]


def render_gomod(release: Release, module: str = MODULE_PATH) -> str:
    """The wrapper's go.mod before ``go mod tidy``: Kubernetes and etcd, and the replaces."""
    lines = [
        f"// Made by tests/controlplane/wrapper.py from {KUBERNETES}@{release.version}'s go.mod:",
        "// each staging module replaced by its published release; go.sum by `go mod tidy`.",
        f"module {module}",
        "",
        f"go {release.go}",
        "",
    ]
    if release.godebug:
        lines += ["godebug (", *(f"\t{s}" for s in release.godebug), ")", ""]
    lines += ["require (", f"\t{ETCD_SERVER} {release.etcd}",
              f"\t{KUBERNETES} {release.version}", ")", "", "replace ("]
    lines += [f"\t{module} => {module} {version}" for module, version in replaces(release)]
    return "\n".join([*lines, ")", ""])


def render_tools(packages: list[str]) -> str:
    """tools.go: a blank import of each command built, so that tidy keeps their modules."""
    imports = "".join(f'\t_ "{pkg}"\n' for pkg in sorted(set(packages)))
    return ("//go:build tools\n\n// Package tools pins the commands build.sh builds from this "
            "module (made by wrapper.py).\npackage tools\n\nimport (\n" + imports + ")\n")


def committed_replaces(gomod: str) -> list[tuple[str, str]]:
    """The ``module => module version`` replaces of a wrapper go.mod (the committed one)."""
    found = re.findall(r"^\s*(k8s\.io/[\w.-]+)\s+=>\s+\1\s+(v\S+)\s*$", gomod, re.MULTILINE)
    return sorted(found)


def download_gomod(version: str) -> str:
    """The release's go.mod text, through the Go module proxy (``go mod download``)."""
    proc = subprocess.run(["go", "mod", "download", "-json", f"{KUBERNETES}@{version}"],
                          capture_output=True, text=True, check=False)
    info = json.loads(proc.stdout) if proc.stdout.strip() else {}
    if proc.returncode != 0 or "GoMod" not in info:
        reason = info.get("Error") or proc.stderr.strip() or f"exit {proc.returncode}"
        raise RuntimeError(f"cannot download {KUBERNETES}@{version} ({reason}); "
                           "`go list -m -versions k8s.io/kubernetes` lists the releases")
    return Path(info["GoMod"]).read_text()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="wrapper.py", description=__doc__.split("\n")[0])
    parser.add_argument("--module", default=MODULE_PATH, help="the wrapper module's path")
    parser.add_argument("version", help="a Kubernetes release, e.g. v1.37.2")
    parser.add_argument("out", type=Path, help="the module's directory (made if missing)")
    parser.add_argument("packages", nargs="*", help="the packages tools.go imports")
    args = parser.parse_args(argv)
    try:
        release = parse_release(args.version, download_gomod(args.version))
    except (RuntimeError, ValueError) as exc:
        print(f"[controlplane-build] ERROR: {exc}", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "go.mod").write_text(render_gomod(release, args.module))
    if args.packages:
        (args.out / "tools.go").write_text(render_tools(args.packages))
    print(f"[controlplane-build] wrapper module for {KUBERNETES}@{args.version}: "
          f"{len(release.staging)} staging modules at {staging_version(args.version)}, "
          f"etcd {release.etcd}, go {release.go}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
