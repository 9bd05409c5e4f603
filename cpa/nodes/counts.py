"""What the node store keeps: the counts it hands to a poll, and the policy that shapes them.

Why a module of its own: the node store is on the start-up path to the first Node list, and
must not pull in the parameter parsers (``cpa.decide.counting``, ``cpa.decide.decision`` and
what they import) that only the first poll needs; those modules re-export these names.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from cpa.nodes.store import NodeRecord

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
    """What the node store applies in its running totals: which Nodes count, and what one
    Node contributes at most. The default counts every Node fully, as upstream does."""

    exclude_taints: frozenset[str] = frozenset()
    max_millicores_per_node: int | Fraction | None = None

    def counts(self, record: NodeRecord) -> bool:
        return not (self.exclude_taints and record.taints & self.exclude_taints)

    def millicores(self, record: NodeRecord) -> int | Fraction:
        cap = self.max_millicores_per_node
        return record.millicores if cap is None else min(record.millicores, cap)


DEFAULT_POLICY: Final = CountingPolicy()
