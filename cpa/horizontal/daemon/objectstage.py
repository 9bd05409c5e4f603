"""Ours: the poll's Pods and Services, from their watches' running counts (no request).

The watches are started and stopped to match the parameters in force
(:class:`~cpa.objects.counters.ObjectCounters`); a kind the parameters count and that is
not counted (its first list not complete, or refused) fails the poll with the reason,
rather than deciding on a 0 that could shrink the target.
"""

from __future__ import annotations

from cpa.horizontal.daemon.target_writes import PollError
from cpa.nodes.counts import ClusterCounts
from cpa.objects.counters import CountUnavailable, ObjectCounters

__all__ = ["with_objects"]


def with_objects(objects: ObjectCounters | None, kinds: frozenset[str],
                 counts: ClusterCounts) -> ClusterCounts:
    """``counts`` with the Pods and Services of ``kinds`` (the others None)."""
    if objects is None:
        if kinds:
            raise PollError("this process counts no Pods or Services; remove the "
                            "podsPerReplica/servicesPerReplica/podsToReplicas/"
                            "servicesToReplicas keys")
        return counts
    objects.use(kinds)
    if not kinds:
        return counts
    try:
        pods = objects.count("pods") if "pods" in kinds else None
        services = objects.count("services") if "services" in kinds else None
    except CountUnavailable as exc:
        raise PollError(str(exc)) from None
    return counts._replace(pods=pods, services=services)
