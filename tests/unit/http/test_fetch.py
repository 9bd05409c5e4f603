"""cpa.http.fetch against real HTTP servers on 127.0.0.1: one deadline for the whole fetch,
redirects followed with the credentials kept to their own origin, no credential in any
error (issue 47, defects 3, 8 and 9)."""

from __future__ import annotations

import base64
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import ThreadingHTTPServer
from typing import ClassVar

import pytest

from cpa import redact
from cpa.http.fetch import MAX_REDIRECTS, Fetcher, FetchError
from tests.httpserve import QuietHandler, QuietServer

TOKEN = "Bearer CANARYbearer0123456789"


class _Handler(QuietHandler):
    """Answers by path: ``/ok``; ``/to?u=URL`` redirects there (302); ``/trickle`` one
    byte every 0.15 s; ``/big`` 2 MB; ``/loop`` redirects to itself. Records each
    request's path and Authorization header."""

    seen: ClassVar[list[tuple[int, str, str | None]]] = []
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        assert isinstance(self.server, ThreadingHTTPServer)
        port = self.server.server_port
        _Handler.seen.append((port, self.path, self.headers.get("Authorization")))
        if self.path.startswith("/to?u="):
            self._redirect(self.path[len("/to?u="):])
        elif self.path == "/loop":
            self._redirect("/loop")
        elif self.path == "/trickle":
            self.send_response(200)
            self.send_header("Content-Length", "100")
            self.end_headers()
            for _ in range(100):
                self.wfile.write(b"x")
                self.wfile.flush()
                time.sleep(0.15)
        elif self.path == "/big":
            self.answer(200, b"y" * 2_000_000, "text/plain")
        else:
            self.answer(200, b"ok", "text/plain")

    def _redirect(self, where: str) -> None:
        self.send_response(302)
        self.send_header("Location", where)
        self.send_header("Content-Length", "0")
        self.end_headers()



@pytest.fixture
def serve() -> Iterator[Callable[[], int]]:
    servers: list[QuietServer] = []

    def start() -> int:
        httpd = QuietServer(("127.0.0.1", 0), _Handler)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        servers.append(httpd)
        return int(httpd.server_address[1])

    _Handler.seen.clear()
    yield start
    for httpd in servers:
        httpd.shutdown()
        httpd.server_close()


def fetcher() -> Fetcher:
    return Fetcher(user_agent="test")


def test_a_redirect_to_another_origin_goes_without_the_credentials(
        serve: Callable[[], int]) -> None:
    """Before (urllib): 6 of 6 redirected requests carried the bearer token to the other
    host. Go drops it on a redirect to another host; here, on any other origin."""
    home, elsewhere = serve(), serve()
    got = fetcher().get(f"http://127.0.0.1:{home}/to?u=http://127.0.0.1:{elsewhere}/ok",
                        timeout=5, max_bytes=100, authorization=TOKEN)
    assert (got.status, got.body) == (200, b"ok")
    assert _Handler.seen == [(home, f"/to?u=http://127.0.0.1:{elsewhere}/ok", TOKEN),
                             (elsewhere, "/ok", None)]


def test_a_redirect_within_the_origin_keeps_the_credentials(serve: Callable[[], int]) -> None:
    home = serve()
    got = fetcher().get(f"http://127.0.0.1:{home}/to?u=/ok", timeout=5, max_bytes=100,
                        authorization=TOKEN)
    assert got.status == 200
    assert [auth for _port, _path, auth in _Handler.seen] == [TOKEN, TOKEN]


def test_a_redirect_back_home_does_not_bring_the_credentials_back_for_the_stranger(
        serve: Callable[[], int]) -> None:
    home, elsewhere = serve(), serve()
    back = f"http://127.0.0.1:{home}/ok"
    fetcher().get(f"http://127.0.0.1:{home}/to?u=http://127.0.0.1:{elsewhere}/to?u={back}",
                  timeout=5, max_bytes=100, authorization=TOKEN)
    assert [(port, auth) for port, _path, auth in _Handler.seen] == [
        (home, TOKEN), (elsewhere, None), (home, TOKEN)]


