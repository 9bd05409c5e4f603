"""The churn generator's plan and bookkeeping, and reading upstream's logged counts (no
control plane: a recording writer stands for the API server)."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

from bench import churn, nodes
from bench.run import upstream_counts
from cpa.nodes.counts import ClusterCounts


class RecordingWriter:
    """Records each PATCH as (path, body, content type)."""

    def __init__(self) -> None:
        self.patches: list[tuple[str, dict[str, Any], str]] = []
        self.lock = threading.Lock()

    def patch(self, path: str, body: dict[str, Any], ctype: str) -> None:
        with self.lock:
            self.patches.append((path, body, ctype))


def window(n: int = 400, rate: float = 200.0, seconds: float = 1.0
           ) -> tuple[churn.Churn, RecordingWriter, dict[str, nodes.NodeState]]:
    writer = RecordingWriter()
    states = {nodes.node_name(i): nodes.node_state(i) for i in range(n)}
    return churn.Churn(writer, states, n, rate, seconds), writer, states  # type: ignore[arg-type]


def test_plan_flips_distinct_nodes_that_no_heartbeat_touches() -> None:
    w, _, _ = window(n=1000, rate=500.0, seconds=2.0)
    assert w.total == 1000 and len(w.flips) == 1000 // churn.FLIP_EVERY
    flipped = [f.index for f in w.flips.values()]
    assert len(set(flipped)) == len(flipped)
    assert Counter(f.kind for f in w.flips.values()) == {k: 5 for k in churn.FLIP_KINDS}
    assert not set(flipped) & set(w.beats)


def test_run_sends_every_update_and_tracks_the_flipped_states() -> None:
    w, writer, states = window()
    before = nodes.counts(states.values())
    result = w.run()
    assert result.done == result.planned == 200 and result.errors == 0
    assert len(writer.patches) == 200
    beats = [p for p in writer.patches if p[0].endswith("/status") and
             len(p[1]["status"]["conditions"]) == len(nodes.CONDITION_TYPES)]
    assert len(beats) == 196 and all(p[2] == churn.SMP for p in beats)
    assert sum("images" in p[1]["status"] for p in beats) >= 30  # 1 in 5
    summary = result.summary(200.0, 1.0)
    assert summary["churn_updates"] == 200 and summary["churn_flips"] == {
        "label": 1, "taint": 1, "cordon": 1, "ready": 1}
    after = nodes.counts(states.values())
    assert after.total_nodes == before.total_nodes
    assert after.schedulable_nodes != before.schedulable_nodes or \
        after.schedulable_cores != before.schedulable_cores
    w.revert()
    assert nodes.counts(states.values()) == before
    cordon = next(f for f in w.flips.values() if f.kind == "cordon")
    name = nodes.node_name(cordon.index)
    sent = [p[1]["spec"]["unschedulable"] for p in writer.patches
            if p[0] == f"/api/v1/nodes/{name}"]
    assert sent == [not nodes.is_cordoned(cordon.index), nodes.is_cordoned(cordon.index)]


def test_images_change_with_the_generation_only() -> None:
    assert nodes.node_images(5) == nodes.node_object(5)["status"]["images"]
    newer = nodes.node_images(5, 3)
    changed = [a for a, b in zip(nodes.node_images(5), newer, strict=True) if a != b]
    assert len(changed) == 1 and changed[0]["names"][1].endswith("2026.11.28-r3")


def test_upstream_counts_from_its_v4_log() -> None:
    log = ("I1130 22:01:02.1 1 autoscaler_server.go:123] Total nodes    12, schedulable nodes:"
           "    10\nI1130 22:01:02.1 1 autoscaler_server.go:124] Total cores    48, "
           "schedulable cores:    40\n"
           "I1130 22:01:04.1 1 autoscaler_server.go:123] Total nodes 65000, schedulable nodes:"
           " 59801\nI1130 22:01:04.1 1 autoscaler_server.go:124] Total cores 367213, "
           "schedulable cores: 338012\n")
    assert upstream_counts(log) == ClusterCounts(65000, 367213, 59801, 338012)
    assert upstream_counts("nothing yet") is None
