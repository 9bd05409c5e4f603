"""GET each Ready Pod's metrics page for one scrape, at most ``concurrency`` at a time.

The requests go through the one HTTP client (:class:`cpa.http.fetch.Fetcher`: one deadline
each from connect to last byte, connections kept alive per Pod, no credentials ever sent
to a Pod). They run on a small pool of threads kept between scrapes, one per concurrent
request, so a slow or silent Pod costs at most its own deadline and never holds the
others. A Pod that is slow or refuses is an answer with an error, never a stalled scrape.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Callable, Sequence
from typing import NamedTuple

from cpa.http.fetch import Fetcher, FetchError

__all__ = ["MAX_BYTES", "Answer", "PodPages", "Request"]

MAX_BYTES = 4 * 1024 * 1024  # a metrics page is tens of KB
ACCEPT = "text/plain;version=0.0.4;q=1,*/*;q=0.1"


class Request(NamedTuple):
    key: str
    host: str
    """An IPv4 or IPv6 address (a Pod IP)."""
    port: int
    path: str

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{self.path}"


class Answer(NamedTuple):
    key: str
    status: int
    """The HTTP status; 0 when there was no answer."""
    body: bytes
    error: str | None
    """What went wrong (``timeout``, ``refused``, ...), None for a 200 with a body."""
    reason: str | None
    """A short word for the metric label: ``timeout``, ``connect``, ``http``, ``read``."""
    seconds: float
    at: float
    """The clock when the answer was complete (what a rate is timed by)."""


class PodPages:
    """One target's page fetches (see the module doc); :meth:`close` when the target's
    scraper stops."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._fetcher = Fetcher(user_agent="cpa-load-scraper", clock=clock)
        self._lock = threading.Lock()
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._workers = 0

    def fetch_all(self, requests: Sequence[Request], concurrency: int, timeout: float,
                  max_bytes: int = MAX_BYTES) -> list[Answer]:
        """GET each request's page, at most ``concurrency`` at a time, each within
        ``timeout`` seconds of its own start; one answer per request, in the order they
        finished. Connections to Pods no longer asked for are closed."""
        self._fetcher.retain_hosts({r.host for r in requests})
        executor = self._pool(max(1, concurrency))
        futures = [executor.submit(self._one, r, timeout, max_bytes) for r in requests]
        return [f.result() for f in concurrent.futures.as_completed(futures)]

    def close(self) -> None:
        """Cut the fetches in flight; the threads end once they return."""
        self._fetcher.abort()
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)

    def _pool(self, workers: int) -> concurrent.futures.ThreadPoolExecutor:
        with self._lock:
            if self._executor is None or self._workers != workers:
                if self._executor is not None:
                    self._executor.shutdown(wait=False)
                self._executor = concurrent.futures.ThreadPoolExecutor(
                    workers, thread_name_prefix="load-page")
                self._workers = workers
            return self._executor

    def _one(self, request: Request, timeout: float, max_bytes: int) -> Answer:
        started = self._clock()
        try:
            got = self._fetcher.get(request.url, timeout=timeout, max_bytes=max_bytes,
                                    accept=ACCEPT)
        except FetchError as exc:
            now = self._clock()
            return Answer(request.key, 0, b"", str(exc), _REASONS.get(exc.reason, "read"),
                          now - started, now)
        now = self._clock()
        if got.status != 200:
            return Answer(request.key, got.status, got.body, f"HTTP {got.status}", "http",
                          now - started, now)
        return Answer(request.key, 200, got.body, None, None, now - started, now)


# The fetch's failure words as the scrape-error metric has always named them.
_REASONS = {"timeout": "timeout", "connect": "connect", "too_large": "read", "read": "read",
            "redirect": "http", "url": "connect", "credentials": "connect"}
