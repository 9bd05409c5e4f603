"""GET one page from each of many Pods at once: bounded concurrency, one deadline each.

Why not a thread per Pod or the API client's transport: a scrape of 100 Pods every two
seconds is 100 short plain-HTTP requests to as many addresses. One thread with non-blocking
sockets and a selector does them ``concurrency`` at a time, each with its own deadline from
connect to last byte, and costs no thread per Pod. A Pod that is slow or refuses is an
answer with an error, never a stalled scrape.

HTTP/1.1 with ``Connection: close``: the body ends at EOF, at ``Content-Length``, or at
the last chunk of a chunked answer (Go's servers chunk large pages). No compression is
asked for. A body over ``max_bytes`` is an error (a metrics page is tens of KB).
"""

from __future__ import annotations

import errno
import selectors
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from cpa.namedtuple import NamedTuple

__all__ = ["Answer", "Request", "fetch_all"]

MAX_BYTES = 4 * 1024 * 1024
_ACCEPT = "text/plain;version=0.0.4;q=1,*/*;q=0.1"


class Request(NamedTuple):
    key: str
    host: str
    """An IPv4 or IPv6 address (a Pod IP)."""
    port: int
    path: str


class Answer(NamedTuple):
    key: str
    status: int
    """The HTTP status; 0 when there was no answer."""
    body: bytes
    error: str | None
    """What went wrong (``timeout``, ``refused``, ...), None for a 200 with a body."""
    reason: str | None
    """A short word for the metric label: ``timeout``, ``connect``, ``http``, ``read``."""
    seconds: float
    at: float
    """The clock when the answer was complete (what a rate is timed by)."""


@dataclass(slots=True)
class _Conn:
    request: Request
    sock: socket.socket
    started: float
    deadline: float
    out: bytes
    fd: int
    data: bytearray = field(default_factory=bytearray)
    connected: bool = False


def _message(request: Request) -> bytes:
    host = f"[{request.host}]" if ":" in request.host else request.host
    return (f"GET {request.path} HTTP/1.1\r\nHost: {host}:{request.port}\r\n"
            f"User-Agent: cpa-load-scraper\r\nAccept: {_ACCEPT}\r\n"
            "Connection: close\r\n\r\n").encode("ascii")


def _dechunk(body: bytes) -> bytes | None:
    """A chunked body's data, None while it is incomplete."""
    out = bytearray()
    pos = 0
    while True:
        end = body.find(b"\r\n", pos)
        if end < 0:
            return None
        size_text = body[pos:end].split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise ValueError("a chunked body with a bad chunk size") from None
        if size == 0:
            return bytes(out)
        start = end + 2
        if len(body) < start + size + 2:
            return None
        out += body[start:start + size]
        pos = start + size + 2


