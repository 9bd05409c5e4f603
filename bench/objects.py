"""``python -m bench.objects``: what the Pods and Services axes cost the daemon.

Beside the Node benchmarks: a real kube-apiserver and etcd (``tests/controlplane``), the
Pods and Services created through the API server (no kubelet: the Pods stay Pending, the
Services headless), then the real daemon started twice on the same cluster, once with
parameters that count them (``podsPerReplica``, ``servicesPerReplica``) and once without:

* peak RSS of the daemon (``/proc``, sampled from its start to the end of the run);
* time from its start to the first correct write (a watch on the Deployment);
* the API server's CPU from the daemon's start to that write (``/proc`` of its process):
  the initial sync, whose difference between the two daemons is what the paged
  metadata-only lists cost it (each start waits for the API server to be quiet first);
* CPU per poll in the steady state (``/proc`` CPU over ``--polls`` polls, divided);
* churn (``bench.podchurn``): Pods created and deleted at ``--churn-rate`` each a second
  for ``--churn-seconds``, the total kept, with each daemon running: the daemon's and the
  API server's CPU % over the window, the rates achieved, and with the axes whether the
  daemon's count comes back to the API server's.

Printed as JSON (and written with ``--out``); run it under ``flock /tmp/bench.lock`` so that
no other timing shares the machine.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench import measure, podchurn
from tests.controlplane import ControlPlane
from tests.controlplane.binaries import ensure_binaries
from tests.controlplane.client import AdminClient

NS = "kube-system"
CM = "kube-dns-autoscaler"
BASE = {"coresPerReplica": 256, "nodesPerReplica": 16, "preventSinglePointFailure": True}
AXES = {**BASE, "podsPerReplica": 1000, "servicesPerReplica": 1000}
NAMESPACES = 20


def _parallel(fn: Callable[[int], object], count: int, workers: int = 16) -> float:
    """``fn(i)`` for every i below ``count`` on ``workers`` threads; the seconds it took."""
    began = time.monotonic()
    with ThreadPoolExecutor(workers) as pool:
        for _ in pool.map(fn, range(count), chunksize=64):
            pass
    return time.monotonic() - began


def populate(admin: AdminClient, pods: int, services: int) -> dict[str, float]:
    """The objects, spread over namespaces, created through the API server."""
    for i in range(NAMESPACES):
        admin.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                          "metadata": {"name": f"bench-{i}"}})

    def pod(i: int) -> object:
        ns = f"bench-{i % NAMESPACES}"
        return admin.post(f"/api/v1/namespaces/{ns}/pods", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p-{i:06d}",
                                                            "labels": {"app": f"a{i % 97}"}},
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}})

    def service(i: int) -> object:
        ns = f"bench-{i % NAMESPACES}"
        return admin.post(f"/api/v1/namespaces/{ns}/services", {
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": f"s-{i:06d}"},
            "spec": {"clusterIP": "None", "selector": {"app": f"a{i % 97}"},
                     "ports": [{"port": 53, "protocol": "UDP"}]}})

    return {"pods_seconds": round(_parallel(pod, pods), 1),
            "services_seconds": round(_parallel(service, services), 1)}


def _deployment(admin: AdminClient) -> None:
    labels = {"app": "coredns"}
    admin.post(f"/apis/apps/v1/namespaces/{NS}/deployments", {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "coredns", "namespace": NS},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels}, "spec": {"containers": [
                     {"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}}})


def _params(admin: AdminClient, params: dict[str, Any]) -> None:
    body = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": CM, "namespace": NS},
            "data": {"linear": json.dumps(params)}}
    admin.apply(body)


def _set_replicas(admin: AdminClient, replicas: int) -> None:
    admin.patch(f"/apis/apps/v1/namespaces/{NS}/deployments/coredns",
                {"spec": {"replicas": replicas}})


def _polls(port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return int(sum(float(line.split()[-1]) for line in text.splitlines()
                   if line.startswith("cpa_polls_total{")))


def _cpu(pid: int | None) -> float:
    """A process's CPU seconds so far (utime + stime), or NaN when it is gone."""
    return measure.cpu_seconds(pid) if pid is not None else math.nan


def busy_percent(plane: ControlPlane, seconds: float) -> float:
    """The API server's CPU % over the next ``seconds``."""
    before, began = _cpu(plane.apiserver_pid), time.monotonic()
    time.sleep(seconds)
    return 100 * (_cpu(plane.apiserver_pid) - before) / (time.monotonic() - began)


