"""The list + watch loop of the caches (the Nodes; the Pods and Services): client-go's
Reflector without its store, which each cache keeps in its own shape.

* list (in ``limit``/``continue`` pages, or as the cache chooses), then short watches from
  the list's resourceVersion, one after the other, bookmarks on; the server ends each watch
  after :data:`WATCH_SECONDS`, and a stream silent for longer than
  :data:`READ_IDLE_SECONDS` is dead (a half-open connection): closed and replaced;
* ``410 Gone`` lists again at once; a stream that does not decode lists again after the
  backoff (what it dropped is unknown); every other failure is retried with jittered
  exponential backoff, lengthened to what a ``Retry-After`` asks (up to
  :data:`~cpa.kube.api.RETRY_AFTER_CAP`);
* :meth:`Reflector.stop` closes the open stream, so a blocked read returns at once.

A cache subclasses :class:`Reflector` and says how it lists (``_sync``), how it reads one
watch (``_watch``) and what it reports when a stream fails (``_failed``).
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from cpa.kube.api import RETRY_AFTER_CAP, ApiError, StreamingApi, StreamResponse

__all__ = ["BACKOFF_MAX", "BACKOFF_START", "READ_IDLE_SECONDS", "WATCH_SECONDS", "Reflector",
           "Relist", "Stopped", "discard", "watch_error"]

WATCH_SECONDS = (40, 50)  # the server ends each watch after this long (jittered)
READ_IDLE_SECONDS = 60.0  # silence longer than any healthy watch has: the connection is dead
BACKOFF_START, BACKOFF_MAX = 0.8, 10.0


class Relist(Exception):
    """The resourceVersion (410 Gone) is too old: list again."""


class Stopped(Exception):
    """stop() came while a list was being read."""


def watch_error(code: int, reason: str, message: str) -> Exception:
    """What a watch's ERROR event means: list again (410), else the API error it carries."""
    if code == 410:
        return Relist(message)
    return ApiError(code, reason, message)


def discard(resp: StreamResponse) -> None:
    """Close a stream we stop reading early, or that failed: its connection must not go
    back to the pool (a frozen one would hang the next request)."""
    with contextlib.suppress(Exception):
        resp.close()
    with contextlib.suppress(Exception):
        resp.release_conn()


