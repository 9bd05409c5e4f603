"""The DNS benchmark's cluster: `make cluster-e2e`'s node (tests/cluster) with the
aggregation layer on, CoreDNS with a CPU limit, metrics-server, and the four ways of
scaling CoreDNS put in and taken out one after another.

The images the harness has not got are made here from binaries, FROM scratch, with the
image builder's OCI code (as ``bench.container`` makes upstream's) and pushed to the
cluster's registry: upstream v1.10.3's binary (with the dynamic loader and C library it
names, when it was built with cgo) and metrics-server v0.8.0 (static, built from its Go
module by scripts/go-tool.sh).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from bench.dnssummary import Sample
from tests.cluster.cluster import Cluster, wait_for
from tests.cluster.coredns import NS, coredns_objects

REPO = Path(__file__).resolve().parents[1]
for _extra in (REPO / "image",):
    if str(_extra) not in sys.path:
        sys.path.insert(0, str(_extra))

MANIFEST_IMAGE = "ghcr.io/cpa-py/cluster-proportional-autoscaler-py"
METRICS_SERVER_IMAGE = "gcr.io/k8s-staging-metrics-server/metrics-server"
METRICS_SERVER_VERSION = "v0.8.0"
CPU = "100m"            # CoreDNS's CPU request and limit: capacity grows with replicas
MAX_REPLICAS = 10       # the HPA's maxReplicas and the load setup's linear max
KUBE_DNS_DEFAULTS = {"coresPerReplica": 256, "nodesPerReplica": 16,
                     "preventSinglePointFailure": True, "includeUnschedulableNodes": True}
AUTOSCALER_LABEL = "k8s-app=kube-dns-autoscaler"
DNS_LABEL = "k8s-app=kube-dns"


def log(msg: str) -> None:
    print(f"[dns-bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --- images --------------------------------------------------------------------------
def shared_libraries(binary: Path) -> list[Path]:
    """The files a dynamically linked binary loads (``ldd``); none for a static one."""
    proc = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=False)
    return [Path(p) for p in re.findall(r"(/\S+) \(0x", proc.stdout)]


def binary_layout(files: dict[str, Path], entrypoint: str, user: str, dest: Path,
                  tag: str) -> Path:
    """An OCI layout of one image holding ``files`` (path in the image -> file here)."""
    from ocibuild import oci

    shutil.rmtree(dest, ignore_errors=True)
    root = dest.with_name(dest.name + "-rootfs")
    shutil.rmtree(root, ignore_errors=True)
    for inside, source in files.items():
        target = root / inside.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(source.resolve().read_bytes())
        target.chmod(0o755)
    layout = oci.Layout(dest)
    layer = oci.layer(layout, root, lambda _path: True, 0)
    manifest = oci.image(layout, [layer], {"architecture": "amd64", "os": "linux"},
                         {"Entrypoint": [entrypoint], "User": user, "Env": ["HOME=/"]},
                         "1970-01-01T00:00:00Z", [f"COPY {entrypoint}"], {})
    layout.tag(manifest, tag)
    shutil.rmtree(root, ignore_errors=True)
    return dest


def upstream_layout(binary: Path, dest: Path) -> Path:
    files = {"/cluster-proportional-autoscaler": binary}
    files.update({str(lib): lib for lib in shared_libraries(binary)})
    return binary_layout(files, "/cluster-proportional-autoscaler", "65535:65535", dest,
                         "v1.10.3")


def metrics_server_layout(binary: Path, dest: Path) -> Path:
    return binary_layout({"/metrics-server": binary}, "/metrics-server", "65534:65534", dest,
                         METRICS_SERVER_VERSION)


# --- what is applied -----------------------------------------------------------------
def coredns_with_cpu_limit(image: str) -> dict[str, Any]:
    """The harness's CoreDNS (one replica) with CPU request = limit = ``CPU``."""
    objects = coredns_objects(image, replicas=1)
    for item in objects["items"]:
        if item["kind"] == "Deployment":
            container = item["spec"]["template"]["spec"]["containers"][0]
            container["resources"]["requests"]["cpu"] = CPU
            container["resources"]["limits"]["cpu"] = CPU
    return objects


