"""Issue 27 #4 for the Lease: an answer that does not decode is a failed round, never a
Lease read as something it is not.

A Lease held by a "ghost" whose renewals stopped; an HTTPS fault proxy rewrites its
``leaseDurationSeconds`` to ``"4"`` (a string: client-go refuses to decode it). The Lease
used to be read as 4 s and taken over once that passed; now every round fails with
``leader.lease_failed`` naming the field, the replica never leads and never writes the
Lease, and its target is left alone.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.controlplane import ControlPlane
from tests.integration.httpproxy import Request, Rewrite, Rule
from tests.integration.support import (
    one_replica_per_node,
    replicas,
    wait_until,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

CM = "ld-params"
LEASE = {"--leader-elect-lease-duration": "4s", "--leader-elect-renew-deadline": "3s",
         "--leader-elect-retry-period": "1s"}


def test_a_malformed_lease_is_never_taken_over(
        controlplane: ControlPlane, namespace: str, no_nodes: None, start: Any,
        http_proxy: Any) -> None:
    admin = controlplane.admin()
    one_replica_per_node(admin, namespace, CM, f"ld-{namespace[-6:]}", 3)
    path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
    stamp = datetime(2026, 1, 1, tzinfo=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    admin.post(path, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                      "metadata": {"name": CM},
                      "spec": {"holderIdentity": "ghost", "leaseDurationSeconds": 4,
                               "acquireTime": stamp, "renewTime": stamp}})
    proxy, kubeconfig = http_proxy(controlplane.admin_kubeconfig)

    def spoil(body: bytes) -> bytes:
        doc = json.loads(body)
        doc["spec"]["leaseDurationSeconds"] = "4"
        return json.dumps(doc).encode()

    def is_lease(r: Request) -> bool:
        return r.method == "GET" and r.path == f"{path}/{CM}"

    proxy.add(Rule("lease", is_lease, Rewrite(spoil)))
    proc = start(f"--namespace={namespace}", f"--configmap={CM}",
                 "--target=deployment/coredns", "--leader-elect",
                 *(f"{k}={v}" for k, v in LEASE.items()), kubeconfig=kubeconfig)
    # Ten rounds of 1-2.2 s each: more than twice the 4 s a takeover would wait.
    failed = wait_until("ten failed Lease rounds", lambda: proc.alive() and len(
        proc.events("leader.lease_failed")) >= 10 and proc.events("leader.lease_failed"),
        90)
    holder = admin.get(f"{path}/{CM}")["spec"]["holderIdentity"]
    lease_writes = proxy.requests(where=lambda r: r.method in ("PUT", "POST")
                                  and r.path.startswith(path))
    started = proc.events("leader.started")
    print(f"\n{len(failed)} failed Lease rounds; leader.started {len(started)}"
          f"; holder {holder!r}; Lease writes {len(lease_writes)}; first error: "
          f"{failed[0]['error'][:200]!r}")
    assert "spec.leaseDurationSeconds is a string ('4'), not an int32" in failed[0]["error"]
    assert failed[0]["hint"].startswith("the Lease object does not decode")
    assert started == [] and holder == "ghost" and not lease_writes
    assert replicas(admin, namespace, "deployment", "coredns") == 1
