"""The built image index, pulled from a real registry and run as a kubelet would run it.

``make image-test`` runs this after ``make image``: the OCI layout is pushed to a local
registry (tests/image/registry.py) and podman pulls each platform from it by the INDEX
digest, picking the platform as a node does. Other architectures run under qemu-user
through binfmt_misc (tests/image/binfmt.py). Every platform gets the quick checks
(metadata, ``--version``, no shell, libgcc_s loadable, SBOM and /LICENSES match what the
image holds); the platforms in ``CPA_IMAGE_TEST_FULL`` (default linux/amd64 and
linux/arm64) also get the full run: the exact command of
``manifests/kube-dns-autoscaler.yaml``, in-cluster configuration only, a real
ServiceAccount token of ``kube-system/kube-dns-autoscaler``, a read-only root filesystem
without any tmpfs, uid 65534, no capabilities, the manifest's 64Mi memory limit (plus
:data:`EMULATOR_MIB` under qemu-user, whose translation cache is charged to the container's
cgroup too: the limit itself is held natively, by amd64); the others get a short one
(first write, /healthz, SIGTERM). Figures (sizes, cold start to first write, RSS, the
cgroup's peak, stop time) are printed per platform.
"""

from __future__ import annotations

import json
import os
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import urllib3
import yaml
from ocibuild.platforms import PLATFORMS, native

from tests.controlplane import ControlPlane, ensure_binaries
from tests.image.binfmt import Binfmt
from tests.image.pod import (
    PodContainer,
    PodNetwork,
    ServiceAccountFiles,
    podman,
)
from tests.image.registry import OUT, Registry, built
from tests.integration.support import create_nodes, replicas, wait_replicas, wait_until

REPO = Path(__file__).resolve().parents[2]
MANIFEST = REPO / "manifests" / "kube-dns-autoscaler.yaml"
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
UPSTREAM = "v1.10.3"
NS = "kube-system"
BUILT: dict[str, Any] = built() if (OUT / "digests.json").exists() else {"platforms": {}}
PLATFORM_NAMES = sorted(BUILT["platforms"], key=list(PLATFORMS).index)
FULL = os.environ.get("CPA_IMAGE_TEST_FULL", "linux/amd64,linux/arm64").split(",")
# The distributions the SBOM must list at the versions the image holds.
DISTS = ("msgspec", "structlog", "prometheus_client", "PyYAML",
         "cluster-proportional-autoscaler-py")

# qemu-user's own memory (its translated code, in transparent huge pages) counts in the
# container's cgroup: about three times amd64's native memory for arm64 in the same full
# run, at the 64Mi limit; there the interpreter's exit, touching code
# not yet translated, stalled in reclaim (ppc64le every time, arm64 in CI: "stopped"
# logged, then podman's SIGKILL after the grace period, exit 137, not OOM-killed). The
# emulated platforms get this much more: the limit is the manifest's on a real node of
# theirs, not the emulator's.
EMULATOR_MIB = 64

pytestmark = pytest.mark.timeout(600)


def report(**figures: object) -> None:
    print("\n[image-test] " + " ".join(f"{k}={v}" for k, v in figures.items()), flush=True)


def manifest_docs() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d]


def memory_limit(name: str) -> str:
    """The manifest's memory limit, plus :data:`EMULATOR_MIB` for a platform under qemu."""
    limit = manifest_container()["resources"]["limits"]["memory"]
    assert limit.endswith("Mi"), limit
    mib = int(limit.removesuffix("Mi"))
    return f"{mib if PLATFORMS[name] == native() else mib + EMULATOR_MIB}m"


def manifest_container() -> dict[str, Any]:
    deployment = next(d for d in manifest_docs() if d["kind"] == "Deployment")
    container: dict[str, Any] = deployment["spec"]["template"]["spec"]["containers"][0]
    return container


