"""The node counts a poll decides on, and the counting policy that shapes them: plain data.

Why a module of its own, with nothing but immutable records of the standard library: it is
where the node side and the decision meet. The node store (:mod:`cpa.nodes.store`) keeps
its running totals under a :class:`CountingPolicy` and hands out :class:`ClusterCounts`;
the decision (:mod:`cpa.horizontal.decide`) reads those counts and turns the parameters' counting
keys
into a policy. This is the one module of :mod:`cpa.nodes` that :mod:`cpa.horizontal.decide` imports,
so it holds no behaviour and imports nothing: the store applies the policy itself, without
the parameter parsers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, NamedTuple

if TYPE_CHECKING:
    from fractions import Fraction

__all__ = ["DEFAULT_POLICY", "ClusterCounts", "CountingPolicy"]


class ClusterCounts(NamedTuple):
    """Node and core counts from the node cache; cores already rounded up to whole cores."""

    total_nodes: int
    total_cores: int
    schedulable_nodes: int
    schedulable_cores: int
    excluded_nodes: int | None = None  # left out by excludeNodesWithTaints (not in totals)
    capped_nodes: int | None = None  # whose cores maxCoresPerNode capped (counted capped)
    """Both None when the counts were not taken from the node store (given by hand to
    ``cpa explain`` or ``cpa simulate``): then they are taken as counted already."""
    total_zones: int | None = None
    """Distinct values of the zones' topologyKey label among all counted Nodes (a Node
    without the label is in the zone ""); None when no zone is counted."""
    schedulable_zones: int | None = None
    """The same among the schedulable counted Nodes."""
    pods: int | None = None
    """Ours, opt-in: the Pods in the cluster that are not finished and not being deleted;
    None when not counted (no parameters in force count them, or not listed yet)."""
    services: int | None = None
    """Ours, opt-in: the Services in the cluster, headless ones included; None when not
    counted."""


class CountingPolicy(NamedTuple):
    """What the node store applies in its running totals: a Node carrying any taint key of
    ``exclude_taints`` is not counted at all, one Node contributes at most
    ``max_millicores_per_node``, and with a ``zone_key`` the counted Nodes' distinct values
    of that label are counted too. The default counts every Node fully and no zone, as
    upstream does."""

    exclude_taints: frozenset[str] = frozenset()
    max_millicores_per_node: int | Fraction | None = None
    zone_key: str | None = None


DEFAULT_POLICY: Final = CountingPolicy()
