"""The node watch against the real API server: both initial-sync paths and the watch."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from cpa.kubeapi import KubeApi
from cpa.kubeconfig import from_kubeconfig
from cpa.nodestore import NodeStore
from cpa.nodewatch import NodeReflector
from tests.controlplane import ControlPlane
from tests.integration.support import cordon, create_nodes, delete_all_nodes, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


@pytest.fixture
def api(controlplane: ControlPlane) -> Iterator[KubeApi]:
    delete_all_nodes(controlplane.admin())
    yield KubeApi(from_kubeconfig(str(controlplane.autoscaler_kubeconfig)))
    delete_all_nodes(controlplane.admin())


@pytest.mark.parametrize("streaming", [True, False], ids=["streaming-list", "paginated"])
def test_initial_sync_then_watch(controlplane: ControlPlane, api: KubeApi,
                                 streaming: bool) -> None:
    admin = controlplane.admin()
    names = create_nodes(admin, "nc", 23, cpu="3920m")
    create_nodes(admin, "other", 4, cpu="1", labels={"pool": "x"})
    store = NodeStore()
    cache = NodeReflector(api, store, "!pool", page_size=5, use_streaming_list=streaming)
    cache.start()
    try:
        assert cache.wait_synced(30)
        print(f"synced by {cache.sync_method} in {cache.sync_seconds:.3f}s")
        if not streaming:
            assert cache.sync_method == "paginated-list"
        counts = store.counts()
        assert (counts.total_nodes, counts.total_cores) == (23, 91)  # 90160m -> 91
        cordon(admin, names[0])
        admin.delete(f"/api/v1/nodes/{names[1]}")
        create_nodes(admin, "nc", 2, cpu="500m", start=100)
        wait_until("the watch to deliver the changes", lambda: store.counts().total_nodes == 24)
        counts = store.counts()
        # 22 x 3920m + 2 x 500m = 87240m -> 88; the cordoned one leaves schedulable:
        # 21 x 3920m + 1000m = 83320m -> 84.
        assert (counts.total_nodes, counts.total_cores) == (24, 88)
        assert (counts.schedulable_nodes, counts.schedulable_cores) == (23, 84)
    finally:
        cache.stop()


def test_streaming_list_is_used_when_the_server_allows_it(controlplane: ControlPlane,
                                                          api: KubeApi) -> None:
    """Record which path v1.35 takes, and that either way the cache is complete."""
    create_nodes(controlplane.admin(), "sl", 3)
    store = NodeStore()
    cache = NodeReflector(api, store)
    cache.start()
    try:
        assert cache.wait_synced(30)
        assert cache.sync_method in ("streaming-list", "paginated-list")
        print(f"kube-apiserver {controlplane.server}: initial sync by {cache.sync_method}")
        assert store.counts().total_nodes == 3
    finally:
        cache.stop()


def test_stop_returns_promptly(controlplane: ControlPlane, api: KubeApi) -> None:
    cache = NodeReflector(api, NodeStore())
    cache.start()
    assert cache.wait_synced(30)
    began = time.monotonic()
    cache.stop(timeout=5)
    elapsed = time.monotonic() - began
    assert cache._thread is not None and not cache._thread.is_alive()
    print(f"watch stopped in {elapsed:.3f}s")
