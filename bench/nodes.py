"""Realistic (GKE-style, ~9.6 KB of JSON) Node objects, created fast and in parallel.

Why this shape: the daemon's memory and sync time depend on the bytes the API server sends
per node, not on the three fields it keeps, so the benchmark nodes carry what real GKE nodes
carry: ~30 labels, big annotations (``csi.volume.kubernetes.io/nodeid`` JSON,
``node.gke.io/last-applied-node-labels``), a dozen conditions with messages, ~20 images
with long names, addresses, nodeInfo, capacity/allocatable.

Everything about node ``i`` is a pure function of ``i`` (machine type, cordoned, NotReady), so
the harness knows the expected counts without asking the server, and a later run can create
only the nodes that are missing.
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import urllib3

from cpa.nodes.counts import ClusterCounts

NAME_PREFIX = "gke-bench-default-pool"
EXTRA_PREFIX = "gke-bench-surge-pool"

# (capacity cpu, allocatable cpu, allocatable millicores, memory, instance type, weight):
# GKE's allocatable after system reservations, e.g. 4 vCPU -> 3920m.
MACHINES: tuple[tuple[str, str, int, str, str, int], ...] = (
    ("1", "940m", 940, "3785940Ki", "e2-medium", 2),
    ("2", "1930m", 1930, "8145492Ki", "e2-standard-2", 3),
    ("4", "3920m", 3920, "16390340Ki", "e2-standard-4", 6),
    ("8", "7910m", 7910, "32882112Ki", "n2-standard-8", 6),
    ("16", "15890m", 15890, "65968736Ki", "n2-standard-16", 3),
)
_WHEEL = [m for m in MACHINES for _ in range(m[5])]  # 20 slots

ZONES = ("us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f")


@dataclass(frozen=True, slots=True)
class NodeState:
    """What the autoscaler should see of one node."""

    millicores: int
    unschedulable: bool
    ready: bool

    @property
    def schedulable(self) -> bool:
        return self.ready and not self.unschedulable


def _hash(i: int, salt: str = "") -> str:
    return hashlib.sha1(f"{salt}{i}".encode()).hexdigest()


def machine(i: int) -> tuple[str, str, int, str, str, int]:
    # A multiplicative hash spreads the machine types evenly over any index range.
    return _WHEEL[(i * 2654435761 >> 7) % len(_WHEEL)]


def is_cordoned(i: int) -> bool:
    """~5% of nodes: spec.unschedulable."""
    return i % 20 == 3


def is_not_ready(i: int) -> bool:
    """~3% of nodes: Ready=False."""
    return i % 33 == 7


def node_name(i: int, prefix: str = NAME_PREFIX) -> str:
    return f"{prefix}-{_hash(i, prefix)[:8]}-{i:06d}"


def node_state(i: int, *, cordoned: bool | None = None) -> NodeState:
    return NodeState(machine(i)[2], is_cordoned(i) if cordoned is None else cordoned,
                     not is_not_ready(i))


_IMAGES = (
    ("gke.gcr.io/gke-metrics-agent", "1.14.2-gke.0", 187_453_120),
    ("gke.gcr.io/fluent-bit-gke-exporter", "v0.28.2-gke.2", 142_771_839),
    ("gke.gcr.io/fluent-bit", "v1.8.12-gke.36", 121_035_667),
    ("gke.gcr.io/cilium/cilium", "v1.14.15-gke.900", 499_230_107),
    ("gke.gcr.io/gcp-compute-persistent-disk-csi-driver", "v1.13.5-gke.0", 92_412_908),
    ("gke.gcr.io/csi-node-driver-registrar", "v2.9.4-gke.12", 26_871_544),
    ("gke.gcr.io/gke-node-termination-handler", "v1.20.4-gke.4", 61_255_403),
    ("gke.gcr.io/netd", "v0.2.61-gke.6", 41_733_029),
    ("gke.gcr.io/ip-masq-agent", "v2.9.3-v0.2.14-gke.5", 28_401_872),
    ("gke.gcr.io/kube-proxy-amd64", "v1.30.5-gke.1014001", 88_104_339),
    ("gke.gcr.io/prometheus-to-sd", "v0.11.12-gke.25", 48_917_712),
    ("gke.gcr.io/pause", "3.10@sha256", 321_904),
    ("registry.k8s.io/coredns/coredns", "v1.11.3", 61_245_718),
    ("registry.k8s.io/cpa/cluster-proportional-autoscaler", "v1.10.3", 38_521_760),
    ("registry.k8s.io/metrics-server/metrics-server", "v0.7.2", 68_413_552),
    ("us-docker.pkg.dev/example-prod/apps/checkout-service", "2026.11.28-r3", 512_993_384),
    ("us-docker.pkg.dev/example-prod/apps/frontend", "2026.11.29-r1", 284_105_774),
    ("us-docker.pkg.dev/example-prod/platform/otel-collector-contrib", "0.113.0", 241_881_913),
    ("docker.io/library/nginx", "1.27.3-alpine", 20_463_011),
    ("quay.io/prometheus/node-exporter", "v1.8.2", 24_512_866),
)

_CONDITIONS = (
    ("FrequentUnregisterNetDevice", "NoFrequentUnregisterNetDevice",
     "node is functioning properly"),
    ("KernelDeadlock", "KernelHasNoDeadlock", "kernel has no deadlock"),
    ("ReadonlyFilesystem", "FilesystemIsNotReadOnly", "Filesystem is not read-only"),
    ("FrequentKubeletRestart", "NoFrequentKubeletRestart", "kubelet is functioning properly"),
    ("FrequentDockerRestart", "NoFrequentDockerRestart", "docker is functioning properly"),
    ("FrequentContainerdRestart", "NoFrequentContainerdRestart",
     "containerd is functioning properly"),
    ("CorruptDockerOverlay2", "NoCorruptDockerOverlay2", "docker overlay2 is functioning properly"),
)


def node_images(i: int, generation: int = 0) -> list[dict[str, Any]]:
    """status.images of node ``i``; a later ``generation`` has pulled a newer build of one
    app image (what a deploy does to a kubelet's image list)."""
    images = []
    for k, (repo, tag, size) in enumerate(_IMAGES):
        if generation and k == len(_IMAGES) - 5:  # .../apps/checkout-service
            tag = f"{tag}-g{generation}"
            size += generation * 8192
        digest = _hash(k * 1000 + generation if generation and k == len(_IMAGES) - 5 else k,
                       repo)
        images.append({"names": [f"{repo}@sha256:{digest}{digest[:24]}", f"{repo}:{tag}"],
                       "sizeBytes": size + (i % 7) * 4096})
    return images


CONDITION_TYPES = (*(c[0] for c in _CONDITIONS), "NetworkUnavailable", "MemoryPressure",
                   "DiskPressure", "PIDPressure", "Ready")


def base_taints(i: int) -> list[dict[str, str]]:
    """spec.taints of node ``i`` as created (a cordoned node has the unschedulable taint)."""
    if not is_cordoned(i):
        return []
    return [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule",
             "timeAdded": "2026-11-29T22:04:10Z"}]


