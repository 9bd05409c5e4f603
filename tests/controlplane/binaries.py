"""Where the control plane's binaries are: built from Go modules by ``build.sh`` (pinned
in ``go/go.mod``) into ``<repo>/.cache/controlplane/<version>/bin``, or given by
``$CPA_CONTROLPLANE_BIN``; and the upstream autoscaler's binary, for the benchmarks."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

BIN_DIR_ENV = "CPA_CONTROLPLANE_BIN"
"""Optional override: a directory holding ``kube-apiserver`` and ``etcd`` (no build then)."""

UPSTREAM_BIN_ENV = "CPA_UPSTREAM_AUTOSCALER_BIN"
"""Optional override: path of an upstream ``cluster-proportional-autoscaler`` binary."""

KEEP_ENV = "CPA_CONTROLPLANE_KEEP"
"""If set to 1, ``ControlPlane.stop`` keeps its temp dir (logs, certs) for debugging."""

_HERE = Path(__file__).resolve().parent
_REPO = _HERE.parents[1]
_GO_MOD = _HERE / "go" / "go.mod"
_BUILD_SH = _HERE / "build.sh"
UPSTREAM_CPA_VERSION = "v1.10.3"
UPSTREAM_HOWTO = (
    "not available: the Go module proxy refuses its module, so build it from its source: "
    f"check out tag {UPSTREAM_CPA_VERSION} of "
    "https://github.com/kubernetes-sigs/cluster-proportional-autoscaler and run `make bench` "
    "with CPA_UPSTREAM_SRC=<that checkout> (build.sh builds it into "
    f".cache/upstream-cpa/{UPSTREAM_CPA_VERSION}/), or `go build "
    "./cmd/cluster-proportional-autoscaler` there and set CPA_UPSTREAM_AUTOSCALER_BIN=<binary>")
"""Why there is no upstream binary, and how to provide one (benchmarks only)."""

def _module_version(module: str) -> str:
    """Read a required module's version from the wrapper go.mod: the one source of truth."""
    pattern = re.compile(rf"^\s*{re.escape(module)}\s+(v\S+)", re.MULTILINE)
    match = pattern.search(_GO_MOD.read_text())
    if match is None:
        raise RuntimeError(f"{module} not found in {_GO_MOD}")
    return match.group(1)


K8S_VERSION = _module_version("k8s.io/kubernetes")
ETCD_VERSION = _module_version("go.etcd.io/etcd/server/v3")


def _default_bin_dir() -> Path:
    return _REPO / ".cache" / "controlplane" / K8S_VERSION / "bin"


def _has_binaries(bin_dir: Path) -> bool:
    return all(os.access(bin_dir / name, os.X_OK) for name in ("kube-apiserver", "etcd"))


def find_binaries() -> Path | None:
    """The bin dir holding both binaries ($CPA_CONTROLPLANE_BIN or the cache), else None."""
    override = os.environ.get(BIN_DIR_ENV)
    bin_dir = Path(override) if override else _default_bin_dir()
    return bin_dir if _has_binaries(bin_dir) else None


def go_available() -> bool:
    """Whether a Go toolchain is on PATH, i.e. whether :func:`ensure_binaries` can build."""
    return shutil.which("go") is not None


def upstream_autoscaler_binary() -> Path | None:
    """The upstream reference autoscaler (benchmarks only), if it was built or configured."""
    override = os.environ.get(UPSTREAM_BIN_ENV)
    default = _REPO / ".cache" / "upstream-cpa" / UPSTREAM_CPA_VERSION
    path = Path(override) if override else default / "cluster-proportional-autoscaler"
    return path if os.access(path, os.X_OK) else None


def ensure_binaries() -> Path:
    """Return the bin dir, running build.sh first if needed (once: a cold build is long).

    Build progress goes to this process's stderr. Raises RuntimeError with the reason when the
    binaries cannot be had (override dir incomplete, no Go, build failure).
    """
    found = find_binaries()
    if found is not None:
        return found
    override = os.environ.get(BIN_DIR_ENV)
    if override:
        raise RuntimeError(
            f"${BIN_DIR_ENV}={override} does not contain executable kube-apiserver and etcd"
        )
    if not go_available():
        raise RuntimeError(
            "kube-apiserver/etcd are not cached and 'go' is not on PATH to build them "
            f"(run {_BUILD_SH} on a machine with Go, or set ${BIN_DIR_ENV})"
        )
    print(
        f"[controlplane] building kube-apiserver {K8S_VERSION} + etcd {ETCD_VERSION} "
        "(once, cached afterwards; how long: README.md, The two commands)",
        file=sys.stderr,
        flush=True,
    )
    proc = subprocess.run(
        ["bash", str(_BUILD_SH)], stdout=subprocess.PIPE, stderr=None, text=True, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"{_BUILD_SH} failed with exit code {proc.returncode}; see its output above"
        )
    found = find_binaries()
    if found is None:
        raise RuntimeError(f"{_BUILD_SH} succeeded but {_default_bin_dir()} lacks the binaries")
    return found


