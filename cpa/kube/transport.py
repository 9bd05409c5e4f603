"""HTTP/1.1 connections to the API server, kept alive and shared between threads.

Why not urllib3: importing it costs ~30 ms (a third of the start-up path to the first Node
list, measured in a clean venv), and the daemon needs little of it: one server, keep-alive,
per-request timeouts, chunked streams it reads as they arrive, and a way to cut a blocked
read from another thread. Nor ``http.client``: importing it costs ~10 ms more than
what this module needs besides (its ``email`` parser, on the path to the first Node list),
and of it only the body reading was still used: a body is read here too, by its
Content-Length, its chunks (:class:`_Dechunker`) or to the connection's close.

Deadlines. A socket timeout bounds each read, not a request: an answer drip-fed one byte
every 10 s never trips a 30 s read timeout and holds the poll for as long as the server
likes. So a request may carry a deadline (a :func:`time.monotonic` time) that covers it
from connecting to its last byte. It is a number on the request's connection, looked at
each time a read begins (:class:`_DeadlineIO`: the socket's timeout becomes the time left
when that is shorter), so a request whose deadline passes fails with
:class:`DeadlineExceeded` by the deadline without a thread to cut it, and a request costs
no registration. :meth:`Pool.abort` cuts every request in flight that has a deadline at
once (SIGTERM) and gives the ones made afterwards a short grace.

Paced streams. A watch of Nodes under churn brings an event every few milliseconds, and a
read woken for each one runs through cold caches each time: per event, the wake-up and
the reads cost several times what the same code costs warm. A stream opened with a
``pace`` (:meth:`Pool.request`) reads from a socket that does not block, and when nothing
is there it sleeps out the rest of its ``pace`` if it was woken less than ``pace`` ago,
else waits in ``poll``: one wake-up per ``pace`` for whatever came meanwhile, and the first
event after a quiet spell read at once.

A poll is two small GETs, so their fixed cost is the poll's cost. ``http.client`` writes a
request one validated header at a time and parses the answer's header with the ``email``
package, which alone cost more CPU than the TLS, the JSON and the decision together. So the
connections here write each request head in one piece and read the answer's header with a
plain loop into :class:`_Fields` (``bench.pollcost``: 1.02 -> 0.66 ms of CPU for a
ConfigMap GET plus a scale GET against kube-apiserver, median of 7 interleaved runs).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import io
import math
import re
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NoReturn

MAX_IDLE = 4  # kept alive: the poll's reads sent ahead, the node watch, Events, the Lease
READER_BUFFER = 8192  # a connection's buffered reader's size (io's default)


class ReadTimeoutError(TimeoutError):
    """A read that got no bytes within the read timeout (a silent or dead connection)."""


class DeadlineExceeded(TimeoutError):
    """A request still unfinished at its deadline (connect to last byte); its connection
    was cut."""


class ConnectError(OSError):
    """The connection could not be made, or broke before the server answered."""

    def __init__(self, message: str, before_answer: bool = False,
                 reused: bool = False, broken: bool = False) -> None:
        super().__init__(message)
        self.before_answer = before_answer  # closed or reset before any response byte
        self.reused = reused  # on a kept-alive connection that had served a request
        self.broken = broken  # reset or closed under us (not refused, not a timeout)

    @property
    def retryable(self) -> bool:
        """Go's rule (net/http ``shouldRetryRequest``) for an idempotent request: a
        kept-alive connection that failed before a single byte of the answer came back;
        the server or a middlebox dropped it as we sent, so the request was not handled."""
        return self.before_answer and self.reused


class ProtocolError(Exception):
    """The server's answer is not HTTP/1.x as this transport reads it: a bad status line
    or header, a body cut short (what ``http.client`` calls ``HTTPException``)."""


class IncompleteBody(ProtocolError):
    """The connection ended before the body did (short of its Content-Length, or inside
    a chunked body)."""


class RemoteDisconnected(ConnectionResetError):
    """The server closed the connection without a byte of an answer (an idle kept-alive
    connection it had dropped, most often)."""


def closed_before_answer(exc: BaseException) -> bool:
    """The connection was closed or reset under us (not a timeout)."""
    return isinstance(exc, (RemoteDisconnected, ConnectionResetError,
                            BrokenPipeError, ConnectionAbortedError, ssl.SSLEOFError))


def probable_eof(exc: BaseException) -> bool:
    """client-go's ``IsConnectionReset || IsProbableEOF``: the connection was reset or
    closed at any point, the answer's body included (not refused, not a timeout)."""
    return (closed_before_answer(exc) or isinstance(exc, IncompleteBody)
            or (isinstance(exc, ConnectError) and exc.broken))


