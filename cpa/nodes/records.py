"""Node objects as the rest of the program sees them: only what the counts need.

The rest of the program sees :class:`NodeInfo`, :class:`ListPage` and :class:`Event` and
never a wire struct: :mod:`cpa.nodes.proto` decodes Kubernetes' protobuf (what the daemon
asks for) and :mod:`cpa.nodes.jsondecode` JSON (the fallback) into these types.
"""

from __future__ import annotations

from typing import NamedTuple

from cpa.kube.wire import Status

__all__ = ["ALL_LABELS", "Event", "ListHead", "ListPage", "NodeInfo"]

ALL_LABELS = "*"
"""The label a decoder is asked for when some target counts by its placement
(``targetPlacement``, opt-in): every label into :attr:`NodeInfo.labels` and every taint in
full into :attr:`NodeInfo.taint_details`. ``*`` is no valid label key, so it can never be a
zones' topologyKey."""


class NodeInfo(NamedTuple):
    """What the counts need of one Node."""

    name: str
    resource_version: str
    unschedulable: bool
    ready: bool
    cpu: str | None  # status.allocatable.cpu, a quantity such as "3920m"
    taints: tuple[str, ...] = ()  # the keys of spec.taints, for opt-in node exclusion
    capacity_cpu: str | None = None
    """status.capacity.cpu: only the vertical autoscaler's decoders read it (CPVA sums
    capacity); None from the autoscaler's, which never look."""
    label: str = ""
    """The value of the one label the decoder was asked for (the zones' topologyKey, opt-in);
    "" when none was asked for or the Node does not have it."""
    labels: tuple[tuple[str, str], ...] | None = None
    """Every label as (key, value) pairs, only when :data:`ALL_LABELS` was asked for
    (``targetPlacement``); None otherwise."""
    taint_details: tuple[tuple[str, str, str], ...] = ()
    """Every taint as (key, value, effect), only when :data:`ALL_LABELS` was asked for."""


class ListPage(NamedTuple):
    items: list[NodeInfo]
    resource_version: str
    continue_token: str


class ListHead(NamedTuple):
    """A NodeList's ListMeta, as a list read while it arrives yields it
    (:func:`cpa.nodes.proto.read_list`): before the Nodes, in Go's field order."""

    resource_version: str
    continue_token: str


class Event(NamedTuple):
    """One watch event, decoded according to its ``type``: ``node`` for ADDED, MODIFIED and
    DELETED; ``resource_version`` (and ``initial_end``, the streaming list's last one) for
    BOOKMARK; ``status`` for ERROR. Other types carry nothing and are ignored."""

    type: str
    node: NodeInfo | None = None
    resource_version: str = ""
    initial_end: bool = False
    status: Status | None = None
