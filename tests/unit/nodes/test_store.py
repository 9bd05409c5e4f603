"""The node store's records and running totals, and the wire decoding that feeds it."""

from __future__ import annotations

import json
from fractions import Fraction
from typing import Any

from cpa.nodes.jsondecode import decode_bookmark, decode_list_page, decode_node
from cpa.nodes.records import NodeInfo
from cpa.nodes.store import NodeStore
from cpa.nodes.totals import NodeRecord


def info(name: str, cpu: str | None = "4", ready: bool = True,
         unschedulable: bool = False) -> NodeInfo:
    return NodeInfo(name, "1", unschedulable, ready, cpu)


def test_totals_follow_upsert_and_delete() -> None:
    store = NodeStore()
    for node in (info("a", "3920m"), info("b", "3920m"), info("c", "3920m", ready=False),
                 info("d", "2", unschedulable=True)):
        store.upsert(node)
    counts = store.counts()
    # 3 x 3920m + 2000m = 13760m -> 14 cores; schedulable: a, b = 7840m -> 8
    assert (counts.total_nodes, counts.total_cores) == (4, 14)
    assert (counts.schedulable_nodes, counts.schedulable_cores) == (2, 8)
    store.upsert(info("c", "3920m"))
    store.delete("d")
    store.delete("never-there")
    counts = store.counts()
    assert (counts.total_nodes, counts.total_cores) == (3, 12)  # 11760m rounds up once
    assert (counts.schedulable_nodes, counts.schedulable_cores) == (3, 12)


def test_record_fields() -> None:
    store = NodeStore()
    for node in (info("nocpu", None), info("notready", "1", ready=False), info("tiny", "1n"),
                 info("bad", "lots")):
        store.upsert(node)
    assert store.get("nocpu") == NodeRecord(False, True, 0)
    assert store.get("notready") == NodeRecord(False, False, 1000)
    tiny = store.get("tiny")
    assert tiny is not None and tiny.millicores == Fraction(1, 1_000_000)
    bad = store.get("bad")
    assert bad is not None and bad.millicores == 0  # unparsable: counted 0 (and logged)
    assert store.counts().total_cores == 2  # 1000m + 1n rounds up to 2


def test_identical_records_are_one_object() -> None:
    store = NodeStore()
    for i in range(5):
        store.upsert(info(f"n{i}", "7910m"))
    records = {id(store.get(f"n{i}")) for i in range(5)}
    assert len(records) == 1
    record = store.get("n0")
    assert record is not None and type(record.millicores) is int


def test_retain_forgets_what_a_relist_no_longer_has() -> None:
    store = NodeStore()
    for name in ("a", "b", "gone"):
        store.upsert(info(name, "1"))
    store.retain(["a", "b", "new-but-not-stored"])
    assert sorted(store.names()) == ["a", "b"]
    assert store.counts().total_cores == 2


# --- the wire ----------------------------------------------------------------------------


def node_json(name: str, cpu: str | None = "4", ready: bool | None = True,
              unschedulable: bool | None = None, rv: str = "1") -> dict[str, Any]:
    obj: dict[str, Any] = {"kind": "Node", "metadata": {"name": name, "resourceVersion": rv,
                                                        "labels": {"a": "b"}},
                           "spec": {}, "status": {"allocatable": {"memory": "16Gi"},
                                                  "conditions": []}}
    if cpu is not None:
        obj["status"]["allocatable"]["cpu"] = cpu
    if ready is not None:
        obj["status"]["conditions"] = [{"type": "MemoryPressure", "status": "False"},
                                       {"type": "Ready", "status": "True" if ready else "False"}]
    if unschedulable is not None:
        obj["spec"]["unschedulable"] = unschedulable
    return obj


def test_decode_node_keeps_only_what_counts() -> None:
    assert decode_node(json.dumps(node_json("a", "3920m", rv="7")).encode()) == NodeInfo(
        "a", "7", False, True, "3920m")
    assert decode_node(json.dumps(node_json("b", None, ready=None, unschedulable=True))
                       .encode()) == NodeInfo("b", "1", True, False, None)
    assert decode_node(b'{"metadata":{"name":"c"}}') == NodeInfo("c", "", False, False, None)
    tainted = node_json("d")
    tainted["spec"]["taints"] = [{"key": "virtual-kubelet.io/provider", "effect": "NoSchedule"},
                                 {"key": "x", "value": "y", "effect": "NoExecute"}]
    assert decode_node(json.dumps(tainted).encode()).taints == (
        "virtual-kubelet.io/provider", "x")


