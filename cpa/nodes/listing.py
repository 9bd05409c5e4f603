"""The Node list's requests: the first list (one page) and the streaming list.

Which request first: one page of up to :data:`ONE_PAGE_NODES` Nodes (a consistent list, in
protobuf), read as it arrives (:func:`cpa.nodes.proto.read_list`). A cluster of that size
(Kubernetes' supported maximum) is listed in one answer: the bytes of the streaming list,
without a watch frame and an event envelope around each Node. A larger cluster's page
says so in its ListMeta, before its first Node; the reflector then closes it and uses the
streaming list (``sendInitialEvents``) from then on.
"""

from __future__ import annotations

from cpa.kube.reflector import READ_IDLE_SECONDS

__all__ = ["NODES_PATH", "ONE_PAGE_NODES", "READ_IDLE_SECONDS", "STREAMING_LIST_SECONDS",
           "one_page_query", "streaming_list_query"]

NODES_PATH = "/api/v1/nodes"
STREAMING_LIST_SECONDS = 600  # a streaming list may take long; we end it at the last bookmark
ONE_PAGE_NODES = 5000
"""The first list's page (``limit``): Kubernetes' documented limit of a cluster's size
("Considerations for large clusters": no more than 5,000 Nodes). Its Nodes are decoded as
they arrive, so the page's size costs no memory; a larger cluster costs one page answer
closed after its ListMeta."""


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
