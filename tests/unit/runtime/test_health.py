"""The health server: upstream's paths and bodies, no name lookups, and bounds on what
its clients can cost."""

from __future__ import annotations

import errno
import socket
import time
from collections.abc import Iterator

import pytest
import urllib3

from cpa.runtime import health
from cpa.runtime.health import HealthServer, HealthState, serve


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[HealthState, str]]:
    def no_lookup(*_args: object) -> str:
        raise AssertionError("the health server asked the resolver for a name")

    # http.server's default server_bind calls getfqdn, which in a Pod whose DNS does not
    # answer blocks for the resolver's timeout before the first poll.
    monkeypatch.setattr(socket, "getfqdn", no_lookup)
    monkeypatch.setattr(socket, "gethostbyaddr", no_lookup)
    state = HealthState()
    srv = serve(state, 0, "127.0.0.1")
    try:
        yield state, f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


def get(url: str) -> tuple[int, bytes]:
    resp = urllib3.request("GET", url, retries=False, timeout=5)
    return resp.status, resp.data


def test_paths_and_bodies(server: tuple[HealthState, str]) -> None:
    state, base = server
    assert get(base + "/healthz") == (200, b"")
    assert get(base + "/last-poll") == (200, b"")
    state.record("cannot reach the API server")
    assert get(base + "/last-poll") == (
        500, b"Encountered error at last poll cycle: cannot reach the API server")
    assert get(base + "/healthz") == (200, b""), "/healthz stays 200 whatever the polls do"
    assert get(base + "/nope")[0] == 404


def raw(base: str, data: bytes, read: bool = True) -> bytes:
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(data)
        if not read:
            return b""
        out = b""
        while chunk := s.recv(65536):
            out += chunk
        return out


def test_head_queries_and_404_as_go_serves_them(server: tuple[HealthState, str]) -> None:
    _, base = server
    assert get(base + "/healthz?probe=1") == (200, b"")
    head = raw(base, b"HEAD /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK\r\n") and head.endswith(b"\r\n\r\n")
    assert b"Content-Length: 0\r\n" in head and b"Date: " in head
    nope = raw(base, b"GET /nope HTTP/1.1\r\nConnection: close\r\n\r\n")
    assert b"X-Content-Type-Options: nosniff" in nope
    assert nope.endswith(b"404 page not found\n")


def test_keep_alive_and_pipelined_requests(server: tuple[HealthState, str]) -> None:
    state, base = server
    state.record("boom")
    two = raw(base, b"GET /healthz HTTP/1.1\r\n\r\nGET /last-poll HTTP/1.1\r\n"
                    b"Connection: close\r\n\r\n")
    assert two.count(b"HTTP/1.1 ") == 2
    assert two.endswith(b"Encountered error at last poll cycle: boom")


def test_a_request_with_a_body_is_answered_then_closed(server: tuple[HealthState, str]
                                                       ) -> None:
    _, base = server
    out = raw(base, b"POST /healthz HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc")
    assert out.startswith(b"HTTP/1.1 200 OK") and b"Connection: close" in out


def test_garbage_and_oversize_heads(server: tuple[HealthState, str]) -> None:
    _, base = server
    assert raw(base, b"hello\r\n\r\n").startswith(b"HTTP/1.1 400")
    assert raw(base, b"GET / HTTP/1.1\r\nX: " + b"a" * 10_000).startswith(b"HTTP/1.1 431")
    assert get(base + "/healthz") == (200, b"")


def test_clients_that_go_away_cost_no_traceback(server: tuple[HealthState, str],
                                                capfd: pytest.CaptureFixture[str]) -> None:
    _, base = server
    for data in (b"GET /metr", b"GET /healthz HTTP/1.1\r\n\r\n", b""):
        for _ in range(20):
            raw(base, data, read=False)
    for _ in range(20):  # a reset, not a close
        host, port = base.removeprefix("http://").split(":")
        s = socket.create_connection((host, int(port)))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        s.sendall(b"GET /healthz HTTP/1.1\r\n\r\n")
        s.close()
    assert get(base + "/healthz") == (200, b"")
    assert "Traceback" not in capfd.readouterr().err


