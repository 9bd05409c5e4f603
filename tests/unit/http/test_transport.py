"""cpa.http (connection, message, pool) against a scripted HTTP/1.1 server on 127.0.0.1
(plain sockets, so each case controls exactly what goes over the wire and when)."""

from __future__ import annotations

import contextlib
import json
import math
import socket
import ssl
import struct
import subprocess
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpa.http.errors import (
    ConnectError,
    DeadlineExceeded,
    IncompleteBody,
    ProtocolError,
    ReadTimeoutError,
    probable_eof,
)
from cpa.http.message import Dechunker
from cpa.http.pool import Pool, Response
from cpa.kube.api import ApiError
from cpa.kube.client import KubeApi
from cpa.kube.clientconfig import Connection

Handler = Callable[[socket.socket, int], None]  # (accepted connection, its index)


def read_request(conn: socket.socket) -> bytes:
    """Read one request's head (our requests carry no body on GET)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            need = int(line.split(b":")[1]) - len(rest)
            while need > 0:
                need -= len(conn.recv(need))
    return head


CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"


def get(pool: Pool, path: str, read_timeout: float = 2) -> Response:
    return pool.request("GET", path, body=None, headers={}, connect_timeout=2,
                        read_timeout=read_timeout)


def fetch(pool: Pool, path: str, read_timeout: float = 2) -> tuple[Response, bytes]:
    """GET ``path``: the answer and its body read to the end, the connection released."""
    resp = get(pool, path, read_timeout)
    body = resp.read()
    resp.release_conn()
    return resp, body


def answer(conn: socket.socket, body: bytes, status: str = "200 OK",
           ctype: str = "application/json") -> None:
    conn.sendall(f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\n"
                 f"Content-Length: {len(body)}\r\n\r\n".encode() + body)


class Server:
    """Accepts connections and hands each to ``handler`` in its own thread."""

    def __init__(self, handler: Handler) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.handler = handler
        self.accepted = 0
        self.requests: list[bytes] = []
        self._threads: list[threading.Thread] = []
        threading.Thread(target=self._accept, name="test-server", daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            index = self.accepted
            self.accepted += 1
            t = threading.Thread(target=self._serve, args=(conn, index), name="test-server",
                                 daemon=True)
            t.start()
            self._threads.append(t)

    def _serve(self, conn: socket.socket, index: int) -> None:
        with conn, contextlib.suppress(OSError):
            self.handler(conn, index)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def serve() -> Iterator[Callable[[Handler], Server]]:
    servers: list[Server] = []

    def start(handler: Handler) -> Server:
        servers.append(Server(handler))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


def keep_alive(bodies: list[bytes]) -> Handler:
    """Answer requests on one connection with these bodies, in turn, keeping it open."""
    def handler(conn: socket.socket, _index: int) -> None:
        for body in bodies:
            if not read_request(conn):
                return
            answer(conn, body)
        time.sleep(2)
    return handler


def test_a_connection_read_to_the_end_is_reused(serve: Callable[[Handler], Server]) -> None:
    server = serve(keep_alive([b'{"a":1}', b'{"b":2}', b'{"c":3}']))
    pool = Pool(server.url, None)
    for expected in (b'{"a":1}', b'{"b":2}', b'{"c":3}'):
        resp, body = fetch(pool, "/x")
        assert resp.status == 200
        assert resp.headers["content-type"] == "application/json"  # any case
        assert body == expected
    assert server.accepted == 1


def test_a_partly_read_answer_closes_its_connection(
        serve: Callable[[Handler], Server]) -> None:
    def handler(conn: socket.socket, index: int) -> None:
        read_request(conn)
        answer(conn, b"x" * 200_000 if index == 0 else b"ok")
        while read_request(conn):
            answer(conn, b"ok")

    server = serve(handler)
    pool = Pool(server.url, None)
    resp = get(pool, "/big")
    next(resp.stream(1000))
    resp.release_conn()  # unread bytes: must not be taken for the next answer
    assert fetch(pool, "/next")[1] == b"ok"
    assert server.accepted == 2


def test_a_chunked_stream_yields_each_chunk_as_it_arrives(
        serve: Callable[[Handler], Server]) -> None:
    go_on = threading.Event()

    def handler(conn: socket.socket, _index: int) -> None:
        read_request(conn)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n")
        conn.sendall(b"6\r\nevent1\r\n")
        go_on.wait(5)
        conn.sendall(b"6\r\nevent2\r\n0\r\n\r\n")

    server = serve(handler)
    resp = get(Pool(server.url, None), "/watch", 5)
    pieces = resp.stream(65536)
    assert next(pieces) == b"event1"  # not held back until 65536 bytes came
    go_on.set()
    assert b"".join(pieces) == b"event2"
    resp.release_conn()


# Reads smaller than the reader's buffer, and as large as a list's or a watch's.
AMTS = pytest.mark.parametrize("amt", [1024, 65536], ids=["small", "large"])


@AMTS
def test_a_silent_stream_raises_a_read_timeout(serve: Callable[[Handler], Server],
                                               amt: int) -> None:
    def handler(conn: socket.socket, _index: int) -> None:
        read_request(conn)
        conn.sendall(CHUNKED_HEAD)
        time.sleep(3)

    server = serve(handler)
    resp = get(Pool(server.url, None), "/watch", 0.3)
    with pytest.raises(ReadTimeoutError, match="Read timed out"):
        list(resp.stream(amt))
    resp.close()


@AMTS
def test_shutdown_from_another_thread_ends_a_blocked_read(
        serve: Callable[[Handler], Server], amt: int) -> None:
    def handler(conn: socket.socket, _index: int) -> None:
        read_request(conn)
        conn.sendall(CHUNKED_HEAD + b"1\r\na\r\n")
        time.sleep(10)

    server = serve(handler)
    resp = Pool(server.url, None).request("GET", "/watch", body=None, headers={},
                                          connect_timeout=2, read_timeout=30)
    threading.Timer(0.3, resp.shutdown).start()
    began = time.monotonic()
    with pytest.raises(Exception):  # noqa: B017 - EOF inside a chunked body, or a closed fd
        list(resp.stream(amt))
    assert time.monotonic() - began < 5
    resp.close()


def test_an_idle_connection_the_server_closed_is_not_reused(
        serve: Callable[[Handler], Server]) -> None:
    def handler(conn: socket.socket, _index: int) -> None:
        read_request(conn)
        answer(conn, b"first")  # then close: a server-side idle timeout

    server = serve(handler)
    pool = Pool(server.url, None)
    assert fetch(pool, "/")[1] == b"first"
    time.sleep(0.2)
    assert fetch(pool, "/")[1] == b"first"
    assert server.accepted == 2


def test_nothing_listening_is_a_connect_error() -> None:
    sock = socket.create_server(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    with pytest.raises(ConnectError):
        Pool(f"http://127.0.0.1:{port}", None).request(
            "GET", "/", body=None, headers={}, connect_timeout=1, read_timeout=1)


def api(url: str) -> KubeApi:
    return KubeApi(Connection(server=url, ssl_context=None, authorization=lambda: "Bearer t",
                              source="test"))


def rst(conn: socket.socket) -> None:
    """Close with a reset (RST), not a FIN."""
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def answer_then(first: Callable[[socket.socket], None]) -> Handler:
    """Connection 0 answers one request, then meets its second with ``first``; every other
    connection answers all its requests."""
    def handler(conn: socket.socket, index: int) -> None:
        served = 0
        while read_request(conn):
            if index == 0 and served == 1:
                first(conn)
                return
            answer(conn, b'{"kind":"ConfigMap"}')
            served += 1
    return handler


@pytest.mark.parametrize("method", ["GET", "PUT"])
def test_a_request_reset_on_a_kept_alive_connection_before_any_answer_byte(
        serve: Callable[[Handler], Server], method: str) -> None:
    """Go's rule: a GET is sent once more on a new connection; a write never is."""
    server = serve(answer_then(rst))
    client = counted(server.url)
    assert client.get_json("/api/v1/x") == {"kind": "ConfigMap"}
    assert server.accepted == 1
    if method == "GET":
        assert client.get_json("/api/v1/x") == {"kind": "ConfigMap"}
        assert server.accepted == 2 and client.waits == [], "at once, on a new connection"
    else:
        with pytest.raises(ApiError) as caught:
            client.send_json(method, "/api/v1/x", {"data": {}})
        assert caught.value.status == 0 and server.accepted == 1


