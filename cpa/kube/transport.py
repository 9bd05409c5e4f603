"""HTTP/1.1 connections to the API server, kept alive and shared between threads.

Why not urllib3: importing it costs ~30 ms (a third of the start-up path to the first Node
list, measured in a clean venv), and the daemon needs little of it: one server, keep-alive,
per-request timeouts, chunked streams it reads as they arrive, and a way to cut a blocked
read from another thread. The standard library's ``http.client`` connects (TLS included)
and reads bodies; this module adds the pool and those edges.

A poll is two small GETs, so their fixed cost is the poll's cost. ``http.client`` writes a
request one validated header at a time and parses the answer's header with the ``email``
package, which alone cost more CPU than the TLS, the JSON and the decision together. So the
connections here write each request head in one piece and read the answer's header with a
plain loop into :class:`_Fields` (``bench.pollcost``: 1.02 -> 0.66 ms of CPU for a
ConfigMap GET plus a scale GET against kube-apiserver, median of 7 interleaved runs).
"""

from __future__ import annotations

import contextlib
import http.client
import re
import select
import socket
import ssl
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

MAX_IDLE = 4  # kept-alive connections: the poll, the node watch, Events, the Lease


class ReadTimeoutError(TimeoutError):
    """A read that got no bytes within the read timeout (a silent or dead connection)."""


class ConnectError(OSError):
    """The connection could not be made, or broke before the server answered."""

    def __init__(self, message: str, before_answer: bool = False) -> None:
        super().__init__(message)
        self.before_answer = before_answer  # closed or reset before any response


def closed_before_answer(exc: BaseException) -> bool:
    """The connection was closed or reset under us before any response (not a timeout):
    a kept-alive connection the server or a middlebox dropped while it sat idle."""
    return isinstance(exc, (http.client.RemoteDisconnected, ConnectionResetError,
                            BrokenPipeError, ConnectionAbortedError, ssl.SSLEOFError))


def _dropped(conn: http.client.HTTPConnection) -> bool:
    """An idle kept-alive connection the server closed: its socket reads as ready (EOF or
    a TLS close) though we sent nothing. Checked before reuse, as Go's transport does."""
    sock = conn.sock
    if sock is None:
        return True
    try:
        return bool(select.select([sock], [], [], 0)[0])
    except (OSError, ValueError):
        return True


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

    def __iter__(self) -> Iterator[str]:
        return iter(self._first)

    def __len__(self) -> int:
        return len(self._first)

    def get_all(self, key: str, failobj: list[str] | None = None) -> list[str] | None:
        values = [v for k, v in self._raw if k == key.lower()]
        return values or failobj


_MAX_LINE = 65536  # as http.client
_MAX_FIELDS = 100


class _Answer(http.client.HTTPResponse):
    """``HTTPResponse`` with the header read by a plain loop (see the module doc); reading
    the body is the standard library's."""

    def begin(self) -> None:
        if self.headers is not None:
            return
        while True:
            version, status, reason = self._read_status()
            if status != http.client.CONTINUE:
                break
            _read_fields(self.fp)  # a 100 Continue's own header
        self.code = self.status = status
        self.reason = reason.strip()
        if version in ("HTTP/1.0", "HTTP/0.9"):
            self.version = 10
        elif version.startswith("HTTP/1."):
            self.version = 11
        else:
            raise http.client.UnknownProtocol(version)
        fields = _read_fields(self.fp)
        self.headers = self.msg = fields
        encoding = fields.get("transfer-encoding")
        self.chunked = encoding is not None and encoding.lower() == "chunked"
        if self.chunked:
            self.chunk_left = None
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
        if status in (http.client.NO_CONTENT, http.client.NOT_MODIFIED) \
                or 100 <= status < 200 or self._method == "HEAD":
            self.length = 0
        if not self.will_close and not self.chunked and self.length is None:
            self.will_close = True


def _read_fields(fp: Any) -> _Fields:
    """Header lines up to the empty one, with ``http.client``'s limits."""
    fields = _Fields()
    readline = fp.readline
    while True:
        line = readline(_MAX_LINE + 1)
        if len(line) > _MAX_LINE:
            raise http.client.LineTooLong("header line")
        if line in (b"\r\n", b"\n", b""):
            return fields
        if len(fields._raw) >= _MAX_FIELDS:
            raise http.client.HTTPException(f"got more than {_MAX_FIELDS} headers")
        text = line.decode("iso-8859-1")
        if text[0] in " \t":
            if fields._raw:
                fields.extend_last(text.strip())
            continue
        name, colon, value = text.partition(":")
        if colon:
            fields.add(name.strip(), value.strip())


