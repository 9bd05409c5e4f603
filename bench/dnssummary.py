"""The DNS benchmark's figures from what one run recorded, pure: the seconds of dnsperf
(``bench.dnsload.Slice``) and the replica samples.

A run's clock starts at the profile's first second. Replica samples are
``(seconds, spec, ready)``: the Deployment's ``spec.replicas`` (what the autoscaler or the
HPA asked for: the cost, as the scheduler reserves it) and its Ready Pods (what serves).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

from bench.dnsload import Slice

WINDOW = 10           # seconds a latency window spans
CAPACITY_HOLD = 10    # seconds that must each lose under CAPACITY_LOSS to count as enough
CAPACITY_LOSS = 0.01


class Sample(NamedTuple):
    seconds: float
    spec: int
    ready: int


def percentile(values: Sequence[float], q: float) -> float | None:
    """The nearest-rank percentile (``q`` in 0..1), None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value * 1000, 2)


def windows(slices: Sequence[Slice], width: int = WINDOW) -> list[dict[str, Any]]:
    """Queries and answer latency per ``width`` seconds of the run."""
    if not slices:
        return []
    out = []
    last = max(s.second for s in slices)
    for start in range(0, last + 1, width):
        part = [s for s in slices if start <= s.second < start + width]
        latencies = [x for s in part for x in s.latencies]
        out.append({"start": start, "sent": sum(s.sent for s in part),
                    "lost": sum(s.lost for s in part), "late": sum(s.late for s in part),
                    "p50_ms": _ms(percentile(latencies, 0.5)),
                    "p99_ms": _ms(percentile(latencies, 0.99))})
    return out


def totals(slices: Sequence[Slice]) -> dict[str, int]:
    return {"offered": sum(s.offered for s in slices), "sent": sum(s.sent for s in slices),
            "completed": sum(s.completed for s in slices),
            "lost": sum(s.lost for s in slices), "late": sum(s.late for s in slices)}


def lost_fraction(piece: Slice) -> float:
    return piece.lost / piece.sent if piece.sent else 0.0


def capacity_seconds(slices: Sequence[Slice], jump: int | None, until: int | None = None,
                     hold: int = CAPACITY_HOLD, max_loss: float = CAPACITY_LOSS
                     ) -> int | None:
    """Seconds from the jump to the first second from which ``hold`` seconds in a row
    each lost under ``max_loss`` of their queries: DNS answering the new load. The
    ``hold`` seconds must end by ``until`` (the end of the raised load), so that the load
    going back down is never taken for capacity. None without a jump, or when it never
    did."""
    if jump is None:
        return None
    by_second = {s.second: s for s in slices}
    last = max(by_second, default=-1) if until is None else min(until - 1,
                                                                  max(by_second, default=-1))
    for start in range(jump, last - hold + 2):
        run = [by_second.get(start + i) for i in range(hold)]
        if all(p is not None and lost_fraction(p) < max_loss for p in run):
            return start - jump
    return None


def replica_seconds(samples: Sequence[Sample], end: float, ready: bool = False) -> float:
    """The integral of the replicas over [0, end], each sample holding until the next (the
    first from 0)."""
    if not samples:
        return 0.0
    ordered = sorted(samples)
    total = 0.0
    for i, sample in enumerate(ordered):
        begin = 0.0 if i == 0 else max(0.0, sample.seconds)
        stop = end if i + 1 == len(ordered) else min(end, ordered[i + 1].seconds)
        if stop > begin:
            total += (sample.ready if ready else sample.spec) * (stop - begin)
    return round(total, 1)


def changes(samples: Sequence[Sample]) -> list[list[float]]:
    """The samples where spec or ready changed (and the first): ``[seconds, spec, ready]``."""
    out: list[list[float]] = []
    for s in sorted(samples):
        if not out or (out[-1][1], out[-1][2]) != (s.spec, s.ready):
            out.append([round(s.seconds, 1), s.spec, s.ready])
    return out


def peak(samples: Sequence[Sample]) -> int:
    return max((s.spec for s in samples), default=0)


def summarize(slices: Sequence[Slice], samples: Sequence[Sample], duration: int,
              jump: int | None, until: int | None = None) -> dict[str, Any]:
    """One run's figures, as the results file keeps them."""
    return {**totals(slices),
            "lost_percent": round(100 * sum(s.lost for s in slices)
                                  / max(1, sum(s.sent for s in slices)), 2),
            "replica_seconds": replica_seconds(samples, duration),
            "ready_replica_seconds": replica_seconds(samples, duration, ready=True),
            "peak_replicas": peak(samples),
            "capacity_seconds": capacity_seconds(slices, jump, until),
            "windows": windows(slices),
            "sent_per_second": [s.sent for s in sorted(slices)],
            "lost_per_second": [s.lost for s in sorted(slices)],
            "replicas": changes(samples)}


GOAL_LOSS_SHARE = 1 / 3   # (c) may lose at most this share of what (d) loses
GOAL_CAPACITY = 10        # seconds from the jump to capacity, for (c)


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 3) if b else None


def goal(runs: dict[str, Any]) -> dict[str, Any]:
    """The issue's goal checked on one profile's runs (keys ``upstream``, ``ours``,
    ``ours_load``, ``hpa``; any missing leaves its checks out): the load axis loses at most a
    third of what the HPA loses, with no more replica-seconds, and has capacity within
    ``GOAL_CAPACITY`` seconds of the jump; upstream and ours lose the same share."""
    out: dict[str, Any] = {}
    load, hpa = runs.get("ours_load"), runs.get("hpa")
    if load is not None and hpa is not None:
        share = _ratio(load["lost"], hpa["lost"])
        cost = _ratio(load["replica_seconds"], hpa["replica_seconds"])
        out["lost_load_over_hpa"] = share
        out["replica_seconds_load_over_hpa"] = cost
        out["lost_at_most_a_third"] = share is not None and share <= GOAL_LOSS_SHARE
        out["replica_seconds_no_more"] = cost is not None and cost <= 1
    if load is not None:
        seconds = load["capacity_seconds"]
        out["capacity_within_10_s"] = seconds is not None and seconds <= GOAL_CAPACITY
    upstream, ours = runs.get("upstream"), runs.get("ours")
    if upstream is not None and ours is not None:
        out["lost_percent_upstream_vs_ours"] = [upstream["lost_percent"], ours["lost_percent"]]
    return out