class _Unanswered(ConnectionError):
    """The connection broke while we waited for the first byte of the answer."""


DEADLINE_SLACK = 0.005  # s: how far past its deadline a read begun in time may end


class _DeadlineIO(io.RawIOBase):
    """The socket as its connection's one buffered reader reads it: a read waits at most
    the time left before the request's deadline (the socket's timeout is lowered to it when
    a read would otherwise end more than :data:`DEADLINE_SLACK` past the deadline). No
    thread and no per-request registration: the deadline is a number on the connection,
    looked at when a read begins."""

    def __init__(self, sock: socket.socket, conn: _Connection) -> None:
        self._sock = sock
        self._conn = conn
        self._tls = isinstance(sock, ssl.SSLSocket)
        self._pollers: dict[int, select.poll] = {}  # paced reads' waits, by event mask

    def readable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._sock.fileno()

    def readinto(self, buffer: Any) -> int:
        conn = self._conn
        if conn.pace:
            return self._paced(buffer)
        deadline = conn.deadline
        if deadline != math.inf:
            left = deadline - conn.clock()
            if left < conn.wait - DEADLINE_SLACK:
                if left <= 0:
                    raise TimeoutError("the request's deadline passed")
                self._sock.settimeout(left)
                conn.wait = left
        if self._tls:
            return _tls_read(self._sock, buffer)
        return self._sock.recv_into(buffer)

    def _paced(self, buffer: Any) -> int:
        """A read of a paced stream (:meth:`Pool.request`'s ``pace``): the socket does not
        block; when nothing is there, a stream busy in the last ``pace`` seconds sleeps
        out the rest of them before it reads again, and only an idle one waits in
        ``poll``. What came meanwhile is then read in one go: one wake-up per ``pace``
        however fast the events come, instead of one each, and the first event after a
        quiet spell is read as soon as it comes."""
        conn = self._conn
        sock = self._sock
        slept = False
        while True:
            try:
                if self._tls:
                    return _tls_read(sock, buffer)
                return sock.recv_into(buffer)
            except (ssl.SSLWantReadError, BlockingIOError):
                events = select.POLLIN
            except ssl.SSLWantWriteError:  # a TLS 1.3 key update answered as we read
                events = select.POLLOUT
            now = conn.clock()
            resume = conn.woke + conn.pace
            if conn.deadline != math.inf:
                resume = min(resume, conn.deadline)
            if now < resume and not slept:
                time.sleep(resume - now)
                conn.woke = resume
                slept = True
                continue
            wait = conn.pace_wait
            if conn.deadline != math.inf:
                wait = min(wait, conn.deadline - now)
                if wait <= 0:
                    raise TimeoutError("the request's deadline passed")
            if not self._ready(events, wait):
                raise TimeoutError("timed out")
            conn.woke = conn.clock()
            slept = True  # woken by data: read it now

    def _ready(self, events: int, timeout: float) -> bool:
        """Whether the socket is ready for ``events`` within ``timeout`` seconds (its
        own socket: an answer that ends its connection took it from the connection)."""
        poller = self._pollers.get(events)
        if poller is None:
            poller = self._pollers[events] = select.poll()
            poller.register(self._sock, events)
        return bool(poller.poll(None if timeout == math.inf else math.ceil(timeout * 1000)))


def _tls_read(sock: Any, buffer: Any) -> int:
    """``SSLSocket.recv_into`` without its two Python frames (``recv_into``, ``read``):
    the TLS object's read, a ragged EOF read as the end (``suppress_ragged_eofs``, on
    for every socket here)."""
    tls = sock._sslobj
    if tls is None:
        return int(sock.recv_into(buffer))  # closed or unwrapped: the socket's own error
    try:
        return int(tls.read(len(buffer), buffer))
    except ssl.SSLEOFError:
        return 0


def _send_all(sock: Any, data: bytes) -> None:
    """``sendall``; for TLS without ``SSLSocket``'s three Python frames (``sendall``,
    ``send``, the view loop): its TLS object's write, which writes all of a small request
    (no partial writes) and waits as the socket's timeout says."""
    tls = getattr(sock, "_sslobj", None)
    if tls is None:
        sock.sendall(data)
        return
    sent = tls.write(data)
    if sent < len(data):
        with memoryview(data) as view:
            while sent < len(data):
                sent += tls.write(view[sent:])


def _ascii(host: str) -> str | bytes:
    """A host name as the socket and TLS layers take it without loading the IDNA codec
    (~1.3 ms of the first connection): bytes when it is ASCII, which that codec would
    return unchanged; an internationalised name stays text, for the codec."""
    return host.encode("ascii") if host.isascii() else host


