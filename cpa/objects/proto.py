"""Objects' metadata (``PartialObjectMetadata``) off Kubernetes' protobuf wire, as far as
a count needs it.

Why protobuf: the API server encodes a page of metadata in protobuf for much less CPU than
in JSON (``python -m bench.objects``), and that cost falls on every daemon start in a
cluster of many Pods. The envelope, the watch framing, the Status and the wire primitives
are :mod:`cpa.kube.wire`'s. The schema (k8s.io/apimachinery ``pkg/apis/meta/v1/
generated.proto``, checked against kube-apiserver v1.35.4):

* PartialObjectMetadataList {1 metadata: ListMeta {2 resourceVersion, 3 continue},
  2 items: PartialObjectMetadata};
* PartialObjectMetadata {1 metadata: ObjectMeta {5 uid, 6 resourceVersion,
  9 deletionTimestamp}}; everything else (names, labels, managedFields) is skipped by its
  length, never decoded.

A deletionTimestamp counts as set when its field is present, as a non-nil pointer is in Go
(the encoder writes it only then).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, TypeVar

from cpa.kube.wire import (
    Buffer,
    ProtoError,
    Status,
    checked,
    field_key,
    length_delimited,
    skip_field,
    status_fields,
    string_fields,
    unwrap,
    utf8,
)

T = TypeVar("T")

__all__ = ["Meta", "MetaEvent", "MetaPage", "decode_event", "decode_list_page"]


class Meta(NamedTuple):
    """What a count needs of one object."""

    uid: str
    resource_version: str
    deleting: bool


class MetaPage(NamedTuple):
    """A page of a list: its objects, resourceVersion and continue token."""

    items: list[Meta]
    resource_version: str
    continue_token: str


class MetaEvent(NamedTuple):
    """A watch event: its type and object (None for a BOOKMARK or an ERROR), the
    resourceVersion it carries, and an ERROR's Status."""

    type: str
    meta: Meta | None = None
    resource_version: str = ""
    status: Status | None = None


def _object_meta(buf: Buffer, pos: int, end: int) -> Meta:
    """ObjectMeta {5 uid, 6 resourceVersion, 9 deletionTimestamp}."""
    uid = rv = ""
    deleting = False
    while pos < end:
        key, pos = field_key(buf, pos)
        if key in (0x2A, 0x32):  # 5 uid, 6 resourceVersion
            start, pos = length_delimited(buf, pos, end)
            if key == 0x2A:
                uid = utf8(buf, start, pos)
            else:
                rv = utf8(buf, start, pos)
        elif key == 0x4A:  # 9 deletionTimestamp: a Time message, present or not
            deleting = True
            pos = skip_field(buf, 2, pos, end)
        else:
            pos = skip_field(buf, key & 7, pos, end)
    return Meta(uid, rv, deleting)


def _partial(buf: Buffer, pos: int, end: int) -> Meta:
    """PartialObjectMetadata {1 metadata: ObjectMeta}."""
    meta = Meta("", "", False)
    while pos < end:
        key, pos = field_key(buf, pos)
        if key == 0x0A:
            start, pos = length_delimited(buf, pos, end)
            meta = _object_meta(buf, start, pos)
        else:
            pos = skip_field(buf, key & 7, pos, end)
    return meta


def _decode_list_page(buf: Buffer) -> MetaPage:
    """A PartialObjectMetadataList body (``k8s\\x00`` + runtime.Unknown)."""
    kind, pos, end = unwrap(buf)
    if kind == "Status":
        raise ProtoError("expected a PartialObjectMetadataList, got a Status: "
                         f"{status_fields(buf, pos, end).message}")
    if kind not in ("PartialObjectMetadataList", ""):
        raise ProtoError(f"expected a PartialObjectMetadataList, got a {kind}")
    items: list[Meta] = []
    rv = cont = ""
    while pos < end:
        key, pos = field_key(buf, pos)
        if key == 0x12:  # 2 items
            start, pos = length_delimited(buf, pos, end)
            items.append(_partial(buf, start, pos))
        elif key == 0x0A:  # 1 metadata: ListMeta {2 resourceVersion, 3 continue}
            start, pos = length_delimited(buf, pos, end)
            rv, cont = string_fields(buf, start, pos, (0x12, 0x1A))
        else:
            pos = skip_field(buf, key & 7, pos, end)
    return MetaPage(items, rv, cont)


def _decode_event(frame: Buffer) -> MetaEvent:
    """One watch frame (without its length): a bare metav1.WatchEvent {1 type, 2 object:
    RawExtension {1 raw}}, its raw a body wrapping a PartialObjectMetadata or a Status."""
    end = len(frame)
    pos = 0
    etype = ""
    raw = (0, 0)
    while pos < end:
        key, pos = field_key(frame, pos)
        if key == 0x0A:  # 1 type
            start, pos = length_delimited(frame, pos, end)
            etype = utf8(frame, start, pos)
        elif key == 0x12:  # 2 object: RawExtension
            start, pos = length_delimited(frame, pos, end)
            while start < pos:
                k, start = field_key(frame, start)
                if k == 0x0A:  # 1 raw
                    raw = length_delimited(frame, start, pos)
                    start = raw[1]
                else:
                    start = skip_field(frame, k & 7, start, pos)
        else:
            pos = skip_field(frame, key & 7, pos, end)
    if raw[0] == raw[1]:
        return MetaEvent(etype)
    kind, start, stop = unwrap(frame, raw[0], raw[1])
    if etype == "ERROR":
        return MetaEvent(etype, status=status_fields(frame, start, stop))
    meta = _partial(frame, start, stop)
    if etype == "BOOKMARK":
        return MetaEvent(etype, resource_version=meta.resource_version)
    if kind not in ("PartialObjectMetadata", ""):
        raise ProtoError(f"expected a PartialObjectMetadata, got a {kind}")
    return MetaEvent(etype, meta, meta.resource_version)


def _utf8_checked(fn: Callable[[Buffer], T]) -> Callable[[Buffer], T]:
    """``fn`` (already :func:`~cpa.kube.wire.checked`) with a string that is not UTF-8
    reported as :class:`ProtoError` too: corrupt bytes, as any other."""
    def wrapper(buf: Buffer) -> T:
        try:
            return fn(buf)
        except UnicodeDecodeError as exc:
            raise ProtoError(f"a string field that is not UTF-8: {exc.reason}") from None
    wrapper.__doc__ = fn.__doc__
    return wrapper


decode_list_page = _utf8_checked(checked(_decode_list_page))
decode_event = _utf8_checked(checked(_decode_event))
