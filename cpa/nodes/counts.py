"""The node counts a poll decides on, and the counting policy that shapes them: plain data.

Why a module of its own, with nothing but frozen dataclasses of the standard library: it is
where the node side and the decision meet. The node store (:mod:`cpa.nodes.store`) keeps
its running totals under a :class:`CountingPolicy` and hands out :class:`ClusterCounts`;
the decision (:mod:`cpa.decide`) reads those counts and turns the parameters' counting keys
into a policy. This is the one module of :mod:`cpa.nodes` that :mod:`cpa.decide` imports,
so it holds no behaviour and imports nothing: the store applies the policy itself, and the
store stays on the start-up path to the first Node list without the parameter parsers.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Final

__all__ = ["DEFAULT_POLICY", "ClusterCounts", "CountingPolicy"]


@dataclass(frozen=True, slots=True)
class ClusterCounts:
    """Node and core counts from the node cache; cores already rounded up to whole cores."""

    total_nodes: int
    total_cores: int
    schedulable_nodes: int
    schedulable_cores: int
    excluded_nodes: int | None = None  # left out by excludeNodesWithTaints (not in totals)
    capped_nodes: int | None = None  # whose cores maxCoresPerNode capped (counted capped)
    """Both None when the counts were not taken from the node store (given by hand to
    ``cpa explain`` or ``cpa simulate``): then they are taken as counted already."""


@dataclass(frozen=True, slots=True)
class CountingPolicy:
    """What the node store applies in its running totals: a Node carrying any taint key of
    ``exclude_taints`` is not counted at all, and one Node contributes at most
    ``max_millicores_per_node``. The default counts every Node fully, as upstream does."""

    exclude_taints: frozenset[str] = frozenset()
    max_millicores_per_node: int | Fraction | None = None


DEFAULT_POLICY: Final = CountingPolicy()
