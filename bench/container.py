"""``python -m bench.container``: our image against upstream's binary in an equivalent image,
both run as a kubelet runs them (podman; changes the host: run it under the host lock).

* **Ours**: the image ``make image`` builds (its linux/amd64 part: ``PLATFORMS=linux/amd64
  image/build.sh``, or ``--layout`` for one built already), pulled into podman from the OCI
  layout.
* **Upstream**: v1.10.3 built here from its source (``CPA_UPSTREAM_SRC``, a checkout of the
  tag) as its own Makefile builds its release binary (``CGO_ENABLED=0``, ``-trimpath``,
  ``-ldflags "-s -w -X .../pkg/version.Version=v1.10.3"``), in an image with nothing else
  (``FROM scratch`` plus the binary; upstream publishes it on distroless/static, which adds
  CA certificates, tzdata and /etc/passwd), written by our image builder's OCI code
  (``image/ocibuild/oci.py``) so that both layouts are made and measured the same way.

Both run the command of ``manifests/kube-dns-autoscaler.yaml`` (upstream's binary takes the
same flags) in a Pod-like container (tests/image/pod.py: a network namespace with a veth to
the API server, the ServiceAccount's token projected read-only, read-only root filesystem,
uid 65534, no capabilities) against one control plane with ``--nodes`` GKE-sized Nodes.
Both get the same memory limit (``--memory``, default 1 GiB: upstream's informer does not
fit our manifest's 64Mi at 1,000 Nodes). Measured, alternating the two over ``--starts``
runs: the image's size (gzip layers as pulled, and unpacked), seconds from ``podman run``
to the first correct ``spec.replicas`` (seen by a watch on the Deployment; the first run
after the pull is reported apart as the cold one, and ``--cold-starts`` more cold ones each
remove the image, pull it again and run it once), and the RSS of the container's process
(VmRSS median over ``--seconds`` after the first write, and VmHWM). Writes
``bench/results/container.json`` and the table ``container.md`` (``make bench-container``).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
for extra in (REPO, REPO / "image"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from bench import measure, nodes  # noqa: E402
from bench.run import NS, RESULTS, TARGET, Cluster, expected_replicas, grow, log  # noqa: E402
from tests.controlplane import (  # noqa: E402
    UPSTREAM_CPA_VERSION,
    ControlPlane,
    ensure_binaries,
)
from tests.image.pod import PodNetwork, ServiceAccountFiles, podman  # noqa: E402

MANIFEST = REPO / "manifests" / "kube-dns-autoscaler.yaml"
CACHE = REPO / ".cache" / "bench-container"
UPSTREAM_MODULE = "github.com/kubernetes-sigs/cluster-proportional-autoscaler"  # go list -m
SA_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


def manifest_command() -> list[str]:
    docs = [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d]
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    command: list[str] = deployment["spec"]["template"]["spec"]["containers"][0]["command"]
    return command


def manifest_rbac() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(MANIFEST.read_text())
            if d and d["kind"] != "Deployment"]


# --- the two images ------------------------------------------------------------------
def our_layout(given: Path | None) -> tuple[Path, str]:
    """The OCI layout of our image and its tag (``make image``'s, amd64 only)."""
    if given is not None:
        index = json.loads((given / "index.json").read_text())
        tag = index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"]
        return given, tag
    log("building our image for linux/amd64 (image/build.sh)")
    out = subprocess.run(["bash", str(REPO / "image" / "build.sh")], cwd=REPO,
                         env={**os.environ, "PLATFORMS": "linux/amd64"}, check=True,
                         capture_output=True, text=True).stdout.strip().splitlines()[-1]
    _, path, tag = out.split(":", 2)
    return Path(path), tag


def upstream_binary(src: Path) -> Path:
    """Upstream's release build of its binary, from its source (cached by the source's
    commit, or by the version for a source tree without its git history)."""
    if not (src / "go.mod").exists():
        raise SystemExit(f"{src}: no go.mod; give a checkout of upstream's tag "
                         f"{UPSTREAM_CPA_VERSION} with --upstream-src or CPA_UPSTREAM_SRC")
    commit = subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True,
                            text=True, check=False).stdout.strip()[:12] or UPSTREAM_CPA_VERSION
    binary = CACHE / f"upstream-{commit}" / "cluster-proportional-autoscaler"
    if binary.exists():
        return binary
    binary.parent.mkdir(parents=True, exist_ok=True)
    log(f"building upstream {UPSTREAM_CPA_VERSION} from {src} (static, stripped)")
    env = {**os.environ, "CGO_ENABLED": "0", "GOOS": "linux", "GOARCH": "amd64",
           "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=vendor"}
    subprocess.run(["go", "build", "-trimpath", "-ldflags",
                    f"-s -w -X {UPSTREAM_MODULE}/pkg/version.Version={UPSTREAM_CPA_VERSION}",
                    "-o", str(binary), "./cmd/cluster-proportional-autoscaler"],
                   cwd=src, env=env, check=True)
    return binary


