"""The Node cache: list + watch, trimmed records, running totals.

Why it looks like this (figures measured for issue 5 on 65,000 GKE-style nodes): decoding a
NodeList into the generated client models takes minutes and gigabytes, while decoding into
a typed msgspec struct that keeps only the needed fields takes about a second and stays near
31 MB. So:

* the initial sync never holds a whole NodeList: it uses a streaming list
  (``sendInitialEvents``) where the server supports it, else ``limit``/``continue`` pages;
* each node is kept as a tiny record ``(unschedulable, ready, millicores)``;
* totals are updated per event, so a poll reads four numbers: O(1) in the node count, and
  no API request (the cache is the only source of counts);
* the watch survives dropped connections (reconnect with backoff) and ``410 Gone``
  (relist), and asks for bookmarks so a reconnect rarely needs a relist.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from fractions import Fraction
from functools import lru_cache
from typing import Any, NamedTuple

import msgspec

from cpa import logs
from cpa.formulas import ClusterCounts
from cpa.kubeapi import ApiError, KubeApi, lines
from cpa.quantity import QuantityError, cores_rounded_up, cpu_millicores

NODES_PATH = "/api/v1/nodes"
PAGE_SIZE = 250  # ~3 MB of JSON per page for GKE-sized nodes
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
BACKOFF_START, BACKOFF_MAX = 0.8, 30.0


# --- wire structs: only the fields the decision needs; msgspec skips the rest unparsed ---
class _Condition(msgspec.Struct):
    type: str = ""
    status: str = ""


class _Allocatable(msgspec.Struct):
    cpu: str | None = None


class _NodeStatus(msgspec.Struct):
    allocatable: _Allocatable | None = None
    conditions: list[_Condition] | None = None


class _NodeSpec(msgspec.Struct):
    unschedulable: bool | None = None


class _NodeMeta(msgspec.Struct):
    name: str = ""
    resourceVersion: str = ""


class _Node(msgspec.Struct):
    metadata: _NodeMeta = msgspec.field(default_factory=_NodeMeta)
    spec: _NodeSpec | None = None
    status: _NodeStatus | None = None


class _ListMeta(msgspec.Struct):
    resourceVersion: str = ""
    continue_: str = msgspec.field(default="", name="continue")


class _NodeList(msgspec.Struct):
    metadata: _ListMeta = msgspec.field(default_factory=_ListMeta)
    items: list[_Node] | None = None


class _BookmarkMeta(msgspec.Struct):
    resourceVersion: str = ""
    annotations: dict[str, str] | None = None


class _Bookmark(msgspec.Struct):
    metadata: _BookmarkMeta = msgspec.field(default_factory=_BookmarkMeta)


class _Status(msgspec.Struct):
    code: int = 0
    reason: str = ""
    message: str = ""


class _Event(msgspec.Struct):
    type: str = ""
    object: msgspec.Raw = msgspec.Raw(b"null")


_decode_event = msgspec.json.Decoder(_Event).decode
_decode_node = msgspec.json.Decoder(_Node).decode
_decode_list = msgspec.json.Decoder(_NodeList).decode
_decode_bookmark = msgspec.json.Decoder(_Bookmark).decode
_decode_status = msgspec.json.Decoder(_Status).decode


class NodeRecord(NamedTuple):
    """What we keep of one Node: about 100-200 bytes instead of ~30 KB of JSON dict."""

    unschedulable: bool
    ready: bool
    millicores: int | Fraction

    @property
    def schedulable(self) -> bool:
        return not self.unschedulable and self.ready


@lru_cache(maxsize=4096)
def _millicores(text: str) -> int | Fraction:
    """Parse once per distinct string: nodes are mostly alike, so records share values."""
    return cpu_millicores(text)


class _Relist(Exception):
    """The watch's resourceVersion is too old (410 Gone): list again."""


