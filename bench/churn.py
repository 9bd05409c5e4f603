"""Node churn as a large cluster has it, forever: kubelets' status updates plus a few flips.

Why: kubelets post Node status on every change and at least every 5 minutes, so a cluster
of N nodes sends ~N/300 Node updates a second through every Node watch, each a whole
~9 KB object to decode. What an autoscaler costs between its polls is this, not the polls.

The generator (:class:`Churn`) sends, at ``rate`` per second for ``seconds``, on a fixed
schedule (update k is due at start + k/rate) from a pool of threads:

* status heartbeats (strategic merge patch of ``nodes/NAME/status``): every condition's
  ``lastHeartbeatTime`` moves on; every 5th also replaces ``status.images`` with a newer
  build of one app image (a deploy);
* one update in 50 is a flip, each of a node that no other update of the window flips:
  a label set, a taint added, a cordon toggled, or Ready toggled (NotReady<->Ready).

Cordon and Ready flips change the counts; the harness's expected states are updated, so
the autoscaler's counts at the end can be checked. :meth:`Churn.revert` undoes the flips.
Whether the generator kept up is measured (achieved rate, lag behind the schedule), not
assumed: a local API server on 2 shared cores may not absorb N/300 at 65,000 nodes.
"""

from __future__ import annotations

import random
import statistics
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from bench import nodes

SMP = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"
CHURN_LABEL = "bench.example.com/churn"
CHURN_TAINT = {"key": "bench.example.com/churn", "effect": "PreferNoSchedule"}
FLIP_EVERY = 50  # one update in 50 is a flip
IMAGES_EVERY = 5  # one heartbeat in 5 also changes the images
FLIP_KINDS = ("label", "taint", "cordon", "ready")


def default_rate(n: int) -> float:
    """Kubelets post status at least every 5 minutes: N/300 updates a second."""
    return n / 300.0


@dataclass
class Flip:
    kind: str
    index: int  # the node's index (bench.nodes.node_name)


@dataclass
class ChurnResult:
    planned: int = 0
    done: int = 0
    errors: int = 0
    flips: dict[str, int] = field(default_factory=dict)
    lags: list[float] = field(default_factory=list)  # start - due, seconds
    latencies: list[float] = field(default_factory=list)
    started: float = 0.0
    ended: float = 0.0

    def summary(self, rate: float, seconds: float) -> dict[str, Any]:
        wall = max(1e-9, self.ended - self.started)
        lags = sorted(self.lags) or [0.0]
        lat = sorted(self.latencies) or [0.0]
        achieved = self.done / wall
        return {
            "churn_target_updates_per_second": round(rate, 1),
            "churn_updates_per_second": round(achieved, 1),
            "churn_seconds": round(wall, 1),
            "churn_updates": self.done,
            "churn_errors": self.errors,
            "churn_flips": self.flips,
            "churn_lag_p99_seconds": round(lags[int(0.99 * (len(lags) - 1))], 3),
            "churn_lag_max_seconds": round(lags[-1], 3),
            "churn_latency_p50_ms": round(statistics.median(lat) * 1000, 1),
            "churn_latency_p99_ms": round(lat[int(0.99 * (len(lat) - 1))] * 1000, 1),
            # Kept up: every planned update was sent and none started a second late.
            "churn_generator_kept_up": (self.done == self.planned and lags[-1] < 1.0
                                        and achieved >= 0.95 * rate),
        }