def _complete(data: bytearray, eof: bool) -> tuple[int, bytes] | None:
    """(status, body) once the answer is whole, else None; ValueError when broken."""
    head_end = data.find(b"\r\n\r\n")
    if head_end < 0:
        if eof:
            raise ValueError("the connection closed before the headers ended")
        return None
    head = bytes(data[:head_end]).decode("latin-1").split("\r\n")
    parts = head[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise ValueError(f"not an HTTP answer: {head[0][:60]!r}")
    status = int(parts[1])
    headers = {}
    for line in head[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    body = bytes(data[head_end + 4:])
    if "chunked" in headers.get("transfer-encoding", "").lower():
        decoded = _dechunk(body)
        if decoded is None:
            if eof:
                raise ValueError("the connection closed inside a chunked body")
            return None
        return status, decoded
    length = headers.get("content-length")
    if length is not None and length.isdigit():
        if len(body) >= int(length):
            return status, body[:int(length)]
        if eof:
            raise ValueError("the connection closed before Content-Length bytes")
        return None
    return (status, body) if eof else None


def fetch_all(requests: Sequence[Request], concurrency: int, timeout: float,
              max_bytes: int = MAX_BYTES,
              clock: Callable[[], float] = time.monotonic) -> list[Answer]:
    """GET each request's page, at most ``concurrency`` at a time, each within ``timeout``
    seconds of its own start; one answer per request, in the order they finished."""
    pending = list(reversed(requests))
    answers: list[Answer] = []
    sel = selectors.DefaultSelector()
    live: dict[int, _Conn] = {}

    def finish(conn: _Conn, status: int, body: bytes, error: str | None,
               reason: str | None) -> None:
        sel.unregister(conn.sock)
        conn.sock.close()
        del live[conn.fd]
        now = clock()
        answers.append(Answer(conn.request.key, status, body, error, reason,
                              now - conn.started, now))

    def start(request: Request) -> None:
        conn = _connect(request, timeout, clock)
        if isinstance(conn, Answer):
            answers.append(conn)
            return
        live[conn.fd] = conn
        sel.register(conn.sock, selectors.EVENT_WRITE, conn)

    try:
        while pending or live:
            while pending and len(live) < concurrency:
                start(pending.pop())
            if not live:
                continue
            now = clock()
            wait = max(0.0, min(c.deadline for c in live.values()) - now)
            for key, _events in sel.select(wait):
                conn = key.data
                _step(conn, sel, finish, max_bytes)
            now = clock()
            for conn in [c for c in live.values() if c.deadline <= now]:
                what = "connecting" if not conn.connected else "reading the answer"
                finish(conn, 0, b"", f"timeout after {timeout:g} s {what}", "timeout")
    finally:
        for conn in list(live.values()):
            sel.unregister(conn.sock)
            conn.sock.close()
        sel.close()
    return answers


def _connect(request: Request, timeout: float, clock: Callable[[], float]) -> _Conn | Answer:
    """A non-blocking connect to the request's host; its answer when it failed at once."""
    now = clock()
    family = socket.AF_INET6 if ":" in request.host else socket.AF_INET
    try:
        sock = socket.socket(family, socket.SOCK_STREAM)
    except OSError as exc:
        return Answer(request.key, 0, b"", f"no socket: {exc}", "connect", 0.0, now)
    sock.setblocking(False)
    code = sock.connect_ex((request.host, request.port))
    if code not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK):
        sock.close()
        name = errno.errorcode.get(code, str(code))
        return Answer(request.key, 0, b"", f"connect: {name}", "connect", clock() - now,
                      clock())
    return _Conn(request, sock, now, now + timeout, _message(request), sock.fileno())


def _step(conn: _Conn, sel: selectors.BaseSelector,
          finish: Callable[[_Conn, int, bytes, str | None, str | None], None],
          max_bytes: int) -> None:
    """Advance one connection by what its socket is ready for."""
    sock = conn.sock
    if not conn.connected:
        code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if code:
            name = errno.errorcode.get(code, str(code))
            finish(conn, 0, b"", f"connect: {name}", "connect")
            return
        conn.connected = True
    if conn.out:
        try:
            sent = sock.send(conn.out)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            finish(conn, 0, b"", f"send: {exc.strerror or exc}", "connect")
            return
        conn.out = conn.out[sent:]
        if not conn.out:
            sel.modify(sock, selectors.EVENT_READ, conn)
        return
    try:
        chunk = sock.recv(65536)
    except (BlockingIOError, InterruptedError):
        return
    except OSError as exc:
        finish(conn, 0, b"", f"read: {exc.strerror or exc}", "read")
        return
    conn.data += chunk
    if len(conn.data) > max_bytes:
        finish(conn, 0, b"", f"the answer is larger than {max_bytes} bytes", "read")
        return
    try:
        whole = _complete(conn.data, eof=not chunk)
    except ValueError as exc:
        finish(conn, 0, b"", str(exc), "read")
        return
    if whole is None:
        return
    status, body = whole
    if status != 200:
        finish(conn, status, body, f"HTTP {status}", "http")
    else:
        finish(conn, status, body, None, None)
