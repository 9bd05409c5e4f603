"""The node cache's decoding and running totals, fed with recorded watch streams.

The real list/watch against a real API server is covered by the integration tests; here
the stream is a fake response object so every event kind and edge is exercised quickly.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import pytest

from cpa.kubeapi import ApiError
from cpa.nodecache import NodeCache, NodeRecord, _Relist


def node(name: str, cpu: str | None = "4", ready: bool | None = True,
         unschedulable: bool | None = None, rv: str = "1", **extra: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {"kind": "Node", "metadata": {"name": name, "resourceVersion": rv,
                                                        "labels": {"a": "b"}},
                           "spec": {}, "status": {"allocatable": {}, "conditions": []}}
    if cpu is not None:
        obj["status"]["allocatable"]["cpu"] = cpu
    obj["status"]["allocatable"]["memory"] = "16Gi"
    if ready is not None:
        obj["status"]["conditions"] = [
            {"type": "MemoryPressure", "status": "False"},
            {"type": "Ready", "status": "True" if ready else "False"}]
    if unschedulable is not None:
        obj["spec"]["unschedulable"] = unschedulable
    obj.update(extra)
    return obj


def event(kind: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": kind, "object": obj}).encode() + b"\n"


def bookmark(rv: str, initial_end: bool = False) -> bytes:
    meta: dict[str, Any] = {"resourceVersion": rv}
    if initial_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    return event("BOOKMARK", {"kind": "Node", "metadata": meta})


class FakeResponse:
    """Enough of urllib3's response for ``lines()``: chunks split at awkward places."""

    def __init__(self, payload: bytes, chunk: int = 7) -> None:
        self.payload = payload
        self.chunk = chunk
        self.released = False

    def stream(self, amt: int, decode_content: bool = True) -> Iterator[bytes]:
        for i in range(0, len(self.payload), self.chunk):
            yield self.payload[i:i + self.chunk]

    def release_conn(self) -> None:
        self.released = True


class FakeApi:
    def __init__(self, pages: list[dict[str, Any]] | None = None) -> None:
        self.pages = pages or []
        self.queries: list[dict[str, str]] = []

    def get_raw(self, path: str, query: dict[str, str]) -> bytes:
        self.queries.append(dict(query))
        return json.dumps(self.pages[len(self.queries) - 1]).encode()


def cache(api: Any = None, selector: str = "") -> NodeCache:
    return NodeCache(api or FakeApi(), selector)


def test_totals_follow_add_modify_delete() -> None:
    c = cache()
    stream = b"".join([
        event("ADDED", node("a", "3920m")),
        event("ADDED", node("b", "3920m")),
        event("ADDED", node("c", "3920m", ready=False)),
        event("ADDED", node("d", "2", unschedulable=True)),
    ])
    resp = FakeResponse(stream)
    assert c._consume(resp, None) == (4, True)
    assert resp.released
    counts = c.counts()
    # 3 x 3920m + 2000m = 13760m -> 14 cores; schedulable: a, b = 7840m -> 8
    assert (counts.total_nodes, counts.total_cores) == (4, 14)
    assert (counts.schedulable_nodes, counts.schedulable_cores) == (2, 8)

    c._consume(FakeResponse(event("MODIFIED", node("c", "3920m", rv="2"))
                            + event("DELETED", node("d", "2", rv="3"))), None)
    counts = c.counts()
    assert (counts.total_nodes, counts.total_cores) == (3, 12)  # 11760m rounds up once
    assert (counts.schedulable_nodes, counts.schedulable_cores) == (3, 12)
    assert c._rv == "3"


def test_record_fields() -> None:
    c = cache()
    c._consume(FakeResponse(b"".join([
        event("ADDED", node("nocpu", None)),
        event("ADDED", node("noconds", "1", ready=None)),
        event("ADDED", node("tiny", "1n")),
        event("ADDED", node("bad", "lots")),
    ])), None)
    recs = c._records
    assert recs["nocpu"] == NodeRecord(False, True, 0)
    assert recs["noconds"] == NodeRecord(False, False, 1000)
    assert recs["tiny"].millicores == Fraction(1, 1_000_000)
    assert recs["bad"].millicores == 0  # an unparsable quantity counts 0 (and is logged)
    assert c.counts().total_cores == 2  # 1000m + 1n rounds up to 2


def test_records_keep_no_strings_but_the_name() -> None:
    c = cache()
    c._consume(FakeResponse(event("ADDED", node("a", "7910m"))), None)
    rec = c._records["a"]
    assert isinstance(rec, NodeRecord) and type(rec.millicores) is int


def test_bookmark_moves_resource_version_only() -> None:
    c = cache()
    c._consume(FakeResponse(event("ADDED", node("a")) + bookmark("99")), None)
    assert c._rv == "99"
    assert c.counts().total_nodes == 1


def test_error_410_asks_for_relist() -> None:
    c = cache()
    gone = event("ERROR", {"kind": "Status", "code": 410, "reason": "Expired",
                           "message": "too old resource version"})
    with pytest.raises(_Relist):
        c._consume(FakeResponse(gone), None)


def test_other_error_event_raises_api_error() -> None:
    c = cache()
    with pytest.raises(ApiError) as info:
        c._consume(FakeResponse(event("ERROR", {"code": 500, "message": "boom"})), None)
    assert info.value.status == 500