class _Connection:
    """One connection, plain or TLS. The name verified (and sent as SNI) may differ from
    the address dialled (a kubeconfig's ``tls-server-name``), and the handshake runs on a
    socket already published as ``self.sock``, so :meth:`Pool.abort` can cut it too.

    The connection keeps one buffered reader for all its answers, and the deadline of the
    request it carries:
    ``deadline`` (``math.inf``: none), ``wait`` (the socket's timeout now), ``expired``
    (cut by :meth:`Pool.abort`)."""

    def __init__(self, host: str, port: int, timeout: float,
                 context: ssl.SSLContext | None, server_name: str | None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout
        self.sock: socket.socket | None = None
        self._tls = context
        self._server_name = server_name or host
        self.clock = clock
        self.deadline = math.inf
        self.wait = math.inf
        self.expired = False
        self.reader: io.BufferedReader | None = None
        self.host_line = f"Host: {_host_field(self)}\r\n"
        self._poller: select.poll | None = None
        self.pace = 0.0  # a paced stream's wake-up interval (0: not paced)
        self.pace_wait = math.inf  # its read timeout
        self.woke = -math.inf  # when it last woke up to read

    def connect(self) -> None:
        self._poller = None
        # getaddrinfo takes bytes too (typeshed says str only)
        sock = socket.create_connection((_ascii(self.host), self.port),  # type: ignore[arg-type]
                                        self.timeout)
        self.sock = sock
        try:  # as Go and urllib3 do
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError as exc:
            if exc.errno != errno.ENOPROTOOPT:
                raise
        if self._tls is not None:
            tls = self._tls.wrap_socket(self.sock, server_hostname=_ascii(self._server_name),
                                        do_handshake_on_connect=False)
            self.sock = tls
            if self.deadline != math.inf:  # the handshake, as a whole, within the deadline
                left = self.deadline - self.clock()
                if left <= 0:
                    raise TimeoutError("the request's deadline passed while connecting")
                tls.settimeout(left if self.timeout is None else min(self.timeout, left))
            tls.do_handshake()
        if self.sock is not None:
            self.reader = io.BufferedReader(_DeadlineIO(self.sock, self), READER_BUFFER)

    def dropped(self) -> bool:
        """An idle kept-alive connection the server closed: its socket reads as ready (EOF
        or a TLS close) though we sent nothing. Checked before reuse, as Go's transport
        does; poll, not select: a descriptor above 1,023 is fine once the limit is
        raised."""
        sock = self.sock
        if sock is None:
            return True
        try:
            poller = self._poller
            if poller is None:
                poller = self._poller = select.poll()
                poller.register(sock, select.POLLIN)
            return bool(poller.poll(0))
        except (OSError, ValueError):
            return True

    def detach(self) -> tuple[io.BufferedReader | None, socket.socket | None]:
        """Hand the reader and socket to an answer that ends the connection (it reads its
        body to the close); the connection is closed without touching them."""
        reader, sock = self.reader, self.sock
        self.reader = self.sock = None
        self.close()
        return reader, sock

    def close(self) -> None:
        reader, self.reader = self.reader, None
        sock, self.sock = self.sock, None
        self._poller = None
        if sock is not None:
            sock.close()
        if reader is not None:
            reader.close()  # the raw reader leaves the socket alone: closed above

    _method = "GET"

    def request(self, method: str, url: str, body: bytes | None,
                headers: Mapping[str, Any]) -> None:
        self._method = _write_request(self, method, url, body, headers)

    def getresponse(self) -> _Answer:
        return _read_answer(self, self._method)


class _Fields(Mapping[str, str]):
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


_MAX_LINE = 65536  # a status or header line, as http.client's limit
_MAX_FIELDS = 100


class _Answer:
    """An answer: its status and header, read from the connection's own buffered reader
    (in one piece when it came whole, see :func:`_whole_head`), and its body, read by its
    Content-Length, its chunks or to the connection's close.

    The reader outlives the answer: at the body's end the answer lets go of it rather than
    closing it, unless the answer owns it (one that ends its connection: ``owned``)."""

    def __init__(self, reader: io.BufferedReader, method: str) -> None:
        self.fp: io.BufferedReader | None = reader
        self._method = method
        self.headers: _Fields | None = None
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
                return b"".join(_dechunked(functools.partial(fp.read1, 65536)))
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

    def _read_status(self) -> tuple[str, int, str]:
        """The status line, read line by line (the rare path: see :func:`_whole_head`)."""
        assert self.fp is not None
        line = self.fp.readline(_MAX_LINE + 1)
        if len(line) > _MAX_LINE:
            raise ProtocolError("a status line longer than 65,536 bytes")
        if not line:
            raise RemoteDisconnected("the server closed the connection without an answer")
        text = line.decode("iso-8859-1")
        status = _status_line(text)
        if status is None:
            self.close()
            raise ProtocolError(f"not an HTTP status line: {text.strip()[:80]!r}")
        return status

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
        fields = None
        if self.fp is not None:
            # Tell a connection broken before the answer's first byte (nothing answered:
            # safe to send a GET again) from one broken part-way through its header.
            try:
                came = self.fp.peek(1)  # blocks until a byte, EOF or an error
            except (ConnectionResetError, ConnectionAbortedError, ssl.SSLEOFError) as exc:
                raise _Unanswered(f"{type(exc).__name__}: {exc}") from exc
            whole = _whole_head(came)
            if whole is not None:
                version, status, reason, fields, size = whole
                self.fp.read(size)  # what was parsed, from the buffer
        if fields is None:
            while True:
                version, status, reason = self._read_status()
                if status != 100:  # Continue
                    break
                _read_fields(self.fp)  # a 100 Continue's own header
            fields = _read_fields(self.fp)
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


def _whole_head(came: bytes) -> tuple[str, int, str, _Fields, int] | None:
    """The status and fields of a whole header already in the reader's buffer (an API
    server's answer comes in one piece), parsed from one string rather than line by line;
    and its size. None when the buffer holds less, or anything unusual (a 1xx, a bare LF,
    an odd status line): the line-by-line path reads it as ``http.client`` does."""
    end = came.find(b"\r\n\r\n")
    if end < 0:
        return None
    lines = came[:end].decode("iso-8859-1").split("\r\n")
    if came.count(b"\n", 0, end) != len(lines) - 1:  # a bare LF in a line
        return None
    status = _status_line(lines[0])
    if status is None or status[1] < 200:
        return None
    del lines[0]
    return *status, _fields_of(lines), end + 4


def _status_line(text: str) -> tuple[str, int, str] | None:
    """A status line's version, code (100-999) and reason; None if it is not one."""
    parts = text.split(None, 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isascii() \
            or not parts[1].isdigit():
        return None
    status = int(parts[1])
    if not 100 <= status <= 999:
        return None
    return parts[0], status, parts[2] if len(parts) == 3 else ""


def _read_fields(fp: Any) -> _Fields:
    """Header lines up to the empty one, with ``http.client``'s limits."""
    lines: list[str] = []
    readline = fp.readline
    while True:
        line = readline(_MAX_LINE + 1)
        if len(line) > _MAX_LINE:
            raise ProtocolError("a header line longer than 65,536 bytes")
        if line in (b"\r\n", b"\n", b""):
            return _fields_of(lines)
        lines.append(line.decode("iso-8859-1"))


def _fields_of(lines: list[str]) -> _Fields:
    """The fields of a header's lines (each with or without its line end): names
    lower-cased, values stripped, a folded line joined to the field before it."""
    fields = _Fields()
    first, raw = fields._first, fields._raw
    for text in lines:
        if len(raw) >= _MAX_FIELDS:
            raise ProtocolError(f"got more than {_MAX_FIELDS} headers")
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


_BAD_TARGET = re.compile(r"[\x00-\x20\x7f]")
_CONTROL = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")
_BODY_METHODS = ("POST", "PUT", "PATCH")


def _host_field(conn: _Connection) -> str:
    """The Host field as ``http.client`` wrote it: the port unless it is 80 (443 named
    too, as its ``HTTPConnection`` under a TLS socket did)."""
    host = f"[{conn.host}]" if ":" in conn.host else conn.host
    return host if conn.port == 80 else f"{host}:{conn.port}"


def field_value_problem(value: str | bytes, offset: int = 0) -> str | None:
    """Why ``value`` cannot be sent as a header field's value, else None: a line break
    or another control character (Go's ``net/http`` refuses the same, tab aside), or a
    character that is not ASCII. The reason names the byte (``offset`` more, for a value
    read from a file after leading whitespace), never the value: a field may be a
    credential."""
    data = value.encode("utf-8", "surrogateescape") if isinstance(value, str) else value
    if data.isascii() and not _CONTROL.search(data):
        return None
    for index, byte in enumerate(data, offset):
        if byte in (0x0A, 0x0D):
            return f"contains a line break at byte {index}"
        if (byte < 0x20 and byte != 0x09) or byte == 0x7F:
            return f"contains a control character (0x{byte:02x}) at byte {index}"
        if byte > 0x7F:
            return f"contains a character that is not ASCII at byte {index}"
    return None


class HeaderError(ValueError):
    """A header field that cannot be sent; the message names the field, not its value."""


def _field_lines(headers: Mapping[str, Any]) -> str:
    """The caller's fields as header lines, each value refused if it could end the line
    or is not ASCII; the error names the field and the reason, never the value."""
    parts = []
    for name, value in headers.items():
        value = str(value)
        if _BAD_TARGET.search(name):
            raise HeaderError(f"a header name with a control character or a space: "
                              f"{name[:40]!r}")
        problem = field_value_problem(value)
        if problem is not None:
            raise HeaderError(f"the {name} header's value {problem}: not sent")
        parts.append(f"{name}: {value}\r\n")
    return "".join(parts)


class _LastFields:
    """The last fields written and their lines: a poll sends the same few fields on every
    request (its token changes once an hour at most), so they are checked once."""

    def __init__(self) -> None:
        self._last: tuple[dict[str, Any], str] = ({}, "")

    def lines(self, headers: Mapping[str, Any]) -> str:
        last = self._last  # one read: another thread may replace it
        if headers == last[0]:
            return last[1]
        text = _field_lines(headers)
        self._last = (dict(headers), text)
        return text


_LAST_FIELDS = _LastFields()


def _write_request(conn: _Connection, method: str, target: str,
                   body: bytes | None, headers: Mapping[str, Any]) -> str:
    """Send the request head (and body) in one write; the same fields as ``http.client``
    sends (Host, Accept-Encoding: identity, the caller's, Content-Length), each value
    refused if it could end the line."""
    if _BAD_TARGET.search(target):
        raise ProtocolError(f"URL can't contain control characters: {target!r}")
    if conn.sock is None:
        conn.connect()
    length = f"Content-Length: {len(body or b'')}\r\n" \
        if body is not None or method in _BODY_METHODS else ""
    head = (f"{method} {target} HTTP/1.1\r\n{conn.host_line}Accept-Encoding: identity\r\n"
            f"{_LAST_FIELDS.lines(headers)}{length}\r\n").encode("iso-8859-1")
    sock = conn.sock
    assert sock is not None
    _send_all(sock, head + body if body else head)
    return method


def _read_answer(conn: _Connection, method: str) -> _Answer:
    """The answer's status and header (the body left unread)."""
    if conn.reader is None:
        raise ProtocolError("no connection to read an answer from")
    answer = _Answer(conn.reader, method)
    try:
        try:
            answer.begin()
        except ConnectionError:
            conn.close()
            raise
        if answer.will_close:  # the answer keeps the socket until its body is read
            _, answer.owned = conn.detach()
        return answer
    except BaseException:
        answer.close()
        raise


class _Dechunker:
    """HTTP/1.1 chunked transfer coding (RFC 9112, 7.1), decoded incrementally.

    A read wholly inside a chunk's data (half the reads of a Node list: the API server
    writes each Node as a 2 KiB chunk and a ~7 KiB one, and TLS hands them over in ~4-5 KiB
    records) is given back as it is, without a copy or a pass of the state loop."""

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


def _dechunked(read: Callable[[], bytes], first: bytes | None = None) -> Iterator[bytes]:
    """A chunked body's data as it arrives, from ``first`` (when given) and then ``read``
    (one read each; a TLS connection's ragged end reads as its end); :class:`IncompleteBody`
    if the connection ends inside it."""
    decoder = _Dechunker()
    feed = decoder.feed
    data = read() if first is None else first
    while True:
        if not data:
            raise IncompleteBody("the connection closed inside a chunked body")
        out = feed(data)
        if out:
            yield out
        if decoder.done:
            return
        try:
            data = read()
        except ssl.SSLEOFError:
            data = b""


def _direct_read(sock: socket.socket, amt: int) -> Callable[[], bytes]:
    """One read of up to ``amt`` bytes from the socket itself: for TLS, the TLS object's
    read without ``SSLSocket``'s Python frames (see :func:`_tls_read`)."""
    tls = getattr(sock, "_sslobj", None)
    if tls is None:
        return functools.partial(sock.recv, amt)
    return functools.partial(tls.read, amt)


class Response:
    """One answer. Read it whole (:meth:`read`) or as it arrives (:meth:`stream`), then
    give it back with :meth:`release_conn`: its connection is reused only when the body was
    read to the end (and no deadline cut it)."""

    def __init__(self, pool: Pool, conn: _Connection, sock: socket.socket | None,
                 resp: _Answer, read_timeout: float) -> None:
        self._pool = pool
        self._conn: _Connection | None = conn
        self._timed = conn  # its deadline, after the connection went back to the pool
        self._sock = sock
        self._resp = resp
        self._read_timeout = read_timeout
        self._over: bool | None = None  # the request is over: whether the deadline cut it
        self.status = resp.status
        self.headers: Mapping[str, str] = resp.headers if resp.headers is not None \
            else _Fields()  # always read by now

    def read(self) -> bytes:
        try:
            data: bytes = self._resp.read()
        except TimeoutError as exc:
            raise self._timeout() from exc
        except (OSError, ProtocolError, ValueError) as exc:
            if self._expired():
                raise _deadline_error() from exc
            raise
        if self._finish():  # cut at its deadline: the body may be short
            raise _deadline_error()
        return data

    def stream(self, amt: int = 65536, decode_content: bool = True) -> Iterator[bytes]:
        """The body in pieces as they arrive (what came is yielded at once, not held back
        until ``amt`` bytes came).

        A chunked body (every watch) is decoded from reads of up to ``amt`` bytes, not a
        chunk at a time: the API server writes a watch event as one or two small
        chunks."""
        if not self._resp.chunked:
            while True:
                data = self._read1(self._resp.read1, amt)
                if not data:
                    if self._finish():
                        raise _deadline_error()
                    return
                yield data
        fp = self._resp.fp
        if fp is None:
            return
        conn, sock = self._conn, self._sock
        try:
            if (conn is None or sock is None or conn.pace or conn.deadline != math.inf
                    or amt < READER_BUFFER):
                yield from _dechunked(functools.partial(self._read1, fp.read1, amt))
            else:
                # No deadline and not paced (a list; the first read empties the reader's
                # buffer, as amt is at least its size): read the socket itself, two
                # Python frames fewer per read (a 1,000-Node list is ~2,000 reads).
                first = self._read1(fp.read1, amt)
                try:
                    yield from _dechunked(_direct_read(sock, amt), first)
                except (ConnectError, IncompleteBody):
                    raise  # the dechunker's own, as on the reader's path
                except (ValueError, OSError, ProtocolError) as exc:
                    failure = self._read_failure(exc)
                    if failure is exc:
                        raise
                    raise failure from exc
        except IncompleteBody as exc:
            if self._expired():
                raise _deadline_error() from exc
            raise ConnectError(str(exc)) from exc
        self._resp.close()  # read to the end: the connection may be reused

    def _read1(self, read1: Callable[[int], bytes], amt: int) -> bytes:
        try:
            return read1(amt)
        except (ValueError, OSError, ProtocolError) as exc:
            failure = self._read_failure(exc)
            if failure is exc:
                raise
            raise failure from exc

    def _read_failure(self, exc: Exception) -> Exception:
        """What a failed read of the body raises, whichever path read it: the deadline's
        error once the deadline passed (the pool shut the socket down to end the read),
        else a timeout as ours and a read from a closed response (``ValueError``) as a
        closed connection; anything else as it was."""
        if isinstance(exc, TimeoutError):
            return self._timeout()
        if self._expired():
            return _deadline_error()
        if isinstance(exc, ValueError):
            return ConnectError(f"the connection was closed: {exc}")
        return exc

    def _expired(self) -> bool:
        if self._over is not None:
            return self._over
        return self._pool.passed(self._timed)

    def _finish(self) -> bool:
        """The request is over: stop watching its deadline; True if the deadline cut it."""
        if self._over is None:
            self._over = self._pool.done(self._timed)
        return self._over

    def _timeout(self) -> TimeoutError:
        if self._expired():
            return _deadline_error()
        return ReadTimeoutError(f"Read timed out. (read timeout={self._read_timeout})")

    def release_conn(self) -> None:
        """Give the connection back: to the pool if the body was read to the end, else
        closed (unread bytes would be taken for the next answer)."""
        expired = self._finish()
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self._resp.isclosed() and not self._resp.will_close and not expired:
            self._pool.put(conn)
        else:
            self._resp.close()
            conn.close()

    def close(self) -> None:
        self._finish()
        conn, self._conn = self._conn, None
        self._resp.close()
        if conn is not None:
            conn.close()

    def shutdown(self) -> None:
        """Cut the connection so that a read blocked in another thread returns at once."""
        sock = self._sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def _deadline_error() -> DeadlineExceeded:
    return DeadlineExceeded("the request's deadline passed before its answer was complete")


_PLAIN_URL = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]*)"
                        r"(?::([0-9]{1,5}))?(/[^?#\s]*)?")


