"""The health endpoints upstream serves on :8080, with upstream's paths and bodies, and our
``/metrics`` beside them."""

from __future__ import annotations

import contextlib
import socket
import socketserver
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cpa.daemon.loop import PollResult

METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class HealthState:
    """The outcome of the last poll, shared between the poll loop and the HTTP server."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._error: str | None = None

    def record(self, error: str | None) -> None:
        with self._lock:
            self._error = error

    def observe(self, result: PollResult) -> None:
        """A poll observer: the poll's error, or stale counts, make /last-poll 500."""
        self.record(result.health_error)

    @property
    def error(self) -> str | None:
        with self._lock:
            return self._error


def _handler(state: HealthState, metrics: Callable[[], bytes] | None
             ) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/healthz":
                self._reply(200, b"")
            elif self.path == "/metrics" and metrics is not None:
                self._reply(200, metrics(), METRICS_CONTENT_TYPE)
            elif self.path == "/last-poll":
                error = state.error
                if error is None:
                    self._reply(200, b"")
                else:
                    self._reply(500, f"Encountered error at last poll cycle: {error}".encode())
            else:
                self._reply(404, b"404 page not found\n")

        def _reply(self, status: int, body: bytes,
                   content_type: str = "text/plain; charset=utf-8") -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            """Probes every few seconds would drown the useful logs."""

    return Handler


class _Server(ThreadingHTTPServer):
    """``HTTPServer.server_bind`` asks the resolver for this host's FQDN, which blocks for
    the resolver's whole timeout (10 s in a Pod whose DNS does not answer, e.g. while the
    CoreDNS this very process scales is at 0 replicas) before the first poll. The name is
    only used for CGI environments; skip the lookup."""

    def server_bind(self) -> None:
        socketserver.TCPServer.server_bind(self)
        self.server_name = "localhost"
        self.server_port = self.server_address[1]

    def shutdown(self) -> None:
        """``serve_forever`` waits for a connection without a timeout: the standard
        library's half-second wake-ups cost 0.36 ms of CPU every 2 s while idle, more than
        a poll's two requests. So stopping asks it to stop, then connects until the wait
        has returned and seen the request."""
        asked = threading.Thread(target=super().shutdown, name="health-stop", daemon=True)
        asked.start()
        bound = str(self.server_address[0])
        host = "127.0.0.1" if bound in ("", "0.0.0.0") else bound
        while asked.is_alive():
            with contextlib.suppress(OSError):
                socket.create_connection((host, self.server_port), timeout=1.0).close()
            asked.join(0.1)


def serve(state: HealthState, port: int, host: str = "",
          metrics: Callable[[], bytes] | None = None) -> ThreadingHTTPServer:
    """Start the server in a daemon thread and return it (``shutdown()`` stops it).

    ``metrics`` renders ``GET /metrics`` (Prometheus text format); without it that path is a
    404 as upstream's."""
    server = _Server((host, port), _handler(state, metrics))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": None},
                     name="health", daemon=True).start()
    return server
