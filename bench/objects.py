"""``python -m bench.objects``: what the Pods and Services axes cost the daemon.

Beside the Node benchmarks: a real kube-apiserver and etcd (``tests/controlplane``), the
Pods and Services created through the API server (no kubelet: the Pods stay Pending, the
Services headless), then the real daemon started twice on the same cluster, once with
parameters that count them (``podsPerReplica``, ``servicesPerReplica``) and once without:

* peak RSS of the daemon (``/proc``, sampled from its start to the end of the run);
* time from its start to the first correct write (a watch on the Deployment);
* CPU per poll in the steady state (``/proc`` CPU over ``--polls`` polls, divided).

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

from bench import measure
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


def run_daemon(plane: ControlPlane, admin: AdminClient, params: dict[str, Any],
               expected: int, polls: int, log: Path) -> dict[str, Any]:
    """One daemon on the cluster as it is: its peak RSS, time to the first correct write
    and CPU per steady poll."""
    _params(admin, params)
    _set_replicas(admin, 1 if expected != 1 else 3)  # so that the right count is a write
    watch = measure.ReplicaWatch(plane.server, plane.ca_file, plane.admin_token, NS,
                                 "coredns")
    port = _free_port()
    argv = [*measure.our_command(), f"--kubeconfig={plane.admin_kubeconfig}",
            f"--namespace={NS}", f"--configmap={CM}", "--target=deployment/coredns",
            "--poll-period-seconds=1", f"--health-port={port}", "--logtostderr=true"]
    with log.open("wb") as out:
        began = time.monotonic()
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    sampler = measure.RssSampler(proc.pid, 0.1)
    try:
        alive: Callable[[], bool] = lambda: proc.poll() is None  # noqa: E731
        written = watch.wait(expected, began, 900, alive)
        measure.wait_for("polls counted", lambda: _polls(port) > 0, 30)
        start_polls, start_cpu = _polls(port), measure.cpu_seconds(proc.pid)
        measure.wait_for(f"{polls} polls", lambda: _polls(port) >= start_polls + polls,
                         polls * 3 + 30, 0.2, alive)
        done_polls, done_cpu = _polls(port), measure.cpu_seconds(proc.pid)
        return {"first_correct_write_seconds": round(written - began, 2),
                "peak_rss_mib": sampler.max_mib(),
                "cpu_ms_per_poll": round(1000 * (done_cpu - start_cpu)
                                         / max(1, done_polls - start_polls), 3),
                "replicas": expected}
    finally:
        sampler.stop()
        watch.close()
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.objects")
    parser.add_argument("--pods", type=int, default=150_000)
    parser.add_argument("--services", type=int, default=20_000)
    parser.add_argument("--polls", type=int, default=20)
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
        total_pods, total_services = args.pods, args.services + 1  # and `kubernetes`
        expected = max(1, math.ceil(total_pods / 1000), math.ceil(total_services / 1000))
        logs = plane.workdir
        result["without_axes"] = run_daemon(plane, admin, BASE, 1, args.polls,
                                            logs / "without.log")
        result["with_axes"] = run_daemon(plane, admin, AXES, expected, args.polls,
                                         logs / "with.log")
    finally:
        plane.stop()
    text = json.dumps(result, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
