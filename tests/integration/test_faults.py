"""An operator's bad day: the real daemon and the real API server, with faults in between.

A TCP proxy (``faultproxy``) sits between the daemon and kube-apiserver and freezes,
black-holes or resets connections; other scenarios stop the API server or etcd with
SIGSTOP, revoke the daemon's RBAC, or feed it ConfigMaps that once made it misbehave.
Every wait is bounded; the measured detection and recovery times are printed.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.controlplane import ControlPlane
from tests.integration.faultproxy import FaultProxy
from tests.integration.support import (
    AutoscalerProcess,
    coredns_and_nodes,
    coredns_flags,
    create_configmap,
    create_nodes,
    put_configmap_data,
    replicas,
    wait_polls,
    wait_replicas,
    wait_until,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

CM = "dns-params"


@pytest.fixture
def proxy(controlplane: ControlPlane) -> Iterator[FaultProxy]:
    p = FaultProxy("127.0.0.1", controlplane.port)
    yield p
    p.close()


def via(proxy: FaultProxy, kubeconfig: Path, out: Path) -> Path:
    """The same kubeconfig, pointed at the proxy (the certificate is for 127.0.0.1)."""
    doc = yaml.safe_load(kubeconfig.read_text())
    for cluster in doc["clusters"]:
        cluster["cluster"]["server"] = f"https://{proxy.address}"
    out.write_text(yaml.safe_dump(doc))
    return out


def setup(admin: Any, namespace: str, nodes: int, data: dict[str, str] | None = None) -> None:
    coredns_and_nodes(admin, namespace, f"f-{namespace[-6:]}", nodes, cpu="4")
    create_configmap(admin, namespace, CM, data or {
        "linear": '{"nodesPerReplica":16,"preventSinglePointFailure":true}'})


def stamp(event: dict[str, Any]) -> float:
    """An event's wall-clock time (structlog's ISO timestamp, UTC)."""
    return datetime.fromisoformat(event["timestamp"].replace("Z", "+00:00")).timestamp()


def since(proc: AutoscalerProcess, name: str, after: float) -> list[dict[str, Any]]:
    """Events named ``name`` logged after the wall-clock time ``after``."""
    return [event for event in proc.events(name) if stamp(event) >= after]


@pytest.mark.api_paths
def test_half_open_watch_is_replaced_within_60s(controlplane: ControlPlane, namespace: str,
                                                no_nodes: None, start: Any, proxy: FaultProxy,
                                                tmp_path: Path) -> None:
    admin = controlplane.admin()
    setup(admin, namespace, 16)
    proc = start(*coredns_flags(namespace, CM), "--v=4", poll_period=2,  # --v=4: watch.opened
                 kubeconfig=via(proxy, controlplane.autoscaler_kubeconfig, tmp_path / "kc"))
    wait_replicas(admin, namespace, "deployment", "coredns", 2, proc=proc)
    # The short watch after the streaming list is open (its answer has begun): freeze it.
    wait_until("the watch after the streaming list", lambda: proc.events("watch.opened"), 30)

    frozen = proxy.freeze()  # a NAT drops its state: open connections carry nothing more
    frozen_at, wall = time.monotonic(), time.time()
    create_nodes(admin, "late", 40, cpu="4")  # 56 nodes: ceil(56/16) = 4
    wait_replicas(admin, namespace, "deployment", "coredns", 4, timeout=120, proc=proc)
    correct_after = time.monotonic() - frozen_at
    dead = [e for e in since(proc, "watch.failed", wall) if "carried no bytes" in e["error"]]
    assert dead, proc.logs()[-4000:]
    detected_after = stamp(dead[0]) - wall
    print(f"\n{frozen} connections frozen; dead watch noticed after ~{detected_after:.0f}s, "
          f"replicas correct {correct_after:.1f}s after the freeze")
    assert detected_after <= 62, "a silent watch must be replaced within 60 s"
    proc.wait_poll_ok(60)


def test_black_hole_then_recovery_within_two_polls(controlplane: ControlPlane, namespace: str,
                                                   no_nodes: None, start: Any,
                                                   proxy: FaultProxy, tmp_path: Path) -> None:
    period = 5
    admin = controlplane.admin()
    setup(admin, namespace, 16)
    proc = start(*coredns_flags(namespace, CM), poll_period=period,
                 kubeconfig=via(proxy, controlplane.autoscaler_kubeconfig, tmp_path / "kc"))
    wait_replicas(admin, namespace, "deployment", "coredns", 2, proc=proc)

    proxy.blackhole()
    began = time.monotonic()
    create_nodes(admin, "bh", 40, cpu="4")  # the API server knows; the daemon cannot hear
    body = proc.wait_poll_error("", timeout=45)  # polls fail with the reason
    print(f"\nduring the black hole /last-poll says: {body[:160]}")
    time.sleep(max(0.0, 40 - (time.monotonic() - began)))
    assert replicas(admin, namespace, "deployment", "coredns") == 2, "wrote while blind"
    proxy.restore()
    restored = time.monotonic()
    wait_replicas(admin, namespace, "deployment", "coredns", 4, timeout=2 * period + 20,
                  proc=proc)
    recovery = time.monotonic() - restored
    print(f"replicas correct {recovery:.1f}s after the network healed "
          f"(poll period {period}s)")
    assert recovery <= 2 * period + 5, "counts must be right within two poll periods"
    proc.wait_poll_ok(30)


def test_reset_connections_recover(controlplane: ControlPlane, namespace: str, no_nodes: None,
                                   start: Any, proxy: FaultProxy, tmp_path: Path) -> None:
    admin = controlplane.admin()
    setup(admin, namespace, 16)
    proc = start(*coredns_flags(namespace, CM), poll_period=1,
                 kubeconfig=via(proxy, controlplane.autoscaler_kubeconfig, tmp_path / "kc"))
    wait_replicas(admin, namespace, "deployment", "coredns", 2, proc=proc)
    # Each reset hits connections between requests (idle for 0.3 s of the 1 s period): a
    # reset in the middle of a request on a fresh connection fails that request, in Go's
    # transport too (nothing to retry on: the connection never served one).
    for _ in range(3):
        wait_until("an idle connection to reset", lambda: proxy.open_connections(0.3), 30)
        assert proxy.reset(idle_for=0.3) >= 1
    reset_at = time.monotonic()
    create_nodes(admin, "rst", 40, cpu="4")
    wait_replicas(admin, namespace, "deployment", "coredns", 4, timeout=30, proc=proc)
    print(f"\nafter 3 resets, replicas correct {time.monotonic() - reset_at:.1f}s later; "
          f"{len(proc.events('watch.failed'))} watch restarts")
    # A pooled connection that was reset is seen dead when taken from the pool (or, when
    # the RST races the request, the GET is retried once on a new one, as Go's transport
    # does: tests/unit/kube/test_transport.py), so the resets cost no poll.
    assert proc.events("poll.failed") == []


@pytest.mark.parametrize("process", ["kube-apiserver", "etcd"])
def test_sigstop_for_60s_writes_nothing_wrong(controlplane: ControlPlane, namespace: str,
                                              no_nodes: None, start: Any, process: str) -> None:
    admin = controlplane.admin()
    setup(admin, namespace, 20)  # ceil(20/16) = 2
    proc = start(*coredns_flags(namespace, CM), poll_period=2)
    wait_replicas(admin, namespace, "deployment", "coredns", 2, proc=proc)
    # The first poll's log lines are written after it (cpa.logs holds them): the API server
    # can show its write before the log does.
    writes = len(wait_until("the first write logged", lambda: proc.events("scale.changed")))
    pid = controlplane.apiserver_pid if process == "kube-apiserver" else controlplane.etcd_pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(60)
    finally:
        os.kill(pid, signal.SIGCONT)
    resumed = time.monotonic()
    proc.wait_poll_ok(60)
    ok_after = time.monotonic() - resumed
    create_nodes(admin, "after", 20, cpu="4")  # 40 nodes: 3
    wait_replicas(admin, namespace, "deployment", "coredns", 3, timeout=60, proc=proc)
    changes = [(e["old"], e["new"]) for e in proc.events("scale.changed")][writes:]
    assert changes == [(2, 3)], f"unexpected writes around the stop: {changes}"
    print(f"\n{process} stopped 60s: /last-poll 200 again {ok_after:.1f}s after SIGCONT, "
          f"{len(proc.events('poll.failed'))} failed polls, no wrong write")


def test_rbac_revoked_and_restored(controlplane: ControlPlane, namespace: str, no_nodes: None,
                                   start: Any, tmp_path: Path) -> None:
    """Its own ServiceAccount and binding, so revoking them touches no other test."""
    admin = controlplane.admin()
    setup(admin, namespace, 20)
    sa = "cpa-rbac-test"
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": f"{namespace}-cpa"},
            "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "watch"]},
                      {"apiGroups": [""], "resources": ["configmaps"],
                       "verbs": ["get", "create"]},
                      {"apiGroups": ["apps"], "resources": ["deployments/scale"],
                       "verbs": ["get", "update"]}]}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": f"{namespace}-cpa"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                           "name": f"{namespace}-cpa"},
               "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": namespace}]}
    admin.apply(role)
    admin.apply(binding)
    kubeconfig = controlplane.kubeconfig_for(f"system:serviceaccount:{namespace}:{sa}", [])
    proc = start(*coredns_flags(namespace, CM), poll_period=1, kubeconfig=kubeconfig)
    wait_replicas(admin, namespace, "deployment", "coredns", 2, proc=proc)

    admin.delete(f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{namespace}-cpa")
    body = proc.wait_poll_error("403", timeout=30)
    assert "forbidden" in body.lower()
    create_nodes(admin, "rb", 20, cpu="4")  # 40 nodes: 3, but it may not see or write
    wait_polls(proc, count=3)
    assert replicas(admin, namespace, "deployment", "coredns") == 2, "replicas must be held"

    admin.apply(binding)
    restored = time.monotonic()
    wait_replicas(admin, namespace, "deployment", "coredns", 3, timeout=40, proc=proc)
    proc.wait_poll_ok(30)
    print(f"\nRBAC revoked: /last-poll said {body[:120]!r}; restored: replicas right "
          f"{time.monotonic() - restored:.1f}s later")
    admin.delete(f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{namespace}-cpa")
    admin.delete(f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{namespace}-cpa")


@pytest.mark.parametrize(("value", "reason"), [
    ('{"nodesPerReplica":1,"min":' + "9" * 4301 + "}", "out of range"),
    ('{"nodesPerReplica":16,"min":2147483648}', "more than a scale subresource can hold"),
    ('{"nodesPerReplica":1e-300}', "more than a scale subresource can hold"),
])
def test_parameters_that_cannot_be_honoured_write_nothing(
        controlplane: ControlPlane, namespace: str, no_nodes: None, start: Any, value: str,
        reason: str) -> None:
    admin = controlplane.admin()
    setup(admin, namespace, 3, {"linear": '{"nodesPerReplica":1}'})
    proc = start(*coredns_flags(namespace, CM))
    wait_replicas(admin, namespace, "deployment", "coredns", 3, proc=proc)
    put_configmap_data(admin, namespace, CM, {"linear": value})
    body = proc.wait_poll_error(reason)
    wait_polls(proc, count=3)  # the version stays invalid, nothing is written
    assert proc.last_poll()[0] == 500
    assert replicas(admin, namespace, "deployment", "coredns") == 3
    assert "unexpected" not in body
    put_configmap_data(admin, namespace, CM, {"linear": '{"nodesPerReplica":2}'})
    wait_replicas(admin, namespace, "deployment", "coredns", 2, proc=proc)


def test_deep_nesting_under_an_unknown_key_is_accepted_as_by_go(
        controlplane: ControlPlane, namespace: str, no_nodes: None, start: Any) -> None:
    admin = controlplane.admin()
    nested = "[" * 5000 + "]" * 5000
    setup(admin, namespace, 3, {"linear": f'{{"nodesPerReplica":1,"note":{nested}}}'})
    proc = start(*coredns_flags(namespace, CM))
    wait_replicas(admin, namespace, "deployment", "coredns", 3, proc=proc)
    proc.wait_poll_ok()


def test_two_autoscalers_on_one_target_warn_once_each(
        controlplane: ControlPlane, namespace: str, no_nodes: None, start: Any) -> None:
    admin = controlplane.admin()
    setup(admin, namespace, 4, {"linear": '{"nodesPerReplica":1}'})  # A wants 4
    create_configmap(admin, namespace, "other", {"linear": '{"nodesPerReplica":2}'})  # B wants 2
    a = start(*coredns_flags(namespace, CM))
    wait_replicas(admin, namespace, "deployment", "coredns", 4, proc=a)
    b = start(f"--namespace={namespace}", "--configmap=other", "--target=deployment/coredns")
    wait_until("both to notice the other writer",
               lambda: a.events("scale.overwritten") and b.events("scale.overwritten"), 30)
    wait_polls(a, b, count=8)  # they keep fighting: many writes, but one warning each
    writes = len(a.events("scale.changed")) + len(b.events("scale.changed"))
    warnings = (len(a.events("scale.overwritten")), len(b.events("scale.overwritten")))
    assert writes >= 8
    assert warnings == (1, 1), warnings
    event = a.events("scale.overwritten")[0]
    assert event["ours"] == 4 and event["found"] == 2 and "docs/troubleshooting.md" in event["hint"]
    # What docs/troubleshooting.md tells operators to look for: who set spec.replicas.
    deployment = admin.get(f"/apis/apps/v1/namespaces/{namespace}/deployments/coredns")
    managers = {(m["manager"], m.get("subresource", "")) for m in
                deployment["metadata"]["managedFields"]}
    assert ("cluster-proportional-autoscaler-py", "scale") in managers, managers
    print(f"\ntwo autoscalers: {writes} writes in ~10s, warnings {warnings}")