def upstream_layout(binary: Path) -> tuple[Path, str]:
    """A layout with one image: the binary at /cluster-proportional-autoscaler, user
    65535:65535 as upstream's Dockerfile says, nothing else."""
    from ocibuild import oci

    root = CACHE / "upstream-rootfs"
    layout_dir = CACHE / "upstream-layout"
    for d in (root, layout_dir):
        subprocess.run(["rm", "-rf", str(d)], check=True)
    root.mkdir(parents=True)
    target = root / "cluster-proportional-autoscaler"
    target.write_bytes(binary.read_bytes())
    target.chmod(0o755)
    epoch = 0
    layout = oci.Layout(layout_dir)
    layer = oci.layer(layout, root, lambda _path: True, epoch)
    created = "1970-01-01T00:00:00Z"
    manifest = oci.image(
        layout, [layer], {"architecture": "amd64", "os": "linux"},
        {"Entrypoint": ["/cluster-proportional-autoscaler"], "User": "65535:65535",
         "Env": ["HOME=/"]},
        created, ["COPY cluster-proportional-autoscaler / (CGO_ENABLED=0, -s -w)"],
        {"org.opencontainers.image.version": UPSTREAM_CPA_VERSION})
    layout.tag(manifest, UPSTREAM_CPA_VERSION)
    return layout_dir, UPSTREAM_CPA_VERSION


def layout_size(layout: Path, tag: str) -> dict[str, float]:
    """The linux/amd64 image of ``tag`` in the layout: its gzip layers (what a node pulls)
    and their tar size (what it unpacks), MiB."""
    def blob(digest: str) -> bytes:
        return (layout / "blobs" / "sha256" / digest.removeprefix("sha256:")).read_bytes()
    index = json.loads((layout / "index.json").read_text())
    ref = next(m for m in index["manifests"]
               if m["annotations"]["org.opencontainers.image.ref.name"] == tag)
    doc = json.loads(blob(ref["digest"]))
    if "manifests" in doc:  # an index: the amd64 manifest
        ref = next(m for m in doc["manifests"]
                   if m.get("platform", {}).get("architecture") == "amd64")
        doc = json.loads(blob(ref["digest"]))
    packed = sum(layer["size"] for layer in doc["layers"])
    unpacked = sum(len(gzip.decompress(blob(layer["digest"]))) for layer in doc["layers"])
    return {"compressed_mib": round(packed / 2**20, 2), "uncompressed_mib": round(
        unpacked / 2**20, 2), "layers": len(doc["layers"])}


def pull(layout: Path, tag: str, name: str) -> str:
    """The image pulled into podman from the layout (the host's platform); its ID.

    A tag that is not a full reference (``0.1.0``) makes podman name the image after the
    layout's path, and a path with a dotted component (``.cache``) is no valid name: the
    layout is pulled through a symbolic link at a plain path."""
    link_dir = Path(f"/tmp/cpa-bench-container-{os.getpid()}")
    link_dir.mkdir(exist_ok=True)
    link = link_dir / name
    link.unlink(missing_ok=True)
    link.symlink_to(layout.resolve())
    try:
        out = podman("pull", "--quiet", "--platform", "linux/amd64", f"oci:{link}:{tag}",
                     timeout=600).stdout.strip().splitlines()
    finally:
        link.unlink()
        link_dir.rmdir()
    return out[-1]