class Churn:
    """One churn window over the benchmark nodes 0..n-1 (see the module docstring)."""

    def __init__(self, writer: nodes.NodeWriter, states: dict[str, nodes.NodeState], n: int,
                 rate: float, seconds: float, seed: int = 1) -> None:
        self.writer = writer
        self.states = states
        self.n = n
        self.rate = rate
        self.seconds = seconds
        self.total = int(rate * seconds)
        rng = random.Random(seed * 1_000_003 + n)
        n_flips = self.total // FLIP_EVERY
        flip_nodes = rng.sample(range(n), min(n, n_flips))
        self.flips = {k: Flip(FLIP_KINDS[j % len(FLIP_KINDS)], idx)
                      for j, (k, idx) in enumerate(zip(range(FLIP_EVERY - 1, self.total,
                                                             FLIP_EVERY), flip_nodes,
                                                       strict=False))}
        flipped = {f.index for f in self.flips.values()}
        beat_nodes = [i for i in range(n) if i not in flipped]
        self.beats = [beat_nodes[rng.randrange(len(beat_nodes))] for _ in range(self.total)]
        self.generation = 0
        self.applied: list[Flip] = []
        self._lock = threading.Lock()

    # --- the updates ---------------------------------------------------------------
    def _heartbeat(self, k: int, i: int) -> None:
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        status: dict[str, Any] = {"conditions": [{"type": t, "lastHeartbeatTime": now}
                                                 for t in nodes.CONDITION_TYPES]}
        if k % IMAGES_EVERY == 0:
            status["images"] = nodes.node_images(i, 1 + k // IMAGES_EVERY)
        self.writer.patch(f"/api/v1/nodes/{nodes.node_name(i)}/status", {"status": status}, SMP)

    def _flip(self, flip: Flip, on: bool) -> None:
        name = nodes.node_name(flip.index)
        state = self.states[name]
        if flip.kind == "label":
            self.writer.patch(f"/api/v1/nodes/{name}", {"metadata": {"labels": {
                CHURN_LABEL: "flipped" if on else None}}}, MERGE)
        elif flip.kind == "taint":
            taints = nodes.base_taints(flip.index) + ([CHURN_TAINT] if on else [])
            self.writer.patch(f"/api/v1/nodes/{name}", {"spec": {"taints": taints}}, MERGE)
        elif flip.kind == "cordon":
            cordoned = nodes.is_cordoned(flip.index) != on
            self.writer.patch(f"/api/v1/nodes/{name}", {"spec": {"unschedulable": cordoned}},
                              MERGE)
            with self._lock:
                self.states[name] = nodes.NodeState(state.millicores, cordoned, state.ready)
        else:  # ready
            ready = (not nodes.is_not_ready(flip.index)) != on
            now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            cond = {"type": "Ready", "status": "True" if ready else "False",
                    "reason": "KubeletReady" if ready else "KubeletNotReady",
                    "lastHeartbeatTime": now, "lastTransitionTime": now}
            self.writer.patch(f"/api/v1/nodes/{name}/status",
                              {"status": {"conditions": [cond]}}, SMP)
            with self._lock:
                self.states[name] = nodes.NodeState(state.millicores, state.unschedulable,
                                                    ready)

    # --- the window ----------------------------------------------------------------
    def run(self) -> ChurnResult:
        """Send the window's updates on schedule; returns when all have been answered."""
        result = ChurnResult(planned=self.total, flips={k: 0 for k in FLIP_KINDS})

        def one(k: int, due: float) -> None:
            start = time.monotonic()
            try:
                flip = self.flips.get(k)
                if flip is not None:
                    self._flip(flip, True)
                else:
                    self._heartbeat(k, self.beats[k])
            except Exception:  # counted; the window goes on
                with self._lock:
                    result.errors += 1
                return
            end = time.monotonic()
            with self._lock:
                result.done += 1
                result.lags.append(start - due)
                result.latencies.append(end - start)
                if flip is not None:
                    result.flips[flip.kind] += 1
                    self.applied.append(flip)
                result.ended = max(result.ended, end)

        threads = max(4, min(32, int(self.rate / 10) + 4))
        with ThreadPoolExecutor(threads, thread_name_prefix="churn") as pool:
            result.started = t0 = time.monotonic()
            for k in range(self.total):
                due = t0 + k / self.rate
                delay = due - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                pool.submit(one, k, due)
        return result

    def revert(self, progress: Callable[[str], None] | None = None) -> None:
        """Undo the flips (labels, taints, cordons, Ready) so the nodes are as created."""
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda f: self._flip(f, False), self.applied))
        if progress:
            progress(f"  reverted {len(self.applied)} flips")
        self.applied = []
