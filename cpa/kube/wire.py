"""Kubernetes' wire formats below the level of any one kind of object.

What every response of the API server shares, whatever it carries: the content types (and
which of the two encodings an answer is in), the framing of a watch stream (JSON lines, or
length-prefixed protobuf frames), the ``Status`` object of an error answer or an ERROR
watch event, and a small reader of the protobuf wire (varints, keys, length-delimited
fields) with the ``k8s\\x00`` + ``runtime.Unknown`` envelope around every protobuf body.

The Node's own schema is :mod:`cpa.nodes.proto`'s business; it reads it with the primitives
here. This module imports only the standard library and :mod:`cpa.kube.api`, so the client,
the node watch and their tests share it without pulling in anything heavy.

The protobuf wire (checked against kube-apiserver v1.35.4; field numbers from
k8s.io/apimachinery ``generated.proto``):

* a body (a list, a Status, a watch event's object) is the magic ``k8s\\x00`` followed by a
  ``runtime.Unknown`` {1 typeMeta {1 apiVersion, 2 kind}, 2 raw, 3 contentEncoding,
  4 contentType}; ``raw`` is the object itself;
* a watch (``Content-Type: application/vnd.kubernetes.protobuf;stream=watch``) is a
  sequence of frames, each a 4-byte big-endian length and a bare ``metav1.WatchEvent``
  {1 type, 2 object: RawExtension {1 raw}} (no magic, no Unknown), whose ``raw`` is a body
  as above;
* Status {3 message, 4 reason, 6 code}.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Concatenate, NamedTuple, ParamSpec, TypeVar

from cpa.kube.api import ApiError, StreamResponse

__all__ = [
    "ACCEPT_PROTOBUF",
    "INITIAL_EVENTS_END",
    "JSON",
    "MAGIC",
    "MAX_FRAME_BYTES",
    "PROTOBUF",
    "Buffer",
    "OversizeFrame",
    "ProtoError",
    "Status",
    "api_error",
    "checked",
    "decode_status",
    "field_key",
    "frames",
    "is_protobuf",
    "length_delimited",
    "lines",
    "skip_field",
    "status_fields",
    "string_field",
    "string_fields",
    "unwrap",
    "utf8",
    "varint",
]

JSON = "application/json"
PROTOBUF = "application/vnd.kubernetes.protobuf"
# Protobuf where the server can encode it, JSON otherwise (a server, aggregated API or proxy
# without protobuf answers JSON to this): the response's Content-Type says which came.
ACCEPT_PROTOBUF = f"{PROTOBUF}, {JSON}"
MAX_FRAME_BYTES = 16 * 1024 * 1024
"""The largest watch frame (or JSON line) read: client-go's streaming decoder's limit. A
length prefix beyond it is a corrupt or hostile stream, not a Node to wait 4 GiB for."""
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
"""The annotation of the bookmark that ends a streaming list's initial events."""
MAGIC = b"k8s\x00"

Buffer = bytes | bytearray
T = TypeVar("T")
P = ParamSpec("P")


def is_protobuf(content_type: str | None) -> bool:
    """Whether a response (``...protobuf`` or ``...protobuf;stream=watch``) is protobuf."""
    if not content_type:
        return False
    return content_type.split(";", 1)[0].strip().lower() == PROTOBUF


class Status(NamedTuple):
    """A ``Status`` object (an ERROR watch event, or an error answer)."""

    code: int = 0
    reason: str = ""
    message: str = ""


class ProtoError(ValueError):
    """Bytes that are not the protobuf we expect (truncated, wrong magic, bad wire type)."""


class OversizeFrame(ValueError):
    """A watch frame or line longer than :data:`MAX_FRAME_BYTES`."""


# --- the protobuf wire ----------------------------------------------------------------------
# Small functions called per field of every Node in a list: keep them plain.


def varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """A varint at ``pos``: (value, position after it)."""
    result = shift = 0
    while True:
        try:
            b = buf[pos]
        except IndexError:
            raise ProtoError("truncated varint") from None
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ProtoError("varint longer than 10 bytes")


def skip_field(buf: Buffer, wire: int, pos: int, end: int) -> int:
    """The position after a field's value of wire type ``wire`` starting at ``pos``."""
    if wire == 2:
        n, pos = varint(buf, pos)
        pos += n
    elif wire == 0:
        _, pos = varint(buf, pos)
    elif wire == 1:
        pos += 8
    elif wire == 5:
        pos += 4
    else:
        raise ProtoError(f"unsupported wire type {wire}")
    if pos > end:
        raise ProtoError("field runs past the end of its message")
    return pos


def length_delimited(buf: Buffer, pos: int, end: int) -> tuple[int, int]:
    """A length-delimited field's payload bounds: (start, end)."""
    b = buf[pos] if pos < end else -1
    if 0 <= b < 0x80:  # one-byte length: most fields
        start, stop = pos + 1, pos + 1 + b
    else:
        n, start = varint(buf, pos)
        stop = start + n
    if stop > end:
        raise ProtoError("field runs past the end of its message")
    return start, stop


def utf8(buf: Buffer, start: int, stop: int) -> str:
    return str(buf[start:stop], "utf-8")


def field_key(buf: Buffer, pos: int) -> tuple[int, int]:
    """A field key: (key, position after it); one byte for every field we read."""
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    return varint(buf, pos)


def string_field(buf: Buffer, pos: int, end: int, want: int) -> str:
    """The string field with key ``want`` (field number << 3 | 2) of the message between
    ``pos`` and ``end``; "" when absent (:func:`string_fields` of one)."""
    return string_fields(buf, pos, end, (want,))[0]


def string_fields(buf: Buffer, pos: int, end: int, wants: tuple[int, ...]) -> list[str]:
    """The string fields with keys ``wants`` of the message between ``pos`` and ``end``, in
    that order; "" for one absent. Every other field is skipped; a repeated one is read each
    time, so the last wins as protobuf says."""
    values = [""] * len(wants)
    while pos < end:
        key, pos = field_key(buf, pos)
        if key in wants:
            start, pos = length_delimited(buf, pos, end)
            values[wants.index(key)] = utf8(buf, start, pos)
        else:
            pos = skip_field(buf, key & 7, pos, end)
    return values


def unwrap(buf: Buffer, pos: int = 0, end: int | None = None) -> tuple[str, int, int]:
    """A body (``k8s\\x00`` + runtime.Unknown): (kind, start, end) of the object in it."""
    end = len(buf) if end is None else end
    if bytes(buf[pos:pos + 4]) != MAGIC:
        raise ProtoError("not a Kubernetes protobuf body (no k8s\\x00 magic)")
    pos += 4
    kind = ""
    raw = (pos, pos)
    while pos < end:
        key, pos = field_key(buf, pos)
        if key == 0x0A:  # 1 typeMeta
            start, pos = length_delimited(buf, pos, end)
            kind = string_field(buf, start, pos, 0x12)  # 2 kind
        elif key == 0x12:  # 2 raw
            raw = length_delimited(buf, pos, end)
            pos = raw[1]
        else:
            pos = skip_field(buf, key & 7, pos, end)
    return kind, raw[0], raw[1]


def status_fields(buf: Buffer, pos: int, end: int) -> Status:
    """A Status message's fields (the object inside a body's envelope)."""
    code = 0
    reason = message = ""
    while pos < end:
        key, pos = field_key(buf, pos)
        if key == 0x1A:  # 3 message
            start, pos = length_delimited(buf, pos, end)
            message = utf8(buf, start, pos)
        elif key == 0x22:  # 4 reason
            start, pos = length_delimited(buf, pos, end)
            reason = utf8(buf, start, pos)
        elif key == 0x30:  # 6 code (int32 varint; negative ones take 10 bytes)
            code, pos = varint(buf, pos)
            if code >= 1 << 63:
                code -= 1 << 64
        else:
            pos = skip_field(buf, key & 7, pos, end)
    return Status(code=code, reason=reason, message=message)


