"""The Node list's first request, which the daemon sends before it loads the rest of itself.

Why a module of its own: the request needs only a client, while the reflector
(:mod:`cpa.nodes.watch`) brings the decoder, the store and their imports (~15 ms before the
first byte could be read). Sent first, from a thread of its own (so that an API server
that does not answer delays neither the health server nor SIGTERM), the list is prepared
by the API server (~10-15 ms to its first byte for a fresh connection, measured on
kube-apiserver v1.35.4 at 1,000 Nodes) while those load; the reflector's first
:meth:`~cpa.kube.client.KubeApi.stream` of the same request then takes its answer.

Which request: one page of up to :data:`ONE_PAGE_NODES` Nodes (a consistent list, in
protobuf), read as it arrives (:func:`cpa.nodes.proto.read_list`). A cluster of that size
(Kubernetes' supported maximum) is listed in one answer. The bytes are the streaming list's
(9.2 MB, ~2,000 TLS reads for 1,000 GKE-sized Nodes), but not its 1,000 watch frames, each
with an event envelope to cut out and read: the daemon's CPU to its first write went from
0.145 to 0.128 s (medians of 15 interleaved starts at 1,000 Nodes). A larger cluster's page
says so in its ListMeta, before its first Node; the reflector then closes it and uses the
streaming list (``sendInitialEvents``) from then on.
"""

from __future__ import annotations

from typing import Protocol

from cpa.kube.wire import ACCEPT_PROTOBUF

__all__ = ["NODES_PATH", "ONE_PAGE_NODES", "READ_IDLE_SECONDS", "STREAMING_LIST_SECONDS",
           "one_page_query", "send_first_list", "streaming_list_query"]

NODES_PATH = "/api/v1/nodes"
STREAMING_LIST_SECONDS = 600  # a streaming list may take long; we end it at the last bookmark
READ_IDLE_SECONDS = 60.0  # silence longer than any healthy watch has: the connection is dead
ONE_PAGE_NODES = 5000
"""The first list's page (``limit``): Kubernetes' documented limit of a cluster's size
("Considerations for large clusters": no more than 5,000 Nodes). Its Nodes are decoded as
they arrive, so the page's size costs no memory; a larger cluster costs one page answer
closed after its ListMeta."""


class SendsStreamsAhead(Protocol):
    def send_stream_ahead(self, path: str, query: dict[str, str], read_timeout: float,
                          accept: str = ...) -> None: ...


def streaming_list_query(selector: str) -> dict[str, str]:
    """The streaming list's query (``sendInitialEvents``; the Nodes matching ``selector``)."""
    query = {"watch": "1", "sendInitialEvents": "true", "allowWatchBookmarks": "true",
             "resourceVersionMatch": "NotOlderThan",
             "timeoutSeconds": str(STREAMING_LIST_SECONDS)}
    if selector:
        query["labelSelector"] = selector
    return query


def one_page_query(selector: str, limit: int = ONE_PAGE_NODES) -> dict[str, str]:
    """The first list's query: one page of up to ``limit`` Nodes matching ``selector``,
    resourceVersion unset (a consistent read, as the streaming list's)."""
    query = {"limit": str(limit)}
    if selector:
        query["labelSelector"] = selector
    return query


def send_first_list(api: SendsStreamsAhead, selector: str) -> None:
    """Send the reflector's first request now, as it will make it (protobuf, one page of
    :data:`ONE_PAGE_NODES`: the reflector is made with ``first_page=ONE_PAGE_NODES``)."""
    api.send_stream_ahead(NODES_PATH, one_page_query(selector), READ_IDLE_SECONDS,
                          ACCEPT_PROTOBUF)