def node_object(i: int, prefix: str = NAME_PREFIX) -> dict[str, Any]:
    """Node ``i`` as a GKE node looks in ``kubectl get node -o json`` (about 9.6 KB)."""
    name = node_name(i, prefix)
    cap_cpu, alloc_cpu, _, memory, itype, _ = machine(i)
    zone = ZONES[i % len(ZONES)]
    h = _hash(i, "id")
    instance_id = str(int(h[:15], 16))
    ip = f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}"
    ext_ip = f"34.{(i >> 16) & 255 | 64}.{(i >> 8) & 255}.{i & 255}"
    pool = prefix.rsplit("-", 2)[-2] + "-pool"
    labels = {
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/instance-type": itype,
        "beta.kubernetes.io/os": "linux",
        "cloud.google.com/gke-boot-disk": "pd-balanced",
        "cloud.google.com/gke-container-runtime": "containerd",
        "cloud.google.com/gke-cpu-scaling-level": cap_cpu,
        "cloud.google.com/gke-logging-variant": "DEFAULT",
        "cloud.google.com/gke-max-pods-per-node": "110",
        "cloud.google.com/gke-memory-gb-scaling-level": str(int(cap_cpu) * 4),
        "cloud.google.com/gke-nodepool": pool,
        "cloud.google.com/gke-os-distribution": "cos",
        "cloud.google.com/gke-provisioning": "standard",
        "cloud.google.com/gke-stack-type": "IPV4",
        "cloud.google.com/machine-family": itype.split("-")[0],
        "cloud.google.com/private-node": "false",
        "failure-domain.beta.kubernetes.io/region": "us-central1",
        "failure-domain.beta.kubernetes.io/zone": zone,
        "iam.gke.io/gke-metadata-server-enabled": "true",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": itype,
        "node.kubernetes.io/masq-agent-ds-ready": "true",
        "topology.gke.io/zone": zone,
        "topology.kubernetes.io/region": "us-central1",
        "topology.kubernetes.io/zone": zone,
        "team.example.com/cost-center": f"cc-{1000 + i % 37}",
        "team.example.com/environment": "production",
    }
    csi = {"pd.csi.storage.gke.io":
           f"projects/example-prod-4711/zones/{zone}/instances/{name}"}
    applied = ",".join(f"{k}={v}" for k, v in labels.items()
                       if k.startswith("cloud.google.com/"))
    annotations = {
        "container.googleapis.com/instance_id": instance_id,
        "csi.volume.kubernetes.io/nodeid": json.dumps(csi, separators=(",", ":")),
        "node.alpha.kubernetes.io/ttl": "0",
        "node.gke.io/last-applied-node-labels": applied,
        "node.gke.io/last-applied-node-taints": "",
        "volumes.kubernetes.io/controller-managed-attach-detach": "true",
    }
    ts = f"2026-11-30T08:{(i // 60) % 60:02d}:{i % 60:02d}Z"
    ready = not is_not_ready(i)
    conditions: list[dict[str, str]] = [
        {"type": t, "status": "False", "reason": r, "message": m,
         "lastHeartbeatTime": ts, "lastTransitionTime": "2026-11-02T14:11:09Z"}
        for t, r, m in _CONDITIONS
    ]
    conditions.append({"type": "NetworkUnavailable", "status": "False",
                       "reason": "RouteCreated", "message": "NodeController create implicit route",
                       "lastHeartbeatTime": "2026-11-02T14:11:30Z",
                       "lastTransitionTime": "2026-11-02T14:11:30Z"})
    for t, r, m in (("MemoryPressure", "KubeletHasSufficientMemory",
                     "kubelet has sufficient memory available"),
                    ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                    ("PIDPressure", "KubeletHasSufficientPID",
                     "kubelet has sufficient PID available")):
        conditions.append({"type": t, "status": "False", "reason": r, "message": m,
                           "lastHeartbeatTime": ts,
                           "lastTransitionTime": "2026-11-02T14:10:51Z"})
    conditions.append({
        "type": "Ready", "status": "True" if ready else "False",
        "reason": "KubeletReady" if ready else "KubeletNotReady",
        "message": ("kubelet is posting ready status. AppArmor enabled" if ready else
                    "container runtime network not ready: NetworkReady=false "
                    "reason:NetworkPluginNotReady message:Network plugin returns error: "
                    "cni plugin not initialized"),
        "lastHeartbeatTime": ts, "lastTransitionTime": "2026-11-02T14:11:12Z"})
    images = node_images(i)
    spec: dict[str, Any] = {
        "podCIDR": f"10.{64 + (i >> 16) % 64}.{(i >> 8) & 255}.0/24",
        "podCIDRs": [f"10.{64 + (i >> 16) % 64}.{(i >> 8) & 255}.0/24"],
        "providerID": f"gce://example-prod-4711/{zone}/{name}",
    }
    if is_cordoned(i):
        spec["unschedulable"] = True
        spec["taints"] = base_taints(i)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "spec": spec,
        "status": {
            "capacity": {"cpu": cap_cpu, "ephemeral-storage": "98831908Ki",
                         "hugepages-1Gi": "0", "hugepages-2Mi": "0", "memory": memory,
                         "pods": "110"},
            "allocatable": {"cpu": alloc_cpu, "ephemeral-storage": "47060071478",
                            "hugepages-1Gi": "0", "hugepages-2Mi": "0",
                            "memory": f"{int(memory[:-2]) * 87 // 100}Ki", "pods": "110"},
            "conditions": conditions,
            "addresses": [{"type": "InternalIP", "address": ip},
                          {"type": "ExternalIP", "address": ext_ip},
                          {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": _hash(i, "machine")[:32],
                "systemUUID": f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}",
                "bootID": _hash(i, "boot")[:32],
                "kernelVersion": "6.1.100+",
                "osImage": "Container-Optimized OS from Google",
                "containerRuntimeVersion": "containerd://1.7.23",
                "kubeletVersion": "v1.30.5-gke.1014001",
                "kubeProxyVersion": "v1.30.5-gke.1014001",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
            "images": images,
        },
    }


