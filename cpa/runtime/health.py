"""The health endpoints upstream serves on :8080, with upstream's paths and bodies, and our
``/metrics`` beside them, on a server whose cost does not grow with its clients.

The port is open on every interface without authentication, as upstream's: anyone who can
reach the Pod can connect. The standard library's ``ThreadingHTTPServer`` spent a thread per
connection with no read timeout: enough idle connections took the daemon past its memory
limit, and with containerd's default soft limit of open files they left no descriptor for
the API server's connections. So this is one thread and one event loop
(``selectors``) with fixed bounds:

* at most :data:`MAX_CONNECTIONS` connections; a new one past that closes the one idle the
  longest (a probe sends its request at once, so it is served; a silent client is the one
  to go);
* a connection that has not completed a request (or taken its answer) within
  :data:`IDLE_SECONDS` is closed; a request head is at most :data:`MAX_REQUEST_BYTES`;
* an accept that fails for lack of descriptors or memory pauses accepting, from 5 ms
  doubling to 1 s (Go's net/http), instead of spinning on a listener that stays readable;
* a client that goes away mid-request costs a closed socket, never a traceback.

Every answer is computed in the loop (``/metrics`` renders in a few ms).
"""

from __future__ import annotations

import collections
import contextlib
import errno
import selectors
import socket
import threading
import time
from collections.abc import Callable
from typing import Protocol

from cpa import logs, redact

METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
TEXT = "text/plain; charset=utf-8"
MAX_CONNECTIONS = 64
IDLE_SECONDS = 5.0
MAX_REQUEST_BYTES = 8192
ACCEPTS_PER_TURN = 16  # then serve the connections that are ready before accepting more
ACCEPT_BACKOFF_START, ACCEPT_BACKOFF_MAX = 0.005, 1.0
_OUT_OF_RESOURCES = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 431: "Request Header Fields Too "
            "Large", 500: "Internal Server Error"}
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


class PollOutcome(Protocol):
    """What ``/last-poll`` needs of a poll's result (either daemon's)."""

    @property
    def health_error(self) -> str | None: ...


class HealthState:
    """The outcome of the last poll, shared between the poll loop and the HTTP server.

    ``initial`` is what ``/last-poll`` says before the first poll (the daemon starts it
    with "waiting for the first Node list")."""

    def __init__(self, initial: str | None = None) -> None:
        self._lock = threading.Lock()
        self._error: str | None = initial
        self._broken: str | None = None

    def record(self, error: str | None) -> None:
        with self._lock:
            self._error = error

    def thread_failed(self, name: str, error: str) -> None:
        """A thread of the daemon ended with an exception nobody caught: ``/last-poll``
        says so from now on, whatever the polls do (what that thread did is no longer
        being done)."""
        with self._lock:
            self._broken = (f"the daemon's {name} thread stopped ({error}); this is a bug, "
                            "please report it; restart the Pod to recover")

    def observe(self, result: PollOutcome) -> None:
        """A poll observer: the poll's error, or stale counts, make /last-poll 500."""
        self.record(result.health_error)

    @property
    def error(self) -> str | None:
        with self._lock:
            return self._broken or self._error


def _http_date(moment: float) -> str:
    g = time.gmtime(moment)
    return (f"{_DAYS[g.tm_wday]}, {g.tm_mday:02d} {_MONTHS[g.tm_mon - 1]} {g.tm_year} "
            f"{g.tm_hour:02d}:{g.tm_min:02d}:{g.tm_sec:02d} GMT")


class _Conn:
    __slots__ = ("closing", "inbuf", "last", "outbuf", "sock")

    def __init__(self, sock: socket.socket, now: float) -> None:
        self.sock = sock
        self.inbuf = b""
        self.outbuf = b""
        self.last = now
        self.closing = False  # close once the answer is out


