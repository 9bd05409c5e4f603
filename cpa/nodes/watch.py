"""The Node list+watch that keeps a :class:`~cpa.nodes.store.NodeStore` current.

The reflector half of client-go's Store/Reflector split:

* the initial sync never holds a whole NodeList: with ``first_page`` (the daemon's), one page
  of that many Nodes decoded as it arrives, which lists any cluster of up to that size in
  one answer (:mod:`cpa.nodes.listing`); for a larger one (or without it), a streaming list
  (``sendInitialEvents``) where the server supports it, else ``limit``/``continue`` pages;
* then short watches from the last resourceVersion (bookmarks on), one after the other;
* every failure is retried with jittered exponential backoff; ``410 Gone`` relists.

Dead connections. A watch through a NAT or load balancer can go half-open: still open, no
bytes ever again, and the counts silently stale (it was 656 s here, until a 660 s read
timeout). client-go notices in ~45 s with HTTP/2 pings; over HTTP/1.1 we make silence itself
the signal. Measured on kube-apiserver v1.35.4: a quiet watch with bookmarks gets one
bookmark 2 s before its ``timeoutSeconds`` and then ends; one with ``timeoutSeconds=900``
got its first bookmark only after 120 s. So each watch asks the server to end it after
40-50 s, and a stream silent for longer than ``READ_IDLE_SECONDS`` (60) is dead: it is
closed and replaced. A reconnect costs one watch request served from the watch cache (no
etcd read, no relist). During an outage the backoff is capped at ``BACKOFF_MAX`` (10 s)
and connecting gives up after ``CONNECT_SECONDS`` (5 s), so the counts are current within a
few seconds of the API server answering again.

Labels. A Node's labels are read only for the one label the store asks for (the zones'
topologyKey, opt-in; :attr:`~cpa.nodes.store.NodeStore.label_key`): each list reads that
key when it starts, and the watches after it decode the same one. When the store needs
another label it asks for a new list (:meth:`NodeReflector.relist`), which replaces the
records the way a ``410 Gone`` does.

Whether the counts are current is public (:meth:`NodeReflector.status`): the poll loop
reports stale counts instead of hiding them.

Corrupt streams. Bytes that do not decode (a frame longer than client-go's 16 MiB limit, a
truncated message, an ADDED event without ``metadata.name``) are never applied: the watch
is down from that moment, with the reason, and the Nodes are listed again (after the usual
backoff, so a stream that stays corrupt costs one list per backoff period, not a spin). The
counts are "up" again only once that list is complete. An answer's ``Retry-After`` (a 429)
lengthens the backoff to what it asks, up to :data:`~cpa.kube.api.RETRY_AFTER_CAP`.

Encoding. Lists and watches ask for Kubernetes' protobuf and accept JSON
(:data:`~cpa.kube.wire.ACCEPT_PROTOBUF`); each response is decoded as its Content-Type says,
so a server (or proxy) that answers JSON is served as before. Protobuf costs the API server
far less CPU to encode than JSON (see :mod:`cpa.nodes.proto` and ``bench/README.md``).
"""

from __future__ import annotations

import functools
import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import NamedTuple

from cpa import logs
from cpa.kube.api import ApiError, StreamingApi, StreamResponse
from cpa.kube.reflector import (
    BACKOFF_MAX,
    BACKOFF_START,
    WATCH_SECONDS,
    Reflector,
    Stopped,
    watch_error,
)
from cpa.kube.wire import ACCEPT_PROTOBUF, JSON, Status, frames, is_protobuf, lines
from cpa.nodes import proto as nodeproto
from cpa.nodes.listing import (
    NODES_PATH,
    READ_IDLE_SECONDS,
    one_page_query,
    streaming_list_query,
)
from cpa.nodes.records import Event, ListHead, ListPage
from cpa.nodes.store import NodeSink, NodeStore

__all__ = ["BACKOFF_MAX", "BACKOFF_START", "WATCH_SECONDS", "NodeReflector", "WatchStatus"]

PAGE_SIZE = 250  # a page of large Nodes stays a few megabytes of JSON


class _Corrupt(Exception):
    """The stream carried bytes we cannot apply as a Node event: list again."""


class _StreamEnded(ApiError):
    """A streaming list that ended before its last bookmark (a server that ignores
    ``sendInitialEvents``)."""


class WatchStatus(NamedTuple):
    """Whether the store follows the cluster, for logs, metrics and ``/last-poll``."""

    synced: bool
    up: bool  # a list or watch is open and delivering, as far as we can tell
    last_contact: float  # clock time of the last bytes (or list page) from the server
    error: str | None  # why it is down (None while up)
    restarts: int  # watches that failed and were replaced

    def stale_seconds(self, now: float) -> float:
        """How long the counts may have missed changes: 0 while the watch is up."""
        return 0.0 if self.up else max(0.0, now - self.last_contact)