def test_decode_bookmark_and_list_page() -> None:
    assert decode_bookmark(b'{"metadata":{"resourceVersion":"9"}}') == ("9", False)
    end = b'{"metadata":{"resourceVersion":"9","annotations":{"k8s.io/initial-events-end":"true"}}}'
    assert decode_bookmark(end) == ("9", True)
    page = decode_list_page(json.dumps({"metadata": {"resourceVersion": "5", "continue": "t"},
                                        "items": [node_json("a")]}).encode())
    assert page.resource_version == "5" and page.continue_token == "t"
    assert [n.name for n in page.items] == ["a"]


# --- the counting policy (opt-in) -------------------------------------------------------


def test_policy_excludes_tainted_nodes_and_caps_cores() -> None:
    from cpa.nodes.counts import CountingPolicy

    store = NodeStore()
    store.upsert(NodeInfo("virtual", "1", False, True, "20000",
                          ("virtual-kubelet.io/provider",)))
    store.upsert(NodeInfo("big", "1", False, True, "96", ("dedicated",)))
    for i in range(3):
        store.upsert(info(f"n{i}", "8"))
    assert store.counts().total_cores == 20000 + 96 + 24  # upstream counts everything
    assert store.set_policy(CountingPolicy(frozenset({"virtual-kubelet.io/provider"}), 64_000))
    counts = store.counts()
    assert (counts.total_nodes, counts.total_cores) == (4, 64 + 24)
    assert (counts.schedulable_nodes, counts.schedulable_cores) == (4, 88)
    assert (counts.excluded_nodes, counts.capped_nodes) == (1, 1)
    # Changes under the policy keep the totals right; so does a relist.
    store.upsert(NodeInfo("virtual2", "1", False, True, "20000",
                          ("x", "virtual-kubelet.io/provider")))
    store.delete("big")
    store.upsert(info("n0", "8", ready=False))
    counts = store.counts()
    assert (counts.total_nodes, counts.total_cores, counts.schedulable_nodes) == (3, 24, 2)
    assert (counts.excluded_nodes, counts.capped_nodes) == (2, 0)
    assert store.set_policy(CountingPolicy()) is True  # back to upstream's counting
    assert store.set_policy(CountingPolicy()) is False
    counts = store.counts()
    assert (counts.total_nodes, counts.total_cores) == (5, 40024)
    assert (counts.excluded_nodes, counts.capped_nodes) == (0, 0)


def test_taint_sets_are_shared() -> None:
    store = NodeStore()
    for i in range(3):
        store.upsert(NodeInfo(f"v{i}", "1", False, True, "4", ("a", "b")))
    records = [store.get(f"v{i}") for i in range(3)]
    assert len({id(r.taints) for r in records if r is not None}) == 1


def counted_millicores(node: NodeInfo, policy: Any) -> int | Fraction:
    """The cpu a Node counts for: its capacity (a Fraction where it is not whole
    millicores), capped by the policy's maxCoresPerNode."""
    from cpa.go.quantity import cpu_millicores

    milli = cpu_millicores(node.cpu) if node.cpu else 0
    if policy.max_millicores_per_node is not None:
        milli = min(milli, policy.max_millicores_per_node)
    return milli


def _recount(nodes: dict[str, NodeInfo], policy: Any
             ) -> tuple[int, int, int, int, int | None, int | None]:
    """A plain recomputation from scratch, sharing nothing with the store's bookkeeping."""
    import math

    total_n = sched_n = 0
    total_m: Any = 0
    sched_m: Any = 0
    zones: set[str] = set()
    sched_zones: set[str] = set()
    for node in nodes.values():
        if set(node.taints) & set(policy.exclude_taints):
            continue
        milli = counted_millicores(node, policy)
        total_n += 1
        total_m += milli
        zones.add(node.label)
        if node.ready and not node.unschedulable:
            sched_n += 1
            sched_m += milli
            sched_zones.add(node.label)
    counted = policy.zone_key is not None
    return (total_n, math.ceil(total_m / 1000), sched_n, math.ceil(sched_m / 1000),
            len(zones) if counted else None, len(sched_zones) if counted else None)


def node_event(store: NodeStore, truth: dict[str, NodeInfo], kind: str, arg: Any) -> None:
    """A watch event, "upsert" (a NodeInfo) or "delete" (a name), given to ``store`` and
    kept in ``truth``: the Nodes a recount reads."""
    if kind == "upsert":
        store.upsert(arg)
        truth[arg.name] = arg
    else:
        assert kind == "delete", kind
        store.delete(arg)
        truth.pop(arg, None)