def load_configmap(target_per_replica: int) -> dict[str, str]:
    """Setup (c): the kube-dns defaults plus the load axis on CoreDNS's requests, every
    window setting left at its default."""
    return {"linear": json.dumps({
        **KUBE_DNS_DEFAULTS, "max": MAX_REPLICAS,
        "load": {"metric": "coredns_dns_requests_total", "port": 9153, "path": "/metrics",
                 "targetPerReplica": target_per_replica}})}


def hpa() -> dict[str, Any]:
    """Setup (d): an HPA on CPU at 50 %, defaults otherwise (behavior, tolerance)."""
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "coredns", "namespace": NS},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                        "name": "coredns"},
                     "minReplicas": 1, "maxReplicas": MAX_REPLICAS,
                     "metrics": [{"type": "Resource", "resource": {
                         "name": "cpu",
                         "target": {"type": "Utilization", "averageUtilization": 50}}}]}}


def kustomization(root: Path, resources: list[Path], images: list[dict[str, str]],
                  patches: list[dict[str, Any]] | None = None) -> Path:
    """An overlay in ``root`` (files copied in: kustomize loads files below its root)."""
    root.mkdir(parents=True, exist_ok=True)
    names = []
    for resource in resources:
        if resource.is_dir():
            names.append(os.path.relpath(resource, root))
        else:
            (root / resource.name).write_text(resource.read_text())
            names.append(resource.name)
    doc: dict[str, Any] = {"apiVersion": "kustomize.config.k8s.io/v1beta1",
                           "kind": "Kustomization", "resources": names, "images": images}
    if patches:
        doc["patches"] = patches
    (root / "kustomization.yaml").write_text(yaml.safe_dump(doc))
    return root


def image_swap(name: str, reference: str) -> dict[str, str]:
    new_name, _, digest = reference.partition("@")
    return {"name": name, "newName": new_name, "digest": digest}


class Setup(NamedTuple):
    key: str
    label: str
    image: str                     # AUTOSCALER or UPSTREAM; "" for the HPA
    configmap: dict[str, str] | None


def setups(target_per_replica: int) -> list[Setup]:
    return [Setup("upstream", "(a) upstream v1.10.3, kube-dns defaults", "UPSTREAM", None),
            Setup("ours", "(b) ours, kube-dns defaults", "AUTOSCALER", None),
            Setup("ours_load", "(c) ours, load axis", "AUTOSCALER",
                  load_configmap(target_per_replica)),
            Setup("hpa", "(d) HPA on CPU 50 %, metrics-server", "", None)]


def parse_time(stamp: str) -> float:
    """An RFC 3339 time from the API or ``kubectl logs --timestamps`` as epoch seconds."""
    stamp = re.sub(r"(\.\d{6})\d+", r"\1", stamp.replace("Z", "+00:00"))
    return datetime.fromisoformat(stamp).timestamp()


class Sampler:
    """Every second: the Deployment's replicas, its Pods' start-ups, the HPA's view."""

    def __init__(self, get: Callable[[str], Any], period: float = 1.0) -> None:
        self.samples: list[tuple[float, int, int]] = []
        self.hpa: list[list[Any]] = []
        self.pods: dict[str, dict[str, float]] = {}
        self._get = get
        self._period = period
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Sampler:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self._period):
            try:
                self._once()
            except Exception as exc:  # a slow or refused read: the next second tries again
                log(f"sample failed: {exc}")

    def _once(self) -> None:
        now = time.time()
        dep = self._get(f"/apis/apps/v1/namespaces/{NS}/deployments/coredns")
        self.samples.append((now, int(dep["spec"]["replicas"]),
                             int(dep["status"].get("readyReplicas") or 0)))
        for pod in self._get(f"/api/v1/namespaces/{NS}/pods?labelSelector={DNS_LABEL}")[
                "items"]:
            times = self.pods.setdefault(pod["metadata"]["name"], {
                "created": parse_time(pod["metadata"]["creationTimestamp"])})
            ready = [c for c in pod.get("status", {}).get("conditions") or []
                     if c["type"] == "Ready" and c["status"] == "True"]
            if ready and "ready" not in times:
                times["ready"] = parse_time(ready[0]["lastTransitionTime"])
        status = self._get(f"/apis/autoscaling/v2/namespaces/{NS}/horizontalpodautoscalers"
                           )["items"]
        if status:
            st = status[0].get("status", {})
            cpu = [m["resource"]["current"].get("averageUtilization")
                   for m in st.get("currentMetrics") or [] if m.get("type") == "Resource"]
            self.hpa.append([now, st.get("desiredReplicas"), cpu[0] if cpu else None])

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def relative(self, t0: float) -> list[Sample]:
        return [Sample(round(t - t0, 2), spec, ready) for t, spec, ready in self.samples]

    def startups(self, t0: float) -> list[list[float]]:
        """``[created, seconds to Ready]`` of each Pod created after ``t0`` (server clock,
        whole seconds)."""
        return sorted([round(t["created"] - t0, 1), round(t["ready"] - t["created"], 1)]
                      for t in self.pods.values() if t["created"] >= t0 - 1 and "ready" in t)


