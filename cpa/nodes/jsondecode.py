"""Node objects off JSON: the fallback when a server answers JSON to our protobuf Accept.

Why msgspec: decoding a NodeList into the generated client models takes minutes and
gigabytes at 65,000 nodes, while msgspec structs that name only the needed fields skip
everything else unparsed (and no garbage).
"""

from __future__ import annotations

import msgspec

from cpa.kube.wire import INITIAL_EVENTS_END, Status
from cpa.nodes.records import ALL_LABELS, Event, ListPage, NodeInfo

__all__ = [
    "decode_bookmark",
    "decode_event",
    "decode_event_capacity",
    "decode_list_page",
    "decode_list_page_capacity",
    "decode_node",
    "decode_status",
]


# --- wire structs: only the fields the decision needs; msgspec skips the rest unparsed ---
class _Condition(msgspec.Struct):
    type: str = ""
    status: str = ""


class _Allocatable(msgspec.Struct):
    cpu: str | None = None


class _NodeStatus(msgspec.Struct):
    allocatable: _Allocatable | None = None
    conditions: list[_Condition] | None = None


class _NodeStatusCapacity(_NodeStatus):
    """The vertical autoscaler's: status.capacity too (CPVA sums capacity cpu)."""

    capacity: _Allocatable | None = None


class _Taint(msgspec.Struct):
    key: str = ""


class _FullTaint(_Taint):
    """A taint in full, for ``targetPlacement`` (opt-in)."""

    value: str = ""
    effect: str = ""


class _NodeSpec(msgspec.Struct):
    unschedulable: bool | None = None
    taints: list[_Taint] | None = None


class _NodeMeta(msgspec.Struct):
    name: str = ""
    resourceVersion: str = ""


class _Node(msgspec.Struct):
    metadata: _NodeMeta = msgspec.field(default_factory=_NodeMeta)
    spec: _NodeSpec | None = None
    status: _NodeStatus | None = None


class _NodeCapacity(_Node):
    status: _NodeStatusCapacity | None = None


class _LabelledMeta(_NodeMeta):
    """The metadata when a label is asked for (the zones' topologyKey, opt-in): the labels
    are decoded only then."""

    labels: dict[str, str] | None = None


class _LabelledNode(_Node):
    metadata: _LabelledMeta = msgspec.field(default_factory=_LabelledMeta)


class _PlacedSpec(_NodeSpec):
    taints: list[_FullTaint] | None = None  # type: ignore[assignment]


class _PlacedNode(_LabelledNode):
    """Every label and every taint in full (``targetPlacement``, opt-in)."""

    spec: _PlacedSpec | None = None


class _ListMeta(msgspec.Struct):
    resourceVersion: str = ""
    continue_: str = msgspec.field(default="", name="continue")


class _NodeList(msgspec.Struct):
    metadata: _ListMeta = msgspec.field(default_factory=_ListMeta)
    items: list[_Node] | None = None


class _NodeListCapacity(_NodeList):
    items: list[_NodeCapacity] | None = None  # type: ignore[assignment]


class _LabelledNodeList(_NodeList):
    items: list[_LabelledNode] | None = None  # type: ignore[assignment]


class _PlacedNodeList(_NodeList):
    items: list[_PlacedNode] | None = None  # type: ignore[assignment]


class _BookmarkMeta(msgspec.Struct):
    resourceVersion: str = ""
    annotations: dict[str, str] | None = None


class _Bookmark(msgspec.Struct):
    metadata: _BookmarkMeta = msgspec.field(default_factory=_BookmarkMeta)


class _Status(msgspec.Struct):
    code: int = 0
    reason: str = ""
    message: str = ""


class _Event(msgspec.Struct):
    type: str = ""
    object: msgspec.Raw = msgspec.Raw(b"null")


