"""The Pods or Services of the cluster counted by a metadata-only list + watch.

Ours, opt-in (the ``podsPerReplica``/``servicesPerReplica`` and ``podsToReplicas``/
``servicesToReplicas`` keys). A cluster may hold a hundred thousand Pods, so nothing of an
object is kept but what the count needs (:class:`~cpa.objects.tally.Tally`), and the API
server sends only the objects' metadata (``PartialObjectMetadata``, asked for in the Accept
header), never their specs and statuses, and in protobuf (:mod:`cpa.objects.proto`), which
costs the API server much less CPU to encode than JSON; a server that answers JSON is read
all the same (the Content-Type says which came). A watcher told of each object (``seen``:
``--watch-targets``) asks for JSON, the one decoder that keeps the whole metadata:

* the first list in pages (``limit``/``continue``), each page decoded and dropped;
* then short watches from the list's resourceVersion, one after the other, as the Node
  watch does (the loop of both: :mod:`cpa.kube.reflector`); ``410 Gone`` lists again (an
  expired ``continue`` starts the list over), every other failure is retried with
  jittered exponential backoff.

What counts. A Service always (headless ones included: DNS answers for them). A Pod while
it is not finished and not being deleted: metadata carries no phase, so the list and the
watch select ``status.phase!=Succeeded,status.phase!=Failed`` on the server, and a Pod that
finishes leaves the selection (the watch sends it as DELETED); a ``deletionTimestamp``
is in the metadata.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Final, NamedTuple

from cpa import logs
from cpa.kube.api import ApiError, StreamingApi
from cpa.kube.reflector import Reflector, watch_error
from cpa.kube.wire import PROTOBUF, Buffer, Status, frames, is_protobuf, lines
from cpa.objects.proto import Meta, MetaEvent, decode_event, decode_list_page
from cpa.objects.tally import Tally

__all__ = ["ACCEPT_LIST", "ACCEPT_LIST_PROTOBUF", "ACCEPT_WATCH", "ACCEPT_WATCH_PROTOBUF",
           "KINDS", "Kind", "ObjectWatch", "Seen", "rule"]

_LIST_AS: Final = ";as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
_AS: Final = ";as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
ACCEPT_LIST: Final = "application/json" + _LIST_AS
ACCEPT_WATCH: Final = "application/json" + _AS
# Protobuf where the server can encode it, else JSON: the Content-Type says which came.
ACCEPT_LIST_PROTOBUF: Final = f"{PROTOBUF}{_LIST_AS}, {ACCEPT_LIST}"
ACCEPT_WATCH_PROTOBUF: Final = f"{PROTOBUF}{_AS}, {ACCEPT_WATCH}"
Seen = Callable[[str, Mapping[str, Any]], None]
"""Told of every object the watch reads: ``LISTED`` (each item of a complete list, which
replaces all before it), ``ADDED``, ``MODIFIED`` or ``DELETED``, and the object."""
PAGE_SIZE = 500


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


class ObjectWatch(Reflector):
    """Counts one kind of object into :attr:`tally`, in a thread, until stopped."""

    relist_after = (ValueError,)
    """An event that does not decode: what the stream dropped is unknown, list again."""

    def __init__(self, api: StreamingApi, kind: Kind, *,
                 clock: Callable[[], float] = time.monotonic,
                 rng: random.Random | None = None, page_size: int = PAGE_SIZE,
                 wait: Callable[[threading.Event, float], bool] | None = None,
                 seen: Seen | None = None) -> None:
        """``clock``, ``rng`` and ``wait`` (a backoff pause: True when stopped) are
        injected so tests run the real loop without waiting. ``seen`` is told of each
        object's metadata as it is read (in the watch's thread: it must be quick)."""
        super().__init__(api, kind.path,
                         {"fieldSelector": kind.field_selector} if kind.field_selector else {},
                         log=logs.get_logger("objects"), thread_name=f"{kind.name}-watch",
                         page_size=page_size, clock=clock, rng=rng, wait=wait)
        self.kind = kind
        self._seen = seen
        # A watcher told of each object gets its whole metadata, which only the JSON
        # decoder keeps; a count needs a uid and a deletionTimestamp, which protobuf
        # carries for less of the API server's CPU.
        self._accept_list, self._accept_watch = ((ACCEPT_LIST, ACCEPT_WATCH) if seen else
                                                 (ACCEPT_LIST_PROTOBUF, ACCEPT_WATCH_PROTOBUF))
        self.tally = Tally()
        self.error: str | None = None
        """Why the count is not current (None while it is)."""
        self.forbidden = False
        """The last failure was a 403: the poll says which rule to add."""
        self.lists = 0

    @property
    def count(self) -> int:
        """The objects counted now (what :class:`~cpa.objects.counters.Watch` reads)."""
        return self.tally.count

    def list_once(self) -> int:
        """List once (``cpa explain --from-cluster``), no watch: the count."""
        self._sync()
        return self.tally.count

    def _relisting(self, reason: str) -> None:
        self._log.info("objects.relist", kind=self.kind.name, reason=reason)

    def _failed(self, exc: Exception, pause: float, relist: bool) -> None:
        self.forbidden = isinstance(exc, ApiError) and exc.forbidden
        reason = str(exc)[:300] if isinstance(exc, ApiError) else f"{type(exc).__name__}: {exc}"
        if self.forbidden:
            reason = (f"{reason}: {self.kind.rbac}" if self.kind.rbac
                      else f"{reason}: grant it with {rule(self.kind.name)}")
        self.error = f"{self.kind.doing or 'counting ' + self.kind.name}: {reason}"
        self._log.warning("objects.watch_failed", kind=self.kind.name, error=self.error,
                          retry_in=round(pause, 2))

    # --- the list ----------------------------------------------------------------------
    def _sync(self) -> None:
        """Every object in pages into a fresh tally, which then replaces the one in use."""
        listed = Tally()
        began = self._clock()

        def take(content_type: str, body: bytes | bytearray) -> str:
            if is_protobuf(content_type):
                return take_protobuf(body)
            page = _object(json.loads(body))
            for item in page.get("items") or ():
                uid, counts = _entry(item)
                listed.put(uid, counts)
                if self._seen is not None:
                    self._seen("LISTED", _object(item))
            meta = page.get("metadata") or {}
            self._rv = str(meta.get("resourceVersion") or "")
            return str(meta.get("continue") or "")

        def take_protobuf(body: bytes | bytearray) -> str:
            page = decode_list_page(body)
            for item in page.items:
                listed.put(*_counted(item))
            self._rv = page.resource_version
            return page.continue_token

        self._paged_list(self._accept_list, take, lambda: listed.adopt(Tally()))
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
    def _watch(self) -> int:
        resp = self._open_watch(self._watch_query(), self._accept_watch)
        self._resp = resp
        count = 0
        complete = False
        try:
            if self._stop.is_set():
                return count
            self._up()
            protobuf = is_protobuf(resp.headers.get("Content-Type"))
            apply = self._apply_frame if protobuf else self._apply_line
            for event in frames(resp) if protobuf else lines(resp):
                if self._stop.is_set():
                    return count
                apply(event)
                count += 1
            complete = True
        finally:
            self._release(resp, complete)
        return count

    def _apply(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        obj = _object(event.get("object") or {})
        meta = obj.get("metadata") or {}
        if kind == "ERROR":
            raise watch_error(int(obj.get("code") or 0), str(obj.get("reason", "")),
                              str(obj.get("message", "")))
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

    def _apply_line(self, line: Buffer) -> None:
        self._apply(_object(json.loads(line)))

    def _apply_frame(self, frame: Buffer) -> None:
        self._apply_protobuf(decode_event(frame))

    def _apply_protobuf(self, event: MetaEvent) -> None:
        if event.type == "ERROR":
            status = event.status or Status()
            raise watch_error(status.code, status.reason, status.message)
        self._rv = event.resource_version or self._rv
        if event.meta is None:
            return  # a BOOKMARK: only its resourceVersion
        if event.type in ("ADDED", "MODIFIED"):
            self.tally.put(*_counted(event.meta))
        elif event.type == "DELETED":
            self.tally.remove(_counted(event.meta)[0])


def _object(value: object) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise ValueError("the API server sent something other than a JSON object")
    return value


def _counted(meta: Meta) -> tuple[str, bool]:
    """A protobuf object's uid and whether it counts, as :func:`_entry` says of JSON."""
    if not meta.uid:
        raise ValueError("an object without metadata.uid")
    return meta.uid, not meta.deleting


def _entry(obj: Mapping[str, Any]) -> tuple[str, bool]:
    """An object's uid and whether it counts (not being deleted)."""
    meta = _object(obj.get("metadata") or {})
    uid = meta.get("uid")
    if not isinstance(uid, str) or not uid:
        raise ValueError("an object without metadata.uid")
    return uid, meta.get("deletionTimestamp") is None
