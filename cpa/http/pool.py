"""Kept-alive HTTP/1.1 connections to one server, shared between threads; one request
to a connection at a time, each with its deadline, all of them cut at once by
:meth:`Pool.abort` (a process told to stop)."""

from __future__ import annotations

import contextlib
import functools
import math
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import NoReturn
from urllib.parse import urlsplit

from cpa.http.connection import (
    DEADLINE_SLACK,
    HttpConnection,
)
from cpa.http.errors import (
    ConnectError,
    DeadlineExceeded,
    IncompleteBody,
    ProtocolError,
    ReadTimeoutError,
    RemoteDisconnected,
    Unanswered,
    closed_before_answer,
)
from cpa.http.message import Answer, HeaderFields, dechunked

MAX_IDLE = 4  # kept alive: the poll's requests, the node watch's, Events, the Lease


class Response:
    """One answer. Read it whole (:meth:`read`) or as it arrives (:meth:`stream`), then
    give it back with :meth:`release_conn`: its connection is reused only when the body was
    read to the end (and no deadline cut it)."""

    def __init__(self, pool: Pool, conn: HttpConnection, sock: socket.socket | None,
                 resp: Answer, read_timeout: float) -> None:
        self._pool = pool
        self._conn: HttpConnection | None = conn
        self._timed = conn  # its deadline, after the connection went back to the pool
        self._sock = sock
        self._resp = resp
        self._read_timeout = read_timeout
        self._over: bool | None = None  # the request is over: whether the deadline cut it
        self.status = resp.status
        self.headers: Mapping[str, str] = resp.headers if resp.headers is not None \
            else HeaderFields()  # always read by now

    def read(self) -> bytes:
        try:
            data: bytes = self._resp.read()
        except TimeoutError as exc:
            raise self._timeout() from exc
        except (OSError, ProtocolError, ValueError) as exc:
            if self._expired():
                raise deadline_error() from exc
            raise
        if self._finish():  # cut at its deadline: the body may be short
            raise deadline_error()
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
                        raise deadline_error()
                    return
                yield data
        fp = self._resp.fp
        if fp is None:
            return
        try:
            yield from dechunked(functools.partial(self._read1, fp.read1, amt))
        except IncompleteBody as exc:
            if self._expired():
                raise deadline_error() from exc
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
            return deadline_error()
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
            return deadline_error()
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


def deadline_error() -> DeadlineExceeded:
    return DeadlineExceeded("the request's deadline passed before its answer was complete")


class Pool:
    """Kept-alive connections to one server; each request has one to itself.

    ``server_name`` is the name the server's certificate is verified against (and sent as
    SNI) when it is not the host of ``server`` (a kubeconfig's ``tls-server-name``)."""

    def __init__(self, server: str, ssl_context: ssl.SSLContext | None,
                 server_name: str | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        parts = urlsplit(server)
        scheme, host, port = parts.scheme, parts.hostname, parts.port
        if scheme not in ("https", "http") or not host:
            raise ValueError(f"the API server address {server!r} is not an http(s) URL")
        self._https = scheme == "https"
        self._host = host
        self._port = port or (443 if self._https else 80)
        self._prefix = parts.path.rstrip("/")
        self._ctx = ssl_context if ssl_context is not None or not self._https \
            else ssl.create_default_context()
        self._server_name = server_name
        self._idle: list[HttpConnection] = []
        self._lock = threading.Lock()
        self._clock = clock
        self._timed: set[HttpConnection] = set()  # requests in flight with a deadline
        self._grace_until = math.inf

    def _new(self, connect_timeout: float) -> HttpConnection:
        return HttpConnection(self._host, self._port, connect_timeout,
                           self._ctx if self._https else None, self._server_name,
                           self._clock)

    def passed(self, conn: HttpConnection) -> bool:
        """The request's deadline cut it (:meth:`abort`) or has passed: a read that timed
        out at the deadline itself is the deadline's failure all the same."""
        return conn.expired or self._clock() >= conn.deadline

    def done(self, conn: HttpConnection) -> bool:
        """The request on ``conn`` is over; True when its deadline cut it first or has
        passed (its connection is not reused)."""
        if conn.deadline == math.inf:
            return conn.expired
        self._timed.discard(conn)
        over = self.passed(conn)
        conn.deadline = math.inf
        return over

    def put(self, conn: HttpConnection) -> None:
        with self._lock:
            if len(self._idle) < MAX_IDLE:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        """Close the connections kept alive (the pool is not used any more)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def _take(self) -> HttpConnection | None:
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None or not conn.dropped():
                return conn
            conn.close()

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
                deadline: float | None = None) -> Response:
        """Send one request and return its answer with the body unread.

        ``target`` is the path and query. ``deadline`` (a :func:`time.monotonic` time)
        bounds the whole request, connect to last byte; ``read_timeout`` each read.
        Raises :class:`ConnectError` when the server cannot be reached or the connection
        broke before an answer (``before_answer``: it was closed or reset before any
        response, e.g. a kept-alive one found dead), :class:`ReadTimeoutError` when no
        answer came in time, and :class:`DeadlineExceeded` when the deadline passed (a
        request whose deadline has passed already is not sent).
        """
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
        if deadline is not None:
            conn.deadline = deadline
            self._timed.add(conn)
        sending = False
        try:
            if fresh:
                read_timeout = self._connect(conn, read_timeout, deadline)
            sock = conn.sock
            if sock is not None and abs(conn.wait - read_timeout) > DEADLINE_SLACK:
                # A kept-alive connection has the wait of its last request, most often
                # the same within the slack: no system call then.
                sock.settimeout(read_timeout)
                conn.wait = read_timeout
            sending = True
            conn.request(method, self._prefix + target, body=body, headers=headers)
            sending = False
            resp = conn.getresponse()
        except BaseException as exc:
            self._fail(conn, exc, sending, fresh, read_timeout)
        return Response(self, conn, sock, resp, read_timeout)

    def _connect(self, conn: HttpConnection, read_timeout: float,
                 deadline: float | None) -> float:
        """Connect a new connection; the read timeout that connecting left."""
        try:
            conn.connect()
        except OSError as exc:
            raise ConnectError(f"{type(exc).__name__}: {exc}") from exc
        if deadline is not None:
            read_timeout = min(read_timeout, deadline - self._clock())
            if read_timeout <= 0:
                raise TimeoutError("the request's deadline passed while connecting")
        return read_timeout

    def _fail(self, conn: HttpConnection, exc: BaseException, sending: bool, fresh: bool,
              read_timeout: float) -> NoReturn:
        """Close the connection and raise what ``exc``, met while sending (``sending``)
        or reading the answer's header, means to the caller."""
        conn.close()
        if self.done(conn):
            raise deadline_error() from exc
        if isinstance(exc, ConnectError):
            raise exc
        if isinstance(exc, TimeoutError):
            raise ReadTimeoutError(f"Read timed out. (read timeout={read_timeout})") from exc
        if isinstance(exc, OSError | ProtocolError):
            # Before any answer byte: broken while sending, an empty status line
            # (RemoteDisconnected), or reset while waiting for the first byte.
            unanswered = (isinstance(exc, Unanswered | RemoteDisconnected)
                          or (sending and closed_before_answer(exc)))
            raise ConnectError(f"{type(exc).__name__}: {exc}", before_answer=unanswered,
                               reused=not fresh,
                               broken=unanswered or closed_before_answer(exc)) from exc
        raise exc