@pytest.fixture(scope="module")
def index_ref() -> Iterator[str]:
    """The index pushed to a local registry; ``host:port/name@sha256:<index digest>``."""
    if not PLATFORM_NAMES:
        pytest.fail(f"no image index in {OUT}: run `make image` first")
    with Registry() as registry:
        ref = registry.push("cluster-proportional-autoscaler-py", VERSION)
        assert ref.endswith("@" + BUILT["index"]), (ref, BUILT["index"])
        yield ref


@pytest.fixture(scope="module")
def emulation() -> Iterator[Binfmt]:
    host = native()
    qemus = [PLATFORMS[p].qemu for p in PLATFORM_NAMES if PLATFORMS[p] != host]
    with Binfmt(qemus) as binfmt:
        yield binfmt
    assert binfmt.leftovers() == []


@pytest.fixture(scope="module")
def pulled(index_ref: str, emulation: Binfmt) -> dict[str, str]:
    """Each platform pulled by the index digest (podman picks the manifest as a node
    does); platform -> local image ID."""
    ids = {}
    for name in PLATFORM_NAMES:
        began = time.monotonic()
        image_id = podman("pull", "--quiet", "--tls-verify=false", "--platform", name,
                          index_ref, timeout=300).stdout.strip().splitlines()[-1]
        info = json.loads(podman("image", "inspect", image_id).stdout)[0]
        assert info["Os"] == "linux" and info["Architecture"] == PLATFORMS[name].oci_arch
        # The image ID is the config's digest: the one of that platform's manifest.
        config = layout_manifest(name)["config"]["digest"]
        assert info["Id"] == config.removeprefix("sha256:"), (name, info["Id"], config)
        ids[name] = image_id
        report(platform=name, pulled_in_s=round(time.monotonic() - began, 2),
               manifest=BUILT["platforms"][name])
    return ids


def run(image_id: str, *args: str, entrypoint: str | None = None, check: bool = True
        ) -> Any:
    extra = ["--entrypoint", entrypoint] if entrypoint else []
    return podman("run", "--rm", "--network", "none", "--read-only", "--read-only-tmpfs=false",
                  "--user", "65534:65534", "--cap-drop", "ALL", *extra, image_id, *args,
                  check=check, timeout=300)


def layout_manifest(name: str) -> dict[str, Any]:
    digest = BUILT["platforms"][name].removeprefix("sha256:")
    doc: dict[str, Any] = json.loads((OUT / "layout" / "blobs" / "sha256" / digest).read_text())
    return doc


def test_index_holds_the_platforms(index_ref: str) -> None:
    assert {"linux/amd64", "linux/arm64"} <= set(PLATFORM_NAMES)
    index = json.loads((OUT / "layout" / "blobs" / "sha256" /
                        BUILT["index"].removeprefix("sha256:")).read_text())
    assert index["mediaType"] == "application/vnd.oci.image.index.v1+json"
    listed = {"/".join(x for x in (m["platform"]["os"], m["platform"]["architecture"],
                                   m["platform"].get("variant", "")) if x): m["digest"]
              for m in index["manifests"]}
    assert listed == BUILT["platforms"]
    report(index=BUILT["index"], platforms=",".join(PLATFORM_NAMES), ref=index_ref)


@pytest.mark.parametrize("name", PLATFORM_NAMES)
def test_metadata_and_sizes(name: str, pulled: dict[str, str]) -> None:
    info = json.loads(podman("image", "inspect", pulled[name]).stdout)[0]
    config = info["Config"]
    assert config["Entrypoint"] == ["/cluster-proportional-autoscaler"]
    assert config["User"] == "65534:65534"
    assert "8080/tcp" in config.get("ExposedPorts", {})
    labels = config["Labels"]
    assert labels["org.opencontainers.image.version"] == VERSION
    assert labels["org.opencontainers.image.title"] == "cluster-proportional-autoscaler-py"
    compressed = sum(layer["size"] for layer in layout_manifest(name)["layers"])
    report(platform=name, uncompressed_mib=round(info["Size"] / 2**20, 1),
           compressed_mib=round(compressed / 2**20, 1))


