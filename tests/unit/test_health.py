"""The health server: upstream's paths and bodies, and no name lookups."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
import urllib3

from cpa.daemon.health import HealthState, serve


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