# --- one run -------------------------------------------------------------------------
def run_once(image: str, command: list[str], network: PodNetwork, plane: ControlPlane,
             sa: ServiceAccountFiles, expected: int, memory: str, seconds: float
             ) -> dict[str, Any]:
    """Start the container, time the first correct write, sample its RSS, stop it."""
    admin = plane.admin()
    admin.put(f"/apis/apps/v1/namespaces/{NS}/deployments/{TARGET}/scale",
              {"apiVersion": "autoscaling/v1", "kind": "Scale",
               "metadata": {"name": TARGET, "namespace": NS}, "spec": {"replicas": 1}})
    writes = measure.ReplicaWatch(plane.server, plane.ca_file, plane.admin_token, NS, TARGET)
    writes.wait(1, 0.0, 30)  # its first event read before the start, not during it
    name = f"cpa-bench-{os.getpid()}-{int(time.monotonic() * 1000) % 10**8}"
    began = time.monotonic()
    container = podman(
        "run", "--detach", "--name", name, "--network", f"ns:{network.path}",
        "--read-only", "--read-only-tmpfs=false", "--user", "65534:65534",
        "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
        "--memory", memory, "--memory-swap", memory,
        "--env", f"KUBERNETES_SERVICE_HOST={network.host_ip}",
        "--env", f"KUBERNETES_SERVICE_PORT={plane.port}",
        "--volume", f"{sa.dir}:{SA_MOUNT}:ro",
        "--entrypoint", command[0], image, *command[1:]).stdout.strip()
    try:
        # Nothing else of the harness runs until the write came (the watch's thread only
        # wakes for it): a `podman inspect` here (~25 ms of CPU on this 2-core machine)
        # would compete with the start it measures.
        t_ok = writes.wait(expected, began, 300)
        pid = int(json.loads(podman("inspect", container).stdout)[0]["State"]["Pid"])
        sampler = measure.RssSampler(pid, 0.2)
        time.sleep(seconds)
        sampler.stop()
        status = measure.proc_status(pid)
        return {"start_to_first_write_s": round(t_ok - began, 3),
                "rss_mib": round(sampler.median_mib(0, time.monotonic()) or 0.0, 1),
                "peak_rss_mib": round(status["VmHWM"] / 1024, 1),
                "cpu_s": round(measure.cpu_seconds(pid), 2)}
    finally:
        writes.close()
        podman("rm", "--force", "--time", "2", container, check=False, timeout=120)