@pytest.mark.parametrize("name", PLATFORM_NAMES)
def test_version_libgcc_and_no_shell(name: str, pulled: dict[str, str]) -> None:
    began = time.monotonic()
    out = run(pulled[name], "--version").stdout.strip()
    took = time.monotonic() - began
    assert out.split()[0] == VERSION and UPSTREAM in out, out
    # The vertical autoscaler at the path of CPVA's image (`command: [/cpvpa, ...]`).
    vertical = run(pulled[name], "--version", entrypoint="/cpvpa").stdout.strip()
    assert vertical.split()[0] == VERSION, vertical
    # glibc dlopen()s libgcc_s for pthread_exit/pthread_cancel: present and loadable.
    probe = ("import ctypes, platform; ctypes.CDLL('libgcc_s.so.1'); "
             "print(platform.machine())")
    machine = run(pulled[name], "-c", probe, entrypoint="/opt/venv/bin/python").stdout.strip()
    assert machine == PLATFORMS[name].wheel_machine, (name, machine)
    for shell in ("/bin/sh", "/bin/bash"):
        proc = run(pulled[name], "-c", "true", entrypoint=shell, check=False)
        assert proc.returncode != 0, f"{shell} exists in the {name} image"
    report(platform=name, version_run_s=round(took, 2), machine=machine)


# Imports every extension module of the image (the interpreter's lib-dynload and the venv's
# C extensions: cross-compiled ones on arm/v7, ppc64le and s390x) and exercises the ones
# the daemon relies on, on the image's own CPU (qemu-user for foreign ones).
EXTENSIONS_PROBE = """
import importlib, json, pathlib, platform, sys, sysconfig
suffix = sysconfig.get_config_var("EXT_SUFFIX")
found = {}
dynload = pathlib.Path(sys.base_prefix, "lib", "python%d.%d" % sys.version_info[:2],
                       "lib-dynload")
for so in sorted(dynload.glob("*.so")):
    found[so.name.split(".")[0]] = str(so)
site = pathlib.Path(sys.prefix, "lib", "python%d.%d" % sys.version_info[:2], "site-packages")
for so in sorted(site.rglob("*.so")):
    rel = so.relative_to(site)
    found[".".join(rel.parts[:-1] + (rel.name.split(".")[0],))] = str(so)
imported, failed, wrong_suffix = [], {}, []
for name, path in sorted(found.items()):
    if not path.endswith(suffix):
        wrong_suffix.append(path)
    try:
        importlib.import_module(name)
        imported.append(name)
    except Exception as exc:
        failed[name] = repr(exc)
import msgspec, ssl, yaml
class Node(msgspec.Struct):
    name: str
    cores: int
    labels: dict[str, str] = {}
doc = b'{"name":"n1","cores":4,"labels":{"a":"b"}}'
node = msgspec.json.decode(doc, type=Node)
assert msgspec.json.encode(node) == doc, msgspec.json.encode(node)
assert msgspec.msgpack.decode(msgspec.msgpack.encode(node), type=Node) == node
assert yaml.safe_load("clusters: [{name: a, cluster: {server: 'https://x'}}]") == {
    "clusters": [{"name": "a", "cluster": {"server": "https://x"}}]}
ctx = ssl.create_default_context()
print(json.dumps({"imported": imported, "failed": failed, "wrong_suffix": wrong_suffix,
                  "machine": platform.machine(), "msgspec_core": msgspec._core.__file__,
                  "libyaml": yaml.__with_libyaml__, "openssl": ssl.OPENSSL_VERSION,
                  "suffix": suffix}))
"""


