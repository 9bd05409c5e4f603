"""Issue 30 on a real node: the load axis scaling real CoreDNS under real DNS load.

A cluster of its own for this module (``cluster.py``, as the other modules), so it runs
alone too (``PYTEST_ARGS='-k load' make cluster-e2e``). The parts are all real: CoreDNS built
from its Go module (tests/cluster/coredns.py: a test zone answered by its ``template``
plugin, ``prometheus :9153``), the ``kube-dns`` Service, our image deployed with the
unchanged manifest plus ``manifests/examples/load-rbac.yaml`` (the ``pods list`` rule), the
manifest's poll period (10 s), and Debian's ``dnsperf`` on the host sending queries to the
Service's ClusterIP (kube-proxy DNATs them to the CoreDNS Pods on the bridge).

The parameters: one Node (the proportional count is 1), one replica per 100 queries a
second, ``max`` 4, a 30 s stable window and a 6 s panic window (20 %), a scrape every 2 s.
The steps:

1. 2,000 queries a second for 30 s: the load asks for 20 (capped at 4), at least twice the
   Ready Pods: panic. The count goes up within the panic window plus one scrape and one
   poll (a scrape that makes panic likely wakes the loop, so the poll comes sooner).
2. While in panic the count never goes down: sampled every 0.25 s from the first write
   up to ``load.panic.ended``, it only rises.
3. The load stops: the count stays up until the load has been under the threshold for a
   whole stable window (counted from the last poll that saw it over), then the stable
   window decides: back to the proportional 1, through a step when the window still holds
   the load's last seconds.

Times are printed at the end (the figures in docs/load.md come from these runs).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cluster.cluster import Cluster, Timings, module_cluster, wait_for
from tests.cluster.coredns import CLUSTER_DNS_IP, NS, ZONE, coredns_objects

REPO = Path(__file__).resolve().parents[2]
MANIFEST_IMAGE = "ghcr.io/cpa-py/cluster-proportional-autoscaler-py"
POLL = 10          # the manifest's default
SCRAPE = 2
STABLE = 30
PANIC = 6          # 20 % of STABLE
QPS = 2000
TARGET = 100       # per replica: the load asks for 20
MAX = 4
LOAD_SECONDS = 30
PARAMS = {"coresPerReplica": 256, "nodesPerReplica": 16, "max": MAX,
          "includeUnschedulableNodes": True,
          "load": {"metric": "coredns_dns_requests_total", "port": 9153, "path": "/metrics",
                   "targetPerReplica": TARGET, "stableWindowSeconds": STABLE,
                   "panicWindowPercentage": PANIC * 100 // STABLE,
                   "scrapeIntervalSeconds": SCRAPE}}

pytestmark = pytest.mark.timeout(900)
TIMES = Timings("cluster-load")
timed = TIMES.add


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    began = time.monotonic()

    def report(c: Cluster) -> None:
        timed("cluster cleanup", c.timings.get("cleanup", 0.0))
        timed("module in all", time.monotonic() - began)

    with module_cluster(TIMES, report) as c:
        timed("cluster start", c.timings.get("cluster start total", 0.0))
        yield c


def admin(c: Cluster) -> Any:
    assert c.plane is not None
    return c.plane.admin()


def coredns_replicas(c: Cluster) -> int:
    return int(admin(c).get(f"/apis/apps/v1/namespaces/{NS}/deployments/coredns")
               ["spec"]["replicas"])


def ready_pods(c: Cluster, selector: str) -> list[dict[str, Any]]:
    items = admin(c).get(f"/api/v1/namespaces/{NS}/pods?labelSelector={selector}")["items"]
    return [p for p in items if not p["metadata"].get("deletionTimestamp") and any(
        x["type"] == "Ready" and x["status"] == "True"
        for x in p.get("status", {}).get("conditions") or [])]


def autoscaler_logs(c: Cluster) -> str:
    pods = ready_pods(c, "k8s-app=kube-dns-autoscaler")
    assert len(pods) == 1, pods
    return c.kubectl("logs", "-n", NS, pods[0]["metadata"]["name"]).stdout


def events(logs: str, name: str) -> list[dict[str, str]]:
    """The autoscaler's logfmt lines for ``name``, as key -> value."""
    out = []
    for line in logs.splitlines():
        fields = dict(re.findall(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)', line))
        if fields.get("event") == name:
            out.append({k: v.strip('"') for k, v in fields.items()})
    return out


def autoscaler_metrics(c: Cluster) -> dict[str, float]:
    """The autoscaler Pod's /metrics, read from the host over the bridge (its Pod IP)."""
    pod = ready_pods(c, "k8s-app=kube-dns-autoscaler")[0]
    with urllib.request.urlopen(f"http://{pod['status']['podIP']}:8080/metrics",
                                timeout=5) as answer:
        body = answer.read().decode()
    return {m.group(1): float(m.group(2)) for m in
            re.finditer(r"^(cpa_load_\w+(?:\{[^}]*\})?) (\S+)$", body, re.M)}


def overlay(c: Cluster) -> Path:
    """The manifest with the image swapped and the load axis's Role beside it."""
    root = Path(tempfile.mkdtemp(prefix="load-overlay-", dir=REPO / ".cache" / "cluster"))
    rbac = REPO / "manifests" / "examples" / "load-rbac.yaml"
    (root / rbac.name).write_text(rbac.read_text())
    name, _, digest = c.images["AUTOSCALER_IMAGE"].partition("@")
    (root / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": [os.path.relpath(REPO / "manifests", root), rbac.name],
        "images": [{"name": MANIFEST_IMAGE, "newName": name, "digest": digest}]}))
    return root