_event = msgspec.json.Decoder(_Event).decode
_node = msgspec.json.Decoder(_Node).decode
_list = msgspec.json.Decoder(_NodeList).decode
_node_capacity = msgspec.json.Decoder(_NodeCapacity).decode
_list_capacity = msgspec.json.Decoder(_NodeListCapacity).decode
_labelled_node = msgspec.json.Decoder(_LabelledNode).decode
_labelled_list = msgspec.json.Decoder(_LabelledNodeList).decode
_placed_node = msgspec.json.Decoder(_PlacedNode).decode
_placed_list = msgspec.json.Decoder(_PlacedNodeList).decode
_bookmark = msgspec.json.Decoder(_Bookmark).decode
_status = msgspec.json.Decoder(_Status).decode


def decode_status(raw: bytes | msgspec.Raw) -> Status:
    """A Status object (an ERROR event's)."""
    s = _status(raw)
    return Status(s.code, s.reason, s.message)


def _info(node: _Node, label: str = "") -> NodeInfo:
    info = _plain_info(node)
    status = node.status
    if isinstance(status, _NodeStatusCapacity) and status.capacity is not None:
        return info._replace(capacity_cpu=status.capacity.cpu)
    meta = node.metadata
    if label == ALL_LABELS and isinstance(meta, _LabelledMeta):
        spec = node.spec
        taints = (tuple((t.key, t.value, t.effect) for t in spec.taints)
                  if isinstance(spec, _PlacedSpec) and spec.taints else ())
        return info._replace(labels=tuple(sorted((meta.labels or {}).items())),
                             taint_details=taints)
    if label and isinstance(meta, _LabelledMeta) and meta.labels:
        return info._replace(label=meta.labels.get(label, ""))
    return info


def _plain_info(node: _Node) -> NodeInfo:
    status = node.status
    cpu = status.allocatable.cpu if status is not None and status.allocatable else None
    ready = status is not None and any(
        c.type == "Ready" and c.status == "True" for c in status.conditions or ())
    spec = node.spec
    unschedulable = bool(spec.unschedulable) if spec is not None else False
    taints = tuple(t.key for t in spec.taints) if spec is not None and spec.taints else ()
    return NodeInfo(node.metadata.name, node.metadata.resourceVersion, unschedulable, ready,
                    cpu, taints)


def decode_event(line: bytes | bytearray, capacity: bool = False, label: str = "") -> Event:
    """One JSON watch event (a line of the stream); ``capacity``: with the Node's capacity
    cpu (the vertical autoscaler); ``label``: with the value of that one label (zones)."""
    event = _event(line)
    kind = event.type
    if kind in ("ADDED", "MODIFIED", "DELETED"):
        if label:
            node = decode_node(event.object, label)
        else:
            node = _info((_node_capacity if capacity else _node)(event.object))
        return Event(kind, node, node.resource_version)
    if kind == "BOOKMARK":
        rv, initial_end = decode_bookmark(event.object)
        return Event(kind, resource_version=rv, initial_end=initial_end)
    if kind == "ERROR":
        return Event(kind, status=decode_status(event.object))
    return Event(kind)


def decode_node(raw: bytes | msgspec.Raw, label: str = "") -> NodeInfo:
    if label == ALL_LABELS:
        return _info(_placed_node(raw), label)
    if label:
        return _info(_labelled_node(raw), label)
    return _info(_node(raw))


def decode_bookmark(raw: bytes | msgspec.Raw) -> tuple[str, bool]:
    """A BOOKMARK's resourceVersion, and whether it ends a streaming list's initial events."""
    mark = _bookmark(raw)
    annotations = mark.metadata.annotations or {}
    return mark.metadata.resourceVersion, annotations.get(INITIAL_EVENTS_END) == "true"


def decode_event_capacity(line: bytes | bytearray) -> Event:
    return decode_event(line, capacity=True)


def decode_list_page(body: bytes | bytearray, capacity: bool = False,
                     label: str = "") -> ListPage:
    if label:
        labelled = _placed_list(body) if label == ALL_LABELS else _labelled_list(body)
        return ListPage([_info(node, label) for node in labelled.items or ()],
                        labelled.metadata.resourceVersion, labelled.metadata.continue_)
    page = (_list_capacity if capacity else _list)(body)
    items = [_info(node) for node in page.items or ()]
    return ListPage(items, page.metadata.resourceVersion, page.metadata.continue_)


def decode_list_page_capacity(body: bytes | bytearray) -> ListPage:
    return decode_list_page(body, capacity=True)