def split_url(url: str) -> tuple[str, str | None, int | None, str]:
    """``urlsplit(url)``'s scheme, hostname, port and path.

    A plain ``scheme://host[:port][/path]`` (every API server address seen in practice) is
    read here; anything else (user info, a query, spaces) by ``urllib.parse``, which costs
    ~2.5 ms to import with ``ipaddress``, on the path to the first Node list."""
    plain = _PLAIN_URL.fullmatch(url)
    if plain is not None:
        scheme, host, port, path = plain.groups()
        if port is None or int(port) <= 65535:
            return (scheme.lower(), host.strip("[]").lower() or None,
                    int(port) if port is not None else None, path or "")
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return parts.scheme, parts.hostname, parts.port, parts.path


class Pool:
    """Kept-alive connections to one server; each request has one to itself.

    ``server_name`` is the name the server's certificate is verified against (and sent as
    SNI) when it is not the host of ``server`` (a kubeconfig's ``tls-server-name``)."""

    def __init__(self, server: str, ssl_context: ssl.SSLContext | None,
                 server_name: str | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        scheme, host, port, path = split_url(server)
        if scheme not in ("https", "http") or not host:
            raise ValueError(f"the API server address {server!r} is not an http(s) URL")
        self._https = scheme == "https"
        self._host = host
        self._port = port or (443 if self._https else 80)
        self._prefix = path.rstrip("/")
        self._ctx = ssl_context if ssl_context is not None or not self._https \
            else ssl.create_default_context()
        self._server_name = server_name
        self._idle: list[_Connection] = []
        self._lock = threading.Lock()
        self._clock = clock
        self._timed: set[_Connection] = set()  # requests in flight with a deadline
        self._grace_until = math.inf

    def _new(self, connect_timeout: float) -> _Connection:
        return _Connection(self._host, self._port, connect_timeout,
                           self._ctx if self._https else None, self._server_name,
                           self._clock)

    def passed(self, conn: _Connection) -> bool:
        """The request's deadline cut it (:meth:`abort`) or has passed: a read that timed
        out at the deadline itself is the deadline's failure all the same."""
        return conn.expired or self._clock() >= conn.deadline

    def done(self, conn: _Connection) -> bool:
        """The request on ``conn`` is over; True when its deadline cut it first or has
        passed (its connection is not reused)."""
        if conn.deadline == math.inf:
            return conn.expired
        self._timed.discard(conn)
        over = self.passed(conn)
        conn.deadline = math.inf
        return over

    def put(self, conn: _Connection) -> None:
        with self._lock:
            if len(self._idle) < MAX_IDLE:
                self._idle.append(conn)
                return
        conn.close()

    def _take(self) -> _Connection | None:
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None or not conn.dropped():
                return conn
            conn.close()

    def preconnect(self, count: int, connect_timeout: float) -> None:
        """Open connections (TCP and TLS) until ``count`` are kept alive idle, at most
        :data:`MAX_IDLE`: made while the process waits for something else, they spare
        the requests that follow a handshake each. Stops at the first that cannot be
        made (those requests then meet the failure themselves) and once told to stop."""
        while self._grace_until == math.inf:
            with self._lock:
                if len(self._idle) >= min(count, MAX_IDLE):
                    return
            conn = self._new(connect_timeout)
            try:
                conn.connect()
            except (OSError, ValueError):  # ssl.SSLError and timeouts are OSErrors
                conn.close()
                return
            with self._lock:
                if len(self._idle) < MAX_IDLE:
                    self._idle.append(conn)
                    continue
            conn.close()
            return

    def abort(self, grace: float) -> None:
        """Cut every request in flight now, and give each one made from now on at most
        ``grace`` seconds (a process told to stop: the Lease release may still go out)."""
        self._grace_until = self._clock() + grace
        for conn in list(self._timed):
            conn.expired = True
            sock = conn.sock
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def request(self, method: str, target: str, *, body: bytes | None,
                headers: dict[str, str], connect_timeout: float, read_timeout: float,
                deadline: float | None = None, pace: float = 0.0) -> Response:
        """Send one request and return its answer with the body unread.

        ``target`` is the path and query. ``deadline`` (a :func:`time.monotonic` time)
        bounds the whole request, connect to last byte; ``read_timeout`` each read.
        Raises :class:`ConnectError` when the server cannot be reached or the connection
        broke before an answer (``before_answer``: it was closed or reset before any
        response, e.g. a kept-alive one found dead), :class:`ReadTimeoutError` when no
        answer came in time, and :class:`DeadlineExceeded` when the deadline passed (a
        request whose deadline has passed already is not sent).

        ``pace`` (seconds, for a long-running stream): a successful answer's body is read
        at most one wake-up per ``pace`` while it keeps coming (see
        :meth:`_DeadlineIO._paced`), so a stream of many small events costs one wake-up,
        and one pass through warm caches, per ``pace`` instead of one per event; each
        read then lags at most ``pace`` behind the server.
        """
        return self.send(method, target, body=body, headers=headers,
                         connect_timeout=connect_timeout, read_timeout=read_timeout,
                         deadline=deadline, pace=pace).answer()

    def send(self, method: str, target: str, *, body: bytes | None,
             headers: dict[str, str], connect_timeout: float, read_timeout: float,
             deadline: float | None = None, pace: float = 0.0) -> Sent:
        """:meth:`request`'s first half: the request sent, on a connection of its own;
        its answer is read by :meth:`Sent.answer` (or given up with :meth:`Sent.close`).
        Raises what :meth:`request` raises for a request that could not be sent."""
        if self._grace_until < math.inf:
            deadline = min(deadline if deadline is not None else math.inf, self._grace_until)
        if deadline is not None:
            left = deadline - self._clock()
            if left <= 0:
                raise DeadlineExceeded("the request's deadline had passed: not sent")
            connect_timeout = min(connect_timeout, left)
            read_timeout = min(read_timeout, left)
        conn = self._take()
        fresh = conn is None
        if conn is None:
            conn = self._new(connect_timeout)
        conn.expired = False
        conn.pace = 0.0  # a kept-alive connection that carried a paced stream
        if deadline is not None:
            conn.deadline = deadline
            self._timed.add(conn)
        sent = Sent(self, conn, fresh, read_timeout, pace)
        sending = False
        try:
            if fresh:
                try:
                    conn.connect()
                except OSError as exc:
                    raise ConnectError(f"{type(exc).__name__}: {exc}") from exc
                if deadline is not None:  # what connecting left
                    read_timeout = sent.read_timeout = min(read_timeout,
                                                           deadline - self._clock())
                    if read_timeout <= 0:
                        raise TimeoutError("the request's deadline passed while connecting")
            sock = sent.sock = conn.sock
            if sock is not None and abs(conn.wait - read_timeout) > DEADLINE_SLACK:
                # A kept-alive connection has the wait of its last request, most often
                # the same within the slack: no system call then.
                sock.settimeout(read_timeout)
                conn.wait = read_timeout
            sending = True
            conn.request(method, self._prefix + target, body=body, headers=headers)
        except BaseException as exc:
            sent.fail(exc, sending)
        return sent


class Sent:
    """A request sent and its answer not read yet (:meth:`Pool.send`): a poll sends its
    GETs together and reads their answers after, one wake-up for them all instead of one
    each."""

    def __init__(self, pool: Pool, conn: _Connection, fresh: bool, read_timeout: float,
                 pace: float) -> None:
        self._pool = pool
        self._conn = conn
        self._fresh = fresh
        self.read_timeout = read_timeout
        self._pace = pace
        self.sock: socket.socket | None = None

    def answer(self) -> Response:
        """The answer, its body unread (raises as :meth:`Pool.request` does)."""
        conn, sock = self._conn, self.sock
        try:
            resp = conn.getresponse()
            if self._pace > 0 and sock is not None and 200 <= resp.status < 300:
                sock.settimeout(0.0)  # paced reads wait in poll (or a sleep), not recv
                conn.wait = 0.0
                conn.pace, conn.pace_wait, conn.woke = self._pace, self.read_timeout, \
                    -math.inf
        except BaseException as exc:
            self.fail(exc, False)
        return Response(self._pool, conn, sock, resp, self.read_timeout)

    def close(self) -> None:
        """Give the answer up: the connection is closed (its answer would be taken for
        the next request's)."""
        self._conn.close()
        self._pool.done(self._conn)

    def fail(self, exc: BaseException, sending: bool) -> NoReturn:
        """Close the connection and raise what ``exc``, met while sending (``sending``)
        or reading the answer's header, means to the caller."""
        conn = self._conn
        conn.close()
        if self._pool.done(conn):
            raise _deadline_error() from exc
        if isinstance(exc, ConnectError):
            raise exc
        if isinstance(exc, TimeoutError):
            raise ReadTimeoutError(f"Read timed out. (read timeout={self.read_timeout})"
                                   ) from exc
        if isinstance(exc, OSError | ProtocolError):
            # Before any answer byte: broken while sending, an empty status line
            # (RemoteDisconnected), or reset while waiting for the first byte.
            unanswered = (isinstance(exc, _Unanswered | RemoteDisconnected)
                          or (sending and closed_before_answer(exc)))
            raise ConnectError(f"{type(exc).__name__}: {exc}", before_answer=unanswered,
                               reused=not self._fresh,
                               broken=unanswered or closed_before_answer(exc)) from exc
        raise exc
