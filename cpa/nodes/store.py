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

Why records and not objects: at 65,000 GKE-sized Nodes a decoded object is ~30 KB while a
record is a shared tuple; nodes are mostly alike, so identical records are one object
(measured: 47 -> 42 MiB peak at 65,000 nodes).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from fractions import Fraction
from functools import lru_cache
from typing import NamedTuple, Protocol

from cpa import logs
from cpa.go.quantity import CpuQuantityError, cores_rounded_up, cpu_millicores
from cpa.nodes.counts import DEFAULT_POLICY, ClusterCounts, CountingPolicy
from cpa.nodes.records import NodeInfo

__all__ = ["NodeRecord", "NodeSink", "NodeStore"]


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


class NodeRecord(NamedTuple):
    """What we keep of one Node."""

    unschedulable: bool
    ready: bool
    millicores: int | Fraction
    taints: frozenset[str] = frozenset()  # taint keys (shared: most nodes have none)
    zone: str = ""  # the value of the label asked for (the policy's zone_key), or ""

    @property
    def schedulable(self) -> bool:
        return not self.unschedulable and self.ready


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
        self._taint_sets: dict[tuple[str, ...], frozenset[str]] = {(): frozenset()}
        self._policy = DEFAULT_POLICY
        self._total_nodes = 0
        self._total_milli: int | Fraction = 0
        self._sched_nodes = 0
        self._sched_milli: int | Fraction = 0
        self._excluded = 0  # nodes the policy leaves out
        self._capped = 0  # nodes whose cores the policy caps
        self._zones_all: dict[str, int] = {}  # zone -> counted Nodes there (with a zone_key)
        self._zones_sched: dict[str, int] = {}
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
            zones = self._zones_ready()
            return ClusterCounts(
                total_nodes=self._total_nodes,
                total_cores=cores_rounded_up(self._total_milli),
                schedulable_nodes=self._sched_nodes,
                schedulable_cores=cores_rounded_up(self._sched_milli),
                excluded_nodes=self._excluded,
                capped_nodes=self._capped,
                total_zones=len(self._zones_all) if zones else None,
                schedulable_zones=len(self._zones_sched) if zones else None,
            )

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
        key = policy.zone_key or ""
        with self._lock:
            changed = policy != self._policy
            if changed:
                self._policy = policy
                self._total_nodes = self._sched_nodes = self._excluded = self._capped = 0
                self._total_milli = self._sched_milli = 0
                self._zones_all.clear()
                self._zones_sched.clear()
                for record in self._records.values():
                    self._count(record, 1)
            relist = key != self._label_key
            self._label_key = key
        hook = self.on_label_change
        if relist and key and hook is not None:
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
            taints = self._taint_sets.get(node.taints)
            if taints is None:
                taints = self._taint_sets.setdefault(node.taints, frozenset(node.taints))
            record = NodeRecord(node.unschedulable, node.ready, milli, taints, node.label)
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
        if old is not None:
            self._count(old, -1)
        if new is not None:
            self._records[name] = new
            self._count(new, 1)
        return True

    def _count(self, record: NodeRecord, sign: int) -> None:
        """Add (``sign`` 1) or take away (-1) one record, as the current policy counts it."""
        milli = record.millicores
        policy = self._policy
        if policy is not DEFAULT_POLICY:  # the common case skips both checks
            if policy.exclude_taints and record.taints & policy.exclude_taints:
                self._excluded += sign
                return
            cap = policy.max_millicores_per_node
            if cap is not None and milli > cap:
                milli = cap
                self._capped += sign
            if policy.zone_key is not None:
                _add(self._zones_all, record.zone, sign)
                if record.schedulable:
                    _add(self._zones_sched, record.zone, sign)
        self._total_nodes += sign
        self._total_milli += sign * milli
        if record.schedulable:
            self._sched_nodes += sign
            self._sched_milli += sign * milli


def _add(per_zone: dict[str, int], zone: str, sign: int) -> None:
    """One Node more (or less) in ``zone``; a zone without Nodes is no zone."""
    count = per_zone.get(zone, 0) + sign
    if count:
        per_zone[zone] = count
    else:
        del per_zone[zone]