class Sampler:
    def __init__(self, c: Cluster) -> None:
        self.seen: list[tuple[float, int]] = []
        self._c = c
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.25):
            self.seen.append((time.monotonic(), coredns_replicas(self._c)))

    def stop(self) -> list[tuple[float, int]]:
        self._stop.set()
        self._thread.join(5)
        return self.seen


def dnsperf(seconds: int, qps: int, workdir: Path) -> subprocess.Popen[str]:
    queries = workdir / "queries.txt"
    queries.write_text("".join(f"host{i}.{ZONE} A\n" for i in range(100)))
    return subprocess.Popen(
        ["dnsperf", "-s", CLUSTER_DNS_IP, "-p", "53", "-d", str(queries), "-l", str(seconds),
         "-Q", str(qps), "-c", "8", "-t", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)


def test_load_scales_coredns_in_panic_and_back_after_the_stable_window(
        cluster: Cluster, tmp_path: Path) -> None:
    began = time.monotonic()
    cluster.kubectl("apply", "-f", "-", input_text=json.dumps(
        coredns_objects(cluster.images["COREDNS_IMAGE"], replicas=1)))
    cluster.kubectl("create", "configmap", "-n", NS, "kube-dns-autoscaler",
                    "--from-literal=linear=" + json.dumps(PARAMS))
    root = overlay(cluster)
    perf: subprocess.Popen[str] | None = None
    sampler: Sampler | None = None
    try:
        cluster.kubectl("apply", "-k", str(root))
        wait_for("1 CoreDNS Pod and the autoscaler Ready", lambda: len(
            ready_pods(cluster, "k8s-app=kube-dns")) == 1 and len(
            ready_pods(cluster, "k8s-app=kube-dns-autoscaler")) == 1, 120, interval=0.5)
        wait_for("the load axis available", lambda: autoscaler_metrics(cluster).get(
            'cpa_load_available{target="deployment/coredns"}') == 1, POLL * 3 + 10)
        assert coredns_replicas(cluster) == 1
        timed("CoreDNS + autoscaler applied -> load axis available", time.monotonic() - began)

        # 1. the load step
        sampler = Sampler(cluster)
        perf = dnsperf(LOAD_SECONDS, QPS, tmp_path)
        step = time.monotonic()
        wait_for("coredns scaled up by the load", lambda: coredns_replicas(cluster) > 1,
                 PANIC + SCRAPE + POLL + 20, interval=0.25)
        up = time.monotonic() - step
        timed("load step -> first scale-up written", up)
        wait_for(f"coredns at max {MAX}", lambda: coredns_replicas(cluster) == MAX, 30,
                 interval=0.25)
        timed(f"load step -> {MAX} replicas (max)", time.monotonic() - step)
        started = events(autoscaler_logs(cluster), "load.panic.started")
        assert started, autoscaler_logs(cluster)[-3000:]
        # The bound: the panic window, one scrape and one poll.
        assert up <= PANIC + SCRAPE + POLL, f"scaled up {up:.1f} s after the load step"

        # 3. the load stops; the count stays until a stable window under the threshold
        output, _ = perf.communicate(timeout=LOAD_SECONDS + 30)
        stopped = time.monotonic()
        perf = None
        summary = [line.strip() for line in output.splitlines()
                   if re.match(r"\s*(Queries (sent|completed|lost)|Queries per second)", line)]
        print("[cluster-load] dnsperf: " + "; ".join(summary), flush=True)
        wait_for("coredns back to the proportional 1", lambda: coredns_replicas(cluster) == 1,
                 STABLE + PANIC + 2 * POLL + 20, interval=0.25)
        down = time.monotonic() - stopped
        timed("load gone -> back to 1 replica", down)
        seen = sampler.stop()
        sampler = None
        logs = autoscaler_logs(cluster)
        ended = events(logs, "load.panic.ended")
        assert ended, logs[-3000:]
        assert down >= STABLE, f"back to 1 after {down:.1f} s, inside the stable window"

        # 2. panic never scaled down: from the first write up, the count only rose until
        # the panic ended; from then on the stable window decides and only lowers it (a
        # stable window that still holds the end of the load may give a step on the way).
        counts = [r for _t, r in seen] + [coredns_replicas(cluster)]  # and the count now
        first_up = next(i for i, r in enumerate(counts) if r > 1)
        drop = next(i for i in range(first_up + 1, len(counts)) if counts[i] < counts[i - 1])
        assert counts[first_up:drop] == sorted(counts[first_up:drop]), counts
        assert counts[drop:] == sorted(counts[drop:], reverse=True), counts
        assert counts[-1] == 1, counts
        changes = [(e["old"], e["new"], e.get("proportional"), e.get("load"))
                   for e in events(logs, "scale.changed")]
        print(f"[cluster-load] writes (old, new, proportional, load): {changes}", flush=True)
        rates = [e for e in events(logs, "load.panic.started") if e.get("panic_rate")]
        print(f"[cluster-load] panic started at rates {[e['panic_rate'] for e in rates]} "
              f"with {[e['ready'] for e in rates]} Ready; ended {len(ended)}x", flush=True)
    except BaseException:
        with contextlib.suppress(Exception):
            print("[cluster-load] autoscaler log:\n" + autoscaler_logs(cluster)[-6000:],
                  flush=True)
        with contextlib.suppress(Exception):
            for pod in ready_pods(cluster, "k8s-app=kube-dns")[:2]:
                print(f"[cluster-load] {pod['metadata']['name']} log:\n" + cluster.kubectl(
                    "logs", "-n", NS, pod["metadata"]["name"]).stdout[-2000:], flush=True)
        raise
    finally:
        if sampler is not None:
            sampler.stop()
        if perf is not None and perf.poll() is None:
            os.killpg(perf.pid, 15)
            perf.wait(30)
        cluster.kubectl("delete", "-k", str(root), "--wait=true", check=False, timeout=120)
        cluster.kubectl("delete", "deployment,service,configmap", "-n", NS, "coredns",
                        "kube-dns", "kube-dns-autoscaler", "--wait=true", "--ignore-not-found",
                        check=False, timeout=120)
        shutil.rmtree(root, ignore_errors=True)