_FIELD = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)')
KEPT_EVENTS = ("scale.changed", "load.panic.started", "load.panic.ended")


def autoscaler_events(logs: str, t0: float) -> list[dict[str, Any]]:
    """Our daemon's decisions from ``kubectl logs --timestamps``: when, and their fields."""
    out: list[dict[str, Any]] = []
    for line in logs.splitlines():
        stamp, _, rest = line.partition(" ")
        fields = {k: v.strip('"') for k, v in _FIELD.findall(rest)}
        if fields.get("event") not in KEPT_EVENTS:
            continue
        try:
            at = parse_time(stamp)
        except ValueError:  # a line kubectl did not stamp: it cannot be placed on the run
            continue
        keep = {k: fields[k] for k in ("event", "old", "new", "proportional", "load",
                                       "panic_rate", "ready") if k in fields}
        out.append({"seconds": round(at - t0, 1), **keep})
    return out


class DnsCluster:
    """The cluster and what the benchmark put in it."""

    def __init__(self, upstream_binary: Path, metrics_server_binary: Path,
                 metrics_server_dir: Path) -> None:
        self.cluster = Cluster(log=log, aggregation=True)
        self.work = self.cluster.workdir / "dns-bench"
        self.upstream_binary = upstream_binary
        self.metrics_server_binary = metrics_server_binary
        self.metrics_server_dir = metrics_server_dir

    @property
    def admin(self) -> Any:
        assert self.cluster.plane is not None
        return self.cluster.plane.admin()

    def kubectl(self, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        return self.cluster.kubectl(*args, **kw)

    def start(self) -> None:
        self.cluster.start()
        self.work.mkdir(parents=True, exist_ok=True)
        registry = self.cluster.registry
        assert registry is not None
        images = self.cluster.images
        images["UPSTREAM_IMAGE"] = registry.push(
            "upstream-cpa", "v1.10.3", upstream_layout(self.upstream_binary,
                                                       self.work / "upstream-layout"))
        images["METRICS_SERVER_IMAGE"] = registry.push(
            "metrics-server", METRICS_SERVER_VERSION,
            metrics_server_layout(self.metrics_server_binary, self.work / "ms-layout"))
        self.kubectl("apply", "-f", "-", input_text=json.dumps(
            coredns_with_cpu_limit(images["COREDNS_IMAGE"])))
        self._start_metrics_server()
        self.wait_one_coredns()

    def _start_metrics_server(self) -> None:
        root = kustomization(
            self.work / "metrics-server", [self.metrics_server_dir / "manifests" / "base"],
            [image_swap(METRICS_SERVER_IMAGE, self.cluster.images["METRICS_SERVER_IMAGE"])],
            # The kubelet's serving certificate is self-signed (as kind's): the flag kind's
            # guides add.
            [{"target": {"kind": "Deployment", "name": "metrics-server"},
              "patch": json.dumps([{"op": "add", "path": "/spec/template/spec/containers/0/"
                                    "args/-", "value": "--kubelet-insecure-tls"}])}])
        self.kubectl("apply", "-k", str(root))

        def pod_metrics() -> bool:
            items = self.admin.get(f"/apis/metrics.k8s.io/v1beta1/namespaces/{NS}/pods"
                                   f"?labelSelector={DNS_LABEL}")["items"]
            return bool(items)

        began = time.monotonic()
        wait_for("metrics-server serving CoreDNS's Pod metrics through the API server",
                 pod_metrics, 180, interval=2)
        log(f"metrics API serving after {time.monotonic() - began:.0f} s")

    def dns_pods(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.admin.get(
            f"/api/v1/namespaces/{NS}/pods?labelSelector={DNS_LABEL}")["items"]
        return items

    def wait_one_coredns(self) -> None:
        """Exactly one CoreDNS Pod, Ready, nothing terminating."""
        def one() -> bool:
            pods = self.dns_pods()
            return len(pods) == 1 and any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in pods[0].get("status", {}).get("conditions") or [])
        wait_for("one Ready CoreDNS Pod", one, 180, interval=1)

    # --- the four setups -------------------------------------------------------------
    def install(self, setup: Setup) -> None:
        if setup.key == "hpa":
            self.kubectl("apply", "-f", "-", input_text=json.dumps(hpa()))
            wait_for("the HPA's first CPU reading", lambda: self.admin.get(
                f"/apis/autoscaling/v2/namespaces/{NS}/horizontalpodautoscalers/coredns")
                .get("status", {}).get("currentMetrics"), 120, interval=1)
            return
        if setup.configmap is not None:
            self.kubectl("create", "configmap", "-n", NS, "kube-dns-autoscaler",
                         *[f"--from-literal={k}={v}" for k, v in setup.configmap.items()])
        resources = [REPO / "manifests"]
        if setup.configmap is not None:
            resources.append(REPO / "manifests" / "examples" / "load-rbac.yaml")
        root = kustomization(self.work / f"overlay-{setup.key}", resources, [
            image_swap(MANIFEST_IMAGE, self.cluster.images[f"{setup.image}_IMAGE"])])
        self.kubectl("apply", "-k", str(root))
        wait_for("the autoscaler Ready and its ConfigMap there", lambda: self._ready(
            AUTOSCALER_LABEL) and self.admin.get(
            f"/api/v1/namespaces/{NS}/configmaps/kube-dns-autoscaler"), 120, interval=1)
        if setup.configmap is not None:
            wait_for("the load axis available", self._load_available, 60, interval=1)

    def _ready(self, selector: str) -> bool:
        pods = self.admin.get(f"/api/v1/namespaces/{NS}/pods?labelSelector={selector}")[
            "items"]
        return len(pods) == 1 and any(c["type"] == "Ready" and c["status"] == "True"
                                      for c in pods[0]["status"].get("conditions") or [])

    def _autoscaler_pod(self) -> dict[str, Any]:
        pod: dict[str, Any] = self.admin.get(
            f"/api/v1/namespaces/{NS}/pods?labelSelector={AUTOSCALER_LABEL}")["items"][0]
        return pod

    def _load_available(self) -> bool:
        import urllib.request
        ip = self._autoscaler_pod()["status"]["podIP"]
        with urllib.request.urlopen(f"http://{ip}:8080/metrics", timeout=5) as answer:
            body = answer.read().decode()
        return 'cpa_load_available{target="deployment/coredns"} 1.0' in body

    def autoscaler_logs(self) -> str:
        name = self._autoscaler_pod()["metadata"]["name"]
        return self.kubectl("logs", "--timestamps", "-n", NS, name).stdout

    def remove(self, setup: Setup) -> None:
        """Take the setup out and bring CoreDNS back to one Pod."""
        if setup.key == "hpa":
            self.kubectl("delete", "hpa", "-n", NS, "coredns", "--ignore-not-found")
        else:
            self.kubectl("delete", "-k", str(self.work / f"overlay-{setup.key}"),
                         "--wait=true", "--ignore-not-found", timeout=180)
            self.kubectl("delete", "configmap", "-n", NS, "kube-dns-autoscaler",
                         "--ignore-not-found")
        self.kubectl("scale", "deployment", "-n", NS, "coredns", "--replicas=1")
        self.wait_one_coredns()

    def stop(self) -> None:
        self.cluster.stop()
