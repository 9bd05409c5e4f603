"""The Pods or Services of the cluster counted by a metadata-only list + watch.

Ours, opt-in (the ``podsPerReplica``/``servicesPerReplica`` and ``podsToReplicas``/
``servicesToReplicas`` keys). A cluster may hold a hundred thousand Pods, so nothing of an
object is kept but what the count needs (:class:`~cpa.objects.tally.Tally`), and the API
server sends only the objects' metadata (``PartialObjectMetadata``, asked for in the Accept
header), never their specs and statuses:

* the first list in pages (``limit``/``continue``), each page decoded and dropped;
* then short watches from the list's resourceVersion, one after the other, as the Node
  watch does (:mod:`cpa.nodes.watch`); ``410 Gone`` (or an expired ``continue``) lists
  again, every other failure is retried with jittered exponential backoff.

What counts. A Service always (headless ones included: DNS answers for them). A Pod while
it is not finished and not being deleted: metadata carries no phase, so the list and the
watch select ``status.phase!=Succeeded,status.phase!=Failed`` on the server, and a Pod that
finishes leaves the selection (the watch sends it as DELETED); a ``deletionTimestamp``
is in the metadata.
"""

from __future__ import annotations

import contextlib
import json
import random
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Final, NamedTuple

from cpa import logs
from cpa.kube.api import RETRY_AFTER_CAP, ApiError, StreamingApi, StreamResponse
from cpa.kube.wire import lines
from cpa.objects.tally import Tally

__all__ = ["ACCEPT_LIST", "ACCEPT_WATCH", "KINDS", "Kind", "ObjectWatch", "Seen", "rule"]

ACCEPT_LIST: Final = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
ACCEPT_WATCH: Final = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
Seen = Callable[[str, Mapping[str, Any]], None]
"""Told of every object the watch reads: ``LISTED`` (each item of a complete list, which
replaces all before it), ``ADDED``, ``MODIFIED`` or ``DELETED``, and the object."""
PAGE_SIZE = 500
WATCH_SECONDS = (40, 50)  # as the Node watch: the server ends each watch, silence is death
READ_IDLE_SECONDS = 60.0
BACKOFF_START, BACKOFF_MAX = 0.8, 10.0


class Kind(NamedTuple):
    """A kind of object counted: its name in the parameters, its path, its selection;
    ``rbac`` (another watcher's, e.g. ``--watch-targets``) the rule a 403 asks for and
    ``doing`` what the error says was being done, when not counting ``name``."""

    name: str
    path: str
    field_selector: str = ""
    rbac: str = ""
    doing: str = ""


KINDS: Final = {
    "pods": Kind("pods", "/api/v1/pods", "status.phase!=Succeeded,status.phase!=Failed"),
    "services": Kind("services", "/api/v1/services"),
}


def rule(kind: str) -> str:
    """The RBAC rule the count of ``kind`` needs, as the operator adds it."""
    return (f'a ClusterRole rule apiGroups [""], resources ["{kind}"], verbs ["list", '
            '"watch"] bound to this ServiceAccount')


class _Relist(Exception):
    """The resourceVersion (or the list's continue token) is too old: list again."""


