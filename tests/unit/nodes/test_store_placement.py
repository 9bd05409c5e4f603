"""The node store's totals per placement (``targetPlacement``): always what a recount from
scratch says, one pass over the Nodes for a new placement and none for a kept one, and
nothing of it without the key."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from cpa.kube.selector import Requirement
from cpa.nodes import placement as placement_module
from cpa.nodes.counts import CountingPolicy
from cpa.nodes.placement import EVERYWHERE, Placement, Term, Toleration, fits
from cpa.nodes.records import ALL_LABELS, NodeInfo
from cpa.nodes.store import NodeStore
from tests.unit.nodes.test_store import counted_millicores, node_event


def placed_node(name: str, labels: dict[str, str], taints: tuple[tuple[str, str, str], ...] = (),
                cpu: str = "4", ready: bool = True) -> NodeInfo:
    return NodeInfo(name, "1", False, ready, cpu, tuple(t[0] for t in taints),
                    labels=tuple(sorted(labels.items())), taint_details=taints)


CORE = Placement((("pool", "core"),))
GPU_TOLERANT = Placement(tolerations=(Toleration("gpu", "Exists"),))


def listed(store: NodeStore) -> None:
    store.labels_listed(store.label_key)  # the reflector's list came with every label


def test_counts_per_placement_and_the_relist_they_need() -> None:
    store = NodeStore()
    relists: list[str] = []
    store.on_label_change = lambda: relists.append(store.label_key)
    assert store.set_placements([CORE, GPU_TOLERANT]) is True
    assert relists == [ALL_LABELS]
    assert store.counts_for(CORE) is None, "no counts before a list with every label"
    for node in (placed_node("a", {"pool": "core"}), placed_node("b", {"pool": "core"}),
                 placed_node("g", {"pool": "gpu"}, (("gpu", "", "NoSchedule"),)),
                 placed_node("h", {"pool": "gpu"}, (("gpu", "", "NoSchedule"),), ready=False)):
        store.upsert(node)
    listed(store)
    core, gpu = store.counts_for(CORE), store.counts_for(GPU_TOLERANT)
    assert core is not None and gpu is not None
    assert (core.total_nodes, core.schedulable_nodes, core.total_cores) == (2, 2, 8)
    assert (gpu.total_nodes, gpu.schedulable_nodes, gpu.total_cores) == (4, 3, 16)
    assert store.counts().total_nodes == 4, "the whole-cluster totals stay upstream's"
    assert store.placement_exclusions(CORE) == {"nodeSelector": 2}
    assert store.placement_exclusions(EVERYWHERE) == {"taint gpu": 2}
    assert store.set_placements([CORE, GPU_TOLERANT]) is False, "kept: nothing changed"
    store.delete("a")
    core = store.counts_for(CORE)
    assert core is not None and core.total_nodes == 1
    store.set_policy(CountingPolicy(max_millicores_per_node=1000, zone_key="pool"))
    core = store.counts_for(CORE)
    assert core is not None and (core.total_cores, core.capped_nodes, core.total_zones) == (
        1, 1, 1)
    assert store.counts().total_zones == 2, "zones read from every label, no other relist"
    assert relists == [ALL_LABELS]
    assert store.set_placements([]) is True
    assert relists == [ALL_LABELS, "pool"], "the last placement gone: list without labels"
    assert store.counts_for(CORE) is None


def test_a_kept_placement_costs_no_pass_and_a_new_one_one(monkeypatch: Any) -> None:
    calls = [0]
    real = placement_module.excluded_by

    def counting(*args: Any) -> str | None:
        calls[0] += 1
        return real(*args)

    monkeypatch.setattr(placement_module, "excluded_by", counting)
    store = NodeStore()
    store.set_placements([CORE])
    for i in range(100):
        store.upsert(placed_node(f"n{i}", {"pool": "core" if i % 2 else "gpu"}))
    listed(store)
    calls[0] = 0
    for _ in range(10):
        store.set_placements([CORE])
    assert calls[0] == 0
    store.set_placements([CORE, GPU_TOLERANT])
    assert calls[0] == 100, "one pass over the Nodes for the new placement"
    calls[0] = 0
    store.upsert(placed_node("n1", {"pool": "core"}))  # a heartbeat: the same record
    assert calls[0] == 0
    store.upsert(placed_node("n1", {"pool": "gpu"}))  # moved: out of and into each
    assert calls[0] == 4


def test_without_the_key_records_carry_no_labels() -> None:
    store = NodeStore()
    store.upsert(NodeInfo("a", "1", False, True, "4"))
    record = store.get("a")
    assert record is not None and record.labels is None and store.label_key == ""


# --- the totals equal a recount, under any sequence of changes ---------------------------
KEYS = ["pool", "gen"]
node_st = st.builds(
    placed_node, st.sampled_from("abcdef"),
    st.dictionaries(st.sampled_from(KEYS), st.sampled_from(["a", "b", "3"]), max_size=2),
    st.lists(st.tuples(st.sampled_from(["vk", "gpu"]), st.just(""),
                       st.sampled_from(["NoSchedule", "PreferNoSchedule"])),
             max_size=2, unique_by=lambda t: t[0]).map(tuple),
    st.sampled_from(["1", "3920m", "96"]), st.booleans())
placement_st = st.builds(
    Placement,
    st.sampled_from([(), (("pool", "a"),)]),
    st.sampled_from([None, (Term((Requirement("gen", ">", ("2",)),)),),
                     (Term(fields=(Requirement("metadata.name", "in", ("a",)),)),)]),
    st.sampled_from([(), (Toleration("gpu", "Exists"),)]))
policy_st = st.builds(CountingPolicy, st.sampled_from([frozenset(), frozenset({"vk"})]),
                      st.sampled_from([None, 2000]), st.sampled_from([None, "pool"]))
op_st = st.one_of(st.tuples(st.just("upsert"), node_st),
                  st.tuples(st.just("delete"), st.sampled_from("abcdef")),
                  st.tuples(st.just("placements"), st.lists(placement_st, max_size=3)),
                  st.tuples(st.just("policy"), policy_st))


def _recount(nodes: dict[str, NodeInfo], policy: CountingPolicy, p: Placement
             ) -> tuple[int, int, int, int | None, None]:
    total = sched = 0
    milli: Any = 0
    zones: set[str] = set()
    for n in nodes.values():
        labels = dict(n.labels or ())
        if set(n.taints) & policy.exclude_taints or not fits(p, n.name, labels,
                                                               n.taint_details):
            continue
        total += 1
        milli += counted_millicores(n, policy)
        sched += n.ready
        zones.add(labels.get(policy.zone_key or "", ""))
    return (total, math.ceil(milli / 1000), sched, (policy.zone_key and len(zones)) or None,
            None)


@settings(max_examples=200, deadline=None)
@given(st.lists(op_st, max_size=30))
# A zone key set before the first placement: the records were read without labels, and the
# placement counts them only after the list that reads every label (a Node without the
# zone label is in the zone "": 2 zones here).
@example([("upsert", placed_node("a", {}, (), "1", False)),
          ("upsert", placed_node("b", {"pool": "a"}, (), "1", False)),
          ("policy", CountingPolicy(frozenset(), None, "pool")),
          ("placements", [Placement((), None, ())])])
def test_placed_totals_equal_a_recount(ops: list[tuple[str, Any]]) -> None:
    store = NodeStore()
    truth: dict[str, NodeInfo] = {}
    kept: list[Placement] = []
    read_with = store.label_key
    for kind, arg in ops:
        if kind == "placements":
            store.set_placements(arg)
            kept = arg
        elif kind == "policy":
            store.set_policy(arg)
        else:
            node_event(store, truth, kind, arg)
        if store.label_key != read_with:  # the reflector lists the Nodes again: every one
            for node in truth.values():  # decoded anew with what the records now keep
                store.upsert(node)
            read_with = store.label_key
        listed(store)
        for p in kept:
            c = store.counts_for(p)
            assert c is not None
            assert (c.total_nodes, c.total_cores, c.schedulable_nodes,
                    c.total_zones if c.total_zones else None, None) == _recount(
                truth, store.policy, p)


def test_cordoned_and_not_ready_nodes_are_counted_by_the_schedulable_rule() -> None:
    """The taints Kubernetes puts on a cordoned or NotReady Node keep it in every placement's
    totals: counted in all, not in the schedulable ones, as the whole cluster's count."""
    store = NodeStore()
    store.set_placements([EVERYWHERE, CORE])
    cordon = (("node.kubernetes.io/unschedulable", "", "NoSchedule"),)
    down = (("node.kubernetes.io/not-ready", "", "NoSchedule"),
            ("node.kubernetes.io/not-ready", "", "NoExecute"))
    for i in range(4):
        store.upsert(placed_node(f"ok{i}", {"pool": "core"}))
    for i in range(3):
        node = placed_node(f"c{i}", {"pool": "core"}, cordon)
        store.upsert(node._replace(unschedulable=True))
    store.upsert(placed_node("d0", {"pool": "core"}, down, ready=False))
    listed(store)
    whole = store.counts()
    for p in (EVERYWHERE, CORE):
        counts = store.counts_for(p)
        assert counts is not None
        assert (counts.total_nodes, counts.schedulable_nodes) == (8, 4)
        assert (counts.total_nodes, counts.schedulable_nodes) == (
            whole.total_nodes, whole.schedulable_nodes)
        assert store.placement_exclusions(p) == {}
