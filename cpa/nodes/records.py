"""Node objects off the wire, as the rest of the program sees them: only what the counts need.

The rest of the program sees :class:`NodeInfo`, :class:`ListPage` and :class:`Event` and
never a wire struct: :mod:`cpa.nodes.proto` decodes Kubernetes' protobuf (what the daemon asks
for) and :mod:`cpa.nodes.json` JSON (the fallback) into these types, and :func:`is_protobuf`
tells from a response's Content-Type which of the two applies. This module imports nothing
heavy, so the protobuf path never loads the JSON decoder's library.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = [
    "ACCEPT_PROTOBUF",
    "INITIAL_EVENTS_END",
    "PROTOBUF",
    "Event",
    "ListPage",
    "NodeInfo",
    "Status",
    "is_protobuf",
]

INITIAL_EVENTS_END = "k8s.io/initial-events-end"
PROTOBUF = "application/vnd.kubernetes.protobuf"
# Protobuf where the server can encode it, JSON otherwise (a server, aggregated API or proxy
# without protobuf answers JSON to this): the response's Content-Type says which came.
ACCEPT_PROTOBUF = f"{PROTOBUF}, application/json"


def is_protobuf(content_type: str | None) -> bool:
    """Whether a response (``...protobuf`` or ``...protobuf;stream=watch``) is protobuf."""
    if not content_type:
        return False
    return content_type.split(";", 1)[0].strip().lower() == PROTOBUF


class NodeInfo(NamedTuple):
    """What the counts need of one Node."""

    name: str
    resource_version: str
    unschedulable: bool
    ready: bool
    cpu: str | None  # status.allocatable.cpu, a quantity such as "3920m"
    taints: tuple[str, ...] = ()  # the keys of spec.taints, for opt-in node exclusion


class ListPage(NamedTuple):
    items: list[NodeInfo]
    resource_version: str
    continue_token: str


class Status(NamedTuple):
    """A ``Status`` object (an ERROR watch event, or an error answer)."""

    code: int = 0
    reason: str = ""
    message: str = ""


class Event(NamedTuple):
    """One watch event, decoded according to its ``type``: ``node`` for ADDED, MODIFIED and
    DELETED; ``resource_version`` (and ``initial_end``, the streaming list's last one) for
    BOOKMARK; ``status`` for ERROR. Other types carry nothing and are ignored."""

    type: str
    node: NodeInfo | None = None
    resource_version: str = ""
    initial_end: bool = False
    status: Status | None = None