def test_redirects_end_after_ten(serve: Callable[[], int]) -> None:
    home = serve()
    with pytest.raises(FetchError) as info:
        fetcher().get(f"http://127.0.0.1:{home}/loop", timeout=5, max_bytes=100)
    assert info.value.reason == "redirect" and len(_Handler.seen) == MAX_REDIRECTS + 1


def test_a_trickled_answer_fails_at_the_deadline(serve: Callable[[], int]) -> None:
    """Before (urllib): the timeout bounded each read, and a byte every 0.15 s never
    tripped it; the scrape hung for the whole answer (15 s here)."""
    home = serve()
    started = time.monotonic()
    with pytest.raises(FetchError) as info:
        fetcher().get(f"http://127.0.0.1:{home}/trickle", timeout=1.0, max_bytes=1000)
    took = time.monotonic() - started
    assert info.value.reason == "timeout"
    assert took < 3.0, f"the fetch took {took:.1f} s past its 1 s deadline"


def test_a_page_larger_than_the_limit_is_a_failure(serve: Callable[[], int]) -> None:
    home = serve()
    with pytest.raises(FetchError) as info:
        fetcher().get(f"http://127.0.0.1:{home}/big", timeout=5, max_bytes=1000)
    assert info.value.reason == "too_large"


def test_a_url_password_is_sent_as_basic_and_never_shown(serve: Callable[[], int]) -> None:
    """Before: such a URL failed (urllib has no handler for it) and its error showed the
    password. Go's client sends it as Basic authentication; so does this one."""
    home = serve()
    got = fetcher().get(f"http://ops:CANARYpass9876@127.0.0.1:{home}/ok", timeout=5,
                        max_bytes=100)
    assert got.status == 200 and "CANARY" not in got.url
    expected = "Basic " + base64.b64encode(b"ops:CANARYpass9876").decode()
    assert _Handler.seen[-1][2] == expected
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        closed = free.getsockname()[1]
    with pytest.raises(FetchError) as info:
        fetcher().get(f"http://ops:CANARYpass9876@127.0.0.1:{closed}/ok", timeout=2,
                      max_bytes=100)
    assert "CANARY" not in str(info.value) and "ops:xxxxx@" in str(info.value)
    assert "CANARYpass9876" not in redact.scrub("a line with CANARYpass9876 in it")


def test_credentials_that_cannot_be_sent_are_refused_by_byte(serve: Callable[[], int]) -> None:
    home = serve()
    with pytest.raises(FetchError) as info:
        fetcher().get(f"http://127.0.0.1:{home}/ok", timeout=5, max_bytes=100,
                      authorization="Bearer CANARYx\n# second line")
    assert info.value.reason == "credentials" and "CANARY" not in str(info.value)
    assert "line break at byte 14" in str(info.value) and _Handler.seen == []


def test_abort_cuts_a_fetch_in_flight_at_once(serve: Callable[[], int]) -> None:
    home = serve()
    f = fetcher()
    failed: list[FetchError] = []

    def fetch() -> None:
        try:
            f.get(f"http://127.0.0.1:{home}/trickle", timeout=30, max_bytes=1000)
        except FetchError as exc:
            failed.append(exc)

    thread = threading.Thread(target=fetch)
    thread.start()
    time.sleep(0.5)
    f.abort()
    thread.join(5)
    assert not thread.is_alive() and failed
    with pytest.raises(FetchError):
        f.get(f"http://127.0.0.1:{home}/ok", timeout=5, max_bytes=100)


@pytest.mark.parametrize("url", ["ftp://h/x", "http://", "http://h:99999/x", "not a url"])
def test_what_is_not_an_http_url_is_refused(url: str) -> None:
    with pytest.raises(FetchError) as info:
        fetcher().get(url, timeout=1, max_bytes=100)
    assert info.value.reason == "url"
