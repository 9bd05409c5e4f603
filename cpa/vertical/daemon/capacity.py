"""The vertical autoscaler's Node store: every Node's capacity cpu, summed as CPVA sums it.

CPVA lists all Nodes every poll and adds their ``status.capacity`` cpu with Go's
``Quantity.Add``, then ``AsInt64`` (cpva k8sclient.go:304-327; the literal port is
:func:`cpa.vertical.decide.formula.cluster_cores`). That sum fails -- the poll fails, nothing is
written -- when any Node's capacity is held with a fraction (``1500m``), at nano precision
or as an ``inf.Dec``, or when the total leaves int64.

This store is fed by the same reflector as the autoscaler's :class:`~cpa.nodes.store.NodeStore`
(it implements :class:`~cpa.nodes.store.NodeSink`) and answers :meth:`CapacityStore.counts`
in O(1) with Go's answer. Why that is Go's answer: for "plain" capacities -- an
``int64Amount`` (not a Dec) that is zero, or non-negative at a scale >= 0, which is what a
kubelet reports -- every partial sum is exact and only grows, so ``Add`` never falls back to
a Dec before the total does, and ``AsInt64`` succeeds exactly when the exact total fits an
int64. Anything else (a fraction, a Dec, a negative capacity whose partial sums could hit
zero and change the scale) is rare enough to take the literal port over the Nodes in the
API server's list order (by name), once per poll while such a Node exists. A property
test holds the store against :func:`~cpa.vertical.decide.formula.cluster_cores`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import NamedTuple

from cpa.go.quantity import INT64_MAX, Quantity, QuantityError
from cpa.nodes.records import NodeInfo
from cpa.vertical.decide.formula import CoresError, cluster_cores

__all__ = ["CapacityStore"]


class _Entry(NamedTuple):
    text: str | None  # status.capacity.cpu as served
    exact: int  # its exact value in whole cores, when plain (else 0)
    plain: bool  # see the module doc: summed exactly; False: the literal port decides
    error: str | None = None  # unparsable (a protobuf decode in Go would have failed)


def _entry(text: str | None) -> _Entry:
    if text is None:
        return _Entry(None, 0, True)
    try:
        q = Quantity.parse(text)
    except QuantityError as exc:
        return _Entry(text, 0, False, str(exc))
    if q.dec:
        return _Entry(text, 0, False)
    if q.unscaled == 0:
        return _Entry(text, 0, True)
    if q.unscaled < 0 or q.exponent < 0:
        return _Entry(text, 0, False)
    return _Entry(text, q.unscaled * 10 ** q.exponent, True)


class CapacityStore:
    """Capacity cpu by Node name and the running totals; safe to share between threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, _Entry] = {}
        self._exact = 0  # sum of the plain entries' exact values
        self._odd = 0  # entries that are not plain

    # --- reading ----------------------------------------------------------------------
    def counts(self) -> tuple[int, int]:
        """(nodes, cores) as CPVA's ``GetClusterSize`` gives them; raises
        :class:`~cpa.vertical.decide.formula.CoresError` where CPVA's poll fails."""
        with self._lock:
            nodes = len(self._entries)
            if not self._odd:
                if self._exact > INT64_MAX:
                    raise CoresError("unable to compute integer values of cores in the "
                                     "cluster")
                return nodes, self._exact
            ordered = sorted(self._entries.items())
        for name, entry in ordered:
            if entry.error is not None:
                raise CoresError(f"Node {name} has a cpu capacity {entry.text!r} that is no "
                                 f"quantity: {entry.error}")
        try:
            return nodes, cluster_cores(entry.text for _, entry in ordered)
        except CoresError as exc:
            odd = [f"{name}={entry.text}" for name, entry in ordered if not entry.plain]
            raise CoresError(f"{exc} (CPVA's Quantity sum needs whole cores; Nodes with a "
                             f"fractional or unusual cpu capacity: {', '.join(odd[:5])}"
                             f"{' ...' if len(odd) > 5 else ''})") from None

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def synced_fields(self) -> dict[str, int]:
        with self._lock:
            return {"nodes": len(self._entries), "odd_capacities": self._odd}

    # --- changing (the reflector's NodeSink) ----------------------------------------------
    def upsert(self, node: NodeInfo) -> None:
        entry = _entry(node.capacity_cpu)
        with self._lock:
            self._apply(node.name, entry)

    def delete(self, name: str) -> None:
        with self._lock:
            self._apply(name, None)

    def retain(self, names: Iterable[str]) -> None:
        keep = set(names)
        with self._lock:
            for name in [n for n in self._entries if n not in keep]:
                self._apply(name, None)

    def _apply(self, name: str, new: _Entry | None) -> None:
        old = self._entries.pop(name, None) if new is None else self._entries.get(name)
        if old is not None:
            self._count(old, -1)
        if new is not None:
            self._entries[name] = new
            self._count(new, 1)

    def _count(self, entry: _Entry, sign: int) -> None:
        if entry.plain:
            self._exact += sign * entry.exact
        else:
            self._odd += sign
