"""The Kubernetes versions tested: the wrapper module's making, CI's choice, the docs' table.

Why: the control plane is built for any release (``K8S_VERSION``) from a wrapper module made
from that release's own go.mod (tests/controlplane/wrapper.sh); CI runs the integration
tests marked ``api_paths`` against the oldest and newest releases supported and Kubernetes'
own e2e spec on the newest. These checks keep the derivation right, the marker on the
version-dependent paths, and CI, the Makefile and docs/kubernetes-versions.md naming the
same versions.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.controlplane.binaries import DEFAULT_K8S_VERSION

REPO = Path(__file__).resolve().parents[2]
CI = (REPO / ".ci" / "run").read_text()
VERSIONS_DOC = (REPO / "docs" / "kubernetes-versions.md").read_text()

GOMOD = """module k8s.io/kubernetes

go 1.26.0

godebug default=go1.26

godebug (
\twinsymlink=0
)

require (
\tgo.etcd.io/etcd/api/v3 v3.7.0
\tk8s.io/api v0.0.0
)

require (
\tgo.etcd.io/etcd/server/v3 v3.7.0 // indirect
)

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/streaming => ./staging/src/k8s.io/streaming
\tk8s.io/cri-streaming => ./staging/src/k8s.io/cri-streaming
)

replace k8s.io/client-go => ./staging/src/k8s.io/client-go
"""


WRAPPER = REPO / "tests" / "controlplane" / "wrapper.sh"


def run_wrapper(tmp_path: Path, version: str, gomod: str | Path, *packages: str
                ) -> subprocess.CompletedProcess[str]:
    """wrapper.sh on a given go.mod (no download): its output module in tmp_path/out."""
    if isinstance(gomod, str):
        (tmp_path / "kubernetes.mod").write_text(gomod)
        gomod = tmp_path / "kubernetes.mod"
    return subprocess.run(["bash", str(WRAPPER), version, str(tmp_path / "out"), *packages],
                          capture_output=True, text=True, check=False,
                          env={**os.environ, "WRAPPER_GOMOD": str(gomod)})


def replaces(gomod: str) -> list[tuple[str, str]]:
    """The ``module => module version`` replaces of a wrapper go.mod."""
    return sorted(re.findall(r"^\s*(k8s\.io/[\w.-]+)\s+=>\s+\1\s+(v\S+)\s*$", gomod, re.M))


def test_a_release_is_read_from_its_go_mod(tmp_path: Path) -> None:
    proc = run_wrapper(tmp_path, "v1.37.2", GOMOD, "k8s.io/kubernetes/cmd/kube-apiserver",
                       "go.etcd.io/etcd/server/v3")
    assert proc.returncode == 0, proc.stderr
    made = (tmp_path / "out" / "go.mod").read_text()
    assert replaces(made) == [
        ("k8s.io/api", "v0.37.2"), ("k8s.io/client-go", "v0.37.2"),
        ("k8s.io/cri-streaming", "v0.37.2"), ("k8s.io/streaming", "v0.37.2")]
    assert re.search(r"^go 1\.26\.0$", made, re.M)
    assert re.search(r"^godebug \(\n\tdefault=go1\.26\n\twinsymlink=0\n\)$", made, re.M)
    assert "\tgo.etcd.io/etcd/server/v3 v3.7.0\n\tk8s.io/kubernetes v1.37.2\n" in made
    tools = (tmp_path / "out" / "tools.go").read_text()
    assert re.findall(r'^\t_ "(\S+)"$', tools, re.M) == [
        "go.etcd.io/etcd/server/v3", "k8s.io/kubernetes/cmd/kube-apiserver"]


def test_without_packages_there_is_no_tools_go(tmp_path: Path) -> None:
    assert run_wrapper(tmp_path, "v1.37.2", GOMOD).returncode == 0
    assert not (tmp_path / "out" / "tools.go").exists()


@pytest.mark.parametrize("bad", ["1.37.2", "v1.37", "v1.37.0-rc.1", "v2.0.0", "latest"])
def test_only_release_versions_are_taken(tmp_path: Path, bad: str) -> None:
    proc = run_wrapper(tmp_path, bad, GOMOD)
    assert proc.returncode == 1 and "is not a Kubernetes release version" in proc.stderr


def test_a_go_mod_without_staging_replaces_is_refused(tmp_path: Path) -> None:
    proc = run_wrapper(tmp_path, "v1.37.2", "module k8s.io/kubernetes\n\ngo 1.26.0\n")
    assert proc.returncode == 1 and "no staging replace" in proc.stderr


def _cached_kubernetes_gomod(version: str) -> Path | None:
    go = shutil.which("go")
    if go is None:
        return None
    cache = subprocess.run([go, "env", "GOMODCACHE"], capture_output=True, text=True,
                           check=False).stdout.strip()
    path = Path(cache, "cache", "download", "k8s.io", "kubernetes", "@v", f"{version}.mod")
    return path if path.is_file() else None


def test_the_committed_module_is_what_the_wrapper_derives(tmp_path: Path) -> None:
    """tests/controlplane/go (the default version's module, committed with its go.sum)
    replaces exactly the staging modules its release's go.mod names, at that release, and
    requires the etcd that go.mod does."""
    gomod = _cached_kubernetes_gomod(DEFAULT_K8S_VERSION)
    if gomod is None:
        pytest.skip(f"k8s.io/kubernetes@{DEFAULT_K8S_VERSION}'s go.mod is not in the Go "
                    "module cache (tests/controlplane/build.sh downloads it)")
    proc = run_wrapper(tmp_path, DEFAULT_K8S_VERSION, gomod)
    assert proc.returncode == 0, proc.stderr
    made = (tmp_path / "out" / "go.mod").read_text()
    committed = (REPO / "tests" / "controlplane" / "go" / "go.mod").read_text()
    assert replaces(committed) == replaces(made) != []
    etcd = re.search(r"^\tgo\.etcd\.io/etcd/server/v3 (\S+)$", made, re.M)
    assert etcd and re.search(rf"^\s*go\.etcd\.io/etcd/server/v3 {re.escape(etcd.group(1))}$",
                              committed, re.M)


def _ci_version(name: str) -> str:
    match = re.search(rf"^{name}=(v1\.\d+\.\d+)\b", CI, re.M)
    assert match, f".ci/run sets no {name}"
    return match.group(1)


def test_ci_runs_the_api_paths_on_the_oldest_and_newest_and_kind_on_the_newest() -> None:
    oldest, newest = _ci_version("k8s_oldest"), _ci_version("k8s_newest")
    assert oldest < newest and DEFAULT_K8S_VERSION not in (oldest, newest)
    for version in ("oldest", "newest"):
        assert re.search(rf'^K8S_VERSION="\$k8s_{version}" make api-paths$', CI, re.M), version
    assert re.search(r'^K8S_VERSION="\$k8s_newest" KIND_EXPERIMENTAL_PROVIDER=podman make e2e$',
                     CI, re.M)
    assert re.search(r"^make test$", CI, re.M)  # everything on the default
    makefile = (REPO / "Makefile").read_text()
    assert '-m "integration and api_paths"' in makefile  # chosen by the marker, not by name


def test_the_versions_page_names_what_ci_runs() -> None:
    for version in (_ci_version("k8s_oldest"), DEFAULT_K8S_VERSION, _ci_version("k8s_newest")):
        assert re.search(rf"^\| `{re.escape(version)}`", VERSIONS_DOC, re.M), version
    readme = (REPO / "README.md").read_text()
    assert "docs/kubernetes-versions.md" in readme


def test_the_marker_covers_every_version_dependent_path() -> None:
    """Each path that changes across versions has at least one marked test: the first
    list (streaming, paged, one page, JSON) and the watch's resume (410), Scale writes,
    the Lease, ConfigMap create and update, the load axis' Pod list."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "-m", "integration and api_paths", "tests/integration"],
        cwd=REPO, capture_output=True, text=True, check=False,
        env={**os.environ, "PYTEST_ADDOPTS": ""})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    ids = [line for line in proc.stdout.splitlines() if "::" in line]
    wanted = {
        "first list, its fallbacks": "test_nodewatch.py::test_initial_sync_then_watch",
        "watch resume": "test_nodewatch.py::test_410_after_an_api_server_restart_relists",
        "Scale writes, ConfigMap create": "test_autoscaler.py::test_seed_walkthrough",
        "Scale subresource of a CRD": "test_targets.py::test_a_custom_resource_with_a_scale",
        "Lease": "test_observability.py::test_leader_election_one_writer_and_takeover",
        "ConfigMap update": "test_parameter_sources.py::test_new_defaults_reach_an_unedited",
        "Pod list": "test_load.py::test_fifty_pods",
    }
    missing = [path for path, test in wanted.items() if not any(test in i for i in ids)]
    assert not missing, missing
    assert len(ids) < 80, "api_paths is a selection, not the suite"