class NodeReflector(Reflector):
    """Lists and watches the Nodes matching ``selector`` into ``store``, in a thread (the
    loop, its backoff and relists: :class:`~cpa.kube.reflector.Reflector`).

    Long because the first list has three ways (one page, the streaming list or pages),
    each of which reads and sets the same resourceVersion and status as the watch."""

    relist_after = (_Corrupt,)

    def __init__(self, api: StreamingApi, store: NodeSink, selector: str = "", *,
                 page_size: int = PAGE_SIZE, use_streaming_list: bool = True,
                 protobuf: bool = True, clock: Callable[[], float] = time.monotonic,
                 rng: random.Random | None = None,
                 wait: Callable[[threading.Event, float], bool] | None = None,
                 capacity: bool = False,
                 first_page: int = 0) -> None:
        """``clock``, ``rng`` and ``wait`` (a backoff pause: wait on the stop event up to
        N seconds, True when stopped) are injected so tests run the real loop on a fake
        clock. ``capacity``: decode each Node's capacity cpu too (the vertical autoscaler);
        the decoders are chosen here, once. ``first_page``: list as one protobuf page of up
        to that many Nodes first (0: not; the daemon's
        :data:`~cpa.nodes.listing.ONE_PAGE_NODES`); once the cluster proves larger, or an
        answer comes in JSON, never again."""
        self._capacity = capacity
        self._decode_page = (nodeproto.decode_list_page_capacity if capacity
                             else nodeproto.decode_list_page)
        self._decode_event = (nodeproto.decode_event_capacity if capacity
                              else nodeproto.decode_event)
        super().__init__(api, NODES_PATH, {"labelSelector": selector} if selector else {},
                         log=logs.get_logger("nodewatch"), thread_name="node-watch",
                         page_size=page_size, clock=clock, rng=rng, wait=wait)
        self._accept = ACCEPT_PROTOBUF if protobuf else JSON
        self._store = store
        self._selector = selector
        self._streaming = use_streaming_list
        self._first_page = first_page if protobuf else 0
        self._started = clock()
        self._up = False
        self._last_contact = self._started
        self._error: str | None = None
        self._restarts = 0
        self.sync_method = ""
        self.sync_seconds = 0.0
        self.encoding = ""  # of the last list or watch response: "protobuf" or "json"
        self.lists = 0  # complete lists of the Nodes: the initial sync, then each relist
        self._first_page_off = ""  # why the first page is not used (any more)
        self._label = ""  # the label decoded into the records (the store's, at the list)
        # The autoscaler's store may ask for a label (zones); the vertical one never does.
        self._labelled = store if isinstance(store, NodeStore) else None
        if self._labelled is not None:
            self._labelled.on_label_change = self.relist

    # --- public --------------------------------------------------------------------
    @property
    def resource_version(self) -> str:
        return self._rv

    def status(self) -> WatchStatus:
        return WatchStatus(self.synced, self._up, self._last_contact, self._error,
                           self._restarts)

    def start(self) -> None:
        self._started = self._clock()
        super().start()

    def list_once(self) -> None:
        """List all matching Nodes once (``cpa explain --from-cluster``); no watch."""
        self._label = self._labelled.label_key if self._labelled is not None else ""
        self._list_pages()
        if self._labelled is not None:
            self._labelled.labels_listed(self._label)

    # --- what the loop reports -----------------------------------------------------
    def _failed(self, exc: Exception, pause: float, relist: bool) -> None:
        self._down(_reason(exc))
        self._log.warning("watch.failed", error=self._error, retry_in=round(pause, 2),
                          relist=relist)

    def _down(self, reason: str) -> None:
        self._up = False
        self._error = reason
        self._restarts += 1

    def _contact(self) -> None:
        self._last_contact = self._clock()
        if not self._up:
            self._up = True
            if self._error is not None and self.synced:
                self._log.info("watch.recovered", after_error=self._error)
            self._error = None

    # --- the initial list ----------------------------------------------------------
    def _sync(self) -> None:
        """(Re)build the store: one page while the cluster fits one (``first_page``), else
        the streaming list if the server has it, else pages; then synced."""
        self._label = self._labelled.label_key if self._labelled is not None else ""
        if self._first_page:
            if self._one_page():
                self._mark_synced("one-page-list")
                return
            if logs.v(1):
                self._log.info("nodes.one_page_list_skipped", reason=self._first_page_off,
                               next="streaming list" if self._streaming else "paginated list")
        if self._streaming:
            if self._stream_initial():
                return
            self._streaming = False
            if logs.v(1):
                self._log.info("nodes.streaming_list_unsupported", fallback="paginated list")
        self._list_pages()
        self._mark_synced("paginated-list")

    def _one_page(self) -> bool:
        """The Nodes as one page of up to ``first_page``, decoded as it arrives; False (and
        never again) when the cluster has more, seen in the ListMeta before any Node is
        read, or when the answer is JSON: the caller then lists as it would without."""
        q = one_page_query(self._selector, self._first_page)  # as the daemon sends it first
        resp = self._api.stream(NODES_PATH, q, read_timeout=READ_IDLE_SECONDS,
                                accept=self._accept)
        self._resp = resp
        seen: set[str] = set()
        rv = ""
        whole = False
        try:
            if self._stop.is_set():  # as in _consume: stop() shuts down self._resp
                raise Stopped()
            if not is_protobuf(resp.headers.get("Content-Type")):
                self._first_page_off = "a JSON answer"
                self._first_page = 0
                return False
            self.encoding = "protobuf"
            store = self._store
            try:
                for item in nodeproto.read_list(resp.stream(65536, decode_content=True),
                                                self._capacity, self._label):
                    if isinstance(item, ListHead):
                        if item.continue_token:
                            self._first_page_off = f"more than {self._first_page} Nodes"
                            self._first_page = 0
                            return False
                        rv = item.resource_version
                    elif item.name:
                        store.upsert(item)
                        seen.add(item.name)
                    else:
                        raise _Corrupt("the Node list holds a Node without metadata.name")
            except ValueError as exc:  # ProtoError, bad UTF-8
                raise _Corrupt(f"a Node list that does not decode: {exc}") from exc
            whole = not self._stop.is_set()
        finally:
            self._release(resp, whole)
        if not whole:
            raise Stopped()
        self._store.retain(seen)
        self._rv = rv
        return True

    def _list_pages(self) -> None:
        """Paginated list: at most one page of raw JSON is alive at a time."""
        seen: set[str] = set()

        def take(content_type: str, body: bytes | bytearray) -> str:
            page = self._page(content_type, body)
            for node in page.items:
                if not node.name:
                    raise _Corrupt("the Node list holds a Node without metadata.name")
                self._store.upsert(node)
                seen.add(node.name)
            self._rv = page.resource_version
            return page.continue_token

        self._paged_list(self._accept, take, seen.clear)
        self._store.retain(seen)
        self._contact()  # the counts are whole again

    def _page(self, content_type: str, body: bytes | bytearray) -> ListPage:
        try:
            if is_protobuf(content_type):
                self.encoding = "protobuf"
                if self._label:
                    return nodeproto.decode_list_page(body, label=self._label)
                return self._decode_page(body)
            self.encoding = "json"
            # msgspec loads only for a JSON answer: API servers answer the protobuf we ask
            # for, and it is a large part of the daemon's memory (docs/architecture.md).
            from cpa.nodes import jsondecode as nodejson
            if self._label:
                return nodejson.decode_list_page(body, label=self._label)
            return nodejson.decode_list_page(body, self._capacity)
        except ValueError as exc:  # ProtoError, msgspec's DecodeError, bad UTF-8
            raise _Corrupt(f"a Node list page that does not decode: {exc}") from exc

    def _events(self, resp: StreamResponse) -> Iterator[Event]:
        """The stream's events, decoded as its Content-Type says."""
        if is_protobuf(resp.headers.get("Content-Type")):
            self.encoding = "protobuf"
            if self._label:
                return map(functools.partial(nodeproto.decode_event, label=self._label),
                           frames(resp))
            return map(self._decode_event, frames(resp))
        self.encoding = "json"
        from cpa.nodes import jsondecode as nodejson  # see _page
        if self._label:
            return map(functools.partial(nodejson.decode_event, label=self._label),
                       lines(resp))
        decode = nodejson.decode_event_capacity if self._capacity else nodejson.decode_event
        return map(decode, lines(resp))

    def _stream_initial(self) -> bool:
        """Streaming list; False when the server refuses it.

        The server sends every node as ADDED, then a bookmark annotated
        ``k8s.io/initial-events-end``; we close the stream there and go on with short
        watches from that bookmark's resourceVersion.
        """
        q = streaming_list_query(self._selector)  # as the daemon sends it first
        try:
            resp = self._api.stream(NODES_PATH, q, read_timeout=READ_IDLE_SECONDS,
                                    accept=self._accept)
        except ApiError as exc:
            if exc.status in (400, 422):  # e.g. the WatchList feature is off
                return False
            raise
        if not self._consume(resp, set())[1] and not self._stop.is_set():
            # A server that ignores sendInitialEvents (before 1.27) never sends the final
            # bookmark: use pages from now on.
            self._streaming = False
            raise _StreamEnded(0, "StreamEnded", "the streaming list ended before its last "
                                                 "bookmark; falling back to a paginated list")
        return True

    def _mark_synced(self, method: str) -> None:
        self.lists += 1
        self._contact()  # the counts are whole again
        if self._labelled is not None:
            self._labelled.labels_listed(self._label)
        if not self._synced.is_set():
            self.sync_method = method
            self.sync_seconds = self._clock() - self._started
            self._synced.set()
            self._log.info("nodes.synced", method=method, seconds=round(self.sync_seconds, 3),
                           **self._store.synced_fields())
        elif logs.v(1):
            self._log.info("nodes.relisted", method=method, nodes=len(self._store))

    # --- the watch -----------------------------------------------------------------
    def _watch(self) -> int:
        """One watch from the last resourceVersion; returns how many events it carried."""
        q = self._watch_query()
        resp = self._open_watch(q, self._accept)
        if logs.v(4):  # one a watch (every 40-50 s), as client-go logs its watches at 4
            self._log.info("watch.opened", resource_version=self._rv,
                           timeout_seconds=int(q["timeoutSeconds"]))
        return self._consume(resp, None)[0]

    def _consume(self, resp: StreamResponse, initial: set[str] | None) -> tuple[int, bool]:
        """Apply the events of one stream; return how many arrived and whether the initial
        events (of a streaming list) were complete.

        ``initial`` collects the names seen when this stream is a streaming list; the store
        keeps only those at the ``initial-events-end`` bookmark, where the stream is closed.
        """
        self._resp = resp
        count = 0
        complete = initial is None
        read_to_the_end = False
        watching = initial is None  # a streaming list's counts are whole only at its end
        try:
            # stop() and relist() set their flag, then shut down whatever self._resp is;
            # checking the flags after publishing self._resp means one of the two always
            # sees the other (a relist asked for while the watch was being opened is not
            # left waiting for the watch to end by itself).
            if self._stop.is_set() or (watching and self._relist.is_set()):
                return count, complete
            if watching:
                self._contact()
            events = self._events(resp)
            while True:
                try:
                    event = next(events, None)
                except ValueError as exc:  # oversize frame, ProtoError, DecodeError
                    raise _Corrupt(f"the node watch stream does not decode: {exc}") from exc
                if event is None or self._stop.is_set():
                    break
                if watching:
                    self._contact()
                count += 1
                if self._apply(event, initial):
                    return count, True
            read_to_the_end = not self._stop.is_set()
        finally:
            self._release(resp, read_to_the_end)
        return count, complete

    def _apply(self, event: Event, initial: set[str] | None) -> bool:
        """One watch event into the store; True at a streaming list's initial-events-end
        bookmark (the store then keeps only the Nodes of ``initial``: the list is whole)."""
        kind = event.type
        node = event.node
        if kind in ("ADDED", "MODIFIED", "DELETED") and (node is None or not node.name):
            raise _Corrupt(f"a watch event {kind} without metadata.name (no Node in "
                           "it): not applied")
        if node is not None and kind in ("ADDED", "MODIFIED"):
            self._store.upsert(node)
            if initial is not None:
                initial.add(node.name)
            self._rv = node.resource_version or self._rv
        elif node is not None and kind == "DELETED":
            self._store.delete(node.name)
            self._rv = node.resource_version or self._rv
        elif kind == "BOOKMARK":
            self._rv = event.resource_version or self._rv
            if initial is not None and event.initial_end:
                self._store.retain(initial)
                self._mark_synced("streaming-list")
                return True
        elif kind == "ERROR":
            status = event.status or Status(message="an ERROR event without a Status")
            raise watch_error(status.code, status.reason, status.message)
        return False


NODES_RULE = ('a ClusterRole rule apiGroups [""], resources ["nodes"], verbs ["list", "watch"] '
              "bound to this ServiceAccount")


def _reason(exc: BaseException) -> str:
    """One line for the log and ``/last-poll``."""
    name = type(exc).__name__
    if "ReadTimeout" in name or "Read timed out" in str(exc):
        return (f"the node watch carried no bytes for {READ_IDLE_SECONDS:.0f}s (a dead "
                "connection?); replacing it")
    if isinstance(exc, ApiError) and exc.forbidden:
        return f"{str(exc)[:300]}: grant it with {NODES_RULE}"
    if isinstance(exc, ApiError | _Corrupt):
        return str(exc)[:300]
    return f"{name}: {exc}"[:300]
