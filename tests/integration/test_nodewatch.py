"""The node watch against the real API server: both initial-sync paths and the watch, in
protobuf (what the daemon asks for) and JSON (the fallback); bookmarks; 410 after an API
server restart."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from cpa.kube import wire
from cpa.kube.api import ApiError
from cpa.kube.client import KubeApi
from cpa.kube.clientconfig import from_kubeconfig
from cpa.nodes import proto as nodeproto
from cpa.nodes.listing import NODES_PATH
from cpa.nodes.store import NodeStore
from cpa.nodes.watch import NodeReflector
from tests.controlplane import ControlPlane
from tests.integration.support import (
    cordon,
    create_nodes,
    delete_all_nodes,
    set_node_ready,
    wait_until,
)

pytestmark = [pytest.mark.integration, pytest.mark.api_paths, pytest.mark.timeout(180)]


@pytest.fixture
def api(controlplane: ControlPlane) -> Iterator[KubeApi]:
    delete_all_nodes(controlplane.admin())
    yield KubeApi(from_kubeconfig(str(controlplane.autoscaler_kubeconfig)))
    delete_all_nodes(controlplane.admin())


@pytest.mark.parametrize("protobuf", [True, False], ids=["protobuf", "json"])
@pytest.mark.parametrize(("streaming", "first_page"), [
    (True, 0), (False, 0),
    (True, 100),  # the daemon's: 23 Nodes fit one page of 100
    (True, 10), (False, 10),  # they do not fit one of 10: the page is dropped at its head
], ids=["streaming-list", "paginated", "one-page", "page-then-streaming",
        "page-then-paginated"])
def test_initial_sync_then_watch(controlplane: ControlPlane, api: KubeApi,
                                 streaming: bool, protobuf: bool, first_page: int) -> None:
    admin = controlplane.admin()
    names = create_nodes(admin, "nc", 23, cpu="3920m")
    create_nodes(admin, "other", 4, cpu="1", labels={"pool": "x"})
    store = NodeStore()
    cache = NodeReflector(api, store, "!pool", page_size=5, use_streaming_list=streaming,
                          protobuf=protobuf, first_page=first_page)
    cache.start()
    try:
        assert cache.wait_synced(30)
        print(f"synced by {cache.sync_method} ({cache.encoding}) in {cache.sync_seconds:.3f}s")
        one_page = protobuf and first_page >= 23  # JSON never asks for the page
        assert cache.sync_method == ("one-page-list" if one_page else
                                     "streaming-list" if streaming else "paginated-list")
        assert cache.encoding == ("protobuf" if protobuf else "json")
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
        set_node_ready(admin, names[2], False)
        wait_until("the watch to deliver NotReady",
                   lambda: store.counts().schedulable_nodes == 22)
        assert cache.encoding == ("protobuf" if protobuf else "json")  # the watch's too
    finally:
        cache.stop()


def test_protobuf_watch_carries_bookmarks(controlplane: ControlPlane, api: KubeApi) -> None:
    """The server's bookmark 2 s before a watch's timeout, in protobuf frames."""
    admin = controlplane.admin()
    create_nodes(admin, "bm", 2)
    _, body = api.get_raw(NODES_PATH, {"limit": "1"}, accept=wire.ACCEPT_PROTOBUF)
    rv = nodeproto.decode_list_page(body).resource_version
    resp = api.stream(NODES_PATH, {"watch": "1", "resourceVersion": rv,
                                   "allowWatchBookmarks": "true", "timeoutSeconds": "4"},
                      read_timeout=10, accept=wire.ACCEPT_PROTOBUF)
    try:
        create_nodes(admin, "bm", 1, start=2)
        assert wire.is_protobuf(resp.headers.get("Content-Type"))
        events = [nodeproto.decode_event(f) for f in wire.frames(resp)]
    finally:
        resp.release_conn()
    assert [e.type for e in events[:2]] == ["ADDED", "BOOKMARK"]
    assert {e.type for e in events[1:]} == {"BOOKMARK"}  # one, sometimes two
    added, bookmark = events[0], events[-1]
    assert added.node is not None and added.node.name == "bm-0002"
    assert int(bookmark.resource_version) >= int(added.resource_version) > int(rv)
    assert not bookmark.initial_end


def test_protobuf_error_answers_carry_the_servers_message(api: KubeApi) -> None:
    with pytest.raises(ApiError) as err:
        api.get_raw(NODES_PATH, {"limit": "1", "continue": "not-a-token"},
                    accept=wire.ACCEPT_PROTOBUF)
    assert err.value.status == 400 and err.value.reason == "BadRequest"
    assert "invalid continue token" in err.value.message


def test_410_after_an_api_server_restart_relists(controlplane: ControlPlane,
                                                 api: KubeApi) -> None:
    """A restarted API server's watch cache starts past the watch's resourceVersion: the
    watch gets ERROR 410 (in protobuf), and the reflector lists again."""
    admin = controlplane.admin()
    create_nodes(admin, "gone", 3, cpu="2")
    store = NodeStore()
    cache = NodeReflector(api, store)
    cache.start()
    try:
        assert cache.wait_synced(30)
        for _ in range(3):  # move the resourceVersion past the watch's
            admin.post("/api/v1/namespaces/default/configmaps",
                       {"metadata": {"generateName": "bump-"}})
        controlplane.stop_apiserver()
        controlplane.start_apiserver()
        create_nodes(admin, "gone", 1, cpu="2", start=3)
        wait_until("the relist", lambda: cache.lists >= 2, timeout=60)
        wait_until("the new node", lambda: store.counts().total_nodes == 4, timeout=30)
        assert cache.encoding == "protobuf"
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