_BAD_TARGET = re.compile(r"[\x00-\x20\x7f]")
_BAD_VALUE = re.compile(r"[\r\n\x00]")
_BODY_METHODS = ("POST", "PUT", "PATCH")


def _host_field(conn: http.client.HTTPConnection) -> str:
    """The Host field as ``http.client`` writes it (the port unless it is the default)."""
    host = f"[{conn.host}]" if ":" in conn.host else conn.host
    return host if conn.port == conn.default_port else f"{host}:{conn.port}"


def _write_request(conn: http.client.HTTPConnection, method: str, target: str,
                   body: bytes | None, headers: Mapping[str, Any]) -> str:
    """Send the request head (and body) in one write; the same fields as ``http.client``
    sends (Host, Accept-Encoding: identity, the caller's, Content-Length), each value
    refused if it could end the line."""
    if _BAD_TARGET.search(target):
        raise http.client.InvalidURL(f"URL can't contain control characters: {target!r}")
    if conn.sock is None:
        conn.connect()
    parts = [f"{method} {target} HTTP/1.1\r\nHost: {_host_field(conn)}\r\n"
             "Accept-Encoding: identity\r\n"]
    for name, value in headers.items():
        value = str(value)
        if _BAD_VALUE.search(value) or _BAD_TARGET.search(name):
            raise ValueError(f"Invalid header {name!r}: {value!r}")
        parts.append(f"{name}: {value}\r\n")
    if body is not None or method in _BODY_METHODS:
        parts.append(f"Content-Length: {len(body or b'')}\r\n")
    parts.append("\r\n")
    head = "".join(parts).encode("iso-8859-1")
    sock = conn.sock
    assert sock is not None
    sock.sendall(head + body if body else head)
    return method


def _read_answer(conn: http.client.HTTPConnection, method: str) -> http.client.HTTPResponse:
    """The answer's status and header (the body left unread), as ``getresponse()``."""
    answer = _Answer(conn.sock, method=method)
    try:
        try:
            answer.begin()
        except ConnectionError:
            conn.close()
            raise
        if answer.will_close:
            conn.close()  # the answer keeps the socket until its body is read
        return answer
    except BaseException:
        answer.close()
        raise


class _Plain(http.client.HTTPConnection):
    """A connection to ``http://``: requests written and answers read as above."""

    _method = "GET"

    def request(self, method: str, url: str, body: Any = None,
                headers: Mapping[str, Any] = {}, *,
                encode_chunked: bool = False) -> None:
        self._method = _write_request(self, method, url, body, headers)

    def getresponse(self) -> http.client.HTTPResponse:
        return _read_answer(self, self._method)


class _Tls(http.client.HTTPSConnection):
    """A connection to ``https://``: requests written and answers read as above."""

    _method = "GET"

    def request(self, method: str, url: str, body: Any = None,
                headers: Mapping[str, Any] = {}, *,
                encode_chunked: bool = False) -> None:
        self._method = _write_request(self, method, url, body, headers)

    def getresponse(self) -> http.client.HTTPResponse:
        return _read_answer(self, self._method)


class _Dechunker:
    """HTTP/1.1 chunked transfer coding (RFC 9112, 7.1), decoded incrementally."""

    MAX_LINE = 4096  # a chunk-size or trailer line; anything longer is not HTTP

    def __init__(self) -> None:
        self._buf = b""
        self._left = 0  # data bytes of the current chunk still to come
        self._state = "size"  # size, data, crlf, trailer, done

    @property
    def done(self) -> bool:
        return self._state == "done"

    def feed(self, data: bytes) -> bytes:
        """The body bytes in ``data`` (and what was pending before it)."""
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


