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
