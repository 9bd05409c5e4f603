"""The node reflector's loop, against a scripted fake API: list, watch, relist, backoff and
dead-connection handling, all through the public loop (``run``) with an injected clock and
random source. The real list/watch against a real API server, and a real frozen connection
through a TCP proxy, are in tests/integration.
"""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from cpa.kube.api import ApiError, StreamResponse
from cpa.kube.wire import ACCEPT_PROTOBUF, JSON, PROTOBUF, frames
from cpa.nodes import proto as nodeproto
from cpa.nodes.listing import READ_IDLE_SECONDS, one_page_query
from cpa.nodes.store import NodeStore
from cpa.nodes.watch import (
    BACKOFF_MAX,
    WATCH_SECONDS,
    NodeReflector,
    WatchStatus,
)
from tests.fakes import FakeResponse, ScriptedApi
from tests.unit.nodes.test_proto import allocatable, condition, envelope, fixture, ld, node
from tests.unit.nodes.test_store import node_json


def event(kind: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": kind, "object": obj}).encode() + b"\n"


def bookmark(rv: str, initial_end: bool = False) -> bytes:
    meta: dict[str, Any] = {"resourceVersion": rv}
    if initial_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    return event("BOOKMARK", {"kind": "Node", "metadata": meta})


class ReadTimeoutError(Exception):
    """Stands for urllib3's ReadTimeoutError: a read that got no bytes in time."""

    def __str__(self) -> str:
        return "Read timed out. (read timeout=60.0)"


class Harness:
    """A reflector on a ScriptedApi with a fake clock that its backoff pauses advance."""

    def __init__(self, api: ScriptedApi, *, streaming: bool = True, selector: str = "",
                 page_size: int = 250, protobuf: bool = True, first_page: int = 0) -> None:
        self.now = 0.0
        self.waits: list[float] = []
        self.store = NodeStore()
        self.api = api
        self.statuses: list[WatchStatus] = []  # the reflector's status as each stream opens
        self.reflector = NodeReflector(api, self.store, selector, page_size=page_size,
                                       use_streaming_list=streaming, protobuf=protobuf,
                                       clock=lambda: self.now, rng=random.Random(7),
                                       wait=self._pause, first_page=first_page)
        # The script is over: end the loop, so run() returns.
        api.when_done = lambda: self.reflector.stop(timeout=0)
        api.on_stream = lambda: self.statuses.append(self.reflector.status())

    def _pause(self, stop: threading.Event, seconds: float) -> bool:
        self.waits.append(seconds)
        self.now += seconds
        return stop.is_set()

    def run(self) -> NodeReflector:
        self.reflector.run()
        return self.reflector

    def names(self) -> list[str]:
        return sorted(self.store.names())


def streaming_list(*nodes: dict[str, Any], rv: str = "10") -> FakeResponse:
    return FakeResponse(b"".join(event("ADDED", n) for n in nodes) + bookmark(rv, True)
                        + event("ADDED", node_json("after-the-end")))


# --- the initial sync --------------------------------------------------------------------


def test_streaming_list_then_short_watches_from_its_bookmark() -> None:
    api = ScriptedApi([streaming_list(node_json("a", "3920m"), node_json("b")),
                       FakeResponse(event("MODIFIED", node_json("a", "1", rv="11")))])
    h = Harness(api, selector="x=y")
    h.run()
    first, read_timeout = api.stream_calls[0]
    assert first["sendInitialEvents"] == "true"
    assert first["resourceVersionMatch"] == "NotOlderThan"
    assert first["allowWatchBookmarks"] == "true" and first["labelSelector"] == "x=y"
    assert "resourceVersion" not in first
    assert read_timeout == READ_IDLE_SECONDS
    # The stream is closed at the initial-events-end bookmark (its connection cannot go
    # back to the pool), so the ADDED after it was never applied.
    assert api.responses[0].closed
    assert h.reflector.sync_method == "streaming-list"
    watch, read_timeout = api.stream_calls[1]
    assert watch["resourceVersion"] == "10" and watch["allowWatchBookmarks"] == "true"
    assert WATCH_SECONDS[0] <= int(watch["timeoutSeconds"]) <= WATCH_SECONDS[1]
    assert read_timeout == READ_IDLE_SECONDS > WATCH_SECONDS[1]
    assert api.responses[1].released and not api.responses[1].closed
    assert h.names() == ["a", "b"]
    assert h.store.counts().total_cores == 5  # 1 + 4
    assert h.reflector.resource_version == "11"


def test_streaming_list_retains_only_what_it_listed() -> None:
    api = ScriptedApi([streaming_list(node_json("a")), ApiError(410, "Expired", "too old"),
                       streaming_list(node_json("b"))])
    h = Harness(api)
    h.run()
    assert h.names() == ["b"]
    assert h.reflector.lists == 2, "the 410 made it list again"


@pytest.mark.parametrize("status", [400, 422])
def test_unsupported_streaming_list_falls_back_to_pages(status: int) -> None:
    api = ScriptedApi([ApiError(status, "Invalid", "sendInitialEvents is forbidden")],
                      [{"metadata": {"resourceVersion": "9"}, "items": [node_json("p")]}])
    h = Harness(api)
    h.run()
    assert h.reflector.sync_method == "paginated-list" and h.names() == ["p"]
    assert api.stream_calls[1][0]["resourceVersion"] == "9"


def test_stream_without_final_bookmark_falls_back_next_time() -> None:
    """A server that ignores sendInitialEvents just watches: no final bookmark."""
    api = ScriptedApi([FakeResponse(event("ADDED", node_json("a")))],
                      [{"metadata": {"resourceVersion": "9"}, "items": [node_json("p")]}])
    h = Harness(api)
    h.run()
    assert h.reflector.sync_method == "paginated-list" and h.names() == ["p"]
    assert h.waits, "the failed stream was retried after a backoff"


def test_paginated_list_follows_continue_and_restarts_on_an_expired_token() -> None:
    api = ScriptedApi([], [
        {"metadata": {"resourceVersion": "5", "continue": "tok"},
         "items": [node_json("a", "1"), node_json("b", "2")]},
        ApiError(410, "Expired", "the continue token expired"),
        {"metadata": {"resourceVersion": "6", "continue": "tok2"}, "items": [node_json("a")]},
        {"metadata": {"resourceVersion": "6"}, "items": [node_json("c", "500m")]},
    ])
    h = Harness(api, streaming=False, selector="role=worker")
    h.reflector.list_once()
    assert api.page_calls[0] == {"limit": "250", "labelSelector": "role=worker"}
    assert api.page_calls[1]["continue"] == "tok"
    assert "continue" not in api.page_calls[2]  # started over
    assert api.page_calls[3]["continue"] == "tok2"
    assert h.names() == ["a", "c"]
    assert h.reflector.resource_version == "6"


# --- the watch ---------------------------------------------------------------------------


def test_watch_events_move_the_totals_and_the_resource_version() -> None:
    stream = b"".join([event("ADDED", node_json("c", "2", rv="11")),
                       event("MODIFIED", node_json("a", "2", unschedulable=True, rv="12")),
                       event("DELETED", node_json("b", rv="13")), bookmark("20")])
    api = ScriptedApi([streaming_list(node_json("a"), node_json("b")),
                       FakeResponse(stream, chunk=13)])
    h = Harness(api)
    h.run()
    counts = h.store.counts()
    assert (counts.total_nodes, counts.total_cores) == (2, 4)
    assert (counts.schedulable_nodes, counts.schedulable_cores) == (1, 2)
    assert h.reflector.resource_version == "20"


def test_410_relists() -> None:
    gone = event("ERROR", {"kind": "Status", "code": 410, "reason": "Expired",
                           "message": "too old resource version"})
    api = ScriptedApi([streaming_list(node_json("a")), FakeResponse(gone),
                       streaming_list(node_json("b"), rv="30")])
    h = Harness(api)
    h.run()
    assert h.names() == ["b"]
    assert "sendInitialEvents" in api.stream_calls[2][0]
    assert h.waits == [], "a relist is not a failure: no backoff"


def test_other_error_events_back_off_and_retry_from_the_same_version() -> None:
    api = ScriptedApi([streaming_list(node_json("a")),
                       FakeResponse(event("ERROR", {"code": 500, "message": "boom"})),
                       FakeResponse(b"")])
    h = Harness(api)
    h.run()
    assert len(h.waits) >= 1
    assert api.stream_calls[2][0]["resourceVersion"] == "10"
    assert h.reflector.status().restarts == 1


def test_empty_watches_back_off_exponentially_up_to_the_cap() -> None:
    api = ScriptedApi([streaming_list(node_json("a"))] + [FakeResponse(b"")] * 12)
    h = Harness(api)
    h.run()
    assert len(h.waits) >= 10
    assert h.waits[1] > h.waits[0] * 1.3  # exponential, with jitter
    assert max(h.waits) <= BACKOFF_MAX * 1.2
    assert h.waits[-1] >= BACKOFF_MAX * 0.8


def test_a_silent_connection_is_dead_replaced_and_reported() -> None:
    """A half-open watch (open, no bytes) ends in a read timeout: status says so with the
    reason and the time of the last bytes; the next watch resumes from the same version."""
    api = ScriptedApi([streaming_list(node_json("a")),
                       FakeResponse(b"", then=ReadTimeoutError()),
                       ApiError(0, "ConnectionError", "connect timed out")])
    h = Harness(api)
    h.now = 100.0
    h.run()
    dead = h.statuses[2]  # as the replacement watch opens, after the backoff
    assert not dead.up and dead.synced
    assert "carried no bytes for 60s" in (dead.error or "")
    assert dead.last_contact == 100.0
    assert dead.stale_seconds(130.0) == 30.0
    assert dead.restarts == 1
    assert api.responses[1].closed  # a dead connection never goes back to the pool open
    assert api.stream_calls[2][0]["resourceVersion"] == "10"
    assert h.statuses[3].restarts == 2 and "connect timed out" in (h.statuses[3].error
                                                                      or "")


def test_recovery_clears_the_error() -> None:
    api = ScriptedApi([streaming_list(node_json("a")),
                       ApiError(0, "ConnectionError", "refused"),
                       FakeResponse(bookmark("12"))])
    h = Harness(api)
    h.run()
    refused, recovered = h.statuses[2], h.statuses[3]
    assert not refused.up and "refused" in (refused.error or "")
    assert recovered.up and recovered.error is None and recovered.restarts == 1
    assert recovered.stale_seconds(1e9) == 0.0


def test_stop_while_a_watch_is_being_opened_does_not_wait_for_the_watch() -> None:
    """stop() can come after the request went out but before the response is published
    for it to shut down; the loop must not then read a 40-50 s watch to its end."""

    class StopDuringConnect(ScriptedApi):
        def stream(self, path: str, query: Mapping[str, str], read_timeout: float,
                   accept: str = JSON, deadline: float | None = None) -> StreamResponse:
            response = super().stream(path, query, read_timeout, accept, deadline)
            if "sendInitialEvents" not in query:
                h.reflector.stop(timeout=0)
            return response

    never_read = FakeResponse(event("ADDED", node_json("late")))
    api = StopDuringConnect([streaming_list(node_json("a")), never_read])
    h = Harness(api)
    h.run()
    assert h.names() == ["a"]
    assert never_read.closed


def test_a_relist_asked_for_while_a_watch_is_being_opened_lists_at_once() -> None:
    """relist() (a new zones label at the first poll) can come after the watch's request went
    out but before its response is published for it to shut down. Before, the loop then read
    that watch until it ended by itself (40-50 s): the first poll waited 30 s for the list
    and failed. Now it lists at once, without a backoff."""

    class RelistDuringConnect(ScriptedApi):
        opened = 0

        def stream(self, path: str, query: Mapping[str, str], read_timeout: float,
                   accept: str = JSON, deadline: float | None = None) -> StreamResponse:
            response = super().stream(path, query, read_timeout, accept, deadline)
            if "sendInitialEvents" not in query and not self.opened:
                self.opened += 1
                h.reflector.relist()
            return response

    class Watched(FakeResponse):
        """Stands for a watch that would carry nothing for 40-50 s: reading it at all is
        the failure."""

        read = False

        def stream(self, amt: int, decode_content: bool = True) -> Iterator[bytes]:
            self.read = True
            return super().stream(amt, decode_content)

    quiet = Watched(b"")
    api = RelistDuringConnect([streaming_list(node_json("a")), quiet,
                               streaming_list(node_json("a"), node_json("b"), rv="20")])
    h = Harness(api)
    h.run()
    assert h.names() == ["a", "b"], "listed again"
    assert not quiet.read, "the watch opened meanwhile was read instead of listing at once"
    assert h.waits == [], "no backoff before the relist"


# --- the first list as one page (the daemon's) ----------------------------------------------


def pb_page(names: list[str], rv: str, cont: str = "", cpu: str = "2", chunk: int = 50,
            head_last: bool = False) -> FakeResponse:
    """A protobuf NodeList answer, ListMeta first as Go writes it (or last)."""
    items = b"".join(ld(2, node(ld(1, n) + ld(6, rv), b"",
                                condition("Ready", "True") + allocatable("cpu", cpu)))
                     for n in names)
    head = ld(1, ld(2, rv) + ld(3, cont))
    return FakeResponse(envelope(items + head if head_last else head + items, "NodeList"),
                        chunk=chunk, content_type=PROTOBUF)


def test_a_cluster_that_fits_one_page_is_listed_by_it_then_watched_from_its_version() -> None:
    api = ScriptedApi([pb_page(["a", "b"], "5"),
                       FakeResponse(event("MODIFIED", node_json("a", "1", rv="11"))),
                       ApiError(410, "Expired", "too old"),
                       pb_page(["c"], "20")])
    h = Harness(api, selector="x=y", first_page=100)
    h.run()
    first, read_timeout = api.stream_calls[0]
    assert first == one_page_query("x=y", 100) == {"limit": "100", "labelSelector": "x=y"}
    assert read_timeout == READ_IDLE_SECONDS and api.accepts[0] == ACCEPT_PROTOBUF
    assert h.reflector.sync_method == "one-page-list" and h.reflector.encoding == "protobuf"
    assert api.responses[0].released and not api.responses[0].closed  # read to its end
    watch = api.stream_calls[1][0]
    assert watch["resourceVersion"] == "5" and watch["watch"] == "1"
    # A 410 relists the same way: the cluster still fits.
    assert api.stream_calls[2][0].get("resourceVersion") == "11"
    assert api.stream_calls[3][0] == first
    assert h.names() == ["c"] and h.reflector.resource_version == "20"
    assert h.reflector.lists == 2


def test_a_page_whose_head_comes_last_is_read_all_the_same() -> None:
    api = ScriptedApi([pb_page(["a", "b", "c"], "7", chunk=3, head_last=True)])
    h = Harness(api, first_page=100)
    h.run()
    assert h.reflector.sync_method == "one-page-list" and h.names() == ["a", "b", "c"]
    assert h.store.counts().total_cores == 6 and h.reflector.resource_version == "7"


def test_a_larger_cluster_drops_the_page_at_its_head_and_streams_from_then_on() -> None:
    page = pb_page(["a", "b"], "5", cont="tok")
    api = ScriptedApi([page,
                       streaming_list(node_json("s1"), node_json("s2"), node_json("s3")),
                       ApiError(410, "Expired", "too old"),
                       streaming_list(node_json("s1"), rv="30")])
    h = Harness(api, first_page=2)
    h.run()
    assert api.stream_calls[0][0] == {"limit": "2"}
    assert page.closed  # dropped unread: closed, its connection is not reused
    assert api.stream_calls[1][0]["sendInitialEvents"] == "true"
    assert h.reflector.sync_method == "streaming-list"
    # None of the page's Nodes was applied (its head came first), and a relist streams.
    assert api.stream_calls[3][0]["sendInitialEvents"] == "true"
    assert h.names() == ["s1"] and h.reflector.lists == 2


def test_a_larger_cluster_without_the_streaming_list_goes_on_with_pages() -> None:
    api = ScriptedApi([pb_page(["a"], "5", cont="tok")],
                      [{"metadata": {"resourceVersion": "6"},
                        "items": [node_json("p1"), node_json("p2")]}])
    h = Harness(api, streaming=False, first_page=1)
    h.run()
    assert h.reflector.sync_method == "paginated-list" and h.names() == ["p1", "p2"]
    assert api.page_calls[0] == {"limit": "250"}


def test_a_json_answer_to_the_page_is_dropped_and_the_page_never_asked_for_again() -> None:
    body = json.dumps({"kind": "NodeList", "metadata": {"resourceVersion": "5"},
                       "items": [node_json("a")]}).encode()
    page = FakeResponse(body, content_type=JSON)
    api = ScriptedApi([page, streaming_list(node_json("a"), node_json("b")),
                       ApiError(410, "Expired", "too old"), streaming_list(node_json("a"))])
    h = Harness(api, first_page=100)
    h.run()
    assert page.closed and h.reflector.sync_method == "streaming-list"
    assert "sendInitialEvents" in api.stream_calls[3][0]
    assert h.names() == ["a"]


def test_json_only_never_asks_for_the_page() -> None:
    api = ScriptedApi([streaming_list(node_json("a"))])
    h = Harness(api, protobuf=False, first_page=100)
    h.run()
    assert "sendInitialEvents" in api.stream_calls[0][0]


@pytest.mark.parametrize("bad", [pb_page(["a", ""], "5"),  # a Node without a name
                                 FakeResponse(b"k8s\x00\x12\x05\x1a\x83", chunk=2,
                                              content_type=PROTOBUF)])
def test_a_page_that_does_not_decode_is_never_applied_and_listed_again(
        bad: FakeResponse) -> None:
    api = ScriptedApi([bad, pb_page(["c"], "9")])
    h = Harness(api, first_page=100)
    h.run()
    assert bad.closed
    assert h.waits and h.statuses[1].error is not None
    assert "does not decode" in h.statuses[1].error or "without metadata.name" in \
        h.statuses[1].error
    assert api.stream_calls[1][0] == {"limit": "100"}  # the page again: the cluster fits
    assert h.reflector.sync_method == "one-page-list" and h.names() == ["c"]


# --- encodings -----------------------------------------------------------------------------

PROTOBUF_WATCH = "application/vnd.kubernetes.protobuf;stream=watch"


def test_protobuf_is_asked_for_and_decoded_as_the_server_answers() -> None:
    """The recorded streaming list and watch of a real kube-apiserver, in protobuf."""
    api = ScriptedApi([FakeResponse(fixture("streaming-list.pb"), chunk=333,
                                    content_type=PROTOBUF_WATCH),
                       FakeResponse(fixture("watch.pb"), chunk=50, content_type=PROTOBUF_WATCH)])
    h = Harness(api)
    h.run()
    assert api.accepts[:2] == [ACCEPT_PROTOBUF] * 2
    assert h.reflector.sync_method == "streaming-list" and h.reflector.encoding == "protobuf"
    # listed: pb-ready, pb-cordoned, pb-notready, pb-nocpu, the GKE node; then pb-ready is
    # cordoned, pb-notready becomes Ready, pb-nocpu is deleted and pb-new (7910m) added.
    assert "pb-nocpu" not in h.names() and "pb-new" in h.names()
    counts = h.store.counts()
    assert counts.total_nodes == 5
    gke_milli = next(r.millicores for n in h.names() if n.startswith("gke-")
                     for r in [h.store.get(n)] if r is not None)
    assert counts.total_cores == -(-(3920 + 2000 + 500 + 7910 + gke_milli) // 1000)
    assert counts.schedulable_nodes == 2  # pb-notready (now Ready) and pb-new
    assert h.reflector.resource_version == fixture_bookmark_rv("watch.pb")


def fixture_bookmark_rv(name: str) -> str:
    last = [nodeproto.decode_event(f) for f in frames(FakeResponse(fixture(name), 4096))][-1]
    assert last.type == "BOOKMARK"
    return last.resource_version


def test_json_answers_to_a_protobuf_accept_are_decoded_as_json() -> None:
    api = ScriptedApi([streaming_list(node_json("a", "3920m")),
                       FakeResponse(event("MODIFIED", node_json("a", "1", rv="11")))])
    h = Harness(api)
    h.run()
    assert api.accepts[0] == ACCEPT_PROTOBUF and h.reflector.encoding == "json"
    assert h.store.counts().total_cores == 1


def test_json_only_when_asked() -> None:
    api = ScriptedApi([streaming_list(node_json("a"))])
    h = Harness(api, protobuf=False)
    h.run()
    assert set(api.accepts) == {"application/json"}


def test_paginated_list_in_protobuf() -> None:
    def page(names: list[str], rv: str, cont: str = "") -> bytes:
        items = b"".join(ld(2, node(ld(1, n) + ld(6, rv), b"", condition("Ready", "True")))
                         for n in names)
        return envelope(ld(1, ld(2, rv) + ld(3, cont)) + items, "NodeList")

    api = ScriptedApi([], [page(["a", "b"], "5", "tok"), page(["c"], "6")])
    h = Harness(api, streaming=False)
    h.reflector.list_once()
    assert h.names() == ["a", "b", "c"] and h.reflector.resource_version == "6"
    assert api.page_calls[1]["continue"] == "tok" and api.accepts[0] == ACCEPT_PROTOBUF
    assert h.reflector.encoding == "protobuf" and h.store.counts().schedulable_nodes == 3


# --- corrupt streams, throttling, forbidden -----------------------------------------------
def test_an_oversize_frame_is_refused_at_once_and_the_nodes_listed_again() -> None:
    api = ScriptedApi([streaming_list(node_json("a")),
                       FakeResponse(b"\xff\xff\xff\xff" + b"x" * 100,
                                    content_type="application/vnd.kubernetes.protobuf;"
                                                 "stream=watch"),
                       streaming_list(node_json("a"), node_json("b"), rv="40")])
    h = Harness(api)
    h.run()
    down = h.statuses[2]  # as the relist opens, after one backoff
    assert not down.up and "4294967295 bytes, over the 16777216-byte limit" in (
        down.error or "")
    assert "sendInitialEvents" in api.stream_calls[2][0], "a corrupt stream is relisted"
    assert len(h.waits) >= 1, "with a backoff: a stream that stays corrupt must not spin"
    assert h.names() == ["a", "b"]


@pytest.mark.parametrize("obj", [{"kind": "Node", "apiVersion": "v1"},
                                 {"kind": "Node", "metadata": {"name": ""}}])
def test_an_added_event_without_a_name_is_never_a_node(obj: dict[str, Any]) -> None:
    api = ScriptedApi([streaming_list(node_json("a")),
                       FakeResponse(event("ADDED", obj)),
                       streaming_list(node_json("a"), rv="40")])
    h = Harness(api)
    seen: list[int] = []
    record = api.on_stream

    def on_stream() -> None:
        seen.append(len(h.store))
        if record is not None:
            record()

    api.on_stream = on_stream
    h.run()
    assert seen[:3] == [0, 1, 1] and max(seen) == 1, "the nameless Node was never counted"
    assert "ADDED without metadata.name" in (h.statuses[2].error or "")
    assert "sendInitialEvents" in api.stream_calls[2][0]


def test_a_stream_being_relisted_is_not_up_until_the_list_is_whole() -> None:
    """The counts missed what the corrupt stream dropped: not current until relisted."""
    api = ScriptedApi([streaming_list(node_json("a")),
                       FakeResponse(b"\xff\xff\xff\xff"),
                       FakeResponse(event("ADDED", node_json("a")))])  # cut before its end
    h = Harness(api)
    h.run()
    assert not h.reflector.status().up


def test_retry_after_lengthens_the_backoff_up_to_the_cap() -> None:
    throttled = ApiError(429, "TooManyRequests", "slow down")
    throttled.retry_after = 7
    forever = ApiError(429, "TooManyRequests", "slow down")
    forever.retry_after = 3600
    api = ScriptedApi([streaming_list(node_json("a")), throttled, forever, FakeResponse(b"")])
    h = Harness(api)
    h.run()
    assert h.waits[0] >= 7
    assert 9 <= h.waits[1] <= 10.0 * 1.2


def test_forbidden_nodes_name_the_rbac_rule_to_add() -> None:
    forbidden = ApiError(403, "Forbidden", 'nodes is forbidden: User "x" cannot list '
                                           'resource "nodes"')
    api = ScriptedApi([forbidden, forbidden])
    h = Harness(api)
    h.run()
    error = h.statuses[1].error or ""
    assert 'resources ["nodes"], verbs ["list", "watch"]' in error


# --- a label for the zones (opt-in) -------------------------------------------------------


def zoned_json(name: str, zone: str) -> dict[str, Any]:
    obj = node_json(name)
    obj["metadata"]["labels"]["topology.kubernetes.io/zone"] = zone
    return obj


def test_a_new_label_makes_the_reflector_list_again_with_it() -> None:
    from cpa.nodes.counts import CountingPolicy

    api = ScriptedApi([streaming_list(zoned_json("a", "z1"), zoned_json("b", "z2")),
                       FakeResponse(event("MODIFIED", zoned_json("a", "z1"))),
                       streaming_list(zoned_json("a", "z1"), zoned_json("b", "z2"),
                                      zoned_json("c", "z2"), rv="20")])
    h = Harness(api, protobuf=False)
    policy = CountingPolicy(zone_key="topology.kubernetes.io/zone")
    opened = 0

    def on_stream() -> None:
        nonlocal opened
        opened += 1
        if opened == 2:  # a poll reads a ConfigMap with zones while the watch opens
            assert h.store.set_policy(policy)
            assert h.store.counts().total_zones is None
    api.on_stream = on_stream
    h.run()
    assert len(api.stream_calls) == 4  # list, watch, the relist, then the script is over
    assert api.stream_calls[2][0]["sendInitialEvents"] == "true"
    assert h.reflector.lists == 2
    record = h.store.get("c")
    assert record is not None and record.zone == "z2"
    h.store.set_policy(policy)
    c = h.store.counts()
    assert (c.total_nodes, c.total_zones) == (3, 2)


def test_relist_closes_an_open_watch_without_counting_a_failure() -> None:
    api = ScriptedApi([streaming_list(node_json("a")),
                       FakeResponse(event("MODIFIED", node_json("a")),
                                    then=OSError("the stream was shut down")),
                       streaming_list(node_json("a"), node_json("b"), rv="30")])
    h = Harness(api)
    h.store.on_label_change = h.reflector.relist
    streams = 0

    def on_stream() -> None:
        nonlocal streams
        streams += 1
        if streams == 2:
            h.reflector.relist()  # as the store asks while the watch is open
    api.on_stream = on_stream
    h.run()
    assert h.names() == ["a", "b"]
    assert h.reflector.status().restarts == 0 and h.waits == []
