"""The node store's interning tables (shared records, label pairs, taint sets) stay bounded by
the live Nodes under label and taint churn: GPU Feature Discovery rewrites a timestamp label
on every GPU Node every minute, the cluster-autoscaler writes a taint whose value is a time.
Every changed Node makes a record never seen before; the tables must forget the ones no
live Node holds, and still share what the live Nodes have in common."""

from __future__ import annotations

import tracemalloc

from cpa.nodes.counts import CountingPolicy
from cpa.nodes.placement import Placement, Toleration
from cpa.nodes.records import NodeInfo
from cpa.nodes.store import NodeStore

NODES = 50
CHANGES = 100_000
GPU = Placement((("pool", "gpu"),), tolerations=(Toleration("nvidia.com/gpu", "Exists"),))
COMMON = {"pool": "gpu", "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
          "topology.kubernetes.io/zone": "zone-a"}


def gpu_node(i: int, tick: int) -> NodeInfo:
    """Node ``i`` at its ``tick``-th update: a GFD timestamp label and, every other update,
    the cluster-autoscaler's deletion-candidate taint with a time for its value."""
    labels = {**COMMON, "kubernetes.io/hostname": f"gpu-{i}",
              "nvidia.com/gfd.timestamp": str(1_700_000_000 + tick)}
    taints = [("nvidia.com/gpu", "present", "NoSchedule")]
    if tick % 2:
        taints.append(("DeletionCandidateOfClusterAutoscaler", str(1_700_000_000 + tick),
                       "PreferNoSchedule"))
    return NodeInfo(f"gpu-{i}", str(tick), False, True, "8", tuple(t[0] for t in taints),
                    labels=tuple(sorted(labels.items())), taint_details=tuple(taints))


def table_sizes(store: NodeStore) -> tuple[int, int, int]:
    return len(store._shared), len(store._pairs), len(store._taint_sets)


def churn(store: NodeStore, first: int, last: int) -> None:
    for tick in range(first, last):
        store.upsert(gpu_node(tick % NODES, tick))


def placed_store() -> NodeStore:
    store = NodeStore()
    store.set_placements([GPU])
    churn(store, 0, NODES)
    store.labels_listed(store.label_key)
    return store


def test_label_and_taint_churn_keeps_the_tables_bounded_by_the_live_nodes() -> None:
    store = placed_store()
    highest: tuple[int, ...] = (0, 0, 0)
    for start in range(NODES, CHANGES, 1000):
        churn(store, start, start + 1000)
        highest = tuple(max(a, b) for a, b in zip(highest, table_sizes(store), strict=True))
    records, pairs, taint_sets = highest
    assert len(store) == NODES
    # Twice the live records (and what a rebuild's slack allows), never one per change.
    assert records <= 2 * NODES + 64, highest
    assert pairs <= 2 * NODES * (len(COMMON) + 2), highest
    assert taint_sets <= 3, highest  # none, the GPU taint, and it with the candidate's
    counts = store.counts_for(GPU)
    assert counts is not None and counts.total_nodes == NODES


def test_the_sharing_survives_a_rebuild() -> None:
    store = placed_store()
    churn(store, NODES, 10 * NODES)
    first, second = store.get("gpu-0"), store.get("gpu-2")  # both without the candidate's
    assert first is not None and second is not None and first.labels and second.labels
    assert dict(first.labels)["pool"] == "gpu"
    pools = [next(p for p in labels if p[0] == "pool")
             for labels in (first.labels, second.labels)]
    assert pools[0] is pools[1], "a label pair shared by the Nodes"
    assert first.taints is second.taints, "one taint set for the Nodes that have it"
    # Identical Nodes are one record, however many changes went before.
    store.upsert(gpu_node(0, 10 * NODES))
    store.upsert(gpu_node(0, 10 * NODES)._replace(name="twin"))
    assert store.get("twin") is store.get("gpu-0")


def test_memory_under_label_churn_stays_within_two_mib() -> None:
    store = placed_store()
    churn(store, NODES, 20 * NODES)  # warm-up: every code path and cache once
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        churn(store, 20 * NODES, 20 * NODES + CHANGES)
        grown = tracemalloc.get_traced_memory()[0] - start
    finally:
        tracemalloc.stop()
    assert grown < 2 * 1024 * 1024, f"{grown / 2**20:.1f} MiB kept after {CHANGES} changes"


def test_without_placement_changed_cpu_zones_and_taints_are_forgotten_too() -> None:
    """Records without labels change with allocatable cpu, the zone label (a topologyKey)
    and taint keys: those tables must forget the past as well."""
    store = NodeStore()
    store.set_policy(CountingPolicy(zone_key="zone"))
    store.labels_listed("zone")
    for tick in range(20_000):
        store.upsert(NodeInfo(f"n{tick % NODES}", str(tick), False, True,
                              f"{4000 + tick}m", (f"key-{tick}",), label=f"zone-{tick}"))
    records, _, taint_sets = table_sizes(store)
    assert records <= 2 * NODES + 64 and taint_sets <= 2 * NODES + 64 + 1
    counts = store.counts()
    assert counts.total_nodes == NODES and counts.total_zones == NODES


def test_the_last_placement_gone_forgets_the_labels() -> None:
    """The relist without labels replaces every record: the labelled ones and their pairs are
    forgotten once that list is complete, not kept until more churn comes."""
    store = placed_store()
    store.set_placements([])
    for i in range(NODES):
        store.upsert(NodeInfo(f"gpu-{i}", "x", False, True, "8", ("nvidia.com/gpu",)))
    store.labels_listed(store.label_key)
    records, pairs, taint_sets = table_sizes(store)
    assert (records, pairs, taint_sets) == (1, 0, 2)
