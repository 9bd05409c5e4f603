"""The protobuf reader of objects' metadata: bytes recorded from kube-apiserver (each with a
JSON twin that the JSON reading, the reference, must agree with), the watch reading them
end to end, and malformed or hostile bytes (a clear error, never a crash)."""

from __future__ import annotations

import contextlib
import json
import random
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpa.kube import wire
from cpa.kube.wire import PROTOBUF, frames, lines
from cpa.objects.proto import Meta, MetaEvent, decode_event, decode_list_page
from cpa.objects.watch import (
    ACCEPT_LIST,
    ACCEPT_LIST_PROTOBUF,
    ACCEPT_WATCH_PROTOBUF,
    KINDS,
    ObjectWatch,
)
from tests.fakes import FakeResponse, ScriptedApi
from tests.unit.objects.fixtures import record_protobuf as recorded

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "protobuf"
WATCH = f"{PROTOBUF};stream=watch"


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def json_meta(item: dict[str, Any]) -> Meta:
    meta = item["metadata"]
    return Meta(meta["uid"], meta["resourceVersion"], "deletionTimestamp" in meta)


def pb_events(name: str, chunk: int = 65536) -> list[MetaEvent]:
    return [decode_event(f) for f in frames(FakeResponse(fixture(name), chunk))]


# --- recorded from kube-apiserver ---------------------------------------------------------


def test_recorded_content_types() -> None:
    assert (recorded.ACCEPT["pb"], recorded.ACCEPT["pb-watch"]) == (
        ACCEPT_LIST_PROTOBUF, ACCEPT_WATCH_PROTOBUF), "recorded as the watch asks"
    types = json.loads(fixture("versions.json"))["content_types"]
    assert types["pods-page.pb"] == PROTOBUF, "the server encodes metadata lists in protobuf"
    assert types["watch.pb"] == WATCH


@pytest.mark.parametrize("name", ["pods-page", "pods-last-page", "services-page"])
def test_list_pages_match_json(name: str) -> None:
    page = decode_list_page(fixture(f"{name}.pb"))
    twin = json.loads(fixture(f"{name}.json"))
    assert page.items == [json_meta(item) for item in twin["items"]]
    assert page.resource_version == twin["metadata"]["resourceVersion"]
    assert page.continue_token == twin["metadata"].get("continue", "")


def test_the_recorded_pages_hold_what_a_count_distinguishes() -> None:
    assert decode_list_page(fixture("pods-page.pb")).continue_token
    assert [m.deleting for m in decode_list_page(fixture("pods-last-page.pb")).items] == [True]


@pytest.mark.parametrize("chunk", [1, 5, 65536])
def test_watch_matches_json(chunk: int) -> None:
    twin = [json.loads(line) for line in lines(FakeResponse(fixture("watch.json"), 65536))]
    events = pb_events("watch.pb", chunk)
    assert [e.type for e in events] == [t["type"] for t in twin]
    assert [e.resource_version for e in events] == [
        t["object"]["metadata"]["resourceVersion"] for t in twin]
    assert [e.meta for e in events] == [
        None if t["type"] == "BOOKMARK" else json_meta(t["object"]) for t in twin]
    assert [e.type for e in events] == ["ADDED", "MODIFIED", "DELETED", "DELETED", "BOOKMARK"]


def test_expired_watch_is_an_error_event_with_410() -> None:
    (event,) = pb_events("gone.pb")
    assert event.type == "ERROR" and event.status is not None
    assert event.status.code == 410 and event.status.reason == "Expired"


# --- the watch reading them ------------------------------------------------------------


def counting(api: ScriptedApi) -> ObjectWatch:
    watch = ObjectWatch(api, KINDS["pods"], rng=random.Random(3), page_size=2,
                        wait=lambda stop, _: stop.is_set())
    api.when_done = lambda: watch.stop(timeout=0)
    return watch


def test_a_count_lists_and_watches_in_protobuf() -> None:
    api = ScriptedApi([FakeResponse(fixture("watch.pb"), chunk=11, content_type=WATCH)],
                      [fixture("pods-page.pb"), fixture("pods-last-page.pb")])
    watch = counting(api)
    watch.run()
    assert api.accepts[:2] == [ACCEPT_LIST_PROTOBUF] * 2
    assert api.page_calls[1]["continue"] == decode_list_page(
        fixture("pods-page.pb")).continue_token
    assert api.stream_calls[0][0]["resourceVersion"] == "202"
    # listed: p1, p2 and p3 (being deleted); watched: p4 came and went, p3 went
    assert (watch.tally.count, len(watch.tally)) == (2, 2)
    assert watch.synced


def test_a_watcher_told_of_each_object_keeps_json() -> None:
    seen: list[tuple[str, Any]] = []
    api = ScriptedApi([], [json.loads(fixture("services-page.json"))])
    watch = ObjectWatch(api, KINDS["services"], rng=random.Random(3),
                        wait=lambda stop, _: stop.is_set(),
                        seen=lambda kind, obj: seen.append((kind, obj)))
    api.when_done = lambda: watch.stop(timeout=0)
    watch.run()
    assert api.accepts[0] == ACCEPT_LIST
    assert [obj["metadata"]["name"] for _, obj in seen] == ["kubernetes", "s1"]
    assert "managedFields" in seen[1][1]["metadata"]