def settle(plane: ControlPlane, below: float = 5.0, window: float = 3.0,
           timeout: float = 300.0) -> dict[str, float]:
    """Wait until the API server is quiet (under ``below`` % CPU over ``window`` s): after
    a bulk creation or a churn it goes on working (compaction, its caches, Go's collector)
    for a while, which would count against the next daemon's sync. Returns how long that
    took and its CPU % in the last window, which the sync carries besides the daemon's
    requests."""
    began = time.monotonic()
    while True:
        percent = busy_percent(plane, window)
        if percent < below or time.monotonic() - began > timeout:
            return {"apiserver_settle_seconds": round(time.monotonic() - began, 1),
                    "apiserver_quiet_cpu_percent": round(percent, 1)}


Extra = Callable[[subprocess.Popen[bytes], int], dict[str, Any]]


def run_daemon(plane: ControlPlane, admin: AdminClient, params: dict[str, Any],
               expected: int, polls: int, log: Path, extra: Extra | None = None,
               source: Path | None = None) -> dict[str, Any]:
    """One daemon on the cluster as it is: its peak RSS, time to the first correct write,
    the API server's CPU from its start to that write (the initial sync), its CPU per
    steady poll; then ``extra`` (the churn) while it still runs. ``source``: the daemon
    imported from that source tree (``--compare``) rather than the installed one."""
    _params(admin, params)
    _set_replicas(admin, 1 if expected != 1 else 3)  # so that the right count is a write
    quiet = settle(plane)
    watch = measure.ReplicaWatch(plane.server, plane.ca_file, plane.admin_token, NS,
                                 "coredns")
    port = _free_port()
    argv = [*measure.our_command(), f"--kubeconfig={plane.admin_kubeconfig}",
            f"--namespace={NS}", f"--configmap={CM}", "--target=deployment/coredns",
            "--poll-period-seconds=1", f"--health-port={port}", "--logtostderr=true"]
    plane_cpu = _cpu(plane.apiserver_pid)
    with log.open("wb") as out:
        began = time.monotonic()
        env = None if source is None else {**os.environ, "PYTHONPATH": str(source)}
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
    sampler = measure.RssSampler(proc.pid, 0.1)
    try:
        alive: Callable[[], bool] = lambda: proc.poll() is None  # noqa: E731
        written = watch.wait(expected, began, 900, alive)
        plane_cpu = _cpu(plane.apiserver_pid) - plane_cpu
        measure.wait_for("polls counted", lambda: _polls(port) > 0, 30)
        start_polls, start_cpu = _polls(port), measure.cpu_seconds(proc.pid)
        measure.wait_for(f"{polls} polls", lambda: _polls(port) >= start_polls + polls,
                         polls * 3 + 30, 0.2, alive)
        done_polls, done_cpu = _polls(port), measure.cpu_seconds(proc.pid)
        result: dict[str, Any] = {"first_correct_write_seconds": round(written - began, 2),
                                  "apiserver_sync_cpu_seconds": round(plane_cpu, 2),
                                  **quiet,
                                  "peak_rss_mib": sampler.max_mib(),
                                  "cpu_ms_per_poll": round(1000 * (done_cpu - start_cpu)
                                                           / max(1, done_polls - start_polls),
                                                           3),
                                  "replicas": expected}
        if extra is not None:
            began_extra = time.monotonic()
            result["churn"] = extra(proc, port)
            result["churn"]["peak_rss_mib"] = sampler.max_mib(began_extra)
        return result
    finally:
        sampler.stop()
        watch.close()
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _metric(port: int, series: str) -> float | None:
    """One series of the daemon's /metrics (name and labels as written), or None."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    return None


def _count_check(plane: ControlPlane, port: int, tally: int) -> dict[str, Any]:
    """Whether the daemon's Pod count comes to the harness's tally after the window (and
    how long that took), and whether the API server, listed, agrees with both."""
    series = 'cpa_cluster_objects{kind="pods"}'
    ended = time.monotonic()
    try:
        settled: float | None = measure.wait_for(
            "the daemon's Pod count", lambda: _metric(port, series) == tally, 60, 0.2)
    except TimeoutError:
        settled = None
    seen = _metric(port, series)
    daemon = None if seen is None else int(seen)
    api = podchurn.count_pods(plane.admin())
    return {"tally_pods": tally, "api_pods": api, "daemon_pods": daemon,
            "count_right": daemon == api == tally,
            "count_settled_seconds_after_window": (
                None if settled is None else round(max(0.0, settled - ended), 2))}


def churn_window(plane: ControlPlane, churn: podchurn.PodChurn, rate: float,
                 seconds: float, counted: bool) -> Extra:
    """The churn while a daemon runs: its CPU % and the API server's over the window, the
    achieved rates; with the Pods axis (``counted``), whether the daemon's count comes
    back to the API's and how long after the window that took."""
    def window(proc: subprocess.Popen[bytes], port: int) -> dict[str, Any]:
        pids = {"daemon": proc.pid, "apiserver": plane.apiserver_pid,
                "etcd": plane.etcd_pid, "generator": os.getpid()}
        before = {name: _cpu(pid) for name, pid in pids.items()}
        done = churn.run(rate, seconds)
        wall = max(1e-9, time.monotonic() - done.started)
        out = done.summary(rate)
        for name, pid in pids.items():  # the generator's own share says if it kept up
            out[f"{name}_cpu_percent"] = round(100 * (_cpu(pid) - before[name]) / wall, 1)
        out["load_average"] = os.getloadavg()
        if counted:
            out.update(_count_check(plane, port, churn.present))
        return out
    return window


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def existing_pods(pods: int) -> Callable[[int], tuple[str, str]]:
    """The i-th Pod there before the churn: the created ones in order, then the churn's
    own (so that a long churn on a few Pods goes on deleting)."""
    def pod(i: int) -> tuple[str, str]:
        if i < pods:
            return f"bench-{i % NAMESPACES}", f"p-{i:06d}"
        k = i - pods
        return podchurn.new_namespace(k, NAMESPACES), podchurn.new_name(k)
    return pod


