"""HTTP/1.1 messages as this client writes and reads them, without sockets: a request's
head, an answer's status line, header fields and body (by its length, its chunks or to the
connection's close).

Why not ``http.client``: its answer header goes through the ``email`` parser, which alone
cost more CPU than the TLS, the JSON and the decision of a steady poll together; here a
request head is written in one piece and an answer's header read with a plain loop into
:class:`HeaderFields`.
"""

from __future__ import annotations

import functools
import io
import re
import socket
import ssl
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from cpa.http.errors import (
    ConnectError,
    HeaderError,
    IncompleteBody,
    ProtocolError,
    RemoteDisconnected,
    Unanswered,
)


class HeaderFields(Mapping[str, str]):
    """An answer's header fields, looked up without regard to case as HTTP wants: the first
    value of a repeated field (all of them through :meth:`get_all`), as ``HTTPMessage``
    answers, without its ``email`` parser."""

    __slots__ = ("_first", "_raw")

    def __init__(self) -> None:
        self._first: dict[str, str] = {}
        self._raw: list[tuple[str, str]] = []

    def add(self, name: str, value: str) -> None:
        key = name.lower()
        self._raw.append((key, value))
        self._first.setdefault(key, value)

    def extend_last(self, more: str) -> None:
        """An obsolete folded line (RFC 9112, 5.2): part of the previous field's value."""
        key, value = self._raw[-1]
        value = f"{value} {more}"
        self._raw[-1] = (key, value)
        if sum(1 for k, _ in self._raw if k == key) == 1:
            self._first[key] = value

    def __getitem__(self, key: str) -> str:
        return self._first[key.lower()]

    def get(self, key: str, default: Any = None) -> Any:  # Mapping's raises on a miss
        return self._first.get(key.lower(), default)

    def __iter__(self) -> Iterator[str]:
        return iter(self._first)

    def __len__(self) -> int:
        return len(self._first)

    def get_all(self, key: str, failobj: list[str] | None = None) -> list[str] | None:
        values = [v for k, v in self._raw if k == key.lower()]
        return values or failobj


MAX_LINE = 65536  # a status or header line, as http.client's limit
MAX_FIELDS = 100


class Answer:
    """An answer: its status and header, read from the connection's own buffered reader,
    and its body, read by its Content-Length, its chunks or to the connection's close.

    The reader outlives the answer: at the body's end the answer lets go of it rather than
    closing it, unless the answer owns it (one that ends its connection: ``owned``)."""

    def __init__(self, reader: io.BufferedReader, method: str) -> None:
        self.fp: io.BufferedReader | None = reader
        self._method = method
        self.headers: HeaderFields | None = None
        self.status = 0
        self.reason = ""
        self.version = 11
        self.chunked = False
        self.length: int | None = None  # body bytes still to come, when it has a length
        self.will_close = True
        self.owned: socket.socket | None = None

    def isclosed(self) -> bool:
        """The body was read to its end (or the answer closed): the reader let go of."""
        return self.fp is None

    def close(self) -> None:
        """Let go of the reader (closed with the socket when the answer owns them)."""
        fp, self.fp = self.fp, None
        sock, self.owned = self.owned, None
        if sock is not None:
            if fp is not None:
                fp.close()
            sock.close()

    def read(self) -> bytes:
        """The whole body (what is left of it)."""
        fp = self.fp
        if fp is None:
            return b""
        if self.chunked:
            try:
                return b"".join(dechunked(functools.partial(fp.read1, 65536)))
            finally:
                self.close()
        length = self.length
        if length is None:
            data = fp.read()
            self.close()
            return data
        data = fp.read(length) if length else b""
        self.close()
        if len(data) < length:
            raise IncompleteBody(f"the connection closed {length - len(data)} bytes short of "
                                 f"the body's {length}")
        return data

    def read1(self, amt: int) -> bytes:
        """What came of a body that is not chunked, up to ``amt`` bytes, with one read of
        the socket at most; b"" at its end."""
        fp = self.fp
        if fp is None:
            return b""
        if self.length is not None and amt > self.length:
            amt = self.length
        data = fp.read1(amt) if amt else b""
        if not data:
            self.close()
        elif self.length is not None:
            self.length -= len(data)
            if not self.length:
                self.close()
        return data

    def _check_close(self) -> bool:
        """Whether the server ends the connection after this answer (RFC 9112, 9.3; an
        HTTP/1.0 server keeps it only when it says keep-alive)."""
        fields = self.headers
        assert fields is not None
        connection = (fields.get("connection") or "").lower()
        if self.version == 11:
            return "close" in connection
        return not (fields.get("keep-alive") or "keep-alive" in connection
                    or "keep-alive" in (fields.get("proxy-connection") or "").lower())

    def begin(self) -> None:
        if self.headers is not None:
            return
        fp = self.fp
        assert fp is not None
        # Tell a connection broken before the answer's first byte (nothing answered: safe
        # to send a GET again) from one broken part-way through its header.
        try:
            fp.peek(1)  # blocks until a byte, EOF or an error
        except (ConnectionResetError, ConnectionAbortedError, ssl.SSLEOFError) as exc:
            raise Unanswered(f"{type(exc).__name__}: {exc}") from exc
        while True:
            version, status, reason, fields = read_head(fp)
            if status != 100:  # Continue: its own header is read and left
                break
        self.status = status
        self.reason = reason.strip()
        if version in ("HTTP/1.0", "HTTP/0.9"):
            self.version = 10
        elif version.startswith("HTTP/1."):
            self.version = 11
        else:
            raise ProtocolError(f"not an HTTP/1 answer: {version!r}")
        self.headers = fields
        encoding = fields.get("transfer-encoding")
        self.chunked = encoding is not None and encoding.lower() == "chunked"
        self.will_close = self._check_close()
        self.length = None
        length = fields.get("content-length")
        if length and not self.chunked:
            try:
                self.length = int(length)
            except ValueError:
                self.length = None
            else:
                if self.length < 0:
                    self.length = None
        if status in (204, 304) \
                or 100 <= status < 200 or self._method == "HEAD":
            self.length = 0
        if not self.will_close and not self.chunked and self.length is None:
            self.will_close = True


