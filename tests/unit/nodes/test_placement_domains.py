"""``capToPlaceable`` on the node side: which required pod anti-affinity terms select the
template's own Pods (and so allow one per topology domain), how many domains a placement
reaches among the schedulable Nodes, and the store's answer kept until a Node changes."""

from __future__ import annotations

from typing import Any

import pytest

from cpa.nodes.counts import CountingPolicy
from cpa.nodes.placement import (
    EVERYWHERE,
    Domains,
    Placement,
    count_domains,
    self_anti_affinity_keys,
)
from cpa.nodes.records import ALL_LABELS, NodeInfo
from cpa.nodes.store import NodeStore

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
DNS = {"k8s-app": "kube-dns"}


def template(*terms: dict[str, Any], labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"labels": DNS if labels is None else labels},
            "spec": {"affinity": {"podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}}}


def term(key: str = HOST, selector: dict[str, Any] | None = None, **extra: Any
         ) -> dict[str, Any]:
    chosen = {"matchLabels": DNS} if selector is None else selector
    return {"labelSelector": chosen, "topologyKey": key, **extra}


@pytest.mark.parametrize(("tmpl", "keys"), [
    (template(term()), (HOST,)),
    (template(term(ZONE)), (ZONE,)),
    (template(term(), term(ZONE)), (HOST, ZONE)),
    (template(term(), term()), (HOST,)),
    # the selector by expressions
    (template(term(selector={"matchExpressions": [
        {"key": "k8s-app", "operator": "In", "values": ["kube-dns"]}]})), (HOST,)),
    (template(term(selector={"matchExpressions": [
        {"key": "k8s-app", "operator": "Exists"}]})), (HOST,)),
    (template(term(selector={"matchExpressions": [
        {"key": "k8s-app", "operator": "NotIn", "values": ["kube-dns"]}]})), ()),
    (template(term(selector={"matchExpressions": [
        {"key": "k8s-app", "operator": "Bogus"}]})), ()),
    # an empty selector selects every Pod, ours too; a missing one selects none
    (template(term(selector={})), (HOST,)),
    (template({"topologyKey": HOST}), ()),
    # another app's Pods: no limit on ours
    (template(term(selector={"matchLabels": {"k8s-app": "other"}})), ()),
    (template(term(key="")), ()),
    # namespaces: ours (none listed), listed, every one ({}), or others only
    (template(term(namespaces=["kube-system"])), (HOST,)),
    (template(term(namespaces=["default"])), ()),
    (template(term(namespaceSelector={})), (HOST,)),
    (template(term(namespaceSelector={"matchLabels": {"team": "a"}})), ()),
    # mismatchLabelKeys on a label the Pods carry: none of theirs is selected
    (template(term(mismatchLabelKeys=["k8s-app"])), ()),
    (template(term(mismatchLabelKeys=["absent"])), (HOST,)),
    (template(term(matchLabelKeys=["pod-template-hash"])), (HOST,)),
    # no anti-affinity at all, or only a preferred one
    ({"metadata": {"labels": DNS}, "spec": {}}, ()),
    ({"metadata": {"labels": DNS}, "spec": {"affinity": {"podAntiAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "podAffinityTerm": term()}]}}}}, ()),
    ({}, ()),
])
def test_self_anti_affinity_keys(tmpl: dict[str, Any], keys: tuple[str, ...]) -> None:
    assert self_anti_affinity_keys(tmpl, "kube-system") == keys


def node(name: str, zone: str | None = None, pool: str = "core",
         taints: tuple[tuple[str, str, str], ...] = ()
         ) -> tuple[str, dict[str, str], tuple[tuple[str, str, str], ...]]:
    labels = {HOST: name, "pool": pool}
    if zone is not None:
        labels[ZONE] = zone
    return name, labels, taints


GPU = ("gpu", "", "NoSchedule")


@pytest.mark.parametrize(("placement", "key", "nodes", "domains"), [
    (EVERYWHERE, HOST, [node("a"), node("b"), node("c")], Domains(3)),
    (EVERYWHERE, ZONE, [node("a", "z1"), node("b", "z1"), node("c", "z2")], Domains(2)),
    # a Node without the key: the anti-affinity cannot hold a Pod off it
    (EVERYWHERE, ZONE, [node("a", "z1"), node("b")], Domains(1, 1)),
    # the placement's rules: a tainted Node, another pool
    (EVERYWHERE, HOST, [node("a"), node("g", taints=(GPU,))], Domains(1)),
    (Placement((("pool", "core"),)), HOST, [node("a"), node("b", pool="gpu")], Domains(1)),
    (EVERYWHERE, HOST, [], Domains(0)),
])
def test_count_domains(placement: Placement, key: str, nodes: list[Any],
                       domains: Domains) -> None:
    found = count_domains(placement, key, nodes)
    assert found == domains
    assert found.bounded is (domains.unlabelled == 0)


def info(name: str, zone: str, ready: bool = True, unschedulable: bool = False,
         taints: tuple[tuple[str, str, str], ...] = ()) -> NodeInfo:
    labels = tuple(sorted({HOST: name, ZONE: zone}.items()))
    return NodeInfo(name, "1", unschedulable, ready, "4", tuple(t[0] for t in taints),
                    labels=labels, taint_details=taints)


def test_the_store_counts_schedulable_nodes_whatever_the_counting_policy() -> None:
    store = NodeStore()
    assert store.domains(EVERYWHERE, HOST) is None, "not asked for"
    store.set_placements([EVERYWHERE])
    for n in (info("a", "z1"), info("b", "z1"), info("c", "z2"),
              info("down", "z3", ready=False), info("cordoned", "z3", unschedulable=True),
              info("spot", "z4", taints=(("spot", "", "PreferNoSchedule"),))):
        store.upsert(n)
    assert store.domains(EVERYWHERE, HOST) is None, "no list with every label yet"
    store.labels_listed(ALL_LABELS)
    # excludeNodesWithTaints leaves a Node out of the count, not out of the scheduler's reach
    store.set_policy(CountingPolicy(exclude_taints=frozenset({"spot"})))
    assert store.domains(EVERYWHERE, HOST) == Domains(4)
    assert store.domains(EVERYWHERE, ZONE) == Domains(3)
    first = store.domains(EVERYWHERE, HOST)
    assert store.domains(EVERYWHERE, HOST) is first, "kept while no Node changed"
    store.upsert(info("down", "z3"))  # Ready again
    assert store.domains(EVERYWHERE, HOST) == Domains(5)
    store.delete("a")
    assert store.domains(EVERYWHERE, HOST) == Domains(4)
    store.set_placements([])
    assert store.domains(EVERYWHERE, HOST) is None