def test_a_frame_that_does_not_decode_lists_again() -> None:
    bad = (5).to_bytes(4, "big") + b"\x0a\x7f" + b"ADD"
    api = ScriptedApi([FakeResponse(bad, content_type=WATCH)],
                      [fixture("pods-last-page.pb"), fixture("pods-page.pb"),
                       fixture("pods-last-page.pb")])
    watch = counting(api)
    watch.run()
    assert len(api.page_calls) == 3 and watch.tally.count == 2, "listed again"


def test_a_410_error_event_in_protobuf_lists_again_without_backoff() -> None:
    waits: list[float] = []

    def pause(stop: threading.Event, seconds: float) -> bool:
        waits.append(seconds)
        return stop.is_set()

    api = ScriptedApi([FakeResponse(fixture("gone.pb"), content_type=WATCH)],
                      [fixture("pods-last-page.pb"), fixture("pods-page.pb"),
                       fixture("pods-last-page.pb")])
    watch = ObjectWatch(api, KINDS["pods"], rng=random.Random(3), wait=pause)
    api.when_done = lambda: watch.stop(timeout=0)
    watch.run()
    assert len(api.page_calls) == 3 and watch.tally.count == 2
    assert waits == [], "a relist is not a failure: no backoff"


# --- malformed and hostile bytes -------------------------------------------------------


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def ld(field: int, payload: bytes | str) -> bytes:
    data = payload.encode() if isinstance(payload, str) else payload
    return varint(field << 3 | 2) + varint(len(data)) + data


def envelope(raw: bytes, kind: str = "") -> bytes:
    return wire.MAGIC + (ld(1, ld(2, kind)) if kind else b"") + ld(2, raw)


MALFORMED = [
    b"",
    b"k8s",
    b"json" + ld(2, b""),  # wrong magic
    wire.MAGIC + varint(2 << 3 | 2) + varint(50) + b"short",  # raw runs past the end
    envelope(ld(2, varint(1 << 3 | 3))),  # a group: unsupported wire type
    envelope(ld(2, ld(1, ld(5, "uid"))[:-1])),  # an item runs past its list
    envelope(ld(2, b"\x0a\x05\x2a\x83")),  # a truncated length inside an item
    envelope(ld(2, b"\x0a\x02\x2a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff")),  # a runaway varint
    envelope(ld(1, ld(2, "7")), kind="NodeList"),  # another kind
    envelope(ld(3, "gone") + varint(6 << 3) + varint(410), kind="Status"),  # an error
]


@pytest.mark.parametrize("data", MALFORMED)
def test_malformed_lists_raise_proto_error(data: bytes) -> None:
    with pytest.raises(wire.ProtoError):
        decode_list_page(data)


def test_a_status_in_place_of_a_list_says_what_it_said() -> None:
    with pytest.raises(wire.ProtoError, match="got a Status: gone"):
        decode_list_page(MALFORMED[-1])


@pytest.mark.parametrize("data", [b"\x0a", b"\x12\x03\x0a\x05k", ld(1, "ADDED") + ld(2, ld(
    1, b"k8s\x01" + ld(2, b""))), ld(1, "ADDED") + ld(2, ld(1, envelope(b"", "Node")))])
def test_malformed_events_raise_proto_error(data: bytes) -> None:
    with pytest.raises(wire.ProtoError):
        decode_event(data)


def test_every_cut_of_a_recorded_page_is_an_error_or_a_shorter_page() -> None:
    data = fixture("pods-page.pb")
    whole = decode_list_page(data)
    for cut in range(len(data)):
        try:
            page = decode_list_page(data[:cut])
        except wire.ProtoError:
            continue
        assert len(page.items) <= len(whole.items)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["pods-page.pb", "services-page.pb"]),
       st.lists(st.tuples(st.integers(0, 2000), st.integers(0, 255)), min_size=1,
                max_size=8))
def test_corrupted_pages_raise_proto_error_or_decode(name: str,
                                                     flips: list[tuple[int, int]]) -> None:
    data = bytearray(fixture(name))
    for at, value in flips:
        data[at % len(data)] = value
    with contextlib.suppress(wire.ProtoError):
        decode_list_page(bytes(data))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_frames_raise_proto_error_or_decode(data: bytes) -> None:
    with contextlib.suppress(wire.ProtoError):
        decode_event(data)


def test_fields_in_any_order_and_unknown_fields_skipped() -> None:
    meta = (varint(7 << 3) + varint(3) + ld(6, "41") + ld(15, "x" * 300) + ld(9, b"")
            + ld(5, "u-1") + varint(30 << 3 | 1) + b"\x00" * 8)
    body = envelope(ld(2, ld(3, "?") + ld(1, meta)) + ld(1, ld(3, "next") + ld(2, "9")))
    page = decode_list_page(body)
    assert page == (page.items, "9", "next")
    assert page.items == [Meta("u-1", "41", True)]


def test_an_item_without_metadata_has_no_uid_and_the_watch_says_so() -> None:
    body = envelope(ld(2, b""), "PartialObjectMetadataList")
    assert decode_list_page(body).items == [Meta("", "", False)]
    api = ScriptedApi([], [body])
    watch = counting(api)
    watch.run()
    assert watch.error is not None and "without metadata.uid" in watch.error
    assert not watch.synced


def test_stopping_a_watch_in_protobuf() -> None:
    api = ScriptedApi([FakeResponse(fixture("watch.pb"), content_type=WATCH)],
                      [fixture("pods-last-page.pb")])
    watch = counting(api)
    api.on_stream = lambda: watch.stop(timeout=0)
    thread = threading.Thread(target=watch.run)
    thread.start()
    thread.join(10)
    assert not thread.is_alive()