class Reflector:
    """Lists and watches ``path`` (with the ``selector`` query) in a thread, until stopped."""

    relist_after: tuple[type[Exception], ...] = ()
    """Failures after which what the stream dropped is unknown: list again."""

    def __init__(self, api: StreamingApi, path: str, selector: Mapping[str, str], *,
                 log: Any, thread_name: str, page_size: int,
                 clock: Callable[[], float] = time.monotonic,
                 rng: random.Random | None = None,
                 wait: Callable[[threading.Event, float], bool] | None = None) -> None:
        """``clock``, ``rng`` and ``wait`` (a backoff pause: wait on the stop event up to
        N seconds, True when stopped) are injected so tests run the real loop on a fake
        clock."""
        self._api = api
        self._path = path
        self._selector_query = dict(selector)
        self._log = log
        self._thread_name = thread_name
        self._page_size = page_size
        self._clock = clock
        self._rng = rng or random.Random()
        self._wait = wait or (lambda stop, seconds: stop.wait(seconds))
        self._rv = ""
        self._synced = threading.Event()
        self._stop = threading.Event()
        self._relist = threading.Event()
        self._thread: threading.Thread | None = None
        self._resp: StreamResponse | None = None

    # --- public --------------------------------------------------------------------
    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    def wait_synced(self, timeout: float | None = None) -> bool:
        return self._synced.wait(timeout)

    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name=self._thread_name, daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 1.0) -> None:
        """Stop: close the open stream so that a blocked read returns at once."""
        self._stop.set()
        self._shutdown_stream()
        if self._thread is not None:
            self._thread.join(timeout)

    def relist(self) -> None:
        """List again as soon as possible: the open watch is closed, and the loop lists
        before it watches again."""
        self._relist.set()
        self._shutdown_stream()

    def _shutdown_stream(self) -> None:
        resp = self._resp
        if resp is not None:
            with contextlib.suppress(Exception):
                resp.shutdown()

    # --- the loop ------------------------------------------------------------------
    def run(self) -> None:
        """List, then watch until stopped; every failure is logged and retried."""
        delay = BACKOFF_START
        need_list = True
        while not self._stop.is_set():
            began = self._clock()
            try:
                if need_list or self._relist.is_set():
                    self._relist.clear()
                    self._sync()
                    need_list = False
                got = self._watch()
                if self._relist.is_set():
                    continue  # asked to list again: at once, no backoff
                if got or self._clock() - began > 10:
                    delay = BACKOFF_START
                    continue
                # A watch that ended at once with nothing in it: back off, do not spin.
            except Relist as exc:
                self._relisting(str(exc)[:200])
                need_list = True
                continue
            except Exception as exc:
                if self._stop.is_set():
                    break
                if self._relist.is_set():  # relist() closed the stream under our feet
                    continue
                pause = delay * self._rng.uniform(0.8, 1.2)
                if isinstance(exc, self.relist_after):
                    need_list = True
                if isinstance(exc, ApiError) and exc.retry_after:
                    pause = max(pause, min(float(exc.retry_after), RETRY_AFTER_CAP))
                self._failed(exc, pause, need_list)
            else:
                pause = delay * self._rng.uniform(0.8, 1.2)
            if self._wait(self._stop, pause):
                break
            delay = min(delay * 2, BACKOFF_MAX)

    def _sync(self) -> None:
        """List everything into the cache; then it is synced."""
        raise NotImplementedError

    def _watch(self) -> int:
        """One watch from the last resourceVersion; returns how many events it carried."""
        raise NotImplementedError

    def _relisting(self, reason: str) -> None:
        """Report a 410: the cache lists again at once."""
        self._log.info("watch.relist", reason=reason)

    def _failed(self, exc: Exception, pause: float, relist: bool) -> None:
        """Report a failure, retried in ``pause`` seconds (after a list when ``relist``)."""
        raise NotImplementedError

    # --- the requests --------------------------------------------------------------
    def _query(self, **extra: str) -> dict[str, str]:
        query = dict(extra)
        query.update(self._selector_query)
        return query

    def _paged_list(self, accept: str, take: Callable[[str, bytes | bytearray], str],
                    restart: Callable[[], None]) -> None:
        """List in pages of ``page_size``: at most one page is alive at a time.
        ``take(content_type, body)`` applies a page, sets the resourceVersion and returns
        the continue token; ``restart()`` forgets what was taken when the token expires
        and the list starts over, as client-go does.

        resourceVersion is left unset (a consistent read): ``resourceVersion=0`` would be
        served from the watch cache, which ignores ``limit`` and returns everything at once.
        """
        cont = ""
        while True:
            query = self._query(limit=str(self._page_size))
            if cont:
                query["continue"] = cont
            try:
                content_type, body = self._api.get_raw(self._path, query, accept=accept)
            except ApiError as exc:
                if exc.gone and cont:
                    restart()
                    cont = ""
                    continue
                raise
            cont = take(content_type, body)
            if not cont:
                return
            if self._stop.is_set():
                raise Stopped()

    def _watch_query(self) -> dict[str, str]:
        return self._query(watch="1", resourceVersion=self._rv, allowWatchBookmarks="true",
                           timeoutSeconds=str(self._rng.randint(*WATCH_SECONDS)))

    def _open_watch(self, query: Mapping[str, str], accept: str) -> StreamResponse:
        """The watch's stream; :class:`Relist` when its resourceVersion is too old."""
        try:
            return self._api.stream(self._path, query, read_timeout=READ_IDLE_SECONDS,
                                    accept=accept)
        except ApiError as exc:
            if exc.gone:  # the same answer as an ERROR event with code 410
                raise Relist(exc.message) from exc
            raise

    def _release(self, resp: StreamResponse, whole: bool) -> None:
        """Done with the open stream: its connection back to the pool when it was read to
        its end, else closed."""
        self._resp = None
        if whole:
            resp.release_conn()
        else:
            discard(resp)