def checked(fn: Callable[Concatenate[Buffer, P], T]) -> Callable[Concatenate[Buffer, P], T]:
    """``fn`` with a read past the end of its buffer (truncated or corrupt bytes) reported
    as :class:`ProtoError`, like every other malformed input."""
    def wrapper(buf: Buffer, /, *args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return fn(buf, *args, **kwargs)
        except IndexError:
            raise ProtoError("truncated protobuf message") from None
    wrapper.__doc__ = fn.__doc__
    return wrapper


@checked
def decode_status(buf: Buffer) -> Status:
    """A protobuf Status body (an error answer, or an ERROR watch event's object)."""
    kind, start, end = unwrap(buf)
    if kind not in ("Status", ""):
        raise ProtoError(f"expected a Status, got a {kind}")
    return status_fields(buf, start, end)


# --- answers and streams --------------------------------------------------------------------


def api_error(status: int, data: bytes, content_type: str | None = None) -> ApiError:
    """The error of a non-2xx answer, with the reason and message of its Status (protobuf
    or JSON, as the answer is), else its text."""
    if is_protobuf(content_type) or data.startswith(MAGIC):
        # An error answer to a protobuf Accept is a protobuf Status.
        try:
            doc = decode_status(data)
            return ApiError(status, doc.reason, doc.message or f"HTTP {status}")
        except ProtoError:
            pass
    reason, message = "", data.decode("utf-8", "replace").strip()[:500]
    try:
        obj = json.loads(data)
        if isinstance(obj, dict):
            reason = str(obj.get("reason", ""))
            message = str(obj.get("message", message))
    except ValueError:
        pass
    return ApiError(status, reason, message or f"HTTP {status}")


def lines(resp: StreamResponse, chunk: int = 65536,
          limit: int = MAX_FRAME_BYTES) -> Iterator[bytes]:
    """Split a streamed watch response into its newline-delimited JSON events (each at
    most ``limit`` bytes)."""
    pending = b""
    for data in resp.stream(chunk, decode_content=True):
        if not data:
            continue
        pending += data
        if b"\n" not in data:
            if len(pending) > limit:
                raise OversizeFrame(f"a watch event longer than {limit} bytes (the limit, "
                                    "as client-go's): a corrupt stream")
            continue
        *complete, pending = pending.split(b"\n")
        for line in complete:
            if line.strip():
                yield line
    if pending.strip():
        yield pending


def frames(resp: StreamResponse, chunk: int = 65536,
           limit: int = MAX_FRAME_BYTES) -> Iterator[bytearray]:
    """Split a streamed protobuf watch into its frames: each a 4-byte big-endian length and
    that many bytes (k8s.io/apimachinery's LengthDelimitedFramer); yields the payloads.

    A frame longer than ``limit`` raises :class:`OversizeFrame` as soon as its length is
    read. A stream that ends inside a frame was cut: that raises, as a torn JSON line
    does."""
    buf = bytearray()
    pos = 0
    for data in resp.stream(chunk, decode_content=True):
        if not data:
            continue
        buf += data
        have = len(buf)
        while have - pos >= 4:
            size = int.from_bytes(buf[pos:pos + 4], "big")
            if size > limit:
                raise OversizeFrame(f"a watch frame of {size} bytes, over the {limit}-byte "
                                    "limit (client-go's): a corrupt stream")
            if have - pos - 4 < size:
                break
            yield buf[pos + 4:pos + 4 + size]
            pos += 4 + size
        if pos:
            del buf[:pos]
            pos = 0
    if buf:
        raise ProtoError(f"the watch stream ended inside a frame ({len(buf)} bytes left over)")