class NodeCache:
    """A list+watch cache of Nodes matching ``selector`` with running totals."""

    def __init__(self, api: KubeApi, selector: str = "", *, page_size: int = PAGE_SIZE,
                 use_streaming_list: bool = True) -> None:
        self._api = api
        self._selector = selector
        self._page_size = page_size
        self._streaming = use_streaming_list
        self._log = logs.get_logger("nodecache")
        self._lock = threading.Lock()
        self._records: dict[str, NodeRecord] = {}
        self._shared: dict[NodeRecord, NodeRecord] = {}
        self._total_nodes = 0
        self._total_milli: int | Fraction = 0
        self._sched_nodes = 0
        self._sched_milli: int | Fraction = 0
        self._rv = ""
        self._synced = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._resp: Any = None
        self._started = time.monotonic()
        self.sync_method = ""
        self.sync_seconds = 0.0

    # --- reading -------------------------------------------------------------------
    def counts(self) -> ClusterCounts:
        """The current totals, rounded as upstream rounds them (cores up, once)."""
        with self._lock:
            return ClusterCounts(
                total_nodes=self._total_nodes,
                total_cores=cores_rounded_up(self._total_milli),
                schedulable_nodes=self._sched_nodes,
                schedulable_cores=cores_rounded_up(self._sched_milli),
            )

    def __len__(self) -> int:
        with self._lock:
            return len(self._records)

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    def wait_synced(self, timeout: float | None = None) -> bool:
        return self._synced.wait(timeout)

    # --- lifecycle -----------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="node-watch", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 1.0) -> None:
        """Stop the watch: close its connection so a blocked read returns at once."""
        self._stop.set()
        resp = self._resp
        if resp is not None:
            with contextlib.suppress(Exception):
                resp.shutdown()
        if self._thread is not None:
            self._thread.join(timeout)

    def sync_once(self) -> None:
        """List all matching nodes once (for ``cpa explain --from-cluster``); no watch."""
        self._list_pages()

    # --- record keeping ------------------------------------------------------------
    def _apply(self, name: str, new: NodeRecord | None) -> None:
        """Replace (or delete, when ``new`` is None) one node's record and fix the totals."""
        old = self._records.pop(name, None) if new is None else self._records.get(name)
        if old is not None:
            self._total_nodes -= 1
            self._total_milli -= old.millicores
            if old.schedulable:
                self._sched_nodes -= 1
                self._sched_milli -= old.millicores
        if new is not None:
            self._records[name] = new
            self._total_nodes += 1
            self._total_milli += new.millicores
            if new.schedulable:
                self._sched_nodes += 1
                self._sched_milli += new.millicores

    def _record(self, node: _Node) -> NodeRecord:
        cpu = node.status.allocatable.cpu if node.status and node.status.allocatable else None
        milli: int | Fraction = 0
        if cpu:
            try:
                milli = _millicores(cpu)
            except QuantityError as exc:
                self._log.warning("node.bad_cpu", node=node.metadata.name, cpu=cpu,
                                  error=str(exc), hint="counted as 0 cores")
        ready = any(c.type == "Ready" and c.status == "True"
                    for c in (node.status.conditions or ())) if node.status else False
        unschedulable = bool(node.spec.unschedulable) if node.spec else False
        record = NodeRecord(unschedulable, ready, milli)
        # Nodes are mostly alike (a cluster has a few dozen distinct records), so one shared
        # tuple per distinct record: measured 47 -> 42 MiB peak at 65,000 nodes.
        return self._shared.setdefault(record, record)

    def _upsert(self, node: _Node) -> str:
        name = node.metadata.name
        record = self._record(node)
        with self._lock:
            self._apply(name, record)
        return name

    def _sweep(self, seen: set[str]) -> None:
        """After a relist: forget nodes the new list no longer has."""
        with self._lock:
            for name in [n for n in self._records if n not in seen]:
                self._apply(name, None)

    # --- the initial list ----------------------------------------------------------
    def _query(self, **extra: str) -> dict[str, str]:
        q = dict(extra)
        if self._selector:
            q["labelSelector"] = self._selector
        return q

    def _list_pages(self) -> None:
        """Paginated list: at most one page of raw JSON is alive at a time.

        resourceVersion is left unset (a consistent read): ``resourceVersion=0`` would be
        served from the watch cache, which ignores ``limit`` and returns everything at once.
        """
        seen: set[str] = set()
        cont = ""
        while True:
            q = self._query(limit=str(self._page_size))
            if cont:
                q["continue"] = cont
            try:
                page = _decode_list(self._api.get_raw(NODES_PATH, q))
            except ApiError as exc:
                if exc.gone and cont:
                    # The continue token expired mid-list: start over, as client-go does.
                    seen.clear()
                    cont = ""
                    continue
                raise
            for node in page.items or ():
                seen.add(self._upsert(node))
            del page.items
            cont = page.metadata.continue_
            self._rv = page.metadata.resourceVersion
            if not cont:
                break
        self._sweep(seen)

    def _stream_initial(self) -> bool:
        """Streaming list; returns False when the server does not support it.

        The server sends every node as ADDED, then a bookmark annotated
        ``k8s.io/initial-events-end``; the same stream then carries on as the watch.
        """
        q = self._query(watch="1", sendInitialEvents="true", allowWatchBookmarks="true",
                        resourceVersionMatch="NotOlderThan",
                        timeoutSeconds=str(random.randint(300, 600)))
        try:
            resp = self._api.stream(NODES_PATH, q, read_timeout=660.0)
        except ApiError as exc:
            if exc.status in (400, 422):  # e.g. the WatchList feature is off
                return False
            raise
        _, complete = self._consume(resp, set())
        if not complete and not self._stop.is_set():
            # A server that ignores sendInitialEvents (before 1.27) never sends the final
            # bookmark: use pages from now on.
            self._streaming = False
            raise ApiError(0, "StreamEnded", "the streaming list ended before its last bookmark; "
                                             "falling back to a paginated list")
        return True

    # --- the watch -----------------------------------------------------------------
    def _consume(self, resp: Any, initial: set[str] | None) -> tuple[int, bool]:
        """Apply the events of one watch stream; return how many arrived, and whether the
        initial events (of a streaming list) were complete.

        ``initial`` is the set of names seen so far when this stream is a streaming list;
        it is swept and cleared at the ``initial-events-end`` bookmark.
        """
        self._resp = resp
        count = 0
        complete = initial is None
        try:
            for line in lines(resp):
                if self._stop.is_set():
                    break
                event = _decode_event(line)
                count += 1
                kind = event.type
                if kind in ("ADDED", "MODIFIED"):
                    node = _decode_node(event.object)
                    name = self._upsert(node)
                    if initial is not None:
                        initial.add(name)
                    self._rv = node.metadata.resourceVersion or self._rv
                elif kind == "DELETED":
                    node = _decode_node(event.object)
                    with self._lock:
                        self._apply(node.metadata.name, None)
                    self._rv = node.metadata.resourceVersion or self._rv
                elif kind == "BOOKMARK":
                    mark = _decode_bookmark(event.object)
                    self._rv = mark.metadata.resourceVersion or self._rv
                    ann = mark.metadata.annotations or {}
                    if initial is not None and ann.get(INITIAL_EVENTS_END) == "true":
                        self._sweep(initial)
                        initial = None
                        complete = True
                        self._mark_synced("streaming-list")
                elif kind == "ERROR":
                    status = _decode_status(event.object)
                    if status.code == 410:
                        raise _Relist(status.message)
                    raise ApiError(status.code, status.reason, status.message)
        finally:
            self._resp = None
            resp.release_conn()
        return count, complete

    def _mark_synced(self, method: str) -> None:
        if not self._synced.is_set():
            self.sync_method = method
            self.sync_seconds = time.monotonic() - self._started
            self._synced.set()
            c = self.counts()
            self._log.info("nodes.synced", method=method, seconds=round(self.sync_seconds, 3),
                           nodes=c.total_nodes, cores=c.total_cores,
                           schedulable_nodes=c.schedulable_nodes,
                           schedulable_cores=c.schedulable_cores)
        elif logs.v(1):
            self._log.info("nodes.relisted", method=method, nodes=len(self))

    def _watch(self) -> int:
        q = self._query(watch="1", resourceVersion=self._rv, allowWatchBookmarks="true",
                        timeoutSeconds=str(random.randint(300, 600)))
        try:
            resp = self._api.stream(NODES_PATH, q, read_timeout=660.0)
        except ApiError as exc:
            if exc.gone:  # the same answer as an ERROR event with code 410
                raise _Relist(exc.message) from exc
            raise
        return self._consume(resp, None)[0]

    def _sync(self) -> None:
        """(Re)build the cache: streaming list if possible, else pages, then mark synced."""
        if self._streaming:
            if self._stream_initial():
                return
            self._streaming = False
            if logs.v(1):
                self._log.info("nodes.streaming_list_unsupported", fallback="paginated list")
        self._list_pages()
        self._mark_synced("paginated-list")

    def _run(self) -> None:
        self._started = time.monotonic()
        delay = BACKOFF_START
        need_list = True
        while not self._stop.is_set():
            began = time.monotonic()
            try:
                if need_list:
                    self._sync()
                    need_list = False
                got = self._watch()
                if got or time.monotonic() - began > 10:
                    delay = BACKOFF_START
                    continue
                # An empty watch that ended at once: back off instead of spinning.
            except _Relist as exc:
                self._log.info("watch.relist", reason=str(exc)[:200])
                need_list = True
                continue
            except ApiError as exc:
                self._log.warning("watch.failed", error=str(exc)[:300],
                                  retry_in=round(delay, 2))
            except Exception as exc:
                if self._stop.is_set():
                    break
                self._log.warning("watch.failed", error=f"{type(exc).__name__}: {exc}"[:300],
                                  retry_in=round(delay, 2))
            if self._stop.wait(delay * random.uniform(0.8, 1.2)):
                break
            delay = min(delay * 2, BACKOFF_MAX)