class ObjectWatch:
    """Counts one kind of object into :attr:`tally`, in a thread, until stopped."""

    def __init__(self, api: StreamingApi, kind: Kind, *,
                 clock: Callable[[], float] = time.monotonic,
                 rng: random.Random | None = None, page_size: int = PAGE_SIZE,
                 wait: Callable[[threading.Event, float], bool] | None = None,
                 seen: Seen | None = None) -> None:
        """``clock``, ``rng`` and ``wait`` (a backoff pause: True when stopped) are
        injected so tests run the real loop without waiting. ``seen`` is told of each
        object's metadata as it is read (in the watch's thread: it must be quick)."""
        self.kind = kind
        self._seen = seen
        self._wait = wait or (lambda stop, seconds: stop.wait(seconds))
        self.tally = Tally()
        self._api = api
        self._clock = clock
        self._rng = rng or random.Random()
        self._page_size = page_size
        self._log = logs.get_logger("objects")
        self._rv = ""
        self._synced = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._resp: StreamResponse | None = None
        self.error: str | None = None
        """Why the count is not current (None while it is)."""
        self.forbidden = False
        """The last failure was a 403: the poll says which rule to add."""
        self.lists = 0

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    def wait_synced(self, timeout: float | None = None) -> bool:
        return self._synced.wait(timeout)

    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name=f"{self.kind.name}-watch",
                                        daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 1.0) -> None:
        """Stop: close the open stream so that a blocked read returns at once."""
        self._stop.set()
        resp = self._resp
        if resp is not None:
            with contextlib.suppress(Exception):
                resp.shutdown()
        if self._thread is not None:
            self._thread.join(timeout)

    def list_once(self) -> int:
        """List once (``cpa explain --from-cluster``), no watch: the count."""
        self._list()
        return self.tally.count

    def run(self) -> None:
        """List, then watch until stopped; every failure is logged and retried."""
        delay = BACKOFF_START
        need_list = True
        while not self._stop.is_set():
            try:
                if need_list:
                    self._list()
                    need_list = False
                self._watch()
                delay = BACKOFF_START
                continue
            except _Relist as exc:
                self._log.info("objects.relist", kind=self.kind.name, reason=str(exc)[:200])
                need_list = True
                continue
            except Exception as exc:
                if self._stop.is_set():
                    break
                pause = delay * self._rng.uniform(0.8, 1.2)
                if isinstance(exc, ValueError):  # an event that does not decode: what the
                    need_list = True             # stream dropped is unknown, list again
                if isinstance(exc, ApiError) and exc.retry_after:
                    pause = max(pause, min(float(exc.retry_after), RETRY_AFTER_CAP))
                self._failed(exc, pause)
            if self._wait(self._stop, pause):
                break
            delay = min(delay * 2, BACKOFF_MAX)

    def _failed(self, exc: Exception, pause: float) -> None:
        self.forbidden = isinstance(exc, ApiError) and exc.forbidden
        reason = str(exc)[:300] if isinstance(exc, ApiError) else f"{type(exc).__name__}: {exc}"
        if self.forbidden:
            reason = (f"{reason}: {self.kind.rbac}" if self.kind.rbac
                      else f"{reason}: grant it with {rule(self.kind.name)}")
        self.error = f"{self.kind.doing or 'counting ' + self.kind.name}: {reason}"
        self._log.warning("objects.watch_failed", kind=self.kind.name, error=self.error,
                          retry_in=round(pause, 2))

    def _query(self, **extra: str) -> dict[str, str]:
        query = dict(extra)
        if self.kind.field_selector:
            query["fieldSelector"] = self.kind.field_selector
        return query

    # --- the list ----------------------------------------------------------------------
    def _list(self) -> None:
        """Every object in pages into a fresh tally, which then replaces the one in use."""
        listed = Tally()
        began = self._clock()
        cont = ""
        while True:
            query = self._query(limit=str(self._page_size))
            if cont:
                query["continue"] = cont
            try:
                _, body = self._api.get_raw(self.kind.path, query, accept=ACCEPT_LIST)
            except ApiError as exc:
                if exc.gone:  # the continue token expired: start over
                    raise _Relist(exc.message) from exc
                raise
            page = _object(json.loads(body))
            for item in page.get("items") or ():
                uid, counts = _entry(item)
                listed.put(uid, counts)
                if self._seen is not None:
                    self._seen("LISTED", _object(item))
            meta = page.get("metadata") or {}
            self._rv = str(meta.get("resourceVersion") or "")
            cont = str(meta.get("continue") or "")
            if self._stop.is_set() or not cont:
                break
        self.tally.adopt(listed)
        self.lists += 1
        self._up()
        if not self._synced.is_set():
            self._synced.set()
            self._log.info("objects.synced", kind=self.kind.name, count=self.tally.count,
                           listed=len(self.tally), seconds=round(self._clock() - began, 3))

    def _up(self) -> None:
        if self.error is not None:
            self._log.info("objects.watch_recovered", kind=self.kind.name,
                           after_error=self.error)
        self.error = None
        self.forbidden = False

    # --- the watch ---------------------------------------------------------------------
    def _watch(self) -> None:
        query = self._query(watch="1", resourceVersion=self._rv, allowWatchBookmarks="true",
                            timeoutSeconds=str(self._rng.randint(*WATCH_SECONDS)))
        try:
            resp = self._api.stream(self.kind.path, query, read_timeout=READ_IDLE_SECONDS,
                                    accept=ACCEPT_WATCH)
        except ApiError as exc:
            if exc.gone:
                raise _Relist(exc.message) from exc
            raise
        self._resp = resp
        complete = False
        try:
            if self._stop.is_set():
                return
            self._up()
            for line in lines(resp):
                if self._stop.is_set():
                    return
                self._apply(_object(json.loads(line)))
            complete = True
        finally:
            self._resp = None
            if complete:
                resp.release_conn()
            else:
                with contextlib.suppress(Exception):
                    resp.close()
                with contextlib.suppress(Exception):
                    resp.release_conn()

    def _apply(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        obj = _object(event.get("object") or {})
        meta = obj.get("metadata") or {}
        if kind == "ERROR":
            code = int(obj.get("code") or 0)
            if code == 410:
                raise _Relist(str(obj.get("message", "")))
            raise ApiError(code, str(obj.get("reason", "")), str(obj.get("message", "")))
        self._rv = str(meta.get("resourceVersion") or self._rv)
        if kind in ("ADDED", "MODIFIED"):
            uid, counts = _entry(obj)
            self.tally.put(uid, counts)
        elif kind == "DELETED":
            self.tally.remove(_entry(obj)[0])
        else:
            return  # a BOOKMARK: only its resourceVersion
        if self._seen is not None:
            self._seen(str(kind), obj)


def _object(value: object) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise ValueError("the API server sent something other than a JSON object")
    return value


def _entry(obj: Mapping[str, Any]) -> tuple[str, bool]:
    """An object's uid and whether it counts (not being deleted)."""
    meta = _object(obj.get("metadata") or {})
    uid = meta.get("uid")
    if not isinstance(uid, str) or not uid:
        raise ValueError("an object without metadata.uid")
    return uid, meta.get("deletionTimestamp") is None