def test_streaming_list_sweeps_at_initial_events_end() -> None:
    c = cache()
    c._consume(FakeResponse(event("ADDED", node("old"))), None)
    seen: set[str] = set()
    count, complete = c._consume(FakeResponse(
        event("ADDED", node("a")) + event("ADDED", node("b")) + bookmark("7", True)
        + event("ADDED", node("c"))), seen)
    assert complete and c.synced and c.sync_method == "streaming-list"
    assert sorted(c._records) == ["a", "b", "c"]  # "old" vanished from the relist
    assert count == 4


def test_streaming_list_incomplete_is_reported() -> None:
    c = cache()
    _, complete = c._consume(FakeResponse(event("ADDED", node("a"))), set())
    assert not complete and not c.synced


def test_paginated_list_follows_continue_and_sweeps() -> None:
    api = FakeApi([
        {"metadata": {"resourceVersion": "5", "continue": "tok"},
         "items": [node("a", "1"), node("b", "2")]},
        {"metadata": {"resourceVersion": "5"}, "items": [node("c", "500m")]},
    ])
    c = cache(api, selector="role=worker")
    c._records["gone"] = NodeRecord(False, True, 1000)
    c._total_nodes, c._total_milli, c._sched_nodes, c._sched_milli = 1, 1000, 1, 1000
    c._list_pages()
    assert api.queries[0] == {"limit": "250", "labelSelector": "role=worker"}
    assert api.queries[1]["continue"] == "tok"
    assert "resourceVersion" not in api.queries[0]  # rv=0 would ignore limit
    assert sorted(c._records) == ["a", "b", "c"]
    counts = c.counts()
    assert (counts.total_nodes, counts.total_cores) == (3, 4)  # 3500m -> 4
    assert c._rv == "5"


def test_event_lines_split_across_chunks() -> None:
    c = cache()
    payload = b"".join(event("ADDED", node(f"n{i}", "250m")) for i in range(50))
    c._consume(FakeResponse(payload, chunk=13), None)
    counts = c.counts()
    assert counts.total_nodes == 50 and counts.total_cores == 13  # 12.5 -> 13


class StreamApi(FakeApi):
    """Answers the streaming-list request with a canned stream, or an error status."""

    def __init__(self, payload: bytes = b"", status: int = 200) -> None:
        super().__init__([{"metadata": {"resourceVersion": "9"}, "items": [node("p")]}])
        self.payload = payload
        self.status = status
        self.stream_queries: list[dict[str, str]] = []

    def stream(self, path: str, query: dict[str, str], read_timeout: float) -> FakeResponse:
        self.stream_queries.append(dict(query))
        if self.status != 200:
            raise ApiError(self.status, "Invalid", "sendInitialEvents is forbidden")
        return FakeResponse(self.payload)


def test_streaming_list_request_shape() -> None:
    api = StreamApi(event("ADDED", node("a")) + bookmark("3", True))
    c = cache(api, selector="x=y")
    assert c._stream_initial() is True
    q = api.stream_queries[0]
    assert q["sendInitialEvents"] == "true" and q["resourceVersionMatch"] == "NotOlderThan"
    assert q["allowWatchBookmarks"] == "true" and q["labelSelector"] == "x=y"
    assert "resourceVersion" not in q


@pytest.mark.parametrize("status", [400, 422])
def test_unsupported_streaming_list_falls_back_to_pages(status: int) -> None:
    api = StreamApi(status=status)
    c = cache(api)
    c._sync()
    assert c.sync_method == "paginated-list" and c._streaming is False
    assert sorted(c._records) == ["p"]


def test_stream_without_final_bookmark_falls_back_next_time() -> None:
    api = StreamApi(event("ADDED", node("a")))  # a server that ignores sendInitialEvents
    c = cache(api)
    with pytest.raises(ApiError, match="paginated"):
        c._sync()
    assert c._streaming is False
    c._sync()
    assert c.sync_method == "paginated-list" and sorted(c._records) == ["p"]


def test_empty_watches_back_off_instead_of_spinning(monkeypatch: pytest.MonkeyPatch) -> None:
    c = cache()
    c._synced.set()
    watches: list[float] = []
    waits: list[float] = []
    monkeypatch.setattr(c, "_sync", lambda: None)

    def empty_watch() -> int:
        watches.append(0)
        return 0

    def fake_wait(timeout: float | None = None) -> bool:
        waits.append(timeout or 0)
        return len(waits) >= 4

    monkeypatch.setattr(c, "_watch", empty_watch)
    monkeypatch.setattr(c._stop, "wait", fake_wait)
    c._run()
    assert len(watches) == 4
    assert waits[1] > waits[0] * 1.3  # exponential, with jitter


def test_identical_records_are_shared() -> None:
    c = cache()
    c._consume(FakeResponse(b"".join(event("ADDED", node(f"n{i}", "7910m"))
                                     for i in range(5))), None)
    assert len({id(r) for r in c._records.values()}) == 1


def test_watch_answered_410_asks_for_relist() -> None:
    class GoneApi(FakeApi):
        def stream(self, path: str, query: dict[str, str], read_timeout: float) -> Any:
            raise ApiError(410, "Expired", "too old resource version: 1 (5)")

    c = cache(GoneApi())
    c._rv = "1"
    with pytest.raises(_Relist):
        c._watch()
