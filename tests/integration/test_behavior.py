"""``behavior`` end to end: the real daemon, a real API server, a node count that flaps.

A 20 s scale-down window (short, so the test takes about a minute): while Nodes come and
go, the replicas never go down inside the window, a scale-up is written at once, and once
the count has been low for a whole window the replicas follow it down. ``cpa explain
--from-cluster --target`` reads the current replicas from the same scale subresource.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.controlplane import ControlPlane
from tests.integration.support import (
    coredns_and_nodes,
    create_configmap,
    create_nodes,
    explain_json,
    replicas,
    wait_replicas,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

CM = "kube-dns-autoscaler"
WINDOW = 20


def hold_for(admin: Any, namespace: str, seconds: float, expected: int) -> None:
    """The replicas stay at ``expected`` for ``seconds`` (sampled every 0.25 s)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        got = replicas(admin, namespace, "deployment", "coredns")
        assert got == expected, f"replicas went to {got} inside the window"
        time.sleep(0.25)


def test_window_holds_a_flapping_node_count(controlplane: ControlPlane, namespace: str,
                                            no_nodes: None, start: Any) -> None:
    admin = controlplane.admin()
    coredns_and_nodes(admin, namespace, "flap", 4, cpu="2")
    behavior = {"scaleDown": {"stabilizationWindowSeconds": WINDOW}}
    create_configmap(admin, namespace, CM,
                     {"linear": json.dumps({"nodesPerReplica": 1, "behavior": behavior})})
    proc = start(f"--namespace={namespace}", f"--configmap={CM}",
                 "--target=deployment/coredns")
    wait_replicas(admin, namespace, "deployment", "coredns", 4, proc=proc)

    # Two Nodes leave and come back, twice, 5 s apart: the replicas stay at 4.
    for _ in range(2):
        for i in (2, 3):
            admin.delete(f"/api/v1/nodes/flap-{i:04d}")
        hold_for(admin, namespace, 5, 4)
        create_nodes(admin, "flap", 2, cpu="2", start=2)
        hold_for(admin, namespace, 5, 4)
    for i in (2, 3):
        admin.delete(f"/api/v1/nodes/flap-{i:04d}")
    hold_for(admin, namespace, WINDOW - 6, 4)

    doc = explain_json(controlplane.autoscaler_kubeconfig, namespace, CM,
                       "--target=deployment/coredns")
    assert doc["desired"] == 2 and doc["behavior"]["current_replicas"] == 4
    assert "no history" in doc["behavior"]["history"]

    # A scale-up is not delayed.
    began = time.monotonic()
    create_nodes(admin, "more", 3, cpu="2")
    wait_replicas(admin, namespace, "deployment", "coredns", 5, timeout=10, proc=proc)
    up = time.monotonic() - began

    # Down to 2 Nodes: the replicas follow only after a whole window without a higher count.
    began = time.monotonic()
    for i in range(3):
        admin.delete(f"/api/v1/nodes/more-{i:04d}")
    wait_replicas(admin, namespace, "deployment", "coredns", 2, timeout=WINDOW + 20,
                  proc=proc)
    down = time.monotonic() - began
    print(f"scale-up written {up:.1f}s after the Nodes joined; scale-down {down:.1f}s after "
          f"they left (window {WINDOW}s)")
    # The daemon's last recommendation of 5 came at most one poll (1 s) before they left.
    assert down >= WINDOW - 1.5, "scaled down inside the window"

    changes = [(e["old"], e["new"]) for e in proc.events("scale.changed")]
    assert changes == [(1, 4), (4, 5), (5, 2)], changes
    held = proc.events("scale.held")
    assert held and all(e["replicas"] > e["desired"] for e in held)
    assert "window 20 s" in held[0]["behavior"]
    proc.wait_poll_ok()