@pytest.mark.parametrize("name", PLATFORM_NAMES)
def test_every_extension_imports(name: str, pulled: dict[str, str]) -> None:
    """Every C extension of the image loads on that CPU: the interpreter's own (_ssl,
    _hashlib, _ctypes, ...: their shared libraries are all in the image) and the venv's,
    msgspec's real C extension first (cross-compiled where PyPI has no wheel)."""
    began = time.monotonic()
    held = json.loads(run(pulled[name], "-c", EXTENSIONS_PROBE,
                          entrypoint="/opt/venv/bin/python").stdout)
    took = time.monotonic() - began
    assert held["failed"] == {}, held["failed"]
    assert held["wrong_suffix"] == [], held["wrong_suffix"]
    assert held["machine"] == PLATFORMS[name].wheel_machine
    assert held["suffix"] == f".cpython-311-{PLATFORMS[name].triplet}.so"
    # (zlib, _socket, select, pyexpat, ... are built into Debian's interpreter binary.)
    for module in ("msgspec._core", "_ssl", "_hashlib", "_ctypes", "_json", "_decimal",
                   "_asyncio", "_bz2", "_lzma", "_uuid"):
        assert module in held["imported"], (module, held["imported"])
    assert held["msgspec_core"].endswith(held["suffix"])
    report(platform=name, extensions=len(held["imported"]), libyaml=held["libyaml"],
           openssl=held["openssl"].replace(" ", "_"), probe_s=round(took, 2))


PROBE = (REPO / "image" / "ocibuild" / "importprobe.py").read_text()
IMPORTS: dict[str, Any] = (json.loads((OUT / "imports.json").read_text())
                           if (OUT / "imports.json").exists() else {"closures": {}})


@pytest.mark.parametrize("name", PLATFORM_NAMES)
def test_every_module_the_program_can_import_imports(name: str, pulled: dict[str, str]
                                                     ) -> None:
    """What was dropped from the standard library (and the sources, and PyYAML's libyaml
    binding) left nothing the program needs out: every module the import closure of each
    entry point reaches (image/ocibuild/importprobe.py, found at build time over the FULL
    standard library), and every module of the project, imports in the image, on its CPU,
    in a fresh interpreter per closure; what the full interpreter could not import either
    (Windows modules, optional libraries) is all that is absent."""
    closures = IMPORTS["closures"]
    assert closures, f"no {OUT / 'imports.json'}: run `make image`"
    per_entry = {ep: spec["closure"] for ep, spec in IMPORTS["entry_points"].items()}
    assert set(per_entry) == {"cluster-proportional-autoscaler", "cpa", "cpvpa"}
    figures = {}
    for label, closure in closures.items():
        began = time.monotonic()
        out = run(pulled[name], "-c", PROBE, "import", *closure["importable"],
                  entrypoint="/opt/venv/bin/python").stdout
        held = json.loads(out.rsplit("\nIMPORTPROBE ", 1)[1])
        assert held["failed"] == {}, (label, held["failed"])
        assert len(held["imported"]) == len(closure["importable"])
        figures[label] = (len(held["imported"]), round(time.monotonic() - began, 1))
    for entry_point, label in per_entry.items():
        report(platform=name, entry_point=entry_point, modules_imported=figures[label][0],
               import_s=figures[label][1])
    report(platform=name, every_project_module=figures["(every module of the project)"][0])


@pytest.mark.parametrize("name", PLATFORM_NAMES)
def test_no_sources_and_tracebacks_keep_file_and_line(name: str, pulled: dict[str, str]
                                                      ) -> None:
    probe = ("import json, pathlib, sys\n"
             "sources = [str(p) for p in pathlib.Path(sys.base_prefix, 'lib').rglob('*.py')]\n"
             "sources += [str(p) for p in pathlib.Path(sys.prefix, 'lib').rglob('*.py')]\n"
             "print(json.dumps(sources))\n"
             "json.loads('{')\n")
    proc = run(pulled[name], "-c", probe, entrypoint="/opt/venv/bin/python", check=False)
    assert json.loads(proc.stdout) == []
    assert 'File "/usr/lib/python3.11/json/decoder.py", line' in proc.stderr, proc.stderr
    assert "JSONDecodeError" in proc.stderr