class HealthServer:
    """``/healthz``, ``/last-poll`` and ``/metrics`` in one thread (see the module doc)."""

    def __init__(self, state: HealthState, port: int, host: str = "",
                 metrics: Callable[[], bytes] | None = None, *,
                 max_connections: int = MAX_CONNECTIONS, idle_seconds: float = IDLE_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._state = state
        self._metrics = metrics
        self._max = max_connections
        self._idle = idle_seconds
        self._clock = clock
        self._listener = _listen(host, port)
        self._listener.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ, None)
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._conns: collections.OrderedDict[int, _Conn] = collections.OrderedDict()
        self._accepting = True
        self._resume_at = 0.0
        self._backoff = 0.0
        self._stopping = False
        self._log = logs.get_logger("health")
        self.evicted = 0  # connections closed to make room for a new one
        self._thread = threading.Thread(target=self._run, name="health", daemon=True)
        self._thread.start()

    @property
    def server_address(self) -> tuple[str, int]:
        address = self._listener.getsockname()
        return str(address[0]), int(address[1])

    @property
    def connections(self) -> int:
        return len(self._conns)

    def shutdown(self) -> None:
        """Stop the loop and close every connection (returns once it has stopped)."""
        self._stopping = True
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        self._thread.join(5)

    def server_close(self) -> None:
        self.shutdown()

    # --- the loop ----------------------------------------------------------------------
    def _run(self) -> None:
        try:
            while not self._stopping:
                try:
                    self._turn()
                except Exception as exc:  # never let one bad turn end the health server
                    self._log.warning("health.error", error=f"{type(exc).__name__}: {exc}")
                    time.sleep(0.05)
        finally:
            for conn in list(self._conns.values()):
                self._close(conn)
            self._selector.close()
            for sock in (self._listener, self._wake_r, self._wake_w):
                with contextlib.suppress(OSError):
                    sock.close()

    def _timeout(self, now: float) -> float | None:
        waits = []
        if self._conns:
            oldest = next(iter(self._conns.values()))
            waits.append(oldest.last + self._idle - now)
        if not self._accepting:
            waits.append(self._resume_at - now)
        return max(0.0, min(waits)) if waits else None

    def _turn(self) -> None:
        events = self._selector.select(self._timeout(self._clock()))
        now = self._clock()
        for key, mask in events:
            if key.data is None:
                self._accept(now)
            elif key.data == "wake":
                with contextlib.suppress(OSError):
                    self._wake_r.recv(64)
            else:
                conn: _Conn = key.data
                try:
                    if mask & selectors.EVENT_WRITE:
                        self._send(conn, now)
                    if mask & selectors.EVENT_READ and conn.sock.fileno() >= 0:
                        self._receive(conn, now)
                except Exception:  # a client that went away, or garbage: drop it quietly
                    self._close(conn)
        self._expire(now)
        if not self._accepting and now >= self._resume_at:
            self._accepting = True
            self._selector.register(self._listener, selectors.EVENT_READ, None)

    def _accept(self, now: float) -> None:
        for _ in range(ACCEPTS_PER_TURN):
            try:
                sock, _ = self._listener.accept()
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno in (errno.ECONNABORTED, errno.EPROTO, errno.EINTR):
                    continue
                self._pause(exc, now)
                return
            if self._backoff:
                self._log.info("health.accepting", after_error="out of resources")
                self._backoff = 0.0
            sock.setblocking(False)
            if len(self._conns) >= self._max:
                oldest = next(iter(self._conns.values()))
                self._close(oldest)
                self.evicted += 1
            conn = _Conn(sock, now)
            self._conns[sock.fileno()] = conn
            self._selector.register(sock, selectors.EVENT_READ, conn)

    def _pause(self, exc: OSError, now: float) -> None:
        """Stop accepting for a while: the listener stays readable while the process has
        no descriptor (or memory) for a new connection, and retrying at once would spin."""
        first = not self._backoff
        self._backoff = min(self._backoff * 2, ACCEPT_BACKOFF_MAX) if self._backoff \
            else ACCEPT_BACKOFF_START
        self._accepting = False
        self._resume_at = now + self._backoff
        self._selector.unregister(self._listener)
        if first:
            reason = "out of file descriptors" if exc.errno in _OUT_OF_RESOURCES else "error"
            self._log.warning("health.accept_failed", error=f"{exc}", reason=reason,
                              hint="accepting again after a pause (5 ms, doubling to 1 s)")

    def _expire(self, now: float) -> None:
        while self._conns:
            oldest = next(iter(self._conns.values()))
            if oldest.last + self._idle > now:
                return
            self._close(oldest)

    def _close(self, conn: _Conn) -> None:
        fd = conn.sock.fileno()
        if fd >= 0:
            self._conns.pop(fd, None)
            with contextlib.suppress(KeyError, ValueError, OSError):
                self._selector.unregister(conn.sock)
        with contextlib.suppress(OSError):
            conn.sock.close()

    def _touch(self, conn: _Conn, now: float) -> None:
        conn.last = now
        self._conns.move_to_end(conn.sock.fileno())

    # --- one connection ------------------------------------------------------------------
    def _receive(self, conn: _Conn, now: float) -> None:
        try:
            data = conn.sock.recv(4096)
        except BlockingIOError:
            return
        except OSError:
            self._close(conn)
            return
        if not data:
            self._close(conn)
            return
        conn.inbuf += data
        self._answer(conn, now)

    def _answer(self, conn: _Conn, now: float) -> None:
        """Answer the request at the head of the buffer, if it is complete (one at a time:
        a pipelined next request waits until this answer is out)."""
        if conn.outbuf or conn.closing:
            return
        head, sep, rest = conn.inbuf.partition(b"\r\n\r\n")
        if not sep:
            if len(conn.inbuf) > MAX_REQUEST_BYTES:
                self._queue(conn, 431, b"request head too large\n", TEXT, True, now)
            return
        conn.inbuf = rest
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            self._queue(conn, 400, b"malformed request\n", TEXT, True, now)
            return
        method, target, version = parts
        fields = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            fields[name.strip().lower()] = value.strip().lower()
        has_body = fields.get("content-length", "0") not in ("", "0") \
            or "transfer-encoding" in fields
        connection = fields.get("connection", "")
        keep = "close" not in connection if version == "HTTP/1.1" \
            else "keep-alive" in connection
        status, body, ctype = self._route(target.split("?", 1)[0])
        # A request body is never read: answer, then close (nothing else on the wire).
        self._queue(conn, status, b"" if method == "HEAD" else body, ctype,
                    has_body or not keep, now, length=len(body))

    def _route(self, path: str) -> tuple[int, bytes, str | None]:
        if path == "/healthz":
            return 200, b"", None
        if path == "/last-poll":
            error = self._state.error
            if error is None:
                return 200, b"", None
            text = redact.scrub(f"Encountered error at last poll cycle: {error}")
            return 500, text.encode(), TEXT
        if path == "/metrics" and self._metrics is not None:
            try:
                return 200, self._metrics(), METRICS_CONTENT_TYPE
            except Exception as exc:
                return 500, f"cannot render the metrics: {type(exc).__name__}: {exc}".encode(
                    ), TEXT
        return 404, b"404 page not found\n", TEXT

    def _queue(self, conn: _Conn, status: int, body: bytes, ctype: str | None, close: bool,
               now: float, length: int | None = None) -> None:
        head = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}",
                f"Date: {_http_date(time.time())}",
                f"Content-Length: {len(body) if length is None else length}"]
        if ctype is not None:
            head.append(f"Content-Type: {ctype}")
        if status == 404:
            head.append("X-Content-Type-Options: nosniff")
        if close:
            head.append("Connection: close")
        conn.outbuf = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body
        conn.closing = close
        self._send(conn, now)

    def _send(self, conn: _Conn, now: float) -> None:
        try:
            sent = conn.sock.send(conn.outbuf)
        except BlockingIOError:
            sent = 0
        except OSError:
            self._close(conn)
            return
        conn.outbuf = conn.outbuf[sent:]
        if sent:
            self._touch(conn, now)
        if conn.outbuf:
            self._selector.modify(conn.sock, selectors.EVENT_WRITE, conn)
            return
        if conn.closing:
            self._close(conn)
            return
        self._selector.modify(conn.sock, selectors.EVENT_READ, conn)
        if conn.inbuf:
            self._answer(conn, now)


def _listen(host: str, port: int) -> socket.socket:
    """Listen on ``host`` (every interface when empty: IPv6 and IPv4 where the node has
    IPv6, as Go's ``:8080``, else IPv4)."""
    if not host and socket.has_dualstack_ipv6():
        try:
            return socket.create_server(("", port), family=socket.AF_INET6,
                                        dualstack_ipv6=True, backlog=128)
        except OSError:
            pass  # IPv6 off in this network namespace
    return socket.create_server((host, port), backlog=128)


def serve(state: HealthState, port: int, host: str = "",
          metrics: Callable[[], bytes] | None = None) -> HealthServer:
    """Start the server in a daemon thread and return it (``shutdown()`` stops it).

    ``metrics`` renders ``GET /metrics`` (Prometheus text format); without it that path is a
    404 as upstream's."""
    return HealthServer(state, port, host, metrics)