def half_answer(conn: socket.socket) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Ty")
    time.sleep(0.2)
    rst(conn)


def second_get_error(server: Server) -> ConnectError:
    """What a second GET on the kept-alive connection of a first, answered one raises."""
    pool = Pool(server.url, None)
    first = get(pool, "/x")
    first.read()
    first.release_conn()
    with pytest.raises(ConnectError) as caught:
        get(pool, "/x")
    return caught.value


def test_a_reset_after_a_byte_of_the_answer_is_not_retryable_at_once(
        serve: Callable[[Handler], Server]) -> None:
    """Go's transport sends nothing again once a byte of the answer came."""
    caught = second_get_error(serve(answer_then(half_answer)))
    assert caught.reused and caught.broken
    assert not caught.before_answer and not caught.retryable


def test_a_reset_on_a_new_connection_is_not_retryable_at_once(
        serve: Callable[[Handler], Server]) -> None:
    """Go's transport: a new connection that fails says something about the server."""
    def handler(conn: socket.socket, _index: int) -> None:
        read_request(conn)
        rst(conn)

    server = serve(handler)
    with pytest.raises(ConnectError) as caught:
        get(Pool(server.url, None), "/x")
    assert caught.value.before_answer and caught.value.broken
    assert not caught.value.reused and not caught.value.retryable


class CountedWaits(KubeApi):
    """The client with its retry pauses recorded and not slept."""

    waits: list[float]

    def _wait_retry(self, seconds: float, end: float) -> bool:
        self.waits.append(seconds)
        return True


def counted(url: str) -> CountedWaits:
    client = CountedWaits(Connection(server=url, ssl_context=None,
                                     authorization=lambda: "Bearer t", source="test"))
    client.waits = []
    return client


@pytest.mark.parametrize("where", ["new connection", "part-way through the answer",
                                   "in the body"])