def test_connections_are_bounded_and_a_new_one_is_still_served() -> None:
    state = HealthState()
    srv = HealthServer(state, 0, "127.0.0.1", max_connections=8, idle_seconds=30)
    port = srv.server_address[1]
    idle = []
    try:
        for _ in range(40):
            idle.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        assert get(f"http://127.0.0.1:{port}/healthz") == (200, b"")
        assert srv.connections <= 8
        assert srv.evicted >= 32 - 1
    finally:
        for s in idle:
            s.close()
        srv.shutdown()


def test_a_silent_connection_is_closed_after_the_idle_timeout() -> None:
    srv = HealthServer(HealthState(), 0, "127.0.0.1", idle_seconds=0.3)
    try:
        s = socket.create_connection(("127.0.0.1", srv.server_address[1]), timeout=5)
        s.sendall(b"GET /healthz HTTP/1.1\r\n")  # never finished
        assert s.recv(100) == b"", "closed by the server"
        s.close()
    finally:
        srv.shutdown()


def test_an_accept_that_fails_for_lack_of_descriptors_backs_off(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The listener stays readable while accept() fails with EMFILE: retrying at once
    would spin a core (upstream's Go server sleeps 5 ms, doubling to 1 s)."""
    calls: list[int] = []
    real_listen = health._listen

    class Exhausted:
        def __init__(self, sock: socket.socket) -> None:
            self.sock = sock

        def accept(self) -> tuple[socket.socket, object]:
            calls.append(1)
            if len(calls) <= 6:
                raise OSError(errno.EMFILE, "Too many open files")
            return self.sock.accept()

        def __getattr__(self, name: str) -> object:
            return getattr(self.sock, name)

    monkeypatch.setattr(health, "_listen", lambda host, port: Exhausted(real_listen(host, port)))
    srv = HealthServer(HealthState(), 0, "127.0.0.1")
    try:
        port = srv.server_address[1]
        pending = socket.create_connection(("127.0.0.1", port), timeout=5)
        time.sleep(0.5)
        assert len(calls) <= 8, f"{len(calls)} accept calls in 0.5 s: spinning"
        pending.sendall(b"GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n")
        assert pending.recv(100).startswith(b"HTTP/1.1 200"), "accepted after the backoff"
        pending.close()
    finally:
        srv.shutdown()


def test_metrics_errors_are_a_500_not_a_dead_server() -> None:
    def broken() -> bytes:
        raise RuntimeError("registry on fire")

    srv = HealthServer(HealthState(), 0, "127.0.0.1", metrics=broken)
    try:
        status, body = get(f"http://127.0.0.1:{srv.server_address[1]}/metrics")
        assert status == 500 and b"registry on fire" in body
    finally:
        srv.shutdown()


def test_the_state_before_the_first_poll() -> None:
    assert HealthState("waiting for the first Node list").error == \
        "waiting for the first Node list"


def test_an_idle_server_never_wakes_up_and_still_stops() -> None:
    """serve_forever waits for a connection with no timeout (no CPU while idle); shutdown()
    makes that wait return, on any interface it listens on."""
    import threading

    for host in ("127.0.0.1", ""):
        srv = serve(HealthState(), 0, host)
        stopper = threading.Thread(target=srv.shutdown, daemon=True)
        stopper.start()
        stopper.join(30)
        assert not stopper.is_alive(), f"shutdown() of a server on {host!r} never returned"
        srv.server_close()


def test_a_thread_that_dies_is_said_in_last_poll_for_good(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 47 #1: every thread either survives or brings its failure to /last-poll."""
    import threading

    from cpa import logs
    from cpa.runtime.process import report_thread_failures

    logs.configure(0, "json")
    state = HealthState()
    saved = threading.excepthook
    try:
        report_thread_failures(state.thread_failed)

        def boom() -> None:
            raise RuntimeError("something nobody expected")

        thread = threading.Thread(target=boom, name="node-watch")
        thread.start()
        thread.join()
    finally:
        threading.excepthook = saved
    state.record(None)  # a poll that went well does not hide it
    assert state.error is not None
    assert "node-watch thread stopped (RuntimeError: something nobody expected)" in state.error
    assert '"event": "thread.failed"' in capsys.readouterr().err