def measure_daemons(plane: ControlPlane, args: argparse.Namespace) -> dict[str, Any]:
    """The daemon without the axes, then with them, on the populated cluster; the same
    churn with each, so that the API server's CPU can be compared."""
    admin = plane.admin()
    total_pods, total_services = args.pods, args.services + 1  # and `kubernetes`
    expected = max(1, math.ceil(total_pods / 1000), math.ceil(total_services / 1000))
    churn = podchurn.PodChurn(lambda: plane.client(plane.admin_token), existing_pods(args.pods),
                              NAMESPACES, total_pods)
    rate, seconds = args.churn_rate, args.churn_seconds
    out: dict[str, Any] = {}
    for key, params, replicas, counted in (("without_axes", BASE, 1, False),
                                           ("with_axes", AXES, expected, True)):
        extra = churn_window(plane, churn, rate, seconds, counted) if seconds > 0 else None
        out[key] = run_daemon(plane, admin, params, replicas, args.polls,
                              plane.workdir / f"{key}.log", extra)
    return out


def compare(plane: ControlPlane, args: argparse.Namespace) -> dict[str, Any]:
    """The daemon with the axes from each ``--compare`` source tree in turn, ``--rounds``
    times: paired figures on one cluster, so that a change is judged against the same
    objects and the same machine load (which moves the API server's CPU from run to run)."""
    admin = plane.admin()
    expected = max(1, math.ceil(args.pods / 1000), math.ceil((args.services + 1) / 1000))
    runs: dict[str, list[dict[str, Any]]] = {str(src): [] for src in args.compare}
    for i in range(args.rounds):
        for src in args.compare:
            runs[str(src)].append(run_daemon(plane, admin, AXES, expected, args.polls,
                                             plane.workdir / f"compare-{i}.log",
                                             source=src.resolve()))
    return runs


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.objects")
    parser.add_argument("--pods", type=int, default=150_000)
    parser.add_argument("--services", type=int, default=20_000)
    parser.add_argument("--polls", type=int, default=20)
    parser.add_argument("--churn-rate", type=float, default=200.0,
                        help="Pods created and deleted a second (each)")
    parser.add_argument("--churn-seconds", type=float, default=60.0,
                        help="the churn window with each daemon (0: no churn)")
    parser.add_argument("--compare", type=Path, nargs="*", default=[],
                        help="source trees whose daemon runs with the axes, in turn, after "
                             "the two runs (e.g. git archive checkouts of two commits)")
    parser.add_argument("--rounds", type=int, default=3, help="turns of --compare")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    plane = ControlPlane(bin_dir=ensure_binaries())
    plane.start()
    try:
        admin = plane.admin()
        result: dict[str, Any] = {"pods": args.pods, "services": args.services,
                                  "load_average": os.getloadavg()}
        result["create"] = populate(admin, args.pods, args.services)
        _deployment(admin)
        result.update(measure_daemons(plane, args))
        if args.compare:
            result["compare"] = compare(plane, args)
    finally:
        plane.stop()
    text = json.dumps(result, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
