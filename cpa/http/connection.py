"""One HTTP/1.1 connection, plain or TLS, and the deadline of the request it carries.

Deadlines. A socket timeout bounds each read, not a request: an answer drip-fed one byte
every 10 s never trips a 30 s read timeout and holds the caller for as long as the server
likes. So a request may carry a deadline (a :func:`time.monotonic` time) that covers it
from connecting to its last byte. It is a number on the request's connection, looked at
each time a read begins (:class:`DeadlineIO`: the socket's timeout becomes the time left
when that is shorter), so a request whose deadline passes fails with
:class:`~cpa.http.errors.DeadlineExceeded` by the deadline without a thread to cut it.
"""

from __future__ import annotations

import errno
import io
import math
import select
import socket
import ssl
import time
from collections.abc import Callable, Mapping
from typing import Any

from cpa.http.errors import ProtocolError
from cpa.http.message import BAD_TARGET, BODY_METHODS, Answer, field_lines

READER_BUFFER = 8192  # a connection's buffered reader's size (io's default)
DEADLINE_SLACK = 0.005  # s: how far past its deadline a read begun in time may end


class DeadlineIO(io.RawIOBase):
    """The socket as its connection's one buffered reader reads it: a read waits at most
    the time left before the request's deadline (the socket's timeout is lowered to it when
    a read would otherwise end more than :data:`DEADLINE_SLACK` past the deadline). No
    thread and no per-request registration: the deadline is a number on the connection,
    looked at when a read begins."""

    def __init__(self, sock: socket.socket, conn: HttpConnection) -> None:
        self._sock = sock
        self._conn = conn

    def readable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._sock.fileno()

    def readinto(self, buffer: Any) -> int:
        conn = self._conn
        deadline = conn.deadline
        if deadline != math.inf:
            left = deadline - conn.clock()
            if left < conn.wait - DEADLINE_SLACK:
                if left <= 0:
                    raise TimeoutError("the request's deadline passed")
                self._sock.settimeout(left)
                conn.wait = left
        return self._sock.recv_into(buffer)


class HttpConnection:
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
        self.host_line = f"Host: {host_field(self)}\r\n"
        self._poller: select.poll | None = None

    def connect(self) -> None:
        self._poller = None
        sock = socket.create_connection((self.host, self.port), self.timeout)
        self.sock = sock
        try:  # as Go and urllib3 do
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError as exc:
            if exc.errno != errno.ENOPROTOOPT:
                raise
        if self._tls is not None:
            tls = self._tls.wrap_socket(self.sock, server_hostname=self._server_name,
                                        do_handshake_on_connect=False)
            self.sock = tls
            if self.deadline != math.inf:  # the handshake, as a whole, within the deadline
                left = self.deadline - self.clock()
                if left <= 0:
                    raise TimeoutError("the request's deadline passed while connecting")
                tls.settimeout(left if self.timeout is None else min(self.timeout, left))
            tls.do_handshake()
        if self.sock is not None:
            self.reader = io.BufferedReader(DeadlineIO(self.sock, self), READER_BUFFER)

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
        self._method = write_request(self, method, url, body, headers)

    def getresponse(self) -> Answer:
        return read_answer(self, self._method)



def host_field(conn: HttpConnection) -> str:
    """The Host field as ``http.client`` wrote it: the port unless it is 80 (443 named
    too, as its ``HTTPConnection`` under a TLS socket did)."""
    host = f"[{conn.host}]" if ":" in conn.host else conn.host
    return host if conn.port == 80 else f"{host}:{conn.port}"


def write_request(conn: HttpConnection, method: str, target: str,
                   body: bytes | None, headers: Mapping[str, Any]) -> str:
    """Send the request head (and body) in one write; the same fields as ``http.client``
    sends (Host, Accept-Encoding: identity, the caller's, Content-Length), each value
    refused if it could end the line."""
    if BAD_TARGET.search(target):
        raise ProtocolError(f"URL can't contain control characters: {target!r}")
    if conn.sock is None:
        conn.connect()
    length = f"Content-Length: {len(body or b'')}\r\n" \
        if body is not None or method in BODY_METHODS else ""
    head = (f"{method} {target} HTTP/1.1\r\n{conn.host_line}Accept-Encoding: identity\r\n"
            f"{field_lines(headers)}{length}\r\n").encode("iso-8859-1")
    sock = conn.sock
    assert sock is not None
    sock.sendall(head + body if body else head)
    return method


def read_answer(conn: HttpConnection, method: str) -> Answer:
    """The answer's status and header (the body left unread)."""
    if conn.reader is None:
        raise ProtocolError("no connection to read an answer from")
    answer = Answer(conn.reader, method)
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
