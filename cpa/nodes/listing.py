"""The Node list's first request, which the daemon sends before it loads the rest of itself.

Why a module of its own: the request needs only a client, while the reflector
(:mod:`cpa.nodes.watch`) brings the decoder, the store and their imports (~15 ms before the
first byte could be read). Sent first, from a thread of its own (so that an API server
that does not answer delays neither the health server nor SIGTERM), the list is prepared
by the API server (~10-15 ms to its first byte for a fresh connection, measured on
kube-apiserver v1.35.4 at 1,000 Nodes) while those load; the reflector's first
:meth:`~cpa.kube.client.KubeApi.stream` of the same request then takes its answer.
"""

from __future__ import annotations

from typing import Protocol

from cpa.kube.wire import ACCEPT_PROTOBUF

__all__ = ["NODES_PATH", "READ_IDLE_SECONDS", "STREAMING_LIST_SECONDS", "send_streaming_list",
           "streaming_list_query"]

NODES_PATH = "/api/v1/nodes"
STREAMING_LIST_SECONDS = 600  # a streaming list may take long; we end it at the last bookmark
READ_IDLE_SECONDS = 60.0  # silence longer than any healthy watch has: the connection is dead


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


def send_streaming_list(api: SendsStreamsAhead, selector: str) -> None:
    """Send the reflector's first request now, as it will make it (protobuf, the streaming
    list); a server that refuses the streaming list answers this one as it would have
    answered the reflector."""
    api.send_stream_ahead(NODES_PATH, streaming_list_query(selector), READ_IDLE_SECONDS,
                          ACCEPT_PROTOBUF)
