"""``python -m bench.load``: what the load axis costs, and how fast it answers a load step.

Against the real kube-apiserver + etcd of the tests (tests/controlplane), with Pods whose
status the benchmark sets and their metric servers (CoreDNS-shaped pages, ~160 lines) on
127.0.0.x in a process of their own (bench/loadpods.py):

* **scrape cost** at each ``--pods`` count: ``Scraper.scrape_once`` run ``--scrapes`` times
  in this thread (the Pod list, every Pod fetched, parsed and turned into a rate); the
  figures are the thread's CPU time (``time.thread_time``) and the wall time per scrape,
  median and p90, the Pod list alone, and per Pod. A poll's share is the scrapes a poll
  period holds (``--poll-period / scrapeIntervalSeconds``) plus the windows' arithmetic
  and the decision for one target, measured on the samples of a full stable window;
* **reaction**: the real daemon (``cpa run``, the manifest's 10 s poll period, a 2 s
  scrape, the default 60 s / 10 % windows) on one Ready Pod serving 100 per second at 150
  per replica (1 replica); the rate steps to 3000 (20 replicas, capped at ``max`` 10) and
  the time from the step to the first scale write above 1, and to the write of 10, is
  taken from the API server (the Deployment's ``spec.replicas``, read every 20 ms);
  ``--trials`` times, each in a fresh namespace with a fresh daemon.

Writes ``bench/results/load.json`` (or ``--out``) and prints a table. Run it on a quiet
machine, one benchmark at a time; it records the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from cpa.horizontal.decide.decision import decide
from cpa.horizontal.decide.modes.registry import parse_configmap_data
from cpa.horizontal.decide.windows import LoadAxis, PanicState, read_windows, scale
from cpa.horizontal.scrape.scraper import Scraper
from cpa.kube.client import KubeApi
from cpa.kube.clientconfig import load as load_kubeconfig
from cpa.kube.pods import list_ready_pods
from cpa.nodes.counts import ClusterCounts
from tests.controlplane import AdminClient, ControlPlane, ensure_binaries
from tests.integration.metricpods import METRIC, PORT
from tests.integration.support import daemon_command, free_port

REPO = Path(__file__).resolve().parents[1]
LOAD = {"metric": METRIC, "port": PORT, "targetPerReplica": 150}


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def _namespace(admin: AdminClient) -> str:
    name = f"bench-load-{secrets.token_hex(3)}"
    admin.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                      "metadata": {"name": name}})
    return name


def _workload(admin: AdminClient, ns: str, data: dict[str, str]) -> None:
    labels = {"app": "coredns"}
    admin.post(f"/apis/apps/v1/namespaces/{ns}/deployments", {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "coredns"},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {"containers": [{"name": "c", "image": "coredns:bench"}]}}}})
    admin.post(f"/api/v1/namespaces/{ns}/configmaps", {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kube-dns-autoscaler"},
        "data": data})


def _pods(admin: AdminClient, ns: str, first: int, count: int) -> None:
    for index in range(count):
        ip = f"127.0.0.{first + index}"
        name = f"coredns-{index}"
        obj = admin.post(f"/api/v1/namespaces/{ns}/pods", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": "coredns"}},
            "spec": {"containers": [{"name": "c", "image": "coredns:bench"}]}})
        obj["status"] = {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
                         "conditions": [{"type": "Ready", "status": "True"}]}
        admin.put(f"/api/v1/namespaces/{ns}/pods/{name}/status", obj)


class Servers:
    """bench/loadpods.py in a child process."""

    def __init__(self, first: int, count: int, rate: float) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.loadpods", str(first), str(count), str(rate)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO)
        assert self.proc.stdout is not None
        if self.proc.stdout.readline().strip() != "ready":
            raise RuntimeError("the metric servers did not start")

    def rate(self, rate: float) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{rate}\n")
        self.proc.stdin.flush()

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


def scrape_cost(plane: ControlPlane, pods: int, scrapes: int, poll_period: float
                ) -> dict[str, Any]:
    admin = plane.admin()
    ns = _namespace(admin)
    data = {"linear": json.dumps({"nodesPerReplica": 16, "load": LOAD})}
    _workload(admin, ns, data)
    _pods(admin, ns, 10, pods)
    servers = Servers(10, pods, 100.0)
    try:
        params = parse_configmap_data(data)
        load = params.shared.load
        assert load is not None
        api = KubeApi(load_kubeconfig(str(plane.admin_kubeconfig)))
        scraper = Scraper(api, ns, f"/apis/apps/v1/namespaces/{ns}/deployments/coredns/scale",
                          "deployment/coredns", load)
        for _ in range(3):  # warm: the selector, the connection, every Pod's first counter
            scraper.scrape_once()
            time.sleep(0.2)
        cpu: list[float] = []
        wall: list[float] = []
        for _ in range(scrapes):
            c0, w0 = time.thread_time(), time.perf_counter()
            sample = scraper.scrape_once()
            cpu.append(time.thread_time() - c0)
            wall.append(time.perf_counter() - w0)
            assert sample is not None and scraper.status().answered == pods, scraper.status()
            time.sleep(0.05)
        listing: list[float] = []
        for _ in range(scrapes):
            c0 = time.thread_time()
            list_ready_pods(api, ns, "app=coredns")
            listing.append(time.thread_time() - c0)
        # One poll's share: the windows over a full stable window of samples, the panic
        # rule and the decision with the load axis.
        samples = scraper.status().samples
        full = tuple(s._replace(at=i * load.scrape_interval_seconds)
                     for i, s in enumerate(samples * (
                         int(load.stable_window_seconds / load.scrape_interval_seconds)
                         // max(1, len(samples)) + 1)))
        now = full[-1].at
        counts = ClusterCounts(16, 64, 16, 64)
        decide_cpu: list[float] = []
        for _ in range(200):
            c0 = time.thread_time()
            reading = read_windows(full, now, load)
            assert reading is not None
            outcome = scale(load, PanicState(begun=True), reading, now)
            decide(params, counts, LoadAxis(outcome.replicas, outcome.steps, outcome))
            decide_cpu.append(time.thread_time() - c0)
        per_scrape = statistics.median(cpu)
        per_poll = per_scrape * poll_period / load.scrape_interval_seconds \
            + statistics.median(decide_cpu)
        return {"pods": pods, "scrapes": scrapes,
                "cpu_ms_per_scrape": {"median": per_scrape * 1e3, "p90": _pct(cpu, 0.9) * 1e3},
                "wall_ms_per_scrape": {"median": statistics.median(wall) * 1e3,
                                       "p90": _pct(wall, 0.9) * 1e3},
                "cpu_ms_pod_list": statistics.median(listing) * 1e3,
                "cpu_ms_per_pod": per_scrape / pods * 1e3,
                "cpu_ms_windows_and_decision": statistics.median(decide_cpu) * 1e3,
                "cpu_ms_per_poll": per_poll * 1e3,
                "scrapes_per_poll": poll_period / load.scrape_interval_seconds}
    finally:
        servers.stop()


def reaction(plane: ControlPlane, trials: int) -> dict[str, Any]:
    first_write: list[float] = []
    full_write: list[float] = []
    for trial in range(trials):
        admin = plane.admin()
        ns = _namespace(admin)
        data = {"linear": json.dumps({"nodesPerReplica": 16, "max": 10, "load": LOAD})}
        _workload(admin, ns, data)
        _pods(admin, ns, 200 + trial, 1)
        servers = Servers(200 + trial, 1, 100.0)
        log = Path(tempfile.mkstemp(prefix="bench-load-", suffix=".log")[1])
        with log.open("wb") as out:
            daemon = subprocess.Popen(
                [*daemon_command(), f"--kubeconfig={plane.admin_kubeconfig}",
                 f"--health-port={free_port()}", f"--namespace={ns}",
                 "--configmap=kube-dns-autoscaler", "--target=deployment/coredns",
                 "--log-format=json"], stdout=out, stderr=subprocess.STDOUT,
                env={k: v for k, v in os.environ.items() if k != "KUBECONFIG"})
        path = f"/apis/apps/v1/namespaces/{ns}/deployments/coredns"
        try:
            deadline = time.monotonic() + 60
            while b'"load.scrape.recovered"' not in log.read_bytes():
                if time.monotonic() > deadline or daemon.poll() is not None:
                    raise RuntimeError(f"the daemon has no rate: {log.read_text()[-2000:]}")
                time.sleep(0.1)
            # A steady state, then the step at a random phase of the 2 s scrape (the log
            # line above comes right after a scrape).
            time.sleep(12 + random.uniform(0.0, 2.0))
            assert admin.get(path)["spec"]["replicas"] == 1
            servers.rate(3000.0)
            step = time.monotonic()
            up: float | None = None
            while time.monotonic() - step < 60:
                replicas = admin.get(path)["spec"]["replicas"]
                if replicas > 1 and up is None:
                    up = time.monotonic() - step
                if replicas == 10:
                    full_write.append(time.monotonic() - step)
                    break
                time.sleep(0.02)
            else:
                raise RuntimeError(f"no write of 10 in 60 s: {log.read_text()[-2000:]}")
            assert up is not None
            first_write.append(up)
            print(f"  trial {trial + 1}: first write {up:.2f} s, 10 replicas "
                  f"{full_write[-1]:.2f} s", flush=True)
        finally:
            daemon.terminate()
            daemon.wait(15)
            servers.stop()
            log.unlink()
    def summary(values: list[float]) -> dict[str, float]:
        return {"median": statistics.median(values), "p90": _pct(values, 0.9),
                "min": min(values), "max": max(values)}
    return {"trials": trials, "poll_period_seconds": 10, "scrape_interval_seconds": 2,
            "stable_window_seconds": 60, "panic_window_seconds": 6,
            "step": "100/s -> 3000/s on 1 Ready Pod, 150 per replica (1 -> 20, max 10)",
            "first_write_seconds": summary(first_write),
            "full_write_seconds": summary(full_write)}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.load")
    parser.add_argument("--pods", default="10,100", help='"" for none')
    parser.add_argument("--scrapes", type=int, default=30)
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--poll-period", type=float, default=10.0)
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "load.json"))
    args = parser.parse_args()
    result: dict[str, Any] = {"machine": {"cpus": os.cpu_count(),
                                          "load_average": os.getloadavg()}}
    with ControlPlane(bin_dir=ensure_binaries()) as plane:
        result["scrape"] = [scrape_cost(plane, int(n), args.scrapes, args.poll_period)
                            for n in args.pods.split(",") if n]
        for row in result["scrape"]:
            print(f"{row['pods']:4d} Pods: {row['cpu_ms_per_scrape']['median']:.2f} ms CPU per "
                  f"scrape (p90 {row['cpu_ms_per_scrape']['p90']:.2f}; Pod list "
                  f"{row['cpu_ms_pod_list']:.2f}), {row['cpu_ms_per_pod']:.3f} ms per Pod, "
                  f"wall {row['wall_ms_per_scrape']['median']:.1f} ms; per 10 s poll "
                  f"{row['cpu_ms_per_poll']:.2f} ms (decision "
                  f"{row['cpu_ms_windows_and_decision']:.3f} ms)", flush=True)
        if args.trials:
            result["reaction"] = reaction(plane, args.trials)
            r = result["reaction"]
            print(f"reaction over {r['trials']} trials: first write median "
                  f"{r['first_write_seconds']['median']:.2f} s, p90 "
                  f"{r['first_write_seconds']['p90']:.2f} s; 10 replicas median "
                  f"{r['full_write_seconds']['median']:.2f} s, p90 "
                  f"{r['full_write_seconds']['p90']:.2f} s", flush=True)
    result["machine"]["load_average_after"] = os.getloadavg()
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