def test_a_get_reset_anywhere_else_is_sent_again_after_a_second(
        serve: Callable[[Handler], Server], where: str) -> None:
    """client-go's rule for a GET: a reset or an EOF counts as ``Retry-After: 1``."""
    def body_cut(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\n{\"kind\"")
        time.sleep(0.2)
        rst(conn)

    def handler(conn: socket.socket, index: int) -> None:
        if not read_request(conn):
            return
        if index == 0 and where == "new connection":
            rst(conn)
            return
        answer(conn, b'{"kind":"ConfigMap"}')
        if index == 0 and read_request(conn):
            (half_answer if where == "part-way through the answer" else body_cut)(conn)
            return
        while read_request(conn):
            answer(conn, b'{"kind":"ConfigMap"}')

    server = serve(handler)
    client = counted(server.url)
    if where != "new connection":
        client.get_json("/api/v1/x")
    assert client.get_json("/api/v1/x") == {"kind": "ConfigMap"}
    assert client.waits == [1.0] and server.accepted == 2


def test_a_write_reset_in_its_answer_is_not_sent_again(
        serve: Callable[[Handler], Server]) -> None:
    """Every GET is answered, every PUT is reset part-way through its answer's header; the
    PUT reaches the server once. (Judged by the requests, not by connection numbers: a
    connection from another test's client to a reused port must not change the answer.)"""
    puts: list[bytes] = []

    def handler(conn: socket.socket, _index: int) -> None:
        while head := read_request(conn):
            if head.startswith(b"PUT "):
                puts.append(head)
                half_answer(conn)
                return
            answer(conn, b'{"kind":"ConfigMap"}')

    server = serve(handler)
    client = counted(server.url)
    client.get_json("/api/v1/x")
    with pytest.raises(ApiError):
        client.send_json("PUT", "/api/v1/x", {"data": {}})
    assert client.waits == [] and len(puts) == 1


def test_a_refused_connection_is_not_tried_again() -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    client = counted(f"http://127.0.0.1:{port}")
    with pytest.raises(ApiError):
        client.get_json("/api/v1/x")
    assert client.waits == []


def test_connect_errors_say_whether_they_may_be_sent_again(
        serve: Callable[[Handler], Server]) -> None:
    caught = second_get_error(serve(answer_then(rst)))
    assert caught.before_answer and caught.reused and caught.retryable
    assert caught.broken


def test_a_write_is_never_sent_twice(serve: Callable[[Handler], Server]) -> None:
    def handler(conn: socket.socket, _index: int) -> None:
        read_request(conn)

    server = serve(handler)
    with pytest.raises(ApiError) as caught:
        api(server.url).send_json("PUT", "/apis/x", {"spec": {"replicas": 3}})
    assert caught.value.status == 0
    assert server.accepted == 1


def test_an_error_answer_carries_the_status_and_message(
        serve: Callable[[Handler], Server]) -> None:
    def handler(conn: socket.socket, _index: int) -> None:
        read_request(conn)
        answer(conn, b'{"kind":"Status","reason":"Forbidden","message":"nope"}',
               status="403 Forbidden")

    server = serve(handler)
    with pytest.raises(ApiError) as caught:
        api(server.url).get_json("/api/v1/x")
    assert (caught.value.status, caught.value.reason, caught.value.message) == (
        403, "Forbidden", "nope")


def test_requests_carry_the_headers_and_the_server_path_prefix(
        serve: Callable[[Handler], Server]) -> None:
    seen: list[bytes] = []

    def handler(conn: socket.socket, _index: int) -> None:
        seen.append(read_request(conn))
        answer(conn, b"{}")

    server = serve(handler)
    api(server.url + "/prefix/").get_json("/api/v1/nodes", {"limit": "1"})
    head = seen[0].decode()
    assert head.startswith("GET /prefix/api/v1/nodes?limit=1 HTTP/1.1\r\n")
    assert "Authorization: Bearer t" in head
    assert "User-Agent: cluster-proportional-autoscaler-py/" in head
    assert "Accept: application/json" in head


# --- chunked decoding ---------------------------------------------------------------------
def encode_chunked(pieces: list[bytes], extension: bool, trailer: bool) -> bytes:
    out = b""
    for piece in pieces:
        if piece:
            out += f"{len(piece):x}".encode() + (b";ext=1" if extension else b"") + b"\r\n"
            out += piece + b"\r\n"
    return out + b"0\r\n" + (b"X-Trailer: 1\r\n" if trailer else b"") + b"\r\n"


@settings(max_examples=300, deadline=None)
@given(pieces=st.lists(st.binary(max_size=300), max_size=12),
       cuts=st.lists(st.integers(min_value=1, max_value=50), max_size=40),
       extension=st.booleans(), trailer=st.booleans())
def test_dechunking_any_split_gives_the_body(pieces: list[bytes], cuts: list[int],
                                             extension: bool, trailer: bool) -> None:
    wire = encode_chunked(pieces, extension, trailer)
    decoder = Dechunker()
    body, pos = b"", 0
    for cut in [*cuts, len(wire)]:
        if pos >= len(wire):
            break
        body += decoder.feed(wire[pos:pos + cut])
        pos += cut
    assert decoder.done
    assert body == b"".join(pieces)


@pytest.mark.parametrize("wire", [b"zz\r\n", b"3\r\nabcX\r\n", b"1" * 5000])
def test_a_malformed_chunked_body_is_an_error(wire: bytes) -> None:
    with pytest.raises(ConnectError, match="malformed chunked body"):
        Dechunker().feed(wire)


@AMTS
def test_a_stream_cut_inside_a_chunk_is_an_error(serve: Callable[[Handler], Server],
                                                amt: int) -> None:
    def handler(conn: socket.socket, _index: int) -> None:
        read_request(conn)
        conn.sendall(CHUNKED_HEAD + b"a\r\n01234")

    server = serve(handler)
    resp = get(Pool(server.url, None), "/watch", 5)
    with pytest.raises(ConnectError, match="closed inside a chunked body"):
        list(resp.stream(amt))
    resp.close()


@pytest.mark.parametrize("amt", [2, 65536], ids=["reader", "direct"])
def test_a_chunked_stream_read_to_its_end_keeps_the_connection(
        serve: Callable[[Handler], Server], amt: int) -> None:
    def handler(conn: socket.socket, _index: int) -> None:
        read_request(conn)
        conn.sendall(CHUNKED_HEAD
                     + encode_chunked([b"abc", b"defg"], True, True))
        read_request(conn)
        answer(conn, b"again")

    server = serve(handler)
    pool = Pool(server.url, None)
    resp = get(pool, "/a", 5)
    assert b"".join(resp.stream(amt)) == b"abcdefg"
    resp.release_conn()
    assert fetch(pool, "/b", 5)[1] == b"again"
    assert server.accepted == 1


def test_connections_disable_nagle(serve: Callable[[Handler], Server]) -> None:
    """Small writes (a request's head, then its body) must not wait for an ACK."""
    server = serve(keep_alive([b"{}"]))
    resp = get(Pool(server.url, None), "/")
    sock = resp._sock
    assert sock is not None
    assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    resp.read()
    resp.release_conn()


# --- deadlines ----------------------------------------------------------------------------
def drip(body: bytes, interval: float) -> Handler:
    """Answer with the head at once, then the body one byte per ``interval`` (no read
    ever waits long: a per-read timeout never fires)."""
    def handler(conn: socket.socket, _index: int) -> None:
        read_request(conn)
        conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {len(body)}\r\n\r\n".encode())
        for i in range(len(body)):
            conn.sendall(body[i:i + 1])
            time.sleep(interval)
    return handler


def test_a_drip_fed_answer_fails_at_the_requests_deadline(
        serve: Callable[[Handler], Server]) -> None:
    server = serve(drip(b'{"data":"' + b"x" * 100 + b'"}', 0.1))
    began = time.monotonic()
    with pytest.raises(ApiError, match=r"within the request's 1s deadline \(connect to last"):
        KubeApi(Connection(server.url, None, lambda: None, "test"), timeout=1.0
                ).get_json("/api/v1/x")
    assert time.monotonic() - began < 3


def test_a_caller_deadline_sooner_than_the_timeout_wins(
        serve: Callable[[Handler], Server]) -> None:
    server = serve(drip(b'{"a":"' + b"x" * 100 + b'"}', 0.1))
    began = time.monotonic()
    with pytest.raises(ApiError, match="deadline"):
        api(server.url).get_json("/api/v1/x", deadline=time.monotonic() + 0.5)
    assert time.monotonic() - began < 2.5


def test_a_request_whose_deadline_has_passed_is_not_sent(
        serve: Callable[[Handler], Server]) -> None:
    server = serve(keep_alive([b"{}"]))
    with pytest.raises(ApiError, match="deadline"):
        api(server.url).send_json("PUT", "/apis/x", {"spec": {}},
                                  deadline=time.monotonic() - 0.1)
    assert server.accepted == 0


def test_a_request_cut_at_its_deadline_does_not_leave_its_connection_in_the_pool(
        serve: Callable[[Handler], Server]) -> None:
    def handler(conn: socket.socket, index: int) -> None:
        read_request(conn)
        if index == 0:
            time.sleep(2)  # the first answer never comes in time
            return
        answer(conn, b'{"ok":true}')

    server = serve(handler)
    client = api(server.url)
    with pytest.raises(ApiError, match="deadline"):
        client.get_json("/slow", deadline=time.monotonic() + 0.3)
    assert client.get_json("/fast") == {"ok": True}
    assert server.accepted == 2


def test_abort_cuts_requests_in_flight_and_bounds_later_ones(
        serve: Callable[[Handler], Server]) -> None:
    def handler(conn: socket.socket, _index: int) -> None:
        read_request(conn)
        time.sleep(5)

    server = serve(handler)
    client = api(server.url)
    threading.Timer(0.3, client.abort, kwargs={"grace": 0.5}).start()
    began = time.monotonic()
    with pytest.raises(ApiError):
        client.get_json("/hung")
    assert time.monotonic() - began < 2
    began = time.monotonic()
    with pytest.raises(ApiError, match="deadline"):
        client.get_json("/also-hung")
    assert time.monotonic() - began < 2, "a request after abort() has the grace only"


def test_a_read_that_times_out_at_the_deadline_is_the_deadline_s_failure(
        serve: Callable[[Handler], Server]) -> None:
    """The read timeout is the time left, so the socket times out at the deadline itself:
    a DeadlineExceeded, not a plain read timeout, and at the deadline, not the 2 s read
    timeout."""
    def handler(conn: socket.socket, _index: int) -> None:
        read_request(conn)
        time.sleep(3)

    server = serve(handler)
    pool = Pool(server.url, None)
    began = time.monotonic()
    with pytest.raises(DeadlineExceeded):
        pool.request("GET", "/x", body=None, headers={}, connect_timeout=2, read_timeout=2,
                     deadline=time.monotonic() + 0.3)
    assert time.monotonic() - began < 1.5


def test_a_read_begun_late_waits_only_the_time_left(
        serve: Callable[[Handler], Server]) -> None:
    """The head comes at once, the body's first half 0.4 s later, then nothing: the read
    that waits for the rest began with 0.2 s left of a 0.6 s deadline, so it gives up at
    the deadline (not a whole 5 s read timeout after it began)."""
    body = b'{"a":"' + b"x" * 50 + b'"}'

    def handler(conn: socket.socket, _index: int) -> None:
        read_request(conn)
        conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n\r\n".encode())
        time.sleep(0.4)
        conn.sendall(body[:20])
        time.sleep(5)

    server = serve(handler)
    pool = Pool(server.url, None)
    began = time.monotonic()
    resp = pool.request("GET", "/x", body=None, headers={}, connect_timeout=2, read_timeout=5,
                        deadline=began + 0.6)
    with pytest.raises(DeadlineExceeded):
        resp.read()
    took = time.monotonic() - began
    resp.release_conn()
    assert 0.55 < took < 1.5, took


def test_a_deadline_has_passed_once_cut_or_once_its_time_came() -> None:
    now = [100.0]
    pool = Pool("http://127.0.0.1:1", None, clock=lambda: now[0])
    conn = pool._new(1.0)  # never connected
    conn.deadline = 105.0
    assert not pool.passed(conn)
    now[0] = 105.0
    assert pool.passed(conn)
    now[0] = 0.0
    conn.expired = True
    assert pool.passed(conn)


def test_deadlines_start_no_thread_and_a_connection_keeps_one_reader(
        serve: Callable[[Handler], Server]) -> None:
    """A request's deadline is a number its connection carries, not a registration with a
    thread; and the connection's buffered reader serves all its answers."""
    server = serve(keep_alive([b'{"a":1}', b'{"b":2}', b'{"c":3}']))
    client = api(server.url)
    before = set(threading.enumerate())
    readers = set()
    for want in ({"a": 1}, {"b": 2}, {"c": 3}):
        assert client.get_json("/x", deadline=time.monotonic() + 5) == want
        idle = client._pool._idle
        assert len(idle) == 1 and idle[0].deadline == math.inf
        readers.add(id(idle[0].reader))
    new = set(threading.enumerate()) - before
    assert all(t.name == "test-server" for t in new), new
    assert len(readers) == 1 and server.accepted == 1


def test_an_answer_that_closes_its_connection_is_read_to_its_end(
        serve: Callable[[Handler], Server]) -> None:
    """``Connection: close``: the answer takes the socket and reader with it; its body,
    sent after a pause, is read whole, and the next request opens a new connection."""
    def handler(conn: socket.socket, _index: int) -> None:
        read_request(conn)
        body = b'{"closing":true}'
        conn.sendall(f"HTTP/1.1 200 OK\r\nConnection: close\r\n"
                     f"Content-Length: {len(body)}\r\n\r\n".encode())
        time.sleep(0.2)
        conn.sendall(body)

    server = serve(handler)
    client = api(server.url)
    assert client.get_json("/x") == {"closing": True}
    assert client._pool._idle == []
    assert client.get_json("/x") == {"closing": True}
    assert server.accepted == 2


# --- bodies, read without http.client -----------------------------------------------------
def one_answer(wire: bytes, then_close: bool = True) -> Handler:
    """Answer the first request with these bytes, then close (or wait)."""
    def handler(conn: socket.socket, _index: int) -> None:
        read_request(conn)
        conn.sendall(wire)
        if not then_close:
            time.sleep(2)
    return handler


@pytest.mark.parametrize("wire,body,kept", [
    (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", b"hello", True),
    (CHUNKED_HEAD + b"3\r\nhel\r\n2;x=y\r\nlo\r\n0\r\nTrailer: 1\r\n\r\n", b"hello", True),
    (b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nhello", b"hello", False),
    (b"HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\nhello", b"hello", False),
    (b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 5\r\n\r\nhello",
     b"hello", True),
    (b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n", b"", True),
    (b"HTTP/1.1 200 OK\r\n\r\nhello", b"hello", False),  # no length: to the close
])
def test_a_body_is_read_by_its_length_its_chunks_or_to_the_close(
        serve: Callable[[Handler], Server], wire: bytes, body: bytes, kept: bool) -> None:
    """Whole reads and streams give the same body; the connection goes back to the pool
    only when the server keeps it (HTTP/1.0 only with keep-alive)."""
    for streamed in (False, True):
        server = serve(one_answer(wire, then_close=not kept))
        pool = Pool(server.url, None)
        resp = get(pool, "/x")
        got = b"".join(resp.stream(2)) if streamed else resp.read()
        assert got == body
        resp.release_conn()
        assert len(pool._idle) == (1 if kept else 0), (wire, streamed)


@pytest.mark.parametrize("wire", [
    b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello",  # short of its length
    CHUNKED_HEAD + b"5\r\nhel",  # cut inside a chunk
])
def test_a_body_cut_short_is_an_incomplete_body(serve: Callable[[Handler], Server],
                                                wire: bytes) -> None:
    """A body that ends before its length or its last chunk is never taken for the whole
    one; client-go counts it as a probable EOF (the watch is opened again, not failed)."""
    resp = get(Pool(serve(one_answer(wire)).url, None), "/x")
    with pytest.raises(IncompleteBody) as caught:
        resp.read()
    assert probable_eof(caught.value)


@pytest.mark.parametrize("wire,message", [
    (b"ICY 200 OK\r\n\r\n", "not an HTTP status line"),
    (b"HTTP/1.1 20x OK\r\n\r\n", "not an HTTP status line"),
    (b"HTTP/2.0 200 OK\r\n\r\n", "not an HTTP/1 answer"),
    (b"HTTP/1.1 200 OK\r\nX: " + b"a" * 70000 + b"\r\n\r\n", "longer than 65,536"),
])
def test_an_answer_that_is_not_http_1_is_a_connect_error(
        serve: Callable[[Handler], Server], wire: bytes, message: str) -> None:
    with pytest.raises(ConnectError, match=message) as caught:
        get(Pool(serve(one_answer(wire)).url, None), "/x")
    assert isinstance(caught.value.__cause__, ProtocolError)


def test_a_server_that_closes_without_an_answer_is_unanswered(
        serve: Callable[[Handler], Server]) -> None:
    """No byte of an answer: a GET may go out again on a kept-alive connection (Go's rule),
    as when ``http.client`` called it RemoteDisconnected."""
    with pytest.raises(ConnectError) as caught:
        get(Pool(serve(one_answer(b"")).url, None), "/x")
    assert caught.value.before_answer and caught.value.broken


# --- Retry-After ----------------------------------------------------------------------------
def throttled(times: int, header: str | None, status: str = "429 Too Many Requests"
              ) -> Handler:
    def handler(conn: socket.socket, _index: int) -> None:
        for _ in range(times):
            read_request(conn)
            extra = f"Retry-After: {header}\r\n" if header is not None else ""
            body = b'{"kind":"Status","reason":"TooManyRequests","message":"slow down"}'
            conn.sendall(f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n{extra}"
                         f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        while read_request(conn):
            answer(conn, b'{"ok":true}')
    return handler


@pytest.mark.parametrize("status", ["429 Too Many Requests", "503 Service Unavailable"])
def test_retry_after_is_waited_and_the_request_sent_again(
        serve: Callable[[Handler], Server], status: str) -> None:
    server = serve(throttled(2, "0", status))
    assert api(server.url).get_json("/x") == {"ok": True}


def test_without_retry_after_a_429_is_the_answer(serve: Callable[[Handler], Server]) -> None:
    server = serve(throttled(1, None))
    with pytest.raises(ApiError) as caught:
        api(server.url).get_json("/x")
    assert caught.value.status == 429


def test_retry_after_is_capped(serve: Callable[[Handler], Server],
                               monkeypatch: pytest.MonkeyPatch) -> None:
    from cpa.kube import client as kubeclient

    monkeypatch.setattr(kubeclient, "RETRY_AFTER_CAP", 0.3)
    server = serve(throttled(1, "3600"))
    began = time.monotonic()
    assert api(server.url).get_json("/x") == {"ok": True}
    assert time.monotonic() - began < 2


def test_a_retry_after_past_the_deadline_is_not_waited(
        serve: Callable[[Handler], Server]) -> None:
    server = serve(throttled(1, "5"))
    began = time.monotonic()
    with pytest.raises(ApiError) as caught:
        KubeApi(Connection(server.url, None, lambda: None, "test"), timeout=1.0
                ).get_json("/x")
    assert caught.value.status == 429 and time.monotonic() - began < 1


def test_a_watch_that_is_throttled_carries_the_retry_after(
        serve: Callable[[Handler], Server]) -> None:
    server = serve(throttled(1, "7"))
    with pytest.raises(ApiError) as caught:
        api(server.url).stream("/api/v1/nodes", {"watch": "1"}, read_timeout=1)
    assert caught.value.retry_after == 7


# --- tls-server-name ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def named_cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A self-signed certificate for the name ``kubernetes`` only (not 127.0.0.1)."""
    d = tmp_path_factory.mktemp("tls")
    key, crt = d / "tls.key", d / "tls.crt"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=kubernetes", "-addext", "subjectAltName=DNS:kubernetes",
                    "-keyout", str(key), "-out", str(crt)], check=True, capture_output=True)
    return str(crt), str(key)


def tls_answer(cert: tuple[str, str], sni: list[str | None]) -> Handler:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(*cert)
    ctx.sni_callback = lambda sock, name, _ctx: sni.append(name)

    def handler(conn: socket.socket, _index: int) -> None:
        with ctx.wrap_socket(conn, server_side=True) as tls:
            read_request(tls)
            answer(tls, b'{"ok":true}')
    return handler


def test_tls_server_name_is_the_name_verified_and_sent(
        serve: Callable[[Handler], Server], named_cert: tuple[str, str]) -> None:
    sni: list[str | None] = []
    server = serve(tls_answer(named_cert, sni))
    url = f"https://127.0.0.1:{server.port}"
    ctx = ssl.create_default_context(cafile=named_cert[0])
    with pytest.raises(ApiError, match="certificate verify failed"):
        KubeApi(Connection(url, ctx, lambda: None, "test")).get_json("/x")
    named = KubeApi(Connection(url, ctx, lambda: None, "test", server_name="kubernetes"))
    assert named.get_json("/x") == {"ok": True}
    assert "kubernetes" in sni


def tls_chunked(cert: tuple[str, str], pieces: list[bytes], cut: bool) -> Handler:
    """A TLS server answering one chunked body of ``pieces``, each written as the API server
    writes a list's Nodes (a chunk per write); ``cut``: closed after the first half, with no
    close_notify (a ragged end)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(*cert)

    def handler(conn: socket.socket, _index: int) -> None:
        tls = ctx.wrap_socket(conn, server_side=True)
        read_request(tls)
        tls.sendall(CHUNKED_HEAD)
        for i, piece in enumerate(pieces):
            if cut and i == len(pieces) // 2:
                tls.shutdown(socket.SHUT_RDWR)  # TCP FIN without a TLS close_notify
                tls.close()
                return
            tls.sendall(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
        tls.sendall(b"0\r\n\r\n")
        read_request(tls)
        answer(tls, b"again")
        tls.close()
    return handler


@pytest.mark.parametrize("cut", [False, True], ids=["whole", "ragged-end"])
def test_a_tls_chunked_stream_is_read_whole_and_its_connection_reused(
        serve: Callable[[Handler], Server], named_cert: tuple[str, str], cut: bool) -> None:
    """A list's many TLS records, read to the end (the connection is kept for the next
    request); a connection closed without a TLS close_notify inside the body is a broken
    one, not the end of it."""
    pieces = [bytes([65 + i % 26]) * (2048 if i % 2 else 7125) for i in range(60)]
    server = serve(tls_chunked(named_cert, pieces, cut))
    ctx = ssl.create_default_context(cafile=named_cert[0])
    pool = Pool(f"https://127.0.0.1:{server.port}", ctx, server_name="kubernetes")
    resp = get(pool, "/api/v1/nodes", 5)
    if cut:
        with pytest.raises(ConnectError, match="closed inside a chunked body"):
            list(resp.stream(65536))
        resp.close()
    else:
        assert b"".join(resp.stream(65536)) == b"".join(pieces)
        resp.release_conn()
        assert fetch(pool, "/again", 5)[1] == b"again"
        assert server.accepted == 1


# --- the request head and the answer's header, written and read without http.client's --
def test_the_answer_header_is_read_as_http_says(serve: Callable[[Handler], Server]) -> None:
    """Names without regard to case, the first of a repeated field (all through get_all),
    an obsolete folded line joined to its field, a 100 Continue skipped, the body by
    Content-Length and the connection kept."""
    def handler(conn: socket.socket, _index: int) -> None:
        for _ in range(2):
            read_request(conn)
            conn.sendall(b"HTTP/1.1 100 Continue\r\nX-Ignored: 1\r\n\r\n"
                         b"HTTP/1.1 200 OK\r\ncontent-TYPE: application/json\r\n"
                         b"Warning: 299 - \"one\"\r\nWarning: 299 - \"two\"\r\n"
                         b"X-Folded: a\r\n  b\r\nContent-Length: 2\r\n\r\n{}")
        time.sleep(2)

    server = serve(handler)
    pool = Pool(server.url, None)
    for _ in range(2):
        resp, body = fetch(pool, "/x")
        assert resp.status == 200
        assert resp.headers["Content-Type"] == resp.headers.get("content-type") == \
            "application/json"
        assert resp.headers.get("warning") == '299 - "one"'
        assert resp.headers.get("X-Folded") == "a b"
        assert resp.headers.get("X-Ignored") is None and "X-Ignored" not in resp.headers
        assert body == b"{}"
    assert server.accepted == 1


def test_a_header_that_comes_in_two_pieces_is_read_line_by_line(
        serve: Callable[[Handler], Server]) -> None:
    def handler(conn: socket.socket, _index: int) -> None:
        read_request(conn)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: app")
        time.sleep(0.2)
        conn.sendall(b"lication/json\r\nContent-Length: 2\r\n\r\n{}")
        time.sleep(1)

    server = serve(handler)
    resp = get(Pool(server.url, None), "/x")
    assert resp.headers.get("content-type") == "application/json"
    assert resp.read() == b"{}"
    resp.release_conn()


def test_too_many_header_fields_are_refused(serve: Callable[[Handler], Server]) -> None:
    def handler(conn: socket.socket, _index: int) -> None:
        read_request(conn)
        conn.sendall(b"HTTP/1.1 200 OK\r\n" + b"X-A: 1\r\n" * 101 + b"\r\n")

    server = serve(handler)
    with pytest.raises(ConnectError, match="more than 100 headers"):
        get(Pool(server.url, None), "/x")


def test_a_header_value_that_could_end_its_line_is_never_sent(
        serve: Callable[[Handler], Server]) -> None:
    server = serve(keep_alive([b"{}"]))
    pool = Pool(server.url, None)
    with pytest.raises(ValueError, match="the Authorization header's value contains a line "
                                         "break at byte 14: not sent") as info:
        pool.request("GET", "/x", body=None,
                     headers={"Authorization": "Bearer CANARYt\r\nX: y"},
                     connect_timeout=2, read_timeout=2)
    assert "CANARY" not in str(info.value)
    with pytest.raises(ConnectError, match="control characters"):
        get(pool, "/x y")


def test_a_write_carries_the_fields_http_client_sent(
        serve: Callable[[Handler], Server]) -> None:
    heads: list[bytes] = []

    def handler(conn: socket.socket, _index: int) -> None:
        data = b""
        while not data.endswith(b"}}"):
            data += conn.recv(65536)
        heads.append(data)
        answer(conn, b"{}")

    server = serve(handler)
    resp = Pool(server.url, None).request(
        "PUT", "/x", body=b'{"spec":{}}', headers={"Content-Type": "application/json"},
        connect_timeout=2, read_timeout=2)
    assert resp.read() == b"{}"
    head = heads[0].decode()
    assert head.startswith(f"PUT /x HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n")
    assert "Content-Length: 11\r\n" in head and "Accept-Encoding: identity\r\n" in head
    assert head.endswith('\r\n\r\n{"spec":{}}')


# --- answers kept decoded -------------------------------------------------------------------
def answers(bodies: list[bytes], puts: list[bytes]) -> Handler:
    """Answer GETs with these bodies in turn (the last one again when they run out) on one
    connection; a PUT's body is kept in ``puts`` and answered with it."""
    def handler(conn: socket.socket, _index: int) -> None:
        got = 0
        while True:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            head, _, rest = data.partition(b"\r\n\r\n")
            if head.startswith(b"PUT"):
                length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                while len(rest) < length:
                    rest += conn.recv(65536)
                puts.append(rest)
                answer(conn, rest)
                continue
            answer(conn, bodies[min(got, len(bodies) - 1)])
            got += 1
    return handler


def test_an_answer_with_the_same_bytes_is_not_decoded_again(
        serve: Callable[[Handler], Server]) -> None:
    one, two = b'{"metadata":{"resourceVersion":"1"}}', b'{"metadata":{"resourceVersion":"2"}}'
    server = serve(answers([one, one, two, two], []))
    client = api(server.url)
    decoded: list[dict[str, object]] = []

    def decode(doc: dict[str, object]) -> dict[str, object]:
        decoded.append(doc)
        return doc

    first = client.get_decoded("/x", decode)
    assert client.get_decoded("/x", decode) is first, "the same bytes: the kept value"
    third = client.get_decoded("/x", decode)
    assert third == {"metadata": {"resourceVersion": "2"}} and third is not first
    assert client.get_decoded("/x", decode) is third
    assert len(decoded) == 2 and server.accepted == 1
    other = client.get_decoded("/x", lambda doc: ("other", doc))
    assert other[0] == "other", "another decoder decodes again"


def test_a_value_the_decoder_refuses_is_not_kept(serve: Callable[[Handler], Server]) -> None:
    server = serve(answers([b'{"a":1}'], []))
    client = api(server.url)
    calls = []

    def decode(doc: dict[str, object]) -> object:
        calls.append(doc)
        if len(calls) == 1:
            raise ValueError("malformed")
        return doc

    with pytest.raises(ValueError):
        client.get_decoded("/x", decode)
    assert client.get_decoded("/x", decode) == {"a": 1} and len(calls) == 2


def test_a_scale_write_leaves_the_kept_answer_as_it_came(
        serve: Callable[[Handler], Server]) -> None:
    """The PUT's body is a copy: the next poll, given the same bytes, reads the target's
    replicas as they came, not as we meant to write them."""
    from cpa.kube.scale import _decoder as scale_decoder
    from cpa.kube.scale import ensure_scale
    from cpa.kube.targets import parse_targets

    scale = (b'{"kind":"Scale","apiVersion":"autoscaling/v1","metadata":{"name":"coredns",'
             b'"namespace":"kube-system","resourceVersion":"7","uid":"u1"},'
             b'"spec":{"replicas":1},"status":{"replicas":1,"selector":"k8s-app=kube-dns"}}')
    puts: list[bytes] = []
    server = serve(answers([scale], puts))
    client = api(server.url)
    target = parse_targets("deployment/coredns")[0][0]
    first = ensure_scale(client, "kube-system", target, 3)
    assert (first.previous, first.replicas, first.changed) == (1, 3, True)
    assert [json.loads(p) for p in puts] == [{
        "kind": "Scale", "apiVersion": "autoscaling/v1",
        "metadata": {"name": "coredns", "namespace": "kube-system", "resourceVersion": "7",
                     "uid": "u1"},
        "spec": {"replicas": 3}}]
    path = "/apis/apps/v1/namespaces/kube-system/deployments/coredns/scale"
    kept, _ = client.get_decoded(path, scale_decoder(path))
    assert kept == json.loads(scale), "the kept object as it came"
    again = ensure_scale(client, "kube-system", target, 3)
    assert (again.previous, again.changed) == (1, True), "read as it came: 1, written again"
    assert json.loads(puts[-1])["spec"] == {"replicas": 3} and len(puts) == 2
