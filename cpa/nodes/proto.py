"""Node objects off Kubernetes' protobuf wire: a small reader that skips what it does not need.

Why protobuf: kube-apiserver encodes protobuf for a fraction of the CPU that JSON costs it
(the API server's load is what operators of a large cluster feel), and the body is smaller
to read through TLS.

Why a hand-written reader rather than the protobuf library: ``python -m bench.protodecode``
compares it with msgspec's JSON and with upb and a trimmed schema, each in a fresh
interpreter (figures: ``bench/results/protodecode.json``). upb is faster per watch event
(its parser is C) but slower per listed Node (a Python object per field read), adds import
time and memory at every start, and keeps every field it does not know as unknown-field
bytes; this reader needs no compiled dependency and skips what it does not need.

The envelope around every body, the watch framing and the Status are
:mod:`cpa.kube.wire`'s, as are the wire primitives this reader uses. The Node's schema
(checked against kube-apiserver v1.35.4; field numbers from k8s.io/api ``generated.proto``):

* NodeList {1 metadata: ListMeta {2 resourceVersion, 3 continue}, 2 items: Node};
  Node {1 metadata: ObjectMeta {1 name, 6 resourceVersion, 11 labels and 12 annotations
  (map entries {1 key, 2 value})}, 2 spec: NodeSpec {4 unschedulable, 5 taints: Taint {1 key}},
  3 status: NodeStatus {2 allocatable (map entries {1 key, 2 value: Quantity {1 string}}),
  4 conditions: NodeCondition {1 type, 2 status}, and for the vertical autoscaler only
  1 capacity (as allocatable)}}.

Everything else is skipped by its wire type and length, never decoded. The labels are read
only when the caller asks for one label (the zones' topologyKey, opt-in), and then only
that label's value: without one, metadata is read as far as name and resourceVersion, as
before. Fields may come in
any order, as protobuf allows; Go's encoder writes them in field order, so the fast paths
below (a condition judged by its leading type, metadata read only as far as name and
resourceVersion) are the common case, and any other order takes the full path. One
liberty: a non-repeated field is read once (Go never writes one twice, where protobuf
would let the last win). A second: a repeated field's elements come in one run (every
encoder writes them so), so NodeStatus is read only until allocatable and conditions
have both been read, in whatever order: its images, addresses and nodeInfo, after them in
Go's order, are about half of a Node's fields. That and reading keys and lengths inline
in the per-Node loops nearly halve the instructions per streamed Node (``bench.pollcost
--callgrind``); a generated test holds the reader to a plain reading of every field.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import lru_cache

from cpa.kube.wire import (
    INITIAL_EVENTS_END,
    MAGIC,
    Buffer,
    ProtoError,
    checked,
    status_fields,
    string_field,
    string_fields,
    unwrap,
)

# Bound to short module-level names: called per field of every Node in a list.
from cpa.kube.wire import field_key as _key
from cpa.kube.wire import length_delimited as _len
from cpa.kube.wire import skip_field as _skip
from cpa.kube.wire import utf8 as _str
from cpa.kube.wire import varint as _varint
from cpa.nodes.records import ALL_LABELS, Event, ListHead, ListPage, NodeInfo

__all__ = ["decode_event", "decode_event_capacity", "decode_list_page",
           "decode_list_page_capacity", "decode_node", "read_list"]


# --- Node ----------------------------------------------------------------------------
def _meta(buf: Buffer, pos: int, end: int, want_annotation: str = ""
          ) -> tuple[str | None, str | None, bool]:
    """ObjectMeta: (name, resourceVersion, annotation ``want_annotation`` == "true").

    Without an annotation to look for, reading stops once name and resourceVersion are
    both read (fields 1 and 6 of 17: the labels, annotations and managedFields after them
    are most of a Node's bytes)."""
    name = rv = None
    flag = False
    while pos < end:
        key = buf[pos]
        pos += 1
        if key == 0x0A:  # 1 name
            s, pos = _len(buf, pos, end)
            name = _str(buf, s, pos)
            if rv is not None and not want_annotation:
                break
        elif key == 0x32:  # 6 resourceVersion
            s, pos = _len(buf, pos, end)
            rv = _str(buf, s, pos)
            if name is not None and not want_annotation:
                break
        elif key == 0x62 and want_annotation:  # 12 annotations
            s, pos = _len(buf, pos, end)
            k, v = _entry(buf, s, pos)
            if k == want_annotation:
                flag = v == "true"
        elif key & 7 == 2 and key < 0x80:  # skip a length-delimited field, inline
            n = buf[pos]
            pos += 1
            if n > 0x7F:
                n, pos = _varint(buf, pos - 1)
            pos += n
        else:
            if key > 0x7F:
                key, pos = _varint(buf, pos - 1)
            pos = _skip(buf, key & 7, pos, end)
    if pos > end:
        raise ProtoError("field runs past the end of its message")
    return name, rv, flag


@lru_cache(maxsize=8)
def _entry_prefix(key: str) -> bytes:
    """How a map entry whose key is ``key`` begins on the wire (field 1, length, bytes)."""
    raw = key.encode()
    n, length = len(raw), bytearray()
    while True:
        if n < 0x80:
            length.append(n)
            break
        length.append(n & 0x7F | 0x80)
        n >>= 7
    return b"\x0a" + bytes(length) + raw


def _meta_label(buf: Buffer, pos: int, end: int, label: str
                ) -> tuple[str | None, str | None, str]:
    """ObjectMeta: (name, resourceVersion, the value of the label ``label`` or "").

    Each label entry is judged by one ``startswith`` against the wanted key (an entry whose
    key is not its first field is read in full); reading stops after the labels (field 11)
    once name and resourceVersion are read, as Go writes fields in order."""
    name = rv = None
    value = ""
    prefix = _entry_prefix(label)
    while pos < end:
        key = buf[pos]
        if key > 0x5A and name is not None and rv is not None:
            break  # past the labels: annotations and managedFields are not ours
        pos += 1
        if key == 0x0A:  # 1 name
            s, pos = _len(buf, pos, end)
            name = _str(buf, s, pos)
        elif key == 0x32:  # 6 resourceVersion
            s, pos = _len(buf, pos, end)
            rv = _str(buf, s, pos)
        elif key == 0x5A:  # 11 labels
            s, pos = _len(buf, pos, end)
            if buf.startswith(prefix, s) or buf[s] != 0x0A:
                k, v = _entry(buf, s, pos)
                if k == label:
                    value = v
        else:
            if key > 0x7F:
                key, pos = _varint(buf, pos - 1)
            pos = _skip(buf, key & 7, pos, end)
    if pos > end:
        raise ProtoError("field runs past the end of its message")
    return name, rv, value


def _meta_all_labels(buf: Buffer, pos: int, end: int
                     ) -> tuple[str | None, str | None, tuple[tuple[str, str], ...]]:
    """ObjectMeta: (name, resourceVersion, every label), for ``targetPlacement`` (opt-in):
    read to its end, as a label may come after annotations in another encoder's order."""
    name = rv = None
    labels: list[tuple[str, str]] = []
    while pos < end:
        key, pos = _key(buf, pos)
        if key == 0x0A:  # 1 name
            s, pos = _len(buf, pos, end)
            name = _str(buf, s, pos)
        elif key == 0x32:  # 6 resourceVersion
            s, pos = _len(buf, pos, end)
            rv = _str(buf, s, pos)
        elif key == 0x5A:  # 11 labels
            s, pos = _len(buf, pos, end)
            labels.append(_entry(buf, s, pos))
        else:
            pos = _skip(buf, key & 7, pos, end)
    if pos > end:
        raise ProtoError("field runs past the end of its message")
    return name, rv, tuple(sorted(labels))


def _taint(buf: Buffer, pos: int, end: int) -> tuple[str, str, str]:
    """A Taint in full: (1 key, 2 value, 3 effect); 4 timeAdded is not ours."""
    key, value, effect = string_fields(buf, pos, end, (0x0A, 0x12, 0x1A))
    return key, value, effect


def _spec_full(buf: Buffer, pos: int, end: int
               ) -> tuple[bool, tuple[str, ...], tuple[tuple[str, str, str], ...]]:
    """NodeSpec for ``targetPlacement``: (unschedulable, taint keys, taints in full)."""
    unschedulable = False
    taints: list[tuple[str, str, str]] = []
    while pos < end:
        key, pos = _key(buf, pos)
        if key == 0x20:  # 4 unschedulable (varint)
            value, pos = _varint(buf, pos)
            unschedulable = value != 0
        elif key == 0x2A:  # 5 taints
            s, pos = _len(buf, pos, end)
            taints.append(_taint(buf, s, pos))
        else:
            pos = _skip(buf, key & 7, pos, end)
    return unschedulable, tuple(t[0] for t in taints), tuple(taints)


def _entry(buf: Buffer, pos: int, end: int) -> tuple[str, str]:
    """A map<string, string> entry: (key, value)."""
    k = v = ""
    while pos < end:
        key, pos = _key(buf, pos)
        if key == 0x0A:
            s, pos = _len(buf, pos, end)
            k = _str(buf, s, pos)
        elif key == 0x12:
            s, pos = _len(buf, pos, end)
            v = _str(buf, s, pos)
        else:
            pos = _skip(buf, key & 7, pos, end)
    return k, v


def _spec(buf: Buffer, pos: int, end: int) -> tuple[bool, tuple[str, ...]]:
    """NodeSpec: (unschedulable, taint keys). Keys and lengths are read inline, as in
    :func:`_status`."""
    unschedulable = False
    taints: list[str] = []
    while pos < end:
        key = buf[pos]
        if key & 7 == 2 and key < 0x80:  # podCIDR(s), providerID, taints, configSource
            n = buf[pos + 1]
            if n < 0x80:
                s = pos + 2
            else:
                n, s = _varint(buf, pos + 1)
            pos = s + n
            if key == 0x2A:  # 5 taints
                if pos > end:
                    raise ProtoError("field runs past the end of its message")
                taints.append(string_field(buf, s, pos, 0x0A))  # 1 key
        elif key == 0x20:  # 4 unschedulable (varint)
            value, pos = _varint(buf, pos + 1)
            unschedulable = value != 0
        else:
            key, pos = _key(buf, pos)
            pos = _skip(buf, key & 7, pos, end)
    if pos > end:
        raise ProtoError("field runs past the end of its message")
    return unschedulable, tuple(taints)


def _cpu_entry(buf: Buffer, pos: int, end: int) -> str | None:
    """An allocatable map entry: the quantity's string when its key is ``cpu``."""
    is_cpu = False
    value: str | None = None
    while pos < end:
        key, pos = _key(buf, pos)
        if key == 0x0A:  # 1 key
            s, pos = _len(buf, pos, end)
            is_cpu = buf[s:pos] == b"cpu"
            if not is_cpu:
                return None
        elif key == 0x12:  # 2 value: Quantity
            s, pos = _len(buf, pos, end)
            value = string_field(buf, s, pos, 0x0A)  # 1 string
        else:
            pos = _skip(buf, key & 7, pos, end)
    return value if is_cpu else None


def _condition(buf: Buffer, pos: int, end: int) -> bool | None:
    """A NodeCondition: None unless its type is Ready, else whether its status is True."""
    ctype = status = None
    while pos < end:
        key, pos = _key(buf, pos)
        if key == 0x0A:  # 1 type
            s, pos = _len(buf, pos, end)
            ctype = buf[s:pos]
            if ctype != b"Ready":
                return None
        elif key == 0x12:  # 2 status
            s, pos = _len(buf, pos, end)
            status = buf[s:pos]
            if ctype is not None:
                break  # type and status read: the rest (times, reason, message) is not ours
        else:
            pos = _skip(buf, key & 7, pos, end)
    return None if ctype is None else status == b"True"


def _status(buf: Buffer, pos: int, end: int) -> tuple[str | None, bool]:
    """NodeStatus: (allocatable cpu, Ready).

    Most of a Node's bytes are here (~50 fields: its images, conditions, addresses), and
    each field costs a pass of this loop, so:

    * keys and lengths are read inline (a one-byte key, a one- or two-byte length: every
      field Kubernetes writes here) rather than through the wire helpers;
    * reading stops at the first other field once both allocatable (2) and conditions (4)
      were read: each is a repeated field, and an encoder writes all of a repeated field's
      elements in one run (Go writes them in field order too, so the images and addresses
      after them are never read);
    * a condition is judged by the length of its leading type (only 5 can be ``Ready``),
      an allocatable entry by the length of its leading key (only 3 can be ``cpu``); any
      other layout is read in full.
    """
    cpu = None
    ready = False
    allocatable = conditions = False
    while pos < end:
        key = buf[pos]
        if key & 7 == 2 and key < 0x80:  # length-delimited: every field we read
            if key == 0x22:
                conditions = True
            elif key == 0x12:
                allocatable = True
            elif allocatable and conditions:
                break  # both runs read: the rest is not ours
            n = buf[pos + 1]
            if n < 0x80:
                s = pos + 2
            elif buf[pos + 2] < 0x80:
                n = (n & 0x7F) | (buf[pos + 2] << 7)
                s = pos + 3
            else:
                n, s = _varint(buf, pos + 1)
            pos = s + n
            if key == 0x22:  # 4 conditions: a type of length 5 may be Ready
                if (buf[s + 1] == 5 if n > 1 and buf[s] == 0x0A else n) and _condition(
                        buf, s, pos):
                    ready = True
            elif key == 0x12 and (buf[s + 1] == 3 if n > 1 and buf[s] == 0x0A else n):
                value = _cpu_entry(buf, s, pos)  # 2 allocatable: a key of length 3 may be cpu
                if value is not None:
                    cpu = value
        elif allocatable and conditions:
            break
        else:
            if key > 0x7F:
                key, pos = _varint(buf, pos)
            else:
                pos += 1
            pos = _skip(buf, key & 7, pos, end)
    if pos > end:
        raise ProtoError("field runs past the end of its message")
    return cpu, ready


def _status_capacity(buf: Buffer, pos: int, end: int) -> tuple[str | None, bool, str | None]:
    """NodeStatus for the vertical autoscaler: (allocatable cpu, Ready, capacity cpu).

    A function of its own so that the autoscaler's :func:`_status`, read for every Node of
    a large cluster, gains no test per field; this one reads the same fields plainly, plus
    field 1."""
    cpu = capacity = None
    ready = False
    while pos < end:
        key, pos = _key(buf, pos)
        if key in (0x0A, 0x12, 0x22):  # 1 capacity, 2 allocatable, 4 conditions
            s, pos = _len(buf, pos, end)
            if key == 0x22:
                ready = bool(_condition(buf, s, pos)) or ready
                continue
            value = _cpu_entry(buf, s, pos)
            if value is None:
                continue
            if key == 0x12:
                cpu = value
            else:
                capacity = value
        else:
            pos = _skip(buf, key & 7, pos, end)
    if pos > end:
        raise ProtoError("field runs past the end of its message")
    return cpu, ready, capacity




def _node(buf: Buffer, pos: int, end: int, capacity: bool = False, label: str = ""
          ) -> NodeInfo:
    """A Node; ``capacity``: also read status.capacity.cpu (the vertical autoscaler);
    ``label``: the value of that one label (the zones' topologyKey)."""
    name = rv = None
    unschedulable = False
    taints: tuple[str, ...] = ()
    cpu = cap = None
    ready = False
    value = ""
    if label == ALL_LABELS:
        return _node_placement(buf, pos, end)
    while pos < end:
        key = buf[pos]
        if key == 0x0A or key == 0x12 or key == 0x1A:
            s, pos = _len(buf, pos + 1, end)
            if key == 0x1A:  # 3 status
                if capacity:
                    cpu, ready, cap = _status_capacity(buf, s, pos)
                else:
                    cpu, ready = _status(buf, s, pos)
            elif key == 0x0A:  # 1 metadata
                if label:
                    n, r, value = _meta_label(buf, s, pos, label)
                else:
                    n, r, _ = _meta(buf, s, pos)
                name = n if n is not None else name
                rv = r if r is not None else rv
            else:  # 2 spec
                unschedulable, taints = _spec(buf, s, pos)
        else:
            key, pos = _key(buf, pos)
            pos = _skip(buf, key & 7, pos, end)
    return NodeInfo(name or "", rv or "", unschedulable, ready, cpu, taints, cap, value)


def _node_placement(buf: Buffer, pos: int, end: int) -> NodeInfo:
    """A Node with every label and every taint in full (``targetPlacement``, opt-in): a
    function of its own so that the default path's :func:`_node` gains no test per field."""
    name = rv = None
    unschedulable = False
    keys: tuple[str, ...] = ()
    taints: tuple[tuple[str, str, str], ...] = ()
    labels: tuple[tuple[str, str], ...] = ()
    cpu = None
    ready = False
    while pos < end:
        key, pos = _key(buf, pos)
        if key == 0x0A:  # 1 metadata
            s, pos = _len(buf, pos, end)
            n, r, labels = _meta_all_labels(buf, s, pos)
            name = n if n is not None else name
            rv = r if r is not None else rv
        elif key == 0x12:  # 2 spec
            s, pos = _len(buf, pos, end)
            unschedulable, keys, taints = _spec_full(buf, s, pos)
        elif key == 0x1A:  # 3 status
            s, pos = _len(buf, pos, end)
            cpu, ready = _status(buf, s, pos)
        else:
            pos = _skip(buf, key & 7, pos, end)
    return NodeInfo(name or "", rv or "", unschedulable, ready, cpu, keys, None, "",
                    labels, taints)


# --- what the reflector calls ----------------------------------------------------------
def _decode_node(buf: Buffer, label: str = "") -> NodeInfo:
    """A Node body (``k8s\\x00`` + Unknown wrapping a Node)."""
    kind, s, e = unwrap(buf)
    if kind not in ("Node", ""):
        raise ProtoError(f"expected a Node, got a {kind}")
    return _node(buf, s, e, label=label)


def _decode_list_page(buf: Buffer, capacity: bool = False, label: str = "") -> ListPage:
    """A NodeList body: its Nodes, resourceVersion and continue token."""
    kind, pos, end = unwrap(buf)
    if kind == "Status":
        status = status_fields(buf, pos, end)
        raise ProtoError(f"expected a NodeList, got a Status: {status.message}")
    items: list[NodeInfo] = []
    head = ListHead("", "")
    while pos < end:
        key, pos = _key(buf, pos)
        if key == 0x12:  # 2 items
            s, pos = _len(buf, pos, end)
            items.append(_node(buf, s, pos, capacity, label))
        elif key == 0x0A:  # 1 metadata: ListMeta
            s, pos = _len(buf, pos, end)
            head = _list_meta(buf, s, pos)
        else:
            pos = _skip(buf, key & 7, pos, end)
    return ListPage(items, head.resource_version, head.continue_token)


def _list_meta(buf: Buffer, pos: int, end: int) -> ListHead:
    """ListMeta {2 resourceVersion, 3 continue}."""
    resource_version, continue_token = string_fields(buf, pos, end, (0x12, 0x1A))
    return ListHead(resource_version, continue_token)


_HEADER = 12  # a field's key (two bytes at most here) and a length (ten at most)
_KEEP = 1 << 16  # read bytes kept before the ones already decoded are dropped


def _read_list(chunks: Iterable[Buffer], capacity: bool = False, label: str = ""
               ) -> Iterator[NodeInfo | ListHead]:
    """A NodeList body decoded as its bytes arrive (``chunks``, in any sizes): its ListMeta
    as a :class:`ListHead` and each Node as soon as its last byte is in.

    Why: a whole page of Nodes costs its size in memory (megabytes for a page of large Nodes)
    and its decoding waits for its last byte; read so, a list holds one Node and one read
    at a time, and each Node is decoded while the API server is still sending the next.

    Go writes ListMeta before the items, so a caller that only wants a list that fits one
    page learns from the first ListHead whether more pages follow, before any Node is
    read. Any field order is read all the same (the ListHead then comes where its field
    is, or as an empty one after the last Node if the body has none).

    A hot loop, long on purpose: it runs once per byte range of every listed Node,
    and calls out of it cost more than the reading itself."""
    source = iter(chunks)
    buf = bytearray()

    def fill(pos: int, need: int) -> bool:
        """At least ``need`` bytes in ``buf`` from ``pos`` (reading on), or False when the
        body ends first."""
        while len(buf) - pos < need:
            data = next(source, None)
            if data is None:
                return False
            buf.extend(data)
        return True

    if not fill(0, 4) or buf[:4] != MAGIC:
        raise ProtoError("not a Kubernetes protobuf body (no k8s\\x00 magic)")
    pos = 4
    base = 0  # where buf[0] is in the body: read bytes are dropped as the list goes on
    head = False
    while fill(pos, 1):  # runtime.Unknown {1 typeMeta, 2 raw, 3 contentEncoding, ...}
        fill(pos, _HEADER)  # short only at the very end: a cut varint raises there
        key, pos = _key(buf, pos)
        if key & 7 != 2:
            pos = _skip(buf, key & 7, pos, len(buf))
            continue
        n, pos = _varint(buf, pos)
        if key != 0x12:  # typeMeta or the others: whole, and small
            if not fill(pos, n):
                raise ProtoError("the list's body ended inside its envelope")
            if key == 0x0A:
                kind = string_field(buf, pos, pos + n, 0x12)  # 2 kind
                if kind not in ("NodeList", ""):
                    raise ProtoError(f"expected a NodeList, got a {kind}")
            pos += n
            continue
        end = base + pos + n  # 2 raw: the NodeList {1 metadata: ListMeta, 2 items: Node}
        while base + pos < end:
            fill(pos, _HEADER)
            key, s = _key(buf, pos)
            if key & 7 != 2:
                pos = _skip(buf, key & 7, s, end - base)
                continue
            n, s = _varint(buf, s)
            e = s + n
            if base + e > end:
                raise ProtoError("field runs past the end of its message")
            if not fill(s, n):
                raise ProtoError(f"the list's body ended inside a field of {n} bytes")
            if key == 0x12:  # 2 items
                yield _node(buf, s, e, capacity, label)
            elif key == 0x0A:  # 1 metadata
                head = True
                yield _list_meta(buf, s, e)
            pos = e
            if pos > _KEEP:
                del buf[:pos]
                base += pos
                pos = 0
    if not head:
        yield ListHead("", "")


def read_list(chunks: Iterable[Buffer], capacity: bool = False, label: str = ""
              ) -> Iterator[NodeInfo | ListHead]:
    """:func:`_read_list`, a read past the end of the bytes reported as
    :class:`ProtoError` (as :func:`~cpa.kube.wire.checked` does for whole bodies)."""
    try:
        yield from _read_list(chunks, capacity, label)
    except IndexError:
        raise ProtoError("truncated protobuf message") from None


def _decode_event(frame: Buffer, capacity: bool = False, label: str = "") -> Event:
    """One watch frame (without its 4-byte length): a bare metav1.WatchEvent {1 type,
    2 object: RawExtension {1 raw}}, its object a body (``k8s\\x00`` + runtime.Unknown).
    Read inline, as :func:`_status` reads fields: this runs for every event."""
    end = len(frame)
    pos = 0
    etype = ""
    start = stop = 0
    while pos < end:
        key = frame[pos]
        if key == 0x0A or key == 0x12:
            s, pos = _len(frame, pos + 1, end)
            if key == 0x0A:  # 1 type
                etype = _str(frame, s, pos)
                continue
            while s < pos:  # 2 object: RawExtension
                if frame[s] == 0x0A:  # 1 raw
                    start, s = _len(frame, s + 1, pos)
                    stop = s
                else:
                    k, s = _key(frame, s)
                    s = _skip(frame, k & 7, s, pos)
        else:
            key, pos = _key(frame, pos)
            pos = _skip(frame, key & 7, pos, end)
    if start == stop:
        return Event(etype)
    if etype == "ADDED" or etype == "MODIFIED" or etype == "DELETED":
        s, e = _raw(frame, start, stop)
        node = _node(frame, s, e, capacity, label)
        return Event(etype, node, node.resource_version)
    _kind, s, e = unwrap(frame, start, stop)
    if etype == "ERROR":
        return Event(etype, status=status_fields(frame, s, e))
    if etype == "BOOKMARK":
        rv = initial_end = None
        while s < e:
            key, s = _key(frame, s)
            if key == 0x0A:  # 1 metadata
                a, s = _len(frame, s, e)
                _, r, flag = _meta(frame, a, s, INITIAL_EVENTS_END)
                rv = r if r is not None else rv
                initial_end = initial_end or flag
            else:
                s = _skip(frame, key & 7, s, e)
        return Event(etype, resource_version=rv or "", initial_end=bool(initial_end))
    return Event(etype)


def _raw(buf: Buffer, pos: int, end: int) -> tuple[int, int]:
    """A Node event's body: where the object inside its envelope is (its kind is not read:
    a Node watch carries Nodes), as :func:`~cpa.kube.wire.unwrap` finds it."""
    if not buf.startswith(MAGIC, pos):
        raise ProtoError("not a Kubernetes protobuf body (no k8s\\x00 magic)")
    pos += 4
    start = stop = pos
    while pos < end:
        key = buf[pos]
        if key & 7 == 2 and key < 0x80:  # 1 typeMeta, 2 raw, 3 contentEncoding, ...
            s, pos = _len(buf, pos + 1, end)
            if key == 0x12:
                start, stop = s, pos
        else:
            key, pos = _key(buf, pos)
            pos = _skip(buf, key & 7, pos, end)
    return start, stop


def _decode_list_page_capacity(buf: Buffer) -> ListPage:
    """A NodeList body, its Nodes with their capacity cpu (the vertical autoscaler)."""
    return _decode_list_page(buf, capacity=True)


def _decode_event_capacity(frame: Buffer) -> Event:
    """One watch frame, its Node with its capacity cpu (the vertical autoscaler)."""
    return _decode_event(frame, capacity=True)


decode_node = checked(_decode_node)
decode_list_page = checked(_decode_list_page)
decode_event = checked(_decode_event)
decode_list_page_capacity = checked(_decode_list_page_capacity)
decode_event_capacity = checked(_decode_event_capacity)
