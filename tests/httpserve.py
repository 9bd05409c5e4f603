"""The far ends some tests fake over real HTTP on 127.0.0.1 (a metrics page, a Prometheus
API, a redirecting server): a handler that answers whole bodies and logs nothing, and a
server that takes a client gone at its deadline for what it is, not an error."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class QuietHandler(BaseHTTPRequestHandler):
    """Answers with :meth:`answer`; the test's output is not cluttered with access logs."""

    def answer(self, status: int, body: bytes, content_type: str | None = None) -> None:
        self.send_response(status)
        if content_type is not None:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: Any) -> None:
        pass


class QuietServer(ThreadingHTTPServer):
    """A client cut at its deadline (the point of many of these tests) is gone before the
    answer is written: expected, not an error to print."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[QuietServer]:
    """A :class:`QuietServer` of ``handler`` on a free port of 127.0.0.1, shut down and
    closed when the block ends."""
    httpd = QuietServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()