SBOM_PROBE = """
import importlib.metadata as m, json, sys, os
print(json.dumps({"python": "%d.%d.%d" % sys.version_info[:3],
                  "dists": {d.metadata["Name"]: d.version for d in m.distributions()},
                  "licenses": sorted(os.listdir("/LICENSES/debian")),
                  "python_licenses": sorted(os.listdir("/LICENSES/python")),
                  "sbom": json.load(open("/LICENSES/sbom.spdx.json"))}))
"""


@pytest.mark.parametrize("name", PLATFORM_NAMES)
def test_sbom_lists_what_the_image_holds(name: str, pulled: dict[str, str]) -> None:
    held = json.loads(run(pulled[name], "-c", SBOM_PROBE,
                          entrypoint="/opt/venv/bin/python").stdout)
    slug = PLATFORMS[name].slug
    sbom = json.loads((OUT / "sbom" / f"{slug}.spdx.json").read_text())
    assert held["sbom"] == sbom, "the SBOM in the image differs from the one written beside it"
    assert sbom["spdxVersion"] == "SPDX-2.3"
    versions = {p["name"]: p["versionInfo"] for p in sbom["packages"]}
    assert versions["cpython"] == held["python"]
    for dist in DISTS:
        assert versions[dist] == held["dists"][dist], (dist, versions.get(dist))
    assert set(held["dists"]) == {p for p in versions if p in held["dists"]}
    debs = [p for p in sbom["packages"] if p["SPDXID"].startswith("SPDXRef-deb-")]
    assert {p["name"] for p in debs} == set(held["licenses"])
    assert {"libc6", "libgcc-s1", "libssl3"} <= set(held["licenses"])
    assert all(p["licenseDeclared"] != "NOASSERTION" for p in debs), debs
    assert set(held["python_licenses"]) == set(held["dists"])
    report(platform=name, sbom_packages=len(sbom["packages"]), debian=len(debs),
           python=held["python"])


# ------------------------------------------------------------------------ the Pod runs
@pytest.fixture(scope="module")
def network() -> Iterator[PodNetwork]:
    net = PodNetwork()
    try:
        net.create()
        yield net
    finally:
        net.close()
    assert net.leftovers() == [], f"left on the host: {net.leftovers()}"


@pytest.fixture
def plane(network: PodNetwork) -> Iterator[ControlPlane]:
    """A fresh control plane per platform, listening on the host end of the Pod's veth,
    with the manifest's ServiceAccount and RBAC (not its Deployment: the container stands
    for that)."""
    cp = ControlPlane(bin_dir=ensure_binaries(), bind_address=network.host_ip)
    try:
        cp.start()
        for doc in manifest_docs():
            if doc["kind"] != "Deployment":
                cp.admin().apply(doc)
        yield cp
    finally:
        cp.stop()


def coredns(plane: ControlPlane) -> None:
    plane.admin().apply({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "coredns", "namespace": NS},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"k8s-app": "kube-dns"}},
                 "template": {"metadata": {"labels": {"k8s-app": "kube-dns"}},
                              "spec": {"containers": [{"name": "coredns",
                                                       "image": "coredns:stand-in"}]}}},
    })


