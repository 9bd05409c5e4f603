"""Forged bytes on the Node watch: an oversize frame, an ADDED event without a name.

An HTTPS fault proxy puts them in front of the real stream of the real API server (the
daemon asks for protobuf: each frame is a 4-byte big-endian length and a WatchEvent). Both
must be decode errors that end in a re-list, never a wait for 4 GiB or a phantom Node.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.controlplane import ControlPlane
from tests.integration.httpproxy import Inject, Request, Rule
from tests.integration.support import (
    coredns_flags,
    one_replica_per_node,
    replicas,
    wait_polls,
    wait_replicas,
    wait_until,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

CM = "wf-params"


def setup(admin: Any, namespace: str, nodes: int) -> None:
    one_replica_per_node(admin, namespace, CM, f"wf-{namespace[-6:]}", nodes)


def node_watch(r: Request) -> bool:
    return r.method == "GET" and r.path == "/api/v1/nodes" and r.is_watch


def node_read(r: Request) -> bool:
    """Any read of the Nodes: the watches and the lists (the daemon's one-page list is no
    watch: forged too, a relist fails as well and the counts stay stale)."""
    return r.method == "GET" and r.path == "/api/v1/nodes"


def short_watch(r: Request) -> bool:
    """A watch from a resourceVersion (not the streaming list that syncs)."""
    return node_watch(r) and "sendInitialEvents" not in r.query


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def nameless_added_frame() -> bytes:
    """A well-formed protobuf watch frame: ADDED, a v1 Node with empty metadata."""
    node = _field(1, b"")  # Node{metadata: ObjectMeta{}}: no name
    unknown = _field(1, _field(1, b"v1") + _field(2, b"Node")) + _field(2, node)
    event = _field(1, b"ADDED") + _field(2, _field(1, b"k8s\x00" + unknown))
    return len(event).to_bytes(4, "big") + event


def test_an_oversize_frame_is_a_decode_error_and_a_relist(
        controlplane: ControlPlane, namespace: str, no_nodes: None, start: Any,
        http_proxy: Any) -> None:
    admin = controlplane.admin()
    setup(admin, namespace, 3)
    proxy, kubeconfig = http_proxy()
    proc = start(*coredns_flags(namespace, CM), poll_period=1, kubeconfig=kubeconfig)
    wait_replicas(admin, namespace, "deployment", "coredns", 3, proc=proc)
    proc.wait_poll_ok()

    rule = proxy.add(Rule("oversize", node_read, Inject(b"\xff\xff\xff\xff")))
    proxy.drop_connections()
    began = time.monotonic()
    wait_until("the oversize frame refused", lambda: any(
        "frame" in e["error"] for e in proc.events("watch.failed")), 10)
    noticed = time.monotonic() - began
    wait_until("the stale metric", lambda: proc.metrics()[
        "cpa_node_counts_stale_seconds"] > 0, 10)
    body = proc.wait_poll_error("stale", timeout=50)
    stale_after = time.monotonic() - began
    # The watch's oversize frame, or the relist's forged body after it.
    assert "frame" in body or "does not decode" in body, body
    assert any(e.get("relist") for e in proc.events("watch.failed")), "no relist asked for"
    print(f"\noversize frame: refused {noticed:.1f}s after it came; /last-poll 500 after "
          f"{stale_after:.0f}s: {body[:220]!r}")

    proxy.remove(rule)
    proc.wait_poll_ok(40)
    assert replicas(admin, namespace, "deployment", "coredns") == 3


def test_an_added_event_without_a_name_is_no_phantom_node(
        controlplane: ControlPlane, namespace: str, no_nodes: None, start: Any,
        http_proxy: Any) -> None:
    admin = controlplane.admin()
    setup(admin, namespace, 3)  # nodesPerReplica 1: a phantom Node would be a 4th replica
    proxy, kubeconfig = http_proxy()
    proc = start(*coredns_flags(namespace, CM), poll_period=1, kubeconfig=kubeconfig)
    wait_replicas(admin, namespace, "deployment", "coredns", 3, proc=proc)
    proc.wait_poll_ok()
    writes = len(wait_until("the first write logged", lambda: proc.events("scale.changed")))

    rule = proxy.add(Rule("phantom", short_watch, Inject(nameless_added_frame()), times=1))
    proxy.drop_connections()
    wait_until("the forged event sent", lambda: rule.applied == 1, 30)
    wait_polls(proc, count=5)
    counted = proc.metrics()['cpa_cluster_nodes{scope="all"}']
    rejected = [e for e in proc.events("watch.failed") if "metadata.name" in e["error"]]
    print(f"\nADDED without a name: nodes counted {counted:g}, replicas "
          f"{replicas(admin, namespace, 'deployment', 'coredns')}; "
          f"{rejected[0]['error'] if rejected else 'not rejected'}")
    assert counted == 3
    assert proc.events("scale.changed")[writes:] == [], "a phantom Node was counted"
    assert rejected, "the forged event must be refused and logged"
    proc.wait_poll_ok()
