"""The Node store: one small record per Node and running totals over them.

As client-go splits Store from Reflector, this module only keeps state; the list/watch that
feeds it is :mod:`cpa.nodes.watch`. Totals are updated per change, so reading them (every
poll) is O(1) in the number of Nodes and makes no API request. They are kept under the
parameters' counting policy (:class:`~cpa.nodes.counts.CountingPolicy`, plain data), which
the store applies itself.

Zones (opt-in): with a ``zone_key`` in the policy the store also keeps, per zone, how many
counted Nodes it has (a dict of a few entries, two updates per change), so the number of
distinct zones is as cheap to read as the other totals. Each record carries the value of
that one label only; the reflector decodes it when asked (:attr:`NodeStore.label_key`).
When the policy asks for a label the records were not read with, the store asks its
reflector to list the Nodes again (:attr:`NodeStore.on_label_change`) and reports no zone
count until that list is complete.

Why records and not objects: a decoded Node is tens of kilobytes while a record is a
shared tuple; Nodes are mostly alike, so identical records are one object (the peak memory
at 65,000 Nodes is in ``bench/results/``).

Sharing, bounded by the live Nodes: three interning tables make equal things one object:
the records, their taint-key sets and (``targetPlacement``) their label pairs. Labels and
taint values churn in real clusters (a GPU Feature Discovery timestamp label rewritten every
minute, the cluster-autoscaler's deletion-candidate taint whose value is a time), and each
change makes a record never seen before; a table that only grows would keep every record
the Nodes ever had. So the tables are rebuilt from the live records whenever the record
table has grown past twice the live records (plus a small slack, so that a small cluster
does not rebuild on every change), and after the list that drops every label (the last
``targetPlacement`` gone). Why a rebuild and not
reference counts: counts would have to be kept right on every path that replaces a record
(an update, a delete, a relist's retain, a re-zone) and for records made but not yet
stored, while a rebuild is derived from the live records, so it cannot get out of step
with them, and it costs nothing on the common event that changes no record (a heartbeat).
Why it stays cheap: a rebuild is one pass over the live records, and it comes only after
at least as many new records were made as there are live ones, each of which cost as much
to make: constant work per change on average. Between rebuilds a table holds the live
records' entries plus those of the records made since; a new taint set or label pair only
ever comes with a new record (every entry of a kept record is in the tables), so the
record table's bound holds the other two. What a record carries besides (its taint
details, its zone) is held by the record only and goes with it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import TYPE_CHECKING, Protocol

from cpa import logs
from cpa.go.quantity import CpuQuantityError, cpu_millicores
from cpa.nodes.counts import DEFAULT_POLICY, ClusterCounts, CountingPolicy
from cpa.nodes.placement import count_domains
from cpa.nodes.records import ALL_LABELS, NodeInfo
from cpa.nodes.totals import NodeRecord, Totals

if TYPE_CHECKING:
    from fractions import Fraction

    from cpa.nodes.placement import Domains, Placement

__all__ = ["NodeSink", "NodeStore"]


class NodeSink(Protocol):
    """What the reflector (:mod:`cpa.nodes.watch`) keeps current, as client-go's Reflector
    feeds a Store: :class:`NodeStore` for the autoscaler, the vertical autoscaler's
    capacity store for ``/cpvpa``."""

    def upsert(self, node: NodeInfo) -> None: ...

    def delete(self, name: str) -> None: ...

    def retain(self, names: Iterable[str]) -> None:
        """After a list: forget every Node it no longer has."""
        ...

    def __len__(self) -> int: ...

    def synced_fields(self) -> dict[str, int]:
        """The totals the ``nodes.synced`` log line shows."""
        ...


_NO_TAINTS: frozenset[str] = frozenset()
_SLACK = 64
"""Records the table may hold beyond twice the live ones before a rebuild: with few Nodes,
a rebuild on nearly every change would cost more than the records it frees."""


def _taint_key(keys: tuple[str, ...]) -> tuple[str, ...]:
    """One key per taint-key set, whatever order the Node lists its taints in (and a key
    listed twice, for two effects, once): a table keyed so is rebuilt from the sets alone.
    Most Nodes have no taint or one, which need no sorting."""
    return keys if len(keys) < 2 else tuple(sorted(set(keys)))


def _placeable(records: dict[str, NodeRecord], placement: Placement, key: str) -> Domains:
    """The domains among the schedulable Nodes ``placement`` fits, whatever the counting
    policy leaves out: the scheduler places Pods there all the same."""
    return count_domains(placement, key, ((name, dict(r.labels or ()), r.taint_details)
                                          for name, r in records.items() if r.schedulable))


@lru_cache(maxsize=4096)
def _millicores(text: str) -> int | Fraction:
    """Parse once per distinct string: nodes are mostly alike."""
    return cpu_millicores(text)


class NodeStore:
    """Records by Node name and the running totals under a :class:`CountingPolicy`; safe to
    share between threads.

    The totals always hold what the current policy counts, so a poll stays O(1); changing
    the policy (a new ConfigMap) costs one pass over the records.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: dict[str, NodeRecord] = {}
        self._shared: dict[NodeRecord, NodeRecord] = {}
        self._taint_sets: dict[tuple[str, ...], frozenset[str]] = {(): _NO_TAINTS}
        self._policy = DEFAULT_POLICY
        self._all = Totals()
        self._placed: dict[Placement, Totals] = {}  # targetPlacement: totals per placement
        self._pairs: dict[tuple[str, str], tuple[str, str]] = {}  # shared label pairs
        self._version = 0  # one more on every changed record: when the domains are stale
        self._domains: dict[tuple[Placement, str], tuple[int, Domains]] = {}  # capToPlaceable
        self._label_key = ""  # the label the reflector is to decode ("" none)
        self._listed_label = ""  # the label the last complete list was decoded with
        self._zones_ready_reported = True
        self._labels_listed = threading.Condition(self._lock)
        self.on_label_change: Callable[[], None] | None = None
        """Called (outside the lock) when the policy needs a label the records do not
        carry: the reflector lists the Nodes again (:meth:`labels_listed` when done)."""
        self._log = logs.get_logger("nodestore")
        self.on_change: Callable[[], None] | None = None
        """Called after a change of a record (in the caller's thread, the lock released):
        the poll loop's nudge for ``--react-to-node-changes``. It must be O(1) and must not
        block: it runs once per such watch event. A Node whose record stays the same (a
        status heartbeat: most watch events) calls nothing."""

    # --- reading -------------------------------------------------------------------
    def counts(self) -> ClusterCounts:
        """The current totals, rounded as upstream rounds them (cores up, once). The zones
        are None unless the policy counts them and the records carry its label."""
        with self._lock:
            return self._all.counts(self._zones_ready())

    def counts_for(self, placement: Placement) -> ClusterCounts | None:
        """The totals of the Nodes ``placement`` can be scheduled on (``targetPlacement``),
        under the same counting policy; None until :meth:`set_placements` asked for it and
        a list has read every Node's labels and taints."""
        with self._lock:
            placed = self._placed.get(placement)
            if placed is None or self._listed_label != ALL_LABELS:
                return None
            return placed.counts(self._policy.zone_key is not None)

    def domains(self, placement: Placement, key: str) -> Domains | None:
        """``capToPlaceable``: :func:`_placeable`, kept till a Node changes; None: unlisted."""
        with self._lock:
            if placement not in self._placed or self._listed_label != ALL_LABELS:
                return None
            kept = self._domains.get((placement, key))
            if kept is None or kept[0] != self._version:
                kept = self._domains[(placement, key)] = (
                    self._version, _placeable(self._records, placement, key))
            return kept[1]

    @property
    def placements(self) -> list[Placement]:
        """The placements kept totals for (``targetPlacement``)."""
        with self._lock:
            return list(self._placed)

    def placement_exclusions(self, placement: Placement) -> dict[str, int] | None:
        """How many Nodes each placement rule kept off (``nodeSelector``, ``nodeAffinity``,
        ``taint KEY``), for ``cpa explain``: one pass over the records; None when the
        records carry no labels (no placement was asked for before the list)."""
        out: dict[str, int] = {}
        with self._lock:
            if self._listed_label != ALL_LABELS:
                return None
            for name, record in self._records.items():
                rule = placement.excludes(name, dict(record.labels or ()),
                                          record.taint_details)
                if rule is not None:
                    out[rule] = out.get(rule, 0) + 1
        return out

    def set_placements(self, placements: Iterable[Placement], wait: float = 0.0) -> bool:
        """Keep running totals for exactly these placements from now on (``targetPlacement``):
        one pass over the records for each new one, nothing for one already kept. The first
        placement makes the reflector list the Nodes again with every label and taint (and
        the last one gone, without: the memory is given back); ``wait`` is how many seconds
        to wait for that list. Returns True when a placement's counts may have changed."""
        wanted = set(placements)
        with self._lock:
            changed = wanted != set(self._placed)
            for gone in [p for p in self._placed if p not in wanted]:
                del self._placed[gone]
            self._domains = {k: v for k, v in self._domains.items() if k[0] in wanted}
            for placement in wanted - set(self._placed):
                placed = self._placed[placement] = Totals()
                for name, record in self._records.items():
                    self._count_placed(placement, placed, name, record, 1)
            key = ALL_LABELS if self._placed else (self._policy.zone_key or "")
            relist = key != self._label_key
            self._label_key = key
        hook = self.on_label_change
        if relist and hook is not None:
            self._log.info("nodes.relist_for_label", label=key or "none",
                           reason="targetPlacement needs every Node's labels and taints"
                           if key == ALL_LABELS else "no target counts by placement now")
            hook()
        if wanted:
            with self._lock:
                if wait > 0:
                    self._labels_listed.wait_for(
                        lambda: self._listed_label == ALL_LABELS, timeout=wait)
                ready = self._listed_label == ALL_LABELS
                changed = changed or relist or not ready
        return changed

    def _zones_ready(self) -> bool:
        return self._policy.zone_key is not None and self._listed_label == self._label_key

    @property
    def label_key(self) -> str:
        """The label whose value the reflector decodes into each record ("" none)."""
        return self._label_key

    def labels_listed(self, key: str) -> None:
        """A complete list of the Nodes was decoded with the label ``key``: every record now
        carries that label's value (the reflector calls this after each list)."""
        with self._lock:
            if self._listed_label == ALL_LABELS and key != ALL_LABELS:
                self._reintern()  # the records without labels replaced all: give them back
            self._listed_label = key
            self._labels_listed.notify_all()

    def synced_fields(self) -> dict[str, int]:
        c = self.counts()
        return {"nodes": c.total_nodes, "cores": c.total_cores,
                "schedulable_nodes": c.schedulable_nodes,
                "schedulable_cores": c.schedulable_cores}

    @property
    def policy(self) -> CountingPolicy:
        return self._policy

    def set_policy(self, policy: CountingPolicy, wait: float = 0.0) -> bool:
        """Count under ``policy`` from now on (one pass over every record, under the lock).

        A ``zone_key`` the records were not decoded with makes the reflector list the Nodes
        again; ``wait`` is how many seconds to wait for that list. Returns True when the
        counts may have changed since the last call: a new policy, or the zones became
        countable (or stopped being) meanwhile.
        """
        if policy == DEFAULT_POLICY:
            policy = DEFAULT_POLICY  # the fast path in _count() tests identity
        with self._lock:
            key = ALL_LABELS if self._placed else (policy.zone_key or "")
            changed = policy != self._policy
            if changed:
                if policy.zone_key != self._policy.zone_key and self._label_key == ALL_LABELS:
                    self._rezone(policy.zone_key)
                self._policy = policy
                self._all.reset()
                for record in self._records.values():
                    self._all.count(record, 1, policy)
                for placement, placed in self._placed.items():
                    placed.reset()
                    for name, record in self._records.items():
                        self._count_placed(placement, placed, name, record, 1)
            relist = key != self._label_key
            self._label_key = key
        hook = self.on_label_change
        if relist and key and key != ALL_LABELS and hook is not None:
            self._log.info("nodes.relist_for_label", label=key,
                           reason="the zones' topologyKey is a label the Node records "
                                  "were not read with")
            hook()
        with self._lock:
            if wait > 0 and policy.zone_key is not None:
                self._labels_listed.wait_for(
                    lambda: self._listed_label == self._label_key, timeout=wait)
            ready = self._zones_ready() or policy.zone_key is None
            changed = changed or ready != self._zones_ready_reported
            self._zones_ready_reported = ready
        return changed

    def get(self, name: str) -> NodeRecord | None:
        with self._lock:
            return self._records.get(name)

    def names(self) -> list[str]:
        with self._lock:
            return list(self._records)

    def __len__(self) -> int:
        with self._lock:
            return len(self._records)

    # --- changing ------------------------------------------------------------------
    def record(self, node: NodeInfo) -> NodeRecord:
        """The (shared) record for a decoded Node; an unparsable cpu counts 0, logged."""
        milli: int | Fraction = 0
        if node.cpu:
            try:
                milli = _millicores(node.cpu)
            except CpuQuantityError as exc:
                self._log.warning("node.bad_cpu", node=node.name, cpu=node.cpu, error=str(exc),
                                  hint="counted as 0 cores")
        with self._lock:
            key = _taint_key(node.taints)
            taints = self._taint_sets.get(key)
            if taints is None:
                taints = self._taint_sets[key] = frozenset(key)
            if node.labels is None:
                record = NodeRecord(node.unschedulable, node.ready, milli, taints, node.label)
            else:  # targetPlacement: every label, and the zone from them
                labels = tuple(self._pairs.setdefault(p, p) for p in node.labels)
                zone_key = self._policy.zone_key
                zone = dict(labels).get(zone_key, "") if zone_key else ""
                record = NodeRecord(node.unschedulable, node.ready, milli, taints, zone,
                                    labels, node.taint_details)
            return self._shared.setdefault(record, record)

    def upsert(self, node: NodeInfo) -> None:
        record = self.record(node)
        with self._lock:
            changed = self._apply(node.name, record)
        if changed and self.on_change is not None:
            self.on_change()

    def delete(self, name: str) -> None:
        with self._lock:
            changed = self._apply(name, None)
        if changed and self.on_change is not None:
            self.on_change()

    def retain(self, names: Iterable[str]) -> None:
        """After a relist: forget every Node the new list no longer has."""
        keep = set(names)
        with self._lock:
            gone = [n for n in self._records if n not in keep]
            for name in gone:
                self._apply(name, None)
        if gone and self.on_change is not None:
            self.on_change()

    def _apply(self, name: str, new: NodeRecord | None) -> bool:
        """Replace (or delete, when ``new`` is None) one record and fix the totals; False
        when nothing changed. Records are shared (:meth:`record`), so an unchanged Node -
        a kubelet's heartbeat, most of the watch's events - is the very same object and
        costs one dict lookup."""
        old = self._records.pop(name, None) if new is None else self._records.get(name)
        if old is new:
            return False
        self._version += 1
        policy = self._policy
        if old is not None:
            self._all.count(old, -1, policy)
        if new is not None:
            self._records[name] = new
            self._all.count(new, 1, policy)
        for placement, placed in self._placed.items():  # targetPlacement: empty without
            if old is not None:
                self._count_placed(placement, placed, name, old, -1)
            if new is not None:
                self._count_placed(placement, placed, name, new, 1)
        if len(self._shared) > 2 * len(self._records) + _SLACK:
            self._reintern()
        return True

    def _reintern(self) -> None:
        """The interning tables rebuilt from the live records (the module doc says when and
        why): each live record, taint set and label pair stays the one shared object."""
        self._shared = {r: r for r in self._records.values()}
        self._taint_sets = {(): _NO_TAINTS}
        self._pairs = {}
        for record in self._shared:
            self._taint_sets.setdefault(_taint_key(tuple(record.taints)), record.taints)
            for pair in record.labels or ():
                self._pairs[pair] = pair

    def _rezone(self, zone_key: str | None) -> None:
        """Records that carry every label, their zone read again for another topologyKey
        (one pass; the totals are counted again by the caller)."""
        for name, record in self._records.items():
            zone = dict(record.labels or ()).get(zone_key, "") if zone_key else ""
            if zone != record.zone:
                fresh = record._replace(zone=zone)
                self._records[name] = self._shared.setdefault(fresh, fresh)
        self._reintern()

    def _count_placed(self, placement: Placement, placed: Totals, name: str,
                      record: NodeRecord, sign: int) -> None:
        """One record in (or out of) a placement's totals: a Node the policy leaves out is
        counted as left out, as in the cluster's totals; one the placement's Pods could not
        be scheduled on is not counted at all."""
        policy = self._policy
        excluded = bool(policy.exclude_taints and record.taints & policy.exclude_taints)
        if not excluded and placement.excludes(name, dict(record.labels or ()),
                                               record.taint_details) is not None:
            return
        placed.count(record, sign, policy)
