"""Running totals of Nodes under a counting policy, one record added or taken away at a
time: what the node store keeps for the whole cluster and, with ``targetPlacement``, for
each placement. One class for both, so the policy is applied in one place."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from cpa.go.quantity import cores_rounded_up
from cpa.nodes.counts import DEFAULT_POLICY, ClusterCounts, CountingPolicy

if TYPE_CHECKING:
    from fractions import Fraction

__all__ = ["NodeRecord", "Totals"]


class NodeRecord(NamedTuple):
    """What we keep of one Node."""

    unschedulable: bool
    ready: bool
    millicores: int | Fraction
    taints: frozenset[str] = frozenset()  # taint keys (shared: most nodes have none)
    zone: str = ""  # the value of the label asked for (the policy's zone_key), or ""
    labels: tuple[tuple[str, str], ...] | None = None
    """Every label, only while some target counts by its placement (``targetPlacement``)."""
    taint_details: tuple[tuple[str, str, str], ...] = ()
    """Every taint as (key, value, effect), only while some target counts by placement."""

    @property
    def schedulable(self) -> bool:
        return not self.unschedulable and self.ready


class Totals:
    """Nodes and millicores, all and schedulable; the Nodes the policy leaves out or caps;
    with a zone key, the counted Nodes per zone (a zone without Nodes is no zone)."""

    __slots__ = ("capped", "excluded", "sched_milli", "sched_nodes", "total_milli",
                 "total_nodes", "zones_all", "zones_sched")

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.total_nodes = self.sched_nodes = self.excluded = self.capped = 0
        self.total_milli: int | Fraction = 0
        self.sched_milli: int | Fraction = 0
        self.zones_all: dict[str, int] = {}
        self.zones_sched: dict[str, int] = {}

    def count(self, record: NodeRecord, sign: int, policy: CountingPolicy) -> None:
        """Add (``sign`` 1) or take away (-1) one record, as ``policy`` counts it. The
        default policy (upstream's: no key of ours) skips the policy's checks: it is what
        nearly every cluster runs, on every Node change."""
        milli = record.millicores
        if policy is not DEFAULT_POLICY:
            if policy.exclude_taints and record.taints & policy.exclude_taints:
                self.excluded += sign
                return
            cap = policy.max_millicores_per_node
            if cap is not None and milli > cap:
                milli = cap
                self.capped += sign
            if policy.zone_key is not None:
                _add(self.zones_all, record.zone, sign)
                if record.schedulable:
                    _add(self.zones_sched, record.zone, sign)
        self.total_nodes += sign
        self.total_milli += sign * milli
        if record.schedulable:
            self.sched_nodes += sign
            self.sched_milli += sign * milli

    def counts(self, zones: bool) -> ClusterCounts:
        """The totals, rounded as upstream rounds them (cores up, once); the zones only
        when ``zones`` (counted and readable)."""
        return ClusterCounts(
            total_nodes=self.total_nodes,
            total_cores=cores_rounded_up(self.total_milli),
            schedulable_nodes=self.sched_nodes,
            schedulable_cores=cores_rounded_up(self.sched_milli),
            excluded_nodes=self.excluded,
            capped_nodes=self.capped,
            total_zones=len(self.zones_all) if zones else None,
            schedulable_zones=len(self.zones_sched) if zones else None,
        )


def _add(per_zone: dict[str, int], zone: str, sign: int) -> None:
    """One Node more (or less) in ``zone``; a zone without Nodes is no zone."""
    count = per_zone.get(zone, 0) + sign
    if count:
        per_zone[zone] = count
    else:
        del per_zone[zone]
