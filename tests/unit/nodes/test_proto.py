"""The protobuf Node reader: recorded bytes of kube-apiserver (each with a JSON twin that the
JSON decoder, the reference, must agree with) and hand-built edge cases (fields out of
order, unknown fields of every wire type, long lengths, truncation)."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpa.kube import wire
from cpa.kube.wire import Status, api_error, frames, lines
from cpa.nodes import jsondecode as nodejson
from cpa.nodes import proto as nodeproto
from cpa.nodes.records import Event, ListHead, NodeInfo
from tests.fakes import FakeResponse

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "protobuf"


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def pb_events(name: str, chunk: int = 65536) -> list[Event]:
    return [nodeproto.decode_event(f) for f in frames(FakeResponse(fixture(name), chunk))]


def json_events(name: str) -> list[Event]:
    return [nodejson.decode_event(line) for line in lines(FakeResponse(fixture(name), 65536))]


# --- recorded from kube-apiserver ---------------------------------------------------------


def test_recorded_content_types() -> None:
    types = json.loads((FIXTURES / "versions.json").read_text())["content_types"]
    assert wire.is_protobuf(types["list-page.pb"])
    assert wire.is_protobuf(types["watch.pb"])  # ...;stream=watch
    assert not wire.is_protobuf(types["watch.json"])


def test_list_page_matches_json() -> None:
    pb = nodeproto.decode_list_page(bytearray(fixture("list-page.pb")))
    js = nodejson.decode_list_page(fixture("list-page.json"))
    assert pb == js
    assert len(pb.items) == 3 and pb.continue_token and pb.resource_version
    by_name = {n.name: n for n in pb.items}
    gke = next(n for n in pb.items if n.name.startswith("gke-"))
    assert gke.unschedulable and gke.taints == ("node.kubernetes.io/unschedulable",)
    assert set(by_name) >= {"pb-cordoned"}
    assert by_name["pb-cordoned"] == NodeInfo(
        "pb-cordoned", by_name["pb-cordoned"].resource_version, True, True, "2",
        ("node.kubernetes.io/unschedulable", "dedicated"))


@pytest.mark.parametrize("chunk", [1, 5, 4096, 65536])
def test_streaming_list_matches_json_and_ends_at_its_bookmark(chunk: int) -> None:
    pb = pb_events("streaming-list.pb", chunk)
    assert pb == json_events("streaming-list.json")
    assert [e.type for e in pb] == ["ADDED"] * 5 + ["BOOKMARK"]
    end = pb[-1]
    assert end.initial_end and end.resource_version and end.node is None
    nodes = {e.node.name: e.node for e in pb if e.node is not None}
    assert nodes["pb-nocpu"].cpu is None and not nodes["pb-nocpu"].ready
    assert nodes["pb-notready"].cpu == "500m" and not nodes["pb-notready"].ready
    assert nodes["pb-ready"].ready and nodes["pb-ready"].cpu == "3920m"


def test_watch_matches_json() -> None:
    pb = pb_events("watch.pb")
    js = json_events("watch.json")
    assert [e.type for e in pb] == ["MODIFIED", "MODIFIED", "DELETED", "ADDED", "BOOKMARK"]
    # The bookmark is the server's own on each connection; the changes are the same.
    assert pb[:4] == js[:4]
    assert pb[4].resource_version and not pb[4].initial_end
    assert pb[0].node is not None and pb[0].node.unschedulable  # pb-ready cordoned
    assert pb[1].node is not None and pb[1].node.ready  # pb-notready became Ready
    assert pb[2].node is not None and pb[2].node.name == "pb-nocpu"


def test_expired_watch_is_an_error_event_with_410() -> None:
    [pb] = pb_events("gone.pb")
    [js] = json_events("gone.json")
    assert pb == js
    assert pb.type == "ERROR" and pb.status is not None
    assert (pb.status.code, pb.status.reason) == (410, "Expired")
    assert "too old resource version" in pb.status.message


def test_error_answers_in_protobuf_become_api_errors() -> None:
    pb = api_error(400, fixture("error-400.pb"), "application/vnd.kubernetes.protobuf")
    js = api_error(400, fixture("error-400.json"), "application/json")
    assert (pb.status, pb.reason, pb.message) == (js.status, js.reason, js.message)
    assert pb.reason == "BadRequest" and "invalid continue token" in pb.message
    # Not a Status after all: the text, as before.
    odd = api_error(502, b"k8s\x00garbage", "application/vnd.kubernetes.protobuf")
    assert odd.status == 502 and "garbage" in odd.message


def test_a_stream_cut_inside_a_frame_raises() -> None:
    data = fixture("watch.pb")
    with pytest.raises(wire.ProtoError, match="inside a frame"):
        list(frames(FakeResponse(data[:-3], 100)))
    assert len(list(frames(FakeResponse(data, 100)))) == 5


# --- hand-built ---------------------------------------------------------------------------


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def ld(field: int, payload: bytes | str) -> bytes:
    data = payload.encode() if isinstance(payload, str) else payload
    return varint(field << 3 | 2) + varint(len(data)) + data


def vi(field: int, value: int) -> bytes:
    return varint(field << 3) + varint(value)


def envelope(raw: bytes, kind: str = "Node") -> bytes:
    return wire.MAGIC + ld(1, ld(1, "v1") + ld(2, kind)) + ld(2, raw) + ld(4, "")


def node(meta: bytes = b"", spec: bytes = b"", status: bytes = b"") -> bytes:
    return ld(1, meta) + ld(2, spec) + ld(3, status)


def condition(ctype: str, status: str, reverse: bool = False) -> bytes:
    fields = [ld(1, ctype), ld(2, status), ld(6, "message")]
    return ld(4, b"".join(reversed(fields) if reverse else fields))


def allocatable(key: str, value: str, reverse: bool = False) -> bytes:
    fields = [ld(1, key), ld(2, ld(1, value))]
    return ld(2, b"".join(reversed(fields) if reverse else fields))


UNKNOWN = (vi(7, 300) + varint(9 << 3 | 1) + b"\x01" * 8 + varint(10 << 3 | 5) + b"\x02" * 4
           + ld(17, "managed" * 40) + ld(99, "x" * 300))  # multi-byte keys and lengths


def decode_node(raw: bytes) -> NodeInfo:
    frame = ld(1, "ADDED") + ld(2, ld(1, envelope(raw)))
    event = nodeproto.decode_event(frame)
    assert event.node is not None
    return event.node


def test_fields_in_any_order_and_unknown_fields_skipped() -> None:
    meta = UNKNOWN + ld(6, "42") + ld(11, ld(1, "k") + ld(2, "v")) + ld(1, "n1")
    spec = ld(5, UNKNOWN + ld(3, "NoSchedule") + ld(1, "t1")) + UNKNOWN + vi(4, 1)
    status = (UNKNOWN + condition("MemoryPressure", "False") + condition("Ready", "True", True)
              + allocatable("memory", "16Gi") + allocatable("cpu", "3920m", True) + UNKNOWN)
    raw = ld(3, status) + UNKNOWN + ld(2, spec) + ld(1, meta)
    assert decode_node(raw) == NodeInfo("n1", "42", True, True, "3920m", ("t1",))


def test_defaults_when_fields_are_absent() -> None:
    assert decode_node(b"") == NodeInfo("", "", False, False, None, ())
    assert decode_node(node(ld(1, "n"), vi(4, 0), condition("Ready", "False"))) == NodeInfo(
        "n", "", False, False, None, ())
    # An empty condition and an empty map entry are valid and count for nothing.
    assert decode_node(node(ld(1, "n"), b"", ld(4, b"") + ld(2, b""))).cpu is None


def test_any_true_ready_condition_counts_as_json_does() -> None:
    status = condition("Ready", "False") + condition("Ready", "True")
    assert decode_node(node(ld(1, "n"), b"", status)).ready
    assert not decode_node(node(ld(1, "n"), b"", condition("ReadyX", "True"))).ready


def test_bookmark_reads_the_initial_events_end_annotation() -> None:
    ann = ld(12, ld(1, "other") + ld(2, "true")) + ld(12, ld(1, wire.INITIAL_EVENTS_END)
                                                       + ld(2, "true"))
    frame = ld(1, "BOOKMARK") + ld(2, ld(1, envelope(node(ld(6, "77") + ann))))
    assert nodeproto.decode_event(frame) == Event("BOOKMARK", resource_version="77",
                                                  initial_end=True)
    plain = ld(1, "BOOKMARK") + ld(2, ld(1, envelope(node(ld(6, "78")))))
    assert nodeproto.decode_event(plain) == Event("BOOKMARK", resource_version="78")


def test_error_event_with_a_negative_code_and_an_unknown_event_type() -> None:
    status = ld(3, "boom") + ld(4, "InternalError") + vi(6, -1)
    frame = ld(1, "ERROR") + ld(2, ld(1, envelope(status, "Status")))
    assert nodeproto.decode_event(frame).status == Status(-1, "InternalError", "boom")
    assert nodeproto.decode_event(ld(1, "ERROR")) == Event("ERROR")
    assert nodeproto.decode_event(ld(1, "SOMETHING") + ld(2, ld(1, envelope(b"")))) == Event(
        "SOMETHING")


MALFORMED_LISTS = [
    b"k8s",  # shorter than the magic
    b"json" + ld(2, b""),  # wrong magic
    wire.MAGIC + varint(2 << 3 | 2) + varint(50) + b"short",  # raw runs past the end
    wire.MAGIC + ld(2, ld(2, varint(1 << 3 | 3))),  # a group: unsupported wire type
    wire.MAGIC + ld(2, ld(2, node(ld(1, "n"))[:-1])),  # an item runs past its list
    wire.MAGIC + ld(2, b"\x12\x05\x1a\x83"),  # truncated length varint inside an item
]


@pytest.mark.parametrize("data", MALFORMED_LISTS)
def test_malformed_bodies_raise_proto_error(data: bytes) -> None:
    with pytest.raises(wire.ProtoError):
        nodeproto.decode_list_page(data)


def test_a_list_body_that_is_a_status_says_so() -> None:
    body = envelope(ld(3, "forbidden, say") + vi(6, 403), "Status")
    with pytest.raises(wire.ProtoError, match="forbidden, say"):
        nodeproto.decode_list_page(body)
    with pytest.raises(wire.ProtoError, match="expected a Node"):
        nodeproto.decode_node(body)


# --- a list read as it arrives (the first list) ---------------------------------------------


def read_list(body: bytes, size: int, **kwargs: object) -> list[NodeInfo | ListHead]:
    """:func:`nodeproto.read_list` over ``body`` cut into reads of ``size`` bytes."""
    chunks = [body[i:i + size] for i in range(0, len(body), size)]
    return list(nodeproto.read_list(chunks, **kwargs))  # type: ignore[arg-type]


def test_a_recorded_list_read_as_it_arrives_is_the_whole_pages_decoding() -> None:
    body = fixture("list-page.pb")
    page = nodeproto.decode_list_page(bytearray(body))
    for size in (1, 2, 3, 5, 11, 64, 4096, len(body)):
        got = read_list(body, size)
        # Go writes ListMeta first: the head comes before any Node.
        assert got[0] == ListHead(page.resource_version, page.continue_token), size
        assert got[1:] == page.items, size
    capacity = nodeproto.decode_list_page_capacity(bytearray(body))
    assert read_list(body, 100, capacity=True)[1:] == capacity.items
    zoned = nodeproto.decode_list_page(bytearray(body), label=ZONE)
    assert read_list(body, 100, label=ZONE)[1:] == zoned.items


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=400), min_size=1, max_size=40))
def test_any_cut_of_the_reads_gives_the_same_list(sizes: list[int]) -> None:
    body = fixture("list-page.pb")
    chunks, pos, i = [], 0, 0
    while pos < len(body):
        n = sizes[i % len(sizes)]
        chunks.append(body[pos:pos + n])
        pos, i = pos + n, i + 1
    page = nodeproto.decode_list_page(bytearray(body))
    assert list(nodeproto.read_list(chunks))[1:] == page.items


def test_a_long_list_is_decoded_as_it_comes_and_never_held_whole() -> None:
    """Each Node is yielded once its own bytes are in, and decoded bytes are dropped as the
    list goes on: the reader's memory stays far below the list's size."""
    items = b"".join(ld(2, node(ld(1, f"n{i:04}") + ld(6, "9") + UNKNOWN, b"",
                                condition("Ready", "True") + allocatable("cpu", "2")))
                     for i in range(600))
    body = envelope(ld(1, ld(2, "9")) + items, "NodeList")
    assert len(body) > 4 * (1 << 16)
    seen: list[int] = []

    def reads() -> Iterator[bytes]:
        for i in range(0, len(body), 1000):
            seen.append(i)
            yield body[i:i + 1000]

    got = nodeproto.read_list(reads())
    assert next(got) == ListHead("9", "")
    first = next(got)
    assert isinstance(first, NodeInfo) and first.name == "n0000" and first.cpu == "2"
    assert len(seen) < 10  # the first Node came after its own bytes, not the list's
    rest = list(got)
    assert [n.name for n in rest if isinstance(n, NodeInfo)][-1] == "n0599"
    assert len(rest) == 599
    tracemalloc.start()
    try:
        for _ in nodeproto.read_list(body[i:i + 1000] for i in range(0, len(body), 1000)):
            pass
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < len(body) // 3, (peak, len(body))


def test_the_head_after_the_items_and_fields_it_does_not_know() -> None:
    """Any field order reads the same; without a ListMeta, an empty head ends the list."""
    one = ld(2, node(ld(1, "a") + ld(6, "3"), vi(4, 1)))
    raw = vi(7, 1) + one + ld(1, ld(3, "tok") + ld(2, "8") + vi(4, 12)) + ld(9, "x" * 200)
    body = wire.MAGIC + vi(5, 3) + ld(1, ld(2, "NodeList")) + ld(2, raw) + ld(3, "")
    got = read_list(body, 7)
    assert got == [NodeInfo("a", "3", True, False, None, ()), ListHead("8", "tok")]
    bare = wire.MAGIC + ld(2, one)
    assert read_list(bare, 3) == [NodeInfo("a", "3", True, False, None, ()), ListHead("", "")]
    assert read_list(wire.MAGIC, 1) == [ListHead("", "")]


@pytest.mark.parametrize("data", [
    *MALFORMED_LISTS,
    wire.MAGIC + ld(2, ld(2, node(ld(1, "n")))[:-3]),  # the body ends inside an item
    wire.MAGIC + ld(2, ld(2, node(ld(1, "n"))))[:-1] + b"",  # ... one byte short
    wire.MAGIC + ld(1, ld(2, "NodeList"))[:-2],  # ... inside the envelope
    wire.MAGIC + ld(2, ld(2, ld(1, b"\xff\xfe"))),  # a name that is not UTF-8
])
def test_malformed_lists_read_as_they_arrive_raise_value_errors(data: bytes) -> None:
    with pytest.raises(ValueError):
        read_list(data, 3)


def test_a_status_or_another_kind_is_no_node_list() -> None:
    with pytest.raises(wire.ProtoError, match="expected a NodeList, got a Status"):
        read_list(envelope(ld(3, "forbidden") + vi(6, 403), "Status"), 5)
    with pytest.raises(wire.ProtoError, match="got a PodList"):
        read_list(envelope(b"", "PodList"), 5)


# --- the one label asked for (zones, opt-in) ------------------------------------------------

ZONE = "topology.kubernetes.io/zone"


def test_recorded_labels_match_json() -> None:
    pb = nodeproto.decode_list_page(bytearray(fixture("list-page.pb")), label=ZONE)
    js = nodejson.decode_list_page(fixture("list-page.json"), label=ZONE)
    assert pb == js
    assert {n.name[:3]: n.label for n in pb.items} == {
        "gke": "us-central1-f", "pb-": ""}  # the pb- Nodes have no zone label
    plain = nodeproto.decode_list_page(bytearray(fixture("list-page.pb")))
    assert [n._replace(label="") for n in pb.items] == plain.items
    assert all(n.label == "" for n in plain.items), "no label asked for, none read"
    for name in ("watch.pb", "streaming-list.pb"):
        pool = [nodeproto.decode_event(f, label="pool")
                for f in frames(FakeResponse(fixture(name), 4096))]
        js_name = name.replace(".pb", ".json")
        js_pool = [nodejson.decode_event(line, label="pool")
                   for line in lines(FakeResponse(fixture(js_name), 65536))]
        assert [e.node for e in pool if e.node] == [e.node for e in js_pool if e.node]
    first = nodeproto.decode_event(next(frames(FakeResponse(fixture("watch.pb"), 4096))),
                                   label="pool")
    assert first.node is not None and first.node.label == "a"


def test_the_label_is_found_in_any_order_and_only_its_value_kept() -> None:
    labels = (ld(11, ld(1, "zone-ish") + ld(2, "no")) + ld(11, ld(2, "b") + ld(1, ZONE))
              + ld(11, ld(1, "x" * 200) + ld(2, "long key")))
    meta = ld(12, ld(1, "a") + ld(2, "late")) + labels + ld(6, "9") + ld(1, "n")
    assert decode_labelled(node(meta), ZONE).label == "b"
    assert decode_labelled(node(meta), "x" * 200).label == "long key"
    assert decode_labelled(node(meta), "absent").label == ""
    # In Go's order (name, resourceVersion, labels, annotations) reading stops after the
    # labels; a label after the annotations would be ignored, but Go never writes one.
    ordered = ld(1, "n") + ld(6, "9") + ld(11, ld(1, ZONE) + ld(2, "z1")) + ld(12, b"\x00")
    assert decode_labelled(node(ordered), ZONE) == NodeInfo("n", "9", False, False, None, (),
                                                            label="z1")


def decode_labelled(raw: bytes, label: str) -> NodeInfo:
    frame = ld(1, "ADDED") + ld(2, ld(1, envelope(raw)))
    event = nodeproto.decode_event(frame, label=label)
    assert event.node is not None
    return event.node


# --- the vertical autoscaler's decoders: capacity cpu too -----------------------------------


def _without_capacity(items: list[NodeInfo]) -> list[NodeInfo]:
    return [node._replace(capacity_cpu=None) for node in items]


def test_capacity_list_page_matches_json_and_the_plain_decoder() -> None:
    pb = nodeproto.decode_list_page_capacity(bytearray(fixture("list-page.pb")))
    js = nodejson.decode_list_page_capacity(fixture("list-page.json"))
    assert pb == js
    doc = json.loads(fixture("list-page.json"))
    assert {n.name: n.capacity_cpu for n in pb.items} == {
        item["metadata"]["name"]: item["status"]["capacity"]["cpu"] for item in doc["items"]}
    # Everything else is what the autoscaler's decoder reads, which never reads capacity.
    plain = nodeproto.decode_list_page(bytearray(fixture("list-page.pb")))
    assert all(node.capacity_cpu is None for node in plain.items)
    assert _without_capacity(pb.items) == plain.items
    assert (pb.resource_version, pb.continue_token) == (plain.resource_version,
                                                        plain.continue_token)


@pytest.mark.parametrize("name", ["streaming-list", "watch"])
def test_capacity_events_match_json_and_the_plain_decoder(name: str) -> None:
    pb = [nodeproto.decode_event_capacity(f)
          for f in frames(FakeResponse(fixture(f"{name}.pb"), 4096))]
    js = [nodejson.decode_event_capacity(line)
          for line in lines(FakeResponse(fixture(f"{name}.json"), 65536))]
    changes = [e for e in pb if e.node is not None]
    assert changes == [e for e in js if e.node is not None]
    assert changes and all(e.node is not None and e.node.capacity_cpu for e in changes)
    plain = [e for e in pb_events(f"{name}.pb") if e.node is not None]
    assert [e._replace(node=e.node._replace(capacity_cpu=None)) for e in changes
            if e.node is not None] == plain


def test_capacity_read_in_any_field_order_with_unknown_fields() -> None:
    def capacity(key: str, value: str, reverse: bool = False) -> bytes:
        fields = [ld(1, key), ld(2, ld(1, value))]
        return ld(1, b"".join(reversed(fields) if reverse else fields))

    status = (condition("Ready", "True", reverse=True) + UNKNOWN
              + allocatable("memory", "1Gi") + allocatable("cpu", "3920m", reverse=True)
              + capacity("pods", "110") + capacity("cpu", "4", reverse=True) + UNKNOWN)
    raw = node(meta=ld(1, "n1") + ld(6, "7"), status=status)
    frame = ld(1, "ADDED") + ld(2, ld(1, envelope(raw)))
    event = nodeproto.decode_event_capacity(frame)
    assert event.node == NodeInfo("n1", "7", False, True, "3920m", (), "4")
    assert decode_node(raw) == event.node._replace(capacity_cpu=None)


# --- every label and taint (targetPlacement, opt-in) ----------------------------------------


def test_all_labels_and_full_taints_match_json_and_the_plain_decoder() -> None:
    from cpa.nodes.records import ALL_LABELS

    pb = nodeproto.decode_list_page(bytearray(fixture("list-page.pb")), label=ALL_LABELS)
    js = nodejson.decode_list_page(fixture("list-page.json"), label=ALL_LABELS)
    assert pb == js
    raw = json.loads(fixture("list-page.json"))
    for got, item in zip(pb.items, raw["items"], strict=True):
        assert got.labels == tuple(sorted((item["metadata"].get("labels") or {}).items()))
        assert got.taint_details == tuple(
            (t["key"], t.get("value", ""), t["effect"])
            for t in (item["spec"].get("taints") or ()))
    plain = nodeproto.decode_list_page(bytearray(fixture("list-page.pb")))
    assert [n._replace(labels=None, taint_details=()) for n in pb.items] == plain.items
    assert all(n.labels is None for n in plain.items), "no placement asked for, none read"
    for name in ("watch.pb", "streaming-list.pb"):
        events = [nodeproto.decode_event(f, label=ALL_LABELS)
                  for f in frames(FakeResponse(fixture(name), 4096))]
        js_name = name.replace(".pb", ".json")
        js_events = [nodejson.decode_event(line, label=ALL_LABELS)
                     for line in lines(FakeResponse(fixture(js_name), 65536))]
        assert [e.node for e in events if e.node] == [e.node for e in js_events if e.node]
        assert any(e.node and e.node.labels for e in events)


def test_full_taints_in_any_order() -> None:
    from cpa.nodes.records import ALL_LABELS

    taint = ld(3, "NoSchedule") + ld(4, b"\x08\x01") + ld(2, "gpu") + ld(1, "pool")
    meta = ld(11, ld(2, "v") + ld(1, "k")) + ld(1, "n") + ld(6, "9")
    got = decode_labelled(node(meta, ld(5, taint) + ld(5, ld(1, "bare")) + vi(4, 1)),
                          ALL_LABELS)
    assert got == NodeInfo("n", "9", True, False, None, ("pool", "bare"),
                           labels=(("k", "v"),),
                           taint_details=(("pool", "gpu", "NoSchedule"), ("bare", "", "")))


# --- generated: the reader against a plain reading of every field -------------------------
# The reader reads keys and lengths inline and stops in NodeStatus once allocatable and
# conditions were read; a plain reader that parses every field of every message is the
# reference. Messages are generated as an encoder may write them: fields in any order,
# each repeated field's elements in one run, unknown fields of every wire type, lengths of
# one, two and three bytes.

def _parse(data: bytes) -> list[tuple[int, int | bytes]]:
    """Every field of a message: (field number, varint value or payload)."""
    out: list[tuple[int, int | bytes]] = []
    pos = 0
    while pos < len(data):
        key, pos = wire.varint(data, pos)
        kind = key & 7
        if kind == 0:
            value, pos = wire.varint(data, pos)
            out.append((key >> 3, value))
        elif kind == 2:
            n, pos = wire.varint(data, pos)
            out.append((key >> 3, data[pos:pos + n]))
            pos += n
        else:
            pos += 8 if kind == 1 else 4
    return out


def _strings(data: bytes, field: int) -> list[str]:
    return [v.decode() for f, v in _parse(data) if f == field and isinstance(v, bytes)]


def _reference(raw: bytes) -> NodeInfo:
    name = rv = ""
    unschedulable = ready = False
    taints: list[str] = []
    cpu = None
    for field, value in _parse(raw):
        if not isinstance(value, bytes):
            continue
        if field == 1:
            name = (_strings(value, 1) or [name])[-1]
            rv = (_strings(value, 6) or [rv])[-1]
        elif field == 2:
            for f, v in _parse(value):
                if f == 4 and isinstance(v, int):
                    unschedulable = v != 0
                elif f == 5 and isinstance(v, bytes):
                    taints.append((_strings(v, 1) or [""])[-1])
        elif field == 3:
            for f, v in _parse(value):
                if f == 2 and isinstance(v, bytes) and _strings(v, 1)[:1] == ["cpu"]:
                    quantities = [q for k, q in _parse(v) if k == 2 and isinstance(q, bytes)]
                    cpu = (_strings(quantities[-1], 1) or [""])[-1] if quantities else None
                elif f == 4 and isinstance(v, bytes):
                    ready = ready or (_strings(v, 1) == ["Ready"] and _strings(v, 2) == ["True"])
    return NodeInfo(name, rv, unschedulable, ready, cpu, tuple(taints))


def _unknown(draw: st.DrawFn) -> bytes:
    field = draw(st.sampled_from([7, 9, 15, 16, 17, 99, 2047]))  # none that is read
    kind = draw(st.sampled_from([0, 1, 2, 5]))
    if kind == 0:
        return vi(field, draw(st.integers(0, 2**63)))
    if kind == 1:
        return varint(field << 3 | 1) + b"\x01" * 8
    if kind == 5:
        return varint(field << 3 | 5) + b"\x02" * 4
    return ld(field, b"x" * draw(st.sampled_from([0, 1, 127, 128, 300, 16383, 16384, 20000])))


def _runs(draw: st.DrawFn, runs: list[bytes]) -> bytes:
    """Some runs of fields (each a repeated field's elements, or one field), in any order."""
    return b"".join(draw(st.permutations(runs)))


@st.composite
def generated_nodes(draw: st.DrawFn) -> bytes:
    meta = [ld(1, draw(st.text(min_size=1, max_size=5))), ld(6, str(draw(st.integers(1))))]
    meta += [_unknown(draw) for _ in range(draw(st.integers(0, 2)))]
    spec = [vi(4, draw(st.integers(0, 2)))] if draw(st.booleans()) else []
    taints = [ld(5, b"".join(draw(st.permutations([ld(1, draw(st.sampled_from(["a", "b"]))),
                                                    ld(3, "NoSchedule")]))))
              for _ in range(draw(st.integers(0, 2)))]
    spec += [b"".join(taints), _unknown(draw)]
    keys = st.sampled_from(["cpu", "cpx", "pods", "memory", "c"])
    entries = [allocatable(draw(keys), draw(st.sampled_from(["1", "3920m", "64"])),
                           draw(st.booleans()))
               for _ in range(draw(st.integers(0, 4)))]
    types = st.sampled_from(["Ready", "Ready", "Reads", "ReadyX", "MemoryPressure", ""])
    conditions = [condition(draw(types), draw(st.sampled_from(["True", "False"])),
                            draw(st.booleans()))
                  for _ in range(draw(st.integers(0, 4)))]
    capacity = b"".join(ld(1, ld(1, "cpu") + ld(2, ld(1, "99"))) for _ in range(2))
    status = [b"".join(entries), b"".join(conditions), capacity, ld(3, "Running"),
              b"".join(ld(8, "image" * draw(st.integers(1, 80))) for _ in range(3)),
              _unknown(draw), _unknown(draw)]
    return node(_runs(draw, meta), _runs(draw, spec), _runs(draw, status))


@settings(max_examples=400, deadline=None)
@given(generated_nodes())
def test_generated_nodes_read_as_a_plain_reading_of_every_field(raw: bytes) -> None:
    assert decode_node(raw) == _reference(raw)
    page = wire.MAGIC + ld(2, ld(2, raw) + ld(2, raw))  # a NodeList of two
    assert nodeproto.decode_list_page(page).items == [_reference(raw)] * 2