def status_line(text: str) -> tuple[str, int, str] | None:
    """A status line's version, code (100-999) and reason; None if it is not one."""
    parts = text.split(None, 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isascii() \
            or not parts[1].isdigit():
        return None
    status = int(parts[1])
    if not 100 <= status <= 999:
        return None
    return parts[0], status, parts[2] if len(parts) == 3 else ""


def read_head(fp: io.BufferedReader) -> tuple[str, int, str, HeaderFields]:
    """An answer's status line (version, code, reason) and header fields, with
    ``http.client``'s limits."""
    line = fp.readline(MAX_LINE + 1)
    if len(line) > MAX_LINE:
        raise ProtocolError("a status line longer than 65,536 bytes")
    if not line:
        raise RemoteDisconnected("the server closed the connection without an answer")
    return (*parsed_status(line.decode("iso-8859-1")), read_fields(fp))


def parsed_status(text: str) -> tuple[str, int, str]:
    """The status line's parts; :class:`ProtocolError` if it is not one."""
    status = status_line(text)
    if status is None:
        raise ProtocolError(f"not an HTTP status line: {text.strip()[:80]!r}")
    return status


def read_fields(fp: Any) -> HeaderFields:
    """Header lines up to the empty one, with ``http.client``'s limits."""
    lines: list[str] = []
    readline = fp.readline
    while True:
        line = readline(MAX_LINE + 1)
        if len(line) > MAX_LINE:
            raise ProtocolError("a header line longer than 65,536 bytes")
        if line in (b"\r\n", b"\n", b""):
            return fields_of(lines)
        if len(lines) >= MAX_FIELDS:
            raise ProtocolError(f"got more than {MAX_FIELDS} headers")
        lines.append(line.decode("iso-8859-1"))


def fields_of(lines: list[str]) -> HeaderFields:
    """The fields of a header's lines (each with or without its line end): names
    lower-cased, values stripped, a folded line joined to the field before it."""
    fields = HeaderFields()
    first, raw = fields._first, fields._raw
    for text in lines:
        if len(raw) >= MAX_FIELDS:
            raise ProtocolError(f"got more than {MAX_FIELDS} headers")
        if text[0] in " \t":
            if raw:
                fields.extend_last(text.strip())
            continue
        name, colon, value = text.partition(":")
        if colon:
            key = name.strip().lower()
            value = value.strip()
            raw.append((key, value))
            if key not in first:
                first[key] = value
    return fields


BAD_TARGET = re.compile(r"[\x00-\x20\x7f]")
CONTROL = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")
BODY_METHODS = ("POST", "PUT", "PATCH")

def field_value_problem(value: str | bytes, offset: int = 0) -> str | None:
    """Why ``value`` cannot be sent as a header field's value, else None: a line break
    or another control character (Go's ``net/http`` refuses the same, tab aside), or a
    character that is not ASCII. The reason names the byte (``offset`` more, for a value
    read from a file after leading whitespace), never the value: a field may be a
    credential."""
    data = value.encode("utf-8", "surrogateescape") if isinstance(value, str) else value
    if data.isascii() and not CONTROL.search(data):
        return None
    for index, byte in enumerate(data, offset):
        if byte in (0x0A, 0x0D):
            return f"contains a line break at byte {index}"
        if (byte < 0x20 and byte != 0x09) or byte == 0x7F:
            return f"contains a control character (0x{byte:02x}) at byte {index}"
        if byte > 0x7F:
            return f"contains a character that is not ASCII at byte {index}"
    return None


def field_lines(headers: Mapping[str, Any]) -> str:
    """The caller's fields as header lines, each value refused if it could end the line
    or is not ASCII; the error names the field and the reason, never the value."""
    parts = []
    for name, value in headers.items():
        value = str(value)
        if BAD_TARGET.search(name):
            raise HeaderError(f"a header name with a control character or a space: "
                              f"{name[:40]!r}")
        problem = field_value_problem(value)
        if problem is not None:
            raise HeaderError(f"the {name} header's value {problem}: not sent")
        parts.append(f"{name}: {value}\r\n")
    return "".join(parts)


class Dechunker:
    """HTTP/1.1 chunked transfer coding (RFC 9112, 7.1), decoded incrementally.

    A read wholly inside a chunk's data (many of the reads of a Node list: the API server
    writes each Node in chunks larger than the TLS records that carry them) is given back
    as it is, without a copy or a pass of the state loop."""

    MAX_LINE = 4096  # a chunk-size or trailer line; anything longer is not HTTP

    def __init__(self) -> None:
        self._buf = b""
        self._left = 0  # data bytes of the current chunk still to come
        self._state = "size"  # size, data, crlf, trailer, done
        self.done = False

    def feed(self, data: bytes) -> bytes:
        """The body bytes in ``data`` (and what was pending before it)."""
        if self._state == "data":
            left = self._left - len(data)
            if left > 0:
                self._left = left
                return data
            if not left:
                self._left = 0
                self._state = "crlf"
                return data
        buf = self._buf + data if self._buf else data
        out: list[bytes] = []
        pos, end = 0, len(buf)
        while pos < end:
            state = self._state
            if state == "data":
                take = min(self._left, end - pos)
                out.append(buf[pos:pos + take])
                pos += take
                self._left -= take
                if not self._left:
                    self._state = "crlf"
            elif state == "crlf":
                if end - pos < 2:
                    break
                if buf[pos:pos + 2] != b"\r\n":
                    raise ConnectError("malformed chunked body: no CRLF after a chunk")
                pos += 2
                self._state = "size"
            elif state in ("size", "trailer"):
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    if end - pos > self.MAX_LINE:
                        raise ConnectError("malformed chunked body: a line too long")
                    break
                line = buf[pos:eol]
                pos = eol + 2
                if state == "trailer":
                    if not line:
                        self._state = "done"
                        self.done = True
                        break
                    continue
                try:
                    size = int(line.split(b";", 1)[0].strip(), 16)
                except ValueError:
                    raise ConnectError(f"malformed chunked body: chunk size {line[:40]!r}"
                                       ) from None
                if size < 0:
                    raise ConnectError("malformed chunked body: a negative chunk size")
                if size:
                    self._left = size
                    self._state = "data"
                else:
                    self._state = "trailer"
            else:
                break
        self._buf = buf[pos:] if self._state != "done" else b""
        return out[0] if len(out) == 1 else b"".join(out)


def dechunked(read: Callable[[], bytes]) -> Iterator[bytes]:
    """A chunked body's data as it arrives, one ``read`` at a time; :class:`IncompleteBody`
    if the connection ends inside it."""
    decoder = Dechunker()
    feed = decoder.feed
    data = read()
    while True:
        if not data:
            raise IncompleteBody("the connection closed inside a chunked body")
        out = feed(data)
        if out:
            yield out
        if decoder.done:
            return
        data = read()