class Response:
    """One answer. Read it whole (:meth:`read`) or as it arrives (:meth:`stream`), then
    give it back with :meth:`release_conn`: its connection is reused only when the body was
    read to the end."""

    def __init__(self, pool: Pool, conn: http.client.HTTPConnection,
                 sock: socket.socket | None, resp: http.client.HTTPResponse,
                 read_timeout: float) -> None:
        self._pool = pool
        self._conn: http.client.HTTPConnection | None = conn
        self._sock = sock
        self._resp = resp
        self._read_timeout = read_timeout
        self.status = resp.status
        self.headers: Mapping[str, str] = resp.headers  # type: ignore[assignment] # _Fields

    def read(self) -> bytes:
        try:
            data: bytes = self._resp.read()
            return data
        except TimeoutError as exc:
            raise self._timeout() from exc

    def stream(self, amt: int = 65536, decode_content: bool = True) -> Iterator[bytes]:
        """The body in pieces as they arrive (what came is yielded at once, not held back
        until ``amt`` bytes came).

        A chunked body (every watch) is decoded here from reads of up to ``amt`` bytes:
        ``http.client`` returns at most one chunk per call, and the API server writes a
        watch event as one or two small chunks."""
        if not self._resp.chunked:
            while True:
                data = self._read1(self._resp.read1, amt)
                if not data:
                    return
                yield data
        fp = self._resp.fp
        if fp is None:
            return
        decoder = _Dechunker()
        while not decoder.done:
            data = self._read1(fp.read1, amt)
            if not data:
                raise ConnectError("the connection closed inside a chunked body")
            out = decoder.feed(data)
            if out:
                yield out
        self._resp.close()  # read to the end: the connection may be reused

    def _read1(self, read1: Callable[[int], bytes], amt: int) -> bytes:
        try:
            return read1(amt)
        except TimeoutError as exc:
            raise self._timeout() from exc
        except ValueError as exc:  # read from a response closed by shutdown()
            raise ConnectError(f"the connection was closed: {exc}") from exc

    def _timeout(self) -> ReadTimeoutError:
        return ReadTimeoutError(f"Read timed out. (read timeout={self._read_timeout})")

    def release_conn(self) -> None:
        """Give the connection back: to the pool if the body was read to the end, else
        closed (unread bytes would be taken for the next answer)."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self._resp.isclosed() and not self._resp.will_close:
            self._pool.put(conn)
        else:
            self._resp.close()
            conn.close()

    def close(self) -> None:
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


class Pool:
    """Kept-alive connections to one server; each request has one to itself."""

    def __init__(self, server: str, ssl_context: ssl.SSLContext | None) -> None:
        parts = urlsplit(server)
        if parts.scheme not in ("https", "http") or not parts.hostname:
            raise ValueError(f"the API server address {server!r} is not an http(s) URL")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._https else 80)
        self._prefix = parts.path.rstrip("/")
        self._ctx = ssl_context if ssl_context is not None or not self._https \
            else ssl.create_default_context()
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def _new(self, connect_timeout: float) -> http.client.HTTPConnection:
        if self._https:
            return _Tls(self._host, self._port, timeout=connect_timeout, context=self._ctx)
        return _Plain(self._host, self._port, timeout=connect_timeout)

    def put(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if len(self._idle) < MAX_IDLE:
                self._idle.append(conn)
                return
        conn.close()

    def _take(self) -> http.client.HTTPConnection | None:
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None or not _dropped(conn):
                return conn
            conn.close()

    def request(self, method: str, target: str, *, body: bytes | None,
                headers: dict[str, str], connect_timeout: float, read_timeout: float
                ) -> Response:
        """Send one request and return its answer with the body unread.

        ``target`` is the path and query. Raises :class:`ConnectError` when the server
        cannot be reached or the connection broke before an answer (``before_answer``: it
        was closed or reset before any response, e.g. a kept-alive one found dead), and
        :class:`ReadTimeoutError` when no answer came in time.
        """
        conn = self._take()
        if conn is None:
            conn = self._new(connect_timeout)
            try:
                conn.connect()
                # As Go and urllib3 do. Without it, streaming the Node list at 20,000 Nodes
                # took 1.1-1.4 s instead of 0.6-0.8 s and 2x the API server's CPU.
                if conn.sock is not None:
                    conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError as exc:
                conn.close()
                raise ConnectError(f"{type(exc).__name__}: {exc}") from exc
        sock = conn.sock
        try:
            if sock is not None:
                sock.settimeout(read_timeout)
            conn.request(method, self._prefix + target, body=body, headers=headers)
            resp = conn.getresponse()
        except TimeoutError as exc:
            conn.close()
            raise ReadTimeoutError(f"Read timed out. (read timeout={read_timeout})") from exc
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise ConnectError(f"{type(exc).__name__}: {exc}",
                               before_answer=closed_before_answer(exc)) from exc
        return Response(self, conn, sock, resp, read_timeout)
