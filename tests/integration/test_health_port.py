"""The health port under abuse, and from the first second.

The port is upstream's ``:8080``, open on every interface without authentication: anyone
in the cluster can connect to it. Idle connections must not cost the daemon its memory
limit (the manifests' 64Mi) or its file descriptors (containerd 2.x gives a container a
soft limit of 1,024), and the API connections must never starve because of them.

Before the first Node list the health server already answers: ``/healthz`` 200,
``/last-poll`` 500 saying why the daemon waits, ``/metrics`` with the failure counted.
"""

from __future__ import annotations

import contextlib
import itertools
import resource
import socket
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.controlplane import ControlPlane
from tests.integration.faultproxy import FaultProxy
from tests.integration.support import (
    AutoscalerProcess,
    coredns_flags,
    create_nodes,
    free_port,
    one_replica_per_node,
    open_files_limit,
    rss_mib,
    service_account,
    via_address,
    wait_replicas,
    wait_until,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

CM = "hp-params"
MEMORY_LIMIT_MIB = 64  # the manifests' and the chart's limit


def setup(admin: Any, namespace: str, nodes: int) -> None:
    one_replica_per_node(admin, namespace, CM, f"hp-{namespace[-6:]}", nodes)


@contextlib.contextmanager
def idle_connections(port: int, count: int) -> Iterator[int]:
    """Open ``count`` TCP connections to the health port, one after the other, that never
    send a byte; yields how many the kernel completed (a connection the server does not
    take stays in its listen queue, or times out)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < count + 256:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, count + 256), hard))
    socks: list[socket.socket] = []
    try:
        for _ in range(count):
            with contextlib.suppress(OSError):
                socks.append(socket.create_connection(("127.0.0.1", port), timeout=2))
        yield len(socks)
    finally:
        for s in socks:
            s.close()


def poll_times(proc: AutoscalerProcess) -> list[float]:
    """When each poll ran (``poll.counts``, logged by every poll at --v=4), by this clock."""
    return [datetime.fromisoformat(e["timestamp"].replace("Z", "+00:00")).timestamp()
            for e in proc.events("poll.counts")]


def test_1500_idle_connections_cost_no_memory_and_no_poll(
        controlplane: ControlPlane, namespace: str, no_nodes: None, start: Any) -> None:
    admin = controlplane.admin()
    setup(admin, namespace, 2)
    proc = start(*coredns_flags(namespace, CM), "--v=4")
    wait_replicas(admin, namespace, "deployment", "coredns", 2, proc=proc)
    proc.wait_poll_ok()
    before = rss_mib(proc.pid)
    with idle_connections(proc.health_port, 1500) as opened:
        began = time.time()
        peak = before
        while time.time() - began < 10:
            peak = max(peak, rss_mib(proc.pid))
            time.sleep(0.25)
        probe = proc.health("/healthz")[0]  # a probe on a new connection, in the flood
        polls = [t for t in poll_times(proc) if began <= t <= began + 10]
    gaps = [round(b - a, 2) for a, b in itertools.pairwise(polls)]
    print(f"\n1,500 idle health connections ({opened} made): RSS {before:.1f} -> peak "
          f"{peak:.1f} MiB; {len(polls)} polls in 10 s (period 1 s), longest gap "
          f"{max(gaps, default=0):.2f}s; a probe meanwhile: {probe}")
    assert peak < MEMORY_LIMIT_MIB, f"RSS {peak:.1f} MiB with 1,500 idle connections"
    assert probe == 200
    assert len(polls) >= 5, f"polls stalled: {polls}"
    proc.wait_poll_ok()


def test_fd_limit_1024_with_1024_connections_polls_still_succeed(
        controlplane: ControlPlane, namespace: str, no_nodes: None, start: Any,
        tmp_path: Path) -> None:
    """A soft and hard limit of 1,024 (nothing to raise), 1,024 idle health connections,
    and the API connections dropped (a load balancer's idle timeout): the daemon must open
    new ones and poll on."""
    admin = controlplane.admin()
    setup(admin, namespace, 2)
    proxy = FaultProxy("127.0.0.1", controlplane.port)
    try:
        kubeconfig = via_address(proxy.address, controlplane.autoscaler_kubeconfig,
                                 tmp_path / "kc")
        proc = start(*coredns_flags(namespace, CM), nofile=(1024, 1024), kubeconfig=kubeconfig)
        wait_replicas(admin, namespace, "deployment", "coredns", 2, proc=proc)
        assert open_files_limit(proc.pid) == (1024, 1024)
        failed_before = len(proc.events("poll.failed"))
        with idle_connections(proc.health_port, 1024) as opened:
            time.sleep(2)
            dropped = proxy.reset()  # every API connection must be made again
            create_nodes(admin, "fd", 2)  # 4 nodes: 4 replicas
            wait_replicas(admin, namespace, "deployment", "coredns", 4, timeout=60,
                          proc=proc)
            time.sleep(3)
            failed = proc.events("poll.failed")[failed_before:]
            fds = len(list(Path(f"/proc/{proc.pid}/fd").iterdir()))
        print(f"\nfd limit 1,024 and 1,024 idle health connections ({opened} made): "
              f"{dropped} API connections reset, replicas right, {len(failed)} failed polls, "
              f"{fds} fds open")
        assert failed == [], failed[:3]
        proc.wait_poll_ok()
    finally:
        proxy.close()


def test_the_soft_open_files_limit_is_raised_to_the_hard_one(
        controlplane: ControlPlane, namespace: str, no_nodes: None, start: Any) -> None:
    admin = controlplane.admin()
    setup(admin, namespace, 1)
    proc = start(*coredns_flags(namespace, CM), nofile=(1024, 4096))
    proc.wait_healthy()
    assert open_files_limit(proc.pid) == (4096, 4096), "as Go programs do at start"


def test_health_and_metrics_answer_with_the_api_server_down(
        controlplane: ControlPlane, namespace: str, start: Any, tmp_path: Path) -> None:
    closed = free_port()  # nothing listens there: connection refused
    kubeconfig = via_address(f"127.0.0.1:{closed}", controlplane.autoscaler_kubeconfig,
                             tmp_path / "down.kubeconfig")
    proc = start(*coredns_flags(namespace, CM), kubeconfig=kubeconfig)
    proc.wait_healthy(30)
    body = proc.wait_poll_error("waiting for the first Node list: ", 30)
    assert "refused" in body.lower(), body
    wait_until("a failure counted", lambda: proc.metrics().get(
        'cpa_polls_total{result="error"}', 0) >= 1, 30)
    print(f"\nAPI server down: /healthz 200, /last-poll 500 {body!r}")


def test_health_says_which_rbac_rule_is_missing_when_nodes_are_forbidden(
        controlplane: ControlPlane, namespace: str, no_nodes: None, start: Any) -> None:
    admin = controlplane.admin()
    setup(admin, namespace, 1)
    kubeconfig = service_account(controlplane, namespace, "no-nodes", nodes=False)
    proc = start(*coredns_flags(namespace, CM), kubeconfig=kubeconfig)
    proc.wait_healthy(30)
    body = proc.wait_poll_error("waiting for the first Node list: ", 30)
    assert "403" in body and "nodes" in body and '"list", "watch"' in body, body
    wait_until("a failure counted", lambda: proc.metrics().get(
        'cpa_polls_total{result="error"}', 0) >= 1, 30)
    print(f"\nnodes forbidden: /last-poll 500 {body!r}")
