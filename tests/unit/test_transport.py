"""cpa.kube.transport against a scripted HTTP/1.1 server on 127.0.0.1 (plain sockets, so each
case controls exactly what goes over the wire and when)."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpa.kube.api import ApiError
from cpa.kube.client import KubeApi
from cpa.kube.config import Connection
from cpa.kube.transport import ConnectError, Pool, ReadTimeoutError, Response, _Dechunker

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
        threading.Thread(target=self._accept, daemon=True).start()

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
            t = threading.Thread(target=self._serve, args=(conn, index), daemon=True)
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
        resp = get(pool, "/x")
        assert resp.status == 200
        assert resp.headers["content-type"] == "application/json"  # any case
        assert resp.read() == expected
        resp.release_conn()
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
    resp = get(pool, "/next")
    assert resp.read() == b"ok"
    resp.release_conn()
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


def test_a_silent_stream_raises_a_read_timeout(serve: Callable[[Handler], Server]) -> None:
    def handler(conn: socket.socket, _index: int) -> None:
        read_request(conn)
        conn.sendall(CHUNKED_HEAD)
        time.sleep(3)

    server = serve(handler)
    resp = get(Pool(server.url, None), "/watch", 0.3)
    with pytest.raises(ReadTimeoutError, match="Read timed out"):
        list(resp.stream(1024))
    resp.close()


def test_shutdown_from_another_thread_ends_a_blocked_read(
        serve: Callable[[Handler], Server]) -> None:
    def handler(conn: socket.socket, _index: int) -> None:
        read_request(conn)
        conn.sendall(CHUNKED_HEAD)
        time.sleep(10)

    server = serve(handler)
    resp = get(Pool(server.url, None), "/watch", 30)
    threading.Timer(0.2, resp.shutdown).start()
    began = time.monotonic()
    with pytest.raises(Exception):  # noqa: B017 - EOF inside a chunked body, or a closed fd
        list(resp.stream(1024))
    assert time.monotonic() - began < 5
    resp.close()


def test_an_idle_connection_the_server_closed_is_not_reused(
        serve: Callable[[Handler], Server]) -> None:
    def handler(conn: socket.socket, _index: int) -> None:
        read_request(conn)
        answer(conn, b"first")  # then close: a server-side idle timeout

    server = serve(handler)
    pool = Pool(server.url, None)
    resp = get(pool, "/")
    assert resp.read() == b"first"
    resp.release_conn()
    time.sleep(0.2)
    resp = get(pool, "/")
    assert resp.read() == b"first"
    resp.release_conn()
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


def test_a_get_reset_before_its_answer_is_sent_once_more(
        serve: Callable[[Handler], Server]) -> None:
    def handler(conn: socket.socket, index: int) -> None:
        read_request(conn)
        if index == 0:  # closed under us before any answer
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            return
        answer(conn, b'{"kind":"ConfigMap"}')

    server = serve(handler)
    assert api(server.url).get_json("/api/v1/x") == {"kind": "ConfigMap"}
    assert server.accepted == 2


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
    decoder = _Dechunker()
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
        _Dechunker().feed(wire)


def test_a_stream_cut_inside_a_chunk_is_an_error(serve: Callable[[Handler], Server]) -> None:
    def handler(conn: socket.socket, _index: int) -> None:
        read_request(conn)
        conn.sendall(CHUNKED_HEAD + b"a\r\n01234")

    server = serve(handler)
    resp = get(Pool(server.url, None), "/watch", 5)
    with pytest.raises(ConnectError, match="closed inside a chunked body"):
        list(resp.stream(1024))
    resp.close()


def test_a_chunked_stream_read_to_its_end_keeps_the_connection(
        serve: Callable[[Handler], Server]) -> None:
    def handler(conn: socket.socket, _index: int) -> None:
        read_request(conn)
        conn.sendall(CHUNKED_HEAD
                     + encode_chunked([b"abc", b"defg"], True, True))
        read_request(conn)
        answer(conn, b"again")

    server = serve(handler)
    pool = Pool(server.url, None)
    resp = get(pool, "/a", 5)
    assert b"".join(resp.stream(2)) == b"abcdefg"
    resp.release_conn()
    resp = get(pool, "/b", 5)
    assert resp.read() == b"again"
    resp.release_conn()
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
        resp = get(pool, "/x")
        assert resp.status == 200
        assert resp.headers["Content-Type"] == resp.headers.get("content-type") == \
            "application/json"
        assert resp.headers.get("warning") == '299 - "one"'
        assert resp.headers.get("X-Folded") == "a b"
        assert resp.headers.get("X-Ignored") is None and "X-Ignored" not in resp.headers
        assert resp.read() == b"{}"
        resp.release_conn()
    assert server.accepted == 1


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
    with pytest.raises(ValueError, match="Invalid header"):
        pool.request("GET", "/x", body=None, headers={"Authorization": "Bearer t\r\nX: y"},
                     connect_timeout=2, read_timeout=2)
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
