"""Two replicas with ``--leader-elect``: the old leader never writes after its renew deadline.

The leader (A) talks to the API server through an HTTPS fault proxy that fails (503) or
hangs its Lease requests and holds one scale GET for 25 s, the write it was about to make
still pending. Meanwhile the follower (B) takes the Lease over and writes. The proxy's log
is the witness: it counts A's scale PUTs by their arrival, from outside the process.

Defaults as client-go's: lease 15 s, renew deadline 10 s, retry 2 s.
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from typing import Any

import pytest

from tests.controlplane import ControlPlane
from tests.integration.httpproxy import Delay, Hang, Request, Respond, Rule
from tests.integration.support import (
    LEASE_RULE,
    coredns_and_nodes,
    create_configmap,
    create_nodes,
    log_events,
    replicas,
    service_account,
    wait_polls,
    wait_replicas,
    wait_until,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

CM = "sb-params"
RENEW_DEADLINE = 10.0
UNAVAILABLE = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                          "reason": "ServiceUnavailable", "code": 503,
                          "message": "injected by the test's proxy"}).encode()


def args(namespace: str) -> list[str]:
    return [f"--namespace={namespace}", f"--configmap={CM}", "--target=deployment/coredns",
            "--leader-elect"]


def wall(event: dict[str, Any]) -> float:
    return datetime.fromisoformat(event["timestamp"].replace("Z", "+00:00")).timestamp()


@pytest.mark.parametrize("lease_fault", ["503", "hang"])
def test_the_old_leader_writes_nothing_after_its_renew_deadline(
        controlplane: ControlPlane, namespace: str, no_nodes: None, start: Any,
        http_proxy: Any, lease_fault: str) -> None:
    admin = controlplane.admin()
    coredns_and_nodes(admin, namespace, f"sb-{namespace[-6:]}", 2)
    create_configmap(admin, namespace, CM, {"linear": '{"nodesPerReplica":1}'})
    kubeconfig = service_account(controlplane, namespace, "ha", [LEASE_RULE])
    proxy_a, kubeconfig_a = http_proxy(kubeconfig)
    a = start(*args(namespace), kubeconfig=kubeconfig_a)
    wait_replicas(admin, namespace, "deployment", "coredns", 2, proc=a)
    wait_until("A to lead", lambda: a.events("leader.started"), 30)
    b = start(*args(namespace), kubeconfig=kubeconfig)
    wait_until("B to follow", lambda: b.health("/healthz")[0] == 200
               and b.metrics()["cpa_leader"] == 0, 60)

    lease_path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{CM}"

    def is_lease(r: Request) -> bool:
        return r.path == lease_path

    def is_scale(r: Request) -> bool:
        return r.path.endswith("/deployments/coredns/scale")

    proxy_a.add(Rule("lease", is_lease,
                     Respond(503, UNAVAILABLE, {"Content-Type": "application/json"})
                     if lease_fault == "503" else Hang()))
    proxy_a.add(Rule("slow-get", lambda r: r.method == "GET" and is_scale(r), Delay(25),
                     times=1))
    create_nodes(admin, "sb-one", 1)  # 3 nodes: A decides 3, its scale GET is held
    held = wait_until("A's scale GET to be held", lambda: proxy_a.requests(
        "GET", lambda r: r.rule == "slow-get"), 30)[0]
    create_nodes(admin, "sb-two", 2)  # 5 nodes: what B will write once it leads

    wait_until("B to take over", lambda: b.events("leader.started"), 45)
    a_leader_at_takeover = a.metrics()["cpa_leader"]
    wait_replicas(admin, namespace, "deployment", "coredns", 5, timeout=30, proc=b)
    wait_until("A's held GET to be answered", lambda: held.answered is not None, 40)
    time.sleep(3)  # A's PUT, had it made one, follows its GET's answer at once
    wait_polls(b, count=3)

    # A's last renewal: its last Lease write (a create is the first) the server accepted.
    renewals = proxy_a.requests(where=lambda r: r.method in ("POST", "PUT")
                                and r.path.startswith(lease_path.rsplit("/", 1)[0])
                                and r.status in (200, 201))
    deadline = renewals[-1].arrived + RENEW_DEADLINE
    puts = proxy_a.requests("PUT", is_scale)
    late = [round(r.arrived - renewals[-1].arrived, 1) for r in puts
            if r.arrived > deadline + 0.5]
    a_logs = a.logs()
    stopped = log_events(a_logs, "leader.stopped")
    took_over = b.events("leader.started")
    a_stop = f"{wall(stopped[0]) - renewals[-1].wall:.1f}s" if stopped else "never"
    print(f"\nLease {lease_fault}: after A's last renewal, A stopped leading at {a_stop}, "
          f"B led from {wall(took_over[0]) - renewals[-1].wall:.1f}s; A's scale PUTs after "
          f"its renew deadline: {len(late)} {late}; cpa_leader of A at the takeover: "
          f"{a_leader_at_takeover:g}")
    assert late == [], f"A wrote after its renew deadline (seconds after its last renewal): " \
                       f"{late}\n{a_logs[-3000:]}"
    assert stopped, "A never logged leader.stopped"
    assert wall(stopped[0]) < wall(took_over[0]), \
        "A must stop leading (at its renew deadline) before B can take the Lease"
    assert a_leader_at_takeover == 0, "cpa_leader of A must drop at its renew deadline"
    assert replicas(admin, namespace, "deployment", "coredns") == 5


def test_a_deleted_lease_never_makes_two_leaders(
        controlplane: ControlPlane, namespace: str, no_nodes: None, start: Any) -> None:
    """Issue 47 #9: ``kubectl delete lease`` under two replicas. Before, the follower
    created the Lease at once and both reported ``cpa_leader 1`` (~0.2 s) until the old
    leader's next renewal found it (or took it over: whichever came first). Five
    deletions at different phases of the renewals, both /metrics read every 50 ms for 3 s
    after each: never two leaders, and the Lease comes back held by the leader."""
    admin = controlplane.admin()
    coredns_and_nodes(admin, namespace, f"dl-{namespace[-6:]}", 2)
    create_configmap(admin, namespace, CM, {"linear": '{"nodesPerReplica":1}'})
    kubeconfig = service_account(controlplane, namespace, "ha", [LEASE_RULE])
    a = start(*args(namespace), kubeconfig=kubeconfig)
    wait_until("A to lead", lambda: a.events("leader.started"), 30)
    b = start(*args(namespace), kubeconfig=kubeconfig)
    # Following: B has read A's Lease (a replica that never saw a holder has nothing to
    # wait out, and takes a deleted Lease at once, as client-go's does).
    wait_until("B to follow", lambda: b.health("/healthz")[0] == 200
               and b.metrics()["cpa_leader"] == 0
               and b.metrics().get("cpa_leader_lease_holder_duration_seconds", 0) > 0, 60)
    lease_path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{CM}"
    both, samples, taken = 0, 0, 0
    for phase in (0.0, 0.4, 0.8, 1.2, 1.6):
        time.sleep(phase)
        admin.delete(lease_path)
        end = time.monotonic() + 3.0
        while time.monotonic() < end:
            leaders = (a.metrics()["cpa_leader"], b.metrics()["cpa_leader"])
            both += sum(leaders) > 1
            taken += leaders == (0, 1)
            samples += 1
            time.sleep(0.05)
        wait_until("the Lease back", lambda: admin.get(lease_path)["spec"].get(
            "holderIdentity"), 20)
    print(f"\nFIGURE deleted Lease x5: {both} of {samples} samples with two leaders, "
          f"{taken} with the follower leading")
    assert both == 0 and taken == 0
    assert a.metrics()["cpa_leader"] == 1 and b.metrics()["cpa_leader"] == 0
