"""``python -m bench.placement``: what ``targetPlacement`` costs at 65,000 Nodes, in process.

The question the issue asks: an unchanged placement must keep the poll O(1) in the Nodes,
a changed one costs one pass over them. So this measures, on a node store filled with
GKE-sized Nodes (``bench/nodes.py``'s labels and taints, decoded by the daemon's decoder
with every label, or without as the default path decodes them):

* CPU per poll (``time.process_time`` over ``--polls`` calls of ``Autoscaler.poll_once``
  against the in-memory API of ``tests/fakes.py``, so the figure is the poll's own code,
  not HTTP): without the key, and with it (its placement unchanged between polls);
* one changed placement (a rollout's new nodeSelector): the one pass over the Nodes;
* one changed Node (a watch event that changes its record), with no placement and one;
* the store's memory (tracemalloc) with the records as the default path keeps them and
  with every label and taint, the price of the key.

The medians of ``--rounds`` are reported; the machine's load average goes with them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from bench.nodes import node_object
from cpa.horizontal.cpa_flags import parse_args
from cpa.horizontal.daemon.cpa_loop import Autoscaler
from cpa.horizontal.daemon.cpa_main import loop_config
from cpa.nodes.jsondecode import decode_node
from cpa.nodes.placement import Placement
from cpa.nodes.records import ALL_LABELS, NodeInfo
from cpa.nodes.store import NodeStore
from tests.fakes import FakeApi

NS = "kube-system"
DEPLOY = f"/apis/apps/v1/namespaces/{NS}/deployments/coredns"
CM = f"/api/v1/namespaces/{NS}/configmaps/kube-dns-autoscaler"
PARAMS = {"coresPerReplica": 256, "nodesPerReplica": 16, "preventSinglePointFailure": True}


def nodes(n: int, label: str) -> list[NodeInfo]:
    out = []
    for i in range(n):
        obj = node_object(i)
        if i % 10 == 0:  # a tainted pool, a tenth of the Nodes
            obj["spec"].setdefault("taints", []).append(
                {"key": "dedicated", "value": "batch", "effect": "NoSchedule"})
        out.append(decode_node(json.dumps(obj).encode(), label))
    return out


def filled(infos: list[NodeInfo], placement: bool) -> NodeStore:
    store = NodeStore()
    if placement:
        store.set_placements([])
    for info in infos:
        store.upsert(info)
    store.labels_listed(ALL_LABELS if placement else "")
    return store


def cpu(fn: Callable[[], object], times: int) -> float:
    """CPU microseconds per call."""
    start = time.process_time()
    for _ in range(times):
        fn()
    return (time.process_time() - start) / times * 1e6


def poll_cost(store: NodeStore, key: bool, polls: int) -> float:
    api = FakeApi()
    api.put(DEPLOY, {"kind": "Deployment", "spec": {"replicas": 1, "template": {"spec": {
        "nodeSelector": {"cloud.google.com/gke-nodepool": "bench-pool"},
        "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}]}}}})
    api.add_scale(DEPLOY + "/scale", 1)
    api.set_configmap(CM, {"linear": json.dumps({**PARAMS, "targetPlacement": key})})
    opts = parse_args([f"--namespace={NS}", "--configmap=kube-dns-autoscaler",
                       "--target=deployment/coredns"], {})
    loop = Autoscaler(loop_config(opts), api, store.counts, count_by=store.set_policy,
                      placements=store)
    for _ in range(3):  # the first polls parse, make the placement's pass and write
        result = loop.poll_once()
        assert result.error is None, result.error
    return cpu(loop.poll_once, polls)


def _flip(store: NodeStore, changed: NodeInfo, back: NodeInfo) -> Callable[[], None]:
    """Two watch events that change one Node's record, and change it back."""
    def flip() -> None:
        store.upsert(changed)
        store.upsert(back)
    return flip


def measure(n: int, polls: int, rounds: int) -> dict[str, Any]:
    plain_infos = nodes(n, "")
    labelled = nodes(n, ALL_LABELS)
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    plain = filled(plain_infos, False)
    plain_bytes = tracemalloc.get_traced_memory()[0] - base
    base = tracemalloc.get_traced_memory()[0]
    placed = filled(labelled, True)
    placed_bytes = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()

    without, with_key, passes, event0, event1 = [], [], [], [], []
    moved = labelled[5]._replace(ready=not labelled[5].ready)
    for r in range(rounds):
        without.append(poll_cost(plain, False, polls))
        with_key.append(poll_cost(placed, True, polls))
        p = Placement(((f"round-{r}", "x"),))
        start = time.process_time()
        placed.set_placements([*placed.placements, p])
        passes.append((time.process_time() - start) * 1e3)
        placed.set_placements([q for q in placed.placements if q != p])
        event0.append(cpu(_flip(plain, moved._replace(labels=None, taint_details=()),
                                plain_infos[5]), 2000) / 2)
        event1.append(cpu(_flip(placed, moved, labelled[5]), 2000) / 2)
    return {
        "nodes": n, "polls": polls, "rounds": rounds, "loadavg": os.getloadavg(),
        "poll_cpu_us_without_key": statistics.median(without),
        "poll_cpu_us_with_key_unchanged": statistics.median(with_key),
        "changed_placement_pass_ms": statistics.median(passes),
        "changed_node_event_us_no_placement": statistics.median(event0),
        "changed_node_event_us_one_placement": statistics.median(event1),
        "store_mib_default": plain_bytes / 2**20,
        "store_mib_every_label": placed_bytes / 2**20,
    }


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.placement")
    ap.add_argument("--nodes", type=int, default=65_000)
    ap.add_argument("--polls", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    print(json.dumps(measure(args.nodes, args.polls, args.rounds), indent=2))


if __name__ == "__main__":
    main()