def test_running_totals_equal_a_recount_under_any_changes() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from cpa.nodes.counts import CountingPolicy

    node = st.builds(NodeInfo, st.sampled_from("abcdefgh"), st.just("1"), st.booleans(),
                     st.booleans(), st.sampled_from([None, "1", "3920m", "96", "250m", "20000"]),
                     st.sampled_from([(), ("vk",), ("x",), ("vk", "x")]),
                     label=st.sampled_from(["", "z1", "z2", "z3"]), labels=st.none(),
                     taint_details=st.just(()))
    policy = st.builds(CountingPolicy, st.sampled_from([frozenset(), frozenset({"vk"})]),
                       st.sampled_from([None, 1000, 64_000]), st.sampled_from([None, "zone"]))
    op = st.one_of(st.tuples(st.just("upsert"), node),
                   st.tuples(st.just("delete"), st.sampled_from("abcdefgh")),
                   st.tuples(st.just("policy"), policy))

    @settings(max_examples=300, deadline=None)
    @given(st.lists(op, max_size=40))
    def check(ops: list[tuple[str, Any]]) -> None:
        store = NodeStore()
        truth: dict[str, NodeInfo] = {}
        for kind, arg in ops:
            if kind == "policy":
                store.set_policy(arg)
                store.labels_listed(store.label_key)  # the labels came with the Nodes
            else:
                node_event(store, truth, kind, arg)
            c = store.counts()
            assert (c.total_nodes, c.total_cores, c.schedulable_nodes, c.schedulable_cores,
                    c.total_zones, c.schedulable_zones) == _recount(truth, store.policy)

    check()


def test_on_change_is_called_for_changes_only() -> None:
    """``--react-to-node-changes`` hangs on ``on_change``: called once per changed record
    (added, changed, deleted, dropped by a relist), never for an event that leaves the
    record as it was - a kubelet's heartbeat, most of a watch's events."""
    store = NodeStore()
    calls: list[int] = []
    store.on_change = lambda: calls.append(len(store))
    store.upsert(info("a", "4"))
    store.upsert(info("b", "4"))
    assert calls == [1, 2]
    store.upsert(info("a", "4"))  # a heartbeat: the same record
    store.delete("never-there")
    store.retain(["a", "b"])
    assert calls == [1, 2]
    store.upsert(info("a", "4", unschedulable=True))  # cordoned
    store.delete("b")
    assert calls == [1, 2, 2, 1]
    store.upsert(info("c", "8"))
    store.retain(["a"])  # a relist without c: one call for the whole relist
    assert calls == [1, 2, 2, 1, 2, 1]
    assert store.counts().total_nodes == 1


# --- zones (opt-in) -----------------------------------------------------------------------


def zoned(name: str, zone: str, ready: bool = True, taints: tuple[str, ...] = ()) -> NodeInfo:
    return NodeInfo(name, "1", False, ready, "4", taints, label=zone)


def test_zones_are_running_totals_of_the_counted_nodes() -> None:
    from cpa.nodes.counts import CountingPolicy

    store = NodeStore()
    relists: list[str] = []
    store.on_label_change = lambda: relists.append(store.label_key)
    for node in (zoned("a1", "a"), zoned("a2", "a"), zoned("b1", "b", ready=False),
                 zoned("c1", "c", taints=("vk",)), zoned("x", "")):
        store.upsert(node)
    assert store.counts().total_zones is None, "no zone counted by default"
    policy = CountingPolicy(frozenset({"vk"}), zone_key="topology.kubernetes.io/zone")
    assert store.set_policy(policy)
    assert relists == ["topology.kubernetes.io/zone"], "the records lack the label: relist"
    assert store.counts().total_zones is None, "not countable before the relist is done"
    store.labels_listed("topology.kubernetes.io/zone")
    assert store.set_policy(policy) is True, "the zones became countable since"
    assert store.set_policy(policy) is False and relists == ["topology.kubernetes.io/zone"]
    c = store.counts()
    # a, b and "" (the Node without the label); c is excluded by its taint
    assert (c.total_zones, c.schedulable_zones) == (3, 2)
    store.delete("x")
    store.upsert(zoned("b1", "b"))
    store.upsert(zoned("a1", "d"))
    c = store.counts()
    assert (c.total_zones, c.schedulable_zones) == (3, 3)  # a, b, d
    store.delete("a2")
    assert store.counts().total_zones == 2
    assert store.set_policy(CountingPolicy()) is True
    assert store.counts().total_zones is None
    assert store.label_key == ""


def test_a_poll_waits_for_the_relist_a_new_label_needs() -> None:
    import threading

    from cpa.nodes.counts import CountingPolicy

    store = NodeStore()
    store.upsert(zoned("a1", ""))

    def relist() -> None:  # what the reflector does, from its own thread
        def run() -> None:
            store.upsert(zoned("a1", "a"))
            store.labels_listed(store.label_key)
        threading.Timer(0.05, run).start()
    store.on_label_change = relist
    assert store.set_policy(CountingPolicy(zone_key="zone"), wait=10.0)
    c = store.counts()
    assert (c.total_zones, c.schedulable_zones) == (1, 1)
    assert store.get("a1") == NodeRecord(False, True, 4000, frozenset(), "a")