# --- main ----------------------------------------------------------------------------
def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m bench.container",
                                 description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--starts", type=int, default=5, help="runs of each image (alternated)")
    ap.add_argument("--seconds", type=float, default=25.0,
                    help="how long each run goes on after its first write (RSS samples)")
    ap.add_argument("--cold-starts", type=int, default=4,
                    help="more first runs after a pull, each after removing the image and "
                         "pulling it again (alternated; reported with the first run)")
    ap.add_argument("--memory", default="1g", help="the containers' memory limit")
    ap.add_argument("--layout", type=Path, default=None,
                    help="our image's OCI layout (default: build it, amd64 only)")
    ap.add_argument("--upstream-src", type=Path,
                    default=Path(os.environ.get("CPA_UPSTREAM_SRC", "/work/src/cpa-upstream")),
                    help="a checkout of upstream's tag (default $CPA_UPSTREAM_SRC)")
    ap.add_argument("--out", type=Path, default=RESULTS / "container.json",
                    help="the JSON report; a table goes beside it (.md)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    subprocess.run(["bash", "-c", ". image/env.sh && image_setup"], cwd=REPO, check=True)
    os.environ.setdefault("CONTAINERS_CONF", str(REPO / ".cache" / "image" / "containers.conf"))
    ours_layout, ours_tag = our_layout(args.layout)
    up_layout, up_tag = upstream_layout(upstream_binary(args.upstream_src))
    images = {"ours": (ours_layout, ours_tag), "upstream": (up_layout, up_tag)}
    report: dict[str, Any] = {
        "nodes": args.nodes, "starts": args.starts, "cold_starts": args.cold_starts,
        "memory_limit": args.memory,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()], "images": {}}
    ids = {}
    for name, (layout, tag) in images.items():
        report["images"][name] = {"layout": str(layout.relative_to(REPO))
                                  if layout.is_relative_to(REPO) else str(layout),
                                  "tag": tag, **layout_size(layout, tag)}
        began = time.monotonic()
        ids[name] = pull(layout, tag, name)
        report["images"][name]["pull_from_layout_s"] = round(time.monotonic() - began, 2)
        log(f"{name}: {report['images'][name]}")
    command = manifest_command()
    network = PodNetwork()
    try:
        network.create()
        with ControlPlane(bin_dir=ensure_binaries(), bind_address=network.host_ip) as plane:
            admin = plane.admin()
            for doc in manifest_rbac():
                admin.apply(doc)
            labels = {"k8s-app": "kube-dns"}
            admin.post(f"/apis/apps/v1/namespaces/{NS}/deployments", {
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": TARGET, "namespace": NS, "labels": labels},
                "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                         "template": {"metadata": {"labels": labels}, "spec": {"containers": [
                             {"name": "coredns", "image": "registry.k8s.io/pause:3.10"}]}}}})
            writer = nodes.NodeWriter(plane.server, plane.ca_file, plane.admin_token, 12)
            cluster = Cluster()
            try:
                report["node_create"] = grow(plane, writer, cluster, args.nodes)
            finally:
                writer.close()
            expected = expected_replicas(cluster.counts())
            token = plane.service_account_token(NS, "kube-dns-autoscaler")
            sa = ServiceAccountFiles(token, plane.ca_file.read_bytes(), NS)
            runs: dict[str, list[dict[str, Any]]] = {name: [] for name in images}
            colds: dict[str, list[dict[str, Any]]] = {name: [] for name in images}
            try:
                for i in range(args.starts):
                    for name in (images if i % 2 == 0 else list(images)[::-1]):
                        got = run_once(ids[name], command, network, plane, sa, expected,
                                       args.memory, args.seconds)
                        runs[name].append(got)
                        log(f"run {i + 1}/{args.starts} {name}: {got}")
                for i in range(args.cold_starts):
                    for name in (images if i % 2 == 1 else list(images)[::-1]):
                        podman("rmi", "--force", ids[name], timeout=120)
                        ids[name] = pull(*images[name], name)
                        got = run_once(ids[name], command, network, plane, sa, expected,
                                       args.memory, min(args.seconds, 2.0))
                        colds[name].append(got)
                        log(f"cold run {i + 2}/{args.cold_starts + 1} {name}: {got}")
            finally:
                sa.close()
    finally:
        network.close()
    for name, rs in runs.items():
        entry = report["images"][name]
        entry["runs"] = rs
        entry["cold_runs"] = colds[name]
        cold = [rs[0]["start_to_first_write_s"]] + [
            r["start_to_first_write_s"] for r in colds[name]]
        entry["cold_start_to_first_write_s"] = cold[0]
        entry["cold_start_to_first_write_s_median"] = round(statistics.median(cold), 3)
        warm = [r["start_to_first_write_s"] for r in rs[1:]] or cold[:1]
        entry["warm_start_to_first_write_s_median"] = round(statistics.median(warm), 3)
        entry["start_to_first_write_s_median"] = round(
            statistics.median(r["start_to_first_write_s"] for r in rs), 3)
        entry["rss_mib_median"] = round(statistics.median(r["rss_mib"] for r in rs), 1)
        entry["peak_rss_mib_max"] = max(r["peak_rss_mib"] for r in rs)
    report["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    table = summary(report)
    args.out.with_suffix(".md").write_text(table + "\n")
    print(table)
    return 0


def summary(report: dict[str, Any]) -> str:
    ours, up = report["images"]["ours"], report["images"]["upstream"]
    rows = (("image, gzip layers (MiB)", "compressed_mib", "{:.1f}"),
            ("image, unpacked (MiB)", "uncompressed_mib", "{:.1f}"),
            ("start to first write, median of the runs (s)", "start_to_first_write_s_median",
             "{:.2f}"),
            ("cold start to first write, the first run (s)", "cold_start_to_first_write_s",
             "{:.2f}"),
            ("cold start to first write, median of the first run and the --cold-starts (s)",
             "cold_start_to_first_write_s_median", "{:.2f}"),
            ("start to first write, warm, median (s)", "warm_start_to_first_write_s_median",
             "{:.2f}"),
            ("RSS, median (MiB)", "rss_mib_median", "{:.1f}"),
            ("peak RSS, VmHWM (MiB)", "peak_rss_mib_max", "{:.1f}"))
    lines = [f"# In a container, at {report['nodes']:,} Nodes ({report['starts']} runs each, "
             f"{report.get('cold_starts', 0)} more after a new pull, "
             f"load {report['load_average_at_start']} -> {report['load_average_at_end']})", "",
             "| | ours | upstream v1.10.3 (static, scratch) | ours / upstream |",
             "|---|---|---|---|"]
    for label, key, fmt in rows:
        a, b = ours.get(key), up.get(key)
        ratio = f"{a / b:.2f}" if isinstance(a, (int, float)) and b else "-"
        lines.append(f"| {label} | {fmt.format(a)} | {fmt.format(b)} | {ratio} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