@pytest.mark.parametrize("name", PLATFORM_NAMES)
def test_runs_as_the_manifest_says(name: str, pulled: dict[str, str], network: PodNetwork,
                                   plane: ControlPlane) -> None:
    full = name in FULL
    admin = plane.admin()
    coredns(plane)
    create_nodes(admin, "img", 2, cpu="4")
    command = manifest_container()["command"]
    health = urllib3.PoolManager(retries=False, timeout=2.0)
    token = plane.service_account_token(NS, "kube-dns-autoscaler")
    sa = ServiceAccountFiles(token, plane.ca_file.read_bytes(), NS)

    def get(path: str) -> tuple[int, str]:
        resp = health.request("GET", f"http://{network.pod_ip}:8080{path}")
        return resp.status, resp.data.decode()

    container = PodContainer(pulled[name], command, network=network, sa=sa,
                             api_host=network.host_ip, api_port=plane.port,
                             memory=memory_limit(name))
    try:
        # 2 nodes x 4 cores: both axes give 1, preventSinglePointFailure lifts it to 2.
        wait_replicas(admin, NS, "deployment", "coredns", 2, timeout=120)
        first_write = time.monotonic() - container.started
        wait_until("/healthz 200 on the Pod IP", lambda: get("/healthz")[0] == 200, 60)
        cm = admin.get(f"/api/v1/namespaces/{NS}/configmaps/kube-dns-autoscaler")
        assert cm["data"] == {"linear": '{"coresPerReplica":256,"includeUnschedulableNodes":'
                                        'true,"nodesPerReplica":16,'
                                        '"preventSinglePointFailure":true}'}
        wait_until("/last-poll 200", lambda: get("/last-poll") == (200, ""), 60)
        figures: dict[str, object] = {}
        # The daemon writes its held-back logs and fills /metrics right AFTER the first
        # poll's writes (cpa/horizontal/daemon/cpa_main.py: _FirstPollDone;
        # cpa/horizontal/daemon/latemetrics.py): a
        # moment after the replicas changed, seconds later under emulation.
        wait_until("the first poll's logs", lambda: "scale.changed" in container.logs(), 60)
        if full:
            wanted = 'cpa_target_replicas{target="deployment/coredns"} 2.0'
            wait_until("/metrics after the first poll", lambda: wanted in get("/metrics")[1], 60)
            status, metrics = get("/metrics")
            assert status == 200 and 'cpa_polls_total{result="success"}' in metrics
            # 40 nodes: ceil(40/16) = 3 replicas.
            changed = time.monotonic()
            create_nodes(admin, "img", 38, cpu="4", start=2)
            wait_replicas(admin, NS, "deployment", "coredns", 3, timeout=60)
            figures["node_change_to_replicas_s"] = round(time.monotonic() - changed, 2)
            status_ = container.proc_status()
            assert status_["Uid"].split()[:2] == ["65534", "65534"]
            assert status_["Gid"].split()[:2] == ["65534", "65534"]
            assert int(status_["CapEff"], 16) == 0
            assert status_["NoNewPrivs"].strip() == "1"
            figures["rss_mib"] = round(int(status_["VmRSS"].split()[0]) / 1024, 1)
            figures["peak_rss_mib"] = round(int(status_["VmHWM"].split()[0]) / 1024, 1)
            figures["cgroup_peak_mib"] = container.memory_peak_mib()
            figures["memory_limit"] = memory_limit(name)
            assert container.changed_files() == [], "the container wrote to its filesystem"
        logs = container.logs()
        for event in ("nodes.synced", "configmap.created", "scale.changed", "params.loaded"):
            assert event in logs, f"{event} missing from the logs:\n{logs}"
        assert "in-cluster" in logs
        # A kubelet sends SIGTERM and kills after the grace period; with a 2 s grace, exit
        # code 0 (not 137) means it stopped by itself within 2 s.
        code, took = container.stop(grace_seconds=2)
        oom = " (killed at its memory limit)" if container.oom_killed() else ""
        assert code == 0, f"exit code {code}{oom} after SIGTERM:\n{container.logs()[-3000:]}"
        assert "stopped" in container.logs()
        assert replicas(admin, NS, "deployment", "coredns") == (3 if full else 2)
        report(platform=name, run="full" if full else "short",
               cold_start_to_first_write_s=round(first_write, 2),
               sigterm_to_exit_s=round(took, 2), **figures)
    finally:
        container.remove()
        sa.close()
