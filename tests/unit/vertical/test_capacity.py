"""The capacity store answers what CPVA's ``GetClusterSize`` answers, whatever the Nodes.

The reference is :func:`cpa.vertical.decide.formula.cluster_cores`, the literal port of CPVA's
``Quantity.Add`` loop and ``AsInt64`` (itself held against CPVA's code by the recorded
vectors), applied to the Nodes in the API server's list order (by name).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpa.go.quantity import INT64_MAX
from cpa.nodes.records import NodeInfo
from cpa.vertical.daemon.capacity import CapacityStore
from cpa.vertical.decide.formula import CoresError, cluster_cores


def node(name: str, capacity: str | None) -> NodeInfo:
    return NodeInfo(name, "1", False, True, "1", (), capacity)


def reference(nodes: dict[str, str | None]) -> tuple[int, int] | None:
    """(nodes, cores) as CPVA lists and sums them, or None where its poll fails."""
    try:
        return len(nodes), cluster_cores(nodes[name] for name in sorted(nodes))
    except CoresError:
        return None


def answer(store: CapacityStore) -> tuple[int, int] | None:
    try:
        return store.counts()
    except CoresError:
        return None


CAPACITIES = st.one_of(
    st.none(),
    st.integers(0, 512).map(str),  # what kubelets report
    st.sampled_from(["0", "1k", "2k", "1500m", "4000m", "0.5", "1.5", "0m", "1e3", "2E",
                     "8E", "9E", "1Ki", "0.000000001", "123456789012345678901", "-4", "-1k",
                     "1n", "100E", "0.0"]),
    st.integers(-(2 ** 64), 2 ** 64).map(str),
)
OPS = st.lists(st.tuples(st.sampled_from(["upsert", "delete", "retain"]),
                         st.sampled_from([f"n{i}" for i in range(8)]), CAPACITIES),
               max_size=40)


@settings(max_examples=400, deadline=None)
@given(OPS)
def test_the_store_agrees_with_cpvas_sum_after_any_changes(
        ops: list[tuple[str, str, str | None]]) -> None:
    store = CapacityStore()
    nodes: dict[str, str | None] = {}
    for op, name, capacity in ops:
        if op == "upsert":
            store.upsert(node(name, capacity))
            nodes[name] = capacity
        elif op == "delete":
            store.delete(name)
            nodes.pop(name, None)
        else:  # a relist that no longer has ``name``
            keep = [n for n in nodes if n != name]
            store.retain(keep)
            nodes = {n: nodes[n] for n in keep}
        assert answer(store) == reference(nodes), (op, name, capacity, nodes)
    assert len(store) == len(nodes)


def test_whole_cores_sum_exactly_and_overflow_fails() -> None:
    store = CapacityStore()
    for i in range(3):
        store.upsert(node(f"n{i}", "8"))
    store.upsert(node("big", "1k"))
    store.upsert(node("none", None))
    assert store.counts() == (5, 1024)
    store.upsert(node("huge", str(INT64_MAX)))
    with pytest.raises(CoresError, match="unable to compute integer values of cores"):
        store.counts()
    store.delete("huge")
    assert store.counts() == (5, 1024)


def test_a_fractional_capacity_fails_and_names_the_node() -> None:
    store = CapacityStore()
    store.upsert(node("whole", "4"))
    store.upsert(node("odd", "1500m"))
    with pytest.raises(CoresError, match="odd=1500m"):
        store.counts()
    store.upsert(node("odd", "2"))
    assert store.counts() == (2, 6)


def test_an_unparsable_capacity_fails_the_poll() -> None:
    store = CapacityStore()
    store.upsert(node("bad", "lots"))
    with pytest.raises(CoresError, match="Node bad has a cpu capacity 'lots'"):
        store.counts()