def counts(states: Iterable[NodeState]) -> ClusterCounts:
    """The counts the autoscaler should report, computed here without the cpa code:
    millicores summed exactly, rounded up to whole cores once."""
    n = milli = sn = smilli = 0
    for s in states:
        n += 1
        milli += s.millicores
        if s.schedulable:
            sn += 1
            smilli += s.millicores
    return ClusterCounts(total_nodes=n, total_cores=-(-milli // 1000),
                         schedulable_nodes=sn, schedulable_cores=-(-smilli // 1000))


class NodeWriter:
    """Parallel node writes over one shared urllib3 pool (admin token); raises on failure."""

    def __init__(self, server: str, ca_file: Path, token: str, threads: int = 12) -> None:
        self.server = server.rstrip("/")
        self.threads = threads
        self._http = urllib3.PoolManager(
            ca_certs=str(ca_file), cert_reqs="CERT_REQUIRED", maxsize=threads, block=True,
            timeout=urllib3.Timeout(connect=10.0, read=120.0), retries=False)
        self._headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}

    def close(self) -> None:
        self._http.clear()

    def _send(self, method: str, path: str, body: bytes | None, ctype: str | None,
              ok: Sequence[int]) -> int:
        headers = dict(self._headers)
        if ctype:
            headers["Content-Type"] = ctype
        for attempt in range(5):
            try:
                resp = self._http.request(method, self.server + path, body=body,
                                          headers=headers)
            except urllib3.exceptions.HTTPError:
                if attempt == 4:
                    raise
                time.sleep(0.5 * (attempt + 1))
                continue
            if resp.status in ok:
                return resp.status
            if resp.status in (429, 500, 503, 504) and attempt < 4:
                time.sleep(0.5 * (attempt + 1))
                continue
            raise RuntimeError(f"{method} {path} -> HTTP {resp.status}: {resp.data[:300]!r}")
        raise AssertionError("unreachable")

    def _parallel(self, what: str, items: Sequence[Any], fn: Callable[[Any], object],
                  progress: bool) -> float:
        """Run ``fn`` over ``items`` on the pool; print progress; return items per second."""
        if not items:
            return 0.0
        done = 0
        lock = threading.Lock()
        start = last = time.monotonic()
        step = max(1000, len(items) // 20)

        def one(item: Any) -> None:
            nonlocal done, last
            fn(item)
            with lock:
                done += 1
                now = time.monotonic()
                if progress and (done % step == 0 or done == len(items)) and now > start:
                    print(f"    {what}: {done}/{len(items)} "
                          f"({done / (now - start):.0f}/s)", file=sys.stderr, flush=True)
                    last = now

        with ThreadPoolExecutor(self.threads) as pool:
            for fut in [pool.submit(one, item) for item in items]:
                fut.result()
        elapsed = time.monotonic() - start
        return len(items) / elapsed if elapsed > 0 else 0.0

    def create(self, indices: Sequence[int], prefix: str = NAME_PREFIX,
               progress: bool = True) -> float:
        """POST the nodes (status included); 409 AlreadyExists counts as done."""
        def one(i: int) -> None:
            body = json.dumps(node_object(i, prefix), separators=(",", ":")).encode()
            self._send("POST", "/api/v1/nodes", body, "application/json", (201, 409))
        return self._parallel("create", indices, one, progress)

    def delete(self, names: Sequence[str], progress: bool = True) -> float:
        def one(name: str) -> None:
            self._send("DELETE", f"/api/v1/nodes/{name}", None, None, (200, 202, 404))
        return self._parallel("delete", names, one, progress)

    def cordon(self, names: Sequence[str], unschedulable: bool, progress: bool = True) -> float:
        body = json.dumps({"spec": {"unschedulable": unschedulable}}).encode()

        def one(name: str) -> None:
            self._send("PATCH", f"/api/v1/nodes/{name}", body,
                       "application/merge-patch+json", (200,))
        return self._parallel("cordon" if unschedulable else "uncordon", names, one, progress)

    def patch(self, path: str, body: dict[str, Any], ctype: str) -> None:
        """One PATCH (``application/merge-patch+json`` or ``strategic-merge-patch+json``)."""
        self._send("PATCH", path, json.dumps(body, separators=(",", ":")).encode(), ctype,
                   (200,))

    def count(self, prefix: str) -> int:
        """How many nodes named ``prefix-*`` exist (paginated, metadata only)."""
        total, cont = 0, ""
        while True:
            q = "limit=5000" + (f"&continue={cont}" if cont else "")
            resp = self._http.request(
                "GET", f"{self.server}/api/v1/nodes?{q}",
                headers={**self._headers, "Accept":
                         "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"})
            if resp.status != 200:
                raise RuntimeError(f"list nodes -> HTTP {resp.status}: {resp.data[:300]!r}")
            doc = json.loads(resp.data)
            total += sum(1 for it in doc.get("items") or ()
                         if it["metadata"]["name"].startswith(prefix + "-"))
            cont = (doc.get("metadata") or {}).get("continue") or ""
            if not cont:
                return total
