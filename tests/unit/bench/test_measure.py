"""bench.measure.PlaneMemory: the API server's memory over a window, from this process's
own RSS and a scripted /metrics."""

from __future__ import annotations

import os
import time

from bench.measure import PlaneMemory


def test_a_window_has_the_heap_before_at_most_and_median_and_the_rss_rise() -> None:
    heaps = iter([100, 300, 200, 500] + [50] * 100)  # MiB, one per /metrics GET

    def metrics() -> str:
        return ("# TYPE go_memstats_heap_inuse_bytes gauge\n"
                f"go_memstats_heap_inuse_bytes {next(heaps) * 2**20:.6e}\n"
                "go_memstats_heap_inuse_bytes_other 1\n")

    memory = PlaneMemory(os.getpid(), metrics, rss_interval=0.01, heap_interval=0.05)
    try:
        time.sleep(0.03)
        t0 = time.monotonic()
        time.sleep(0.03)
        while len(memory.heap) < 4:
            time.sleep(0.01)
        t1 = memory.heap[3][0]
    finally:
        memory.stop()
    before = [b for t, b in memory.heap if t < t0]
    within = [b >> 20 for t, b in memory.heap if t0 <= t <= t1]
    window = memory.window(t0, t1)
    assert window["heap_inuse_before_mib"] == before[-1] >> 20
    assert window["heap_inuse_max_mib"] == max(within)
    assert window["heap_inuse_max_mib"] == 500
    assert window["rss_max_mib"] is not None and window["rss_max_mib"] > 1
    assert window["rss_rise_mib"] is not None and window["rss_rise_mib"] >= 0


def test_a_metrics_failure_skips_the_sample() -> None:
    calls = [0]

    def metrics() -> str:
        calls[0] += 1
        if calls[0] == 1:
            raise ConnectionError("the API server is busy")
        return "go_memstats_heap_inuse_bytes 1048576\n"

    memory = PlaneMemory(os.getpid(), metrics, rss_interval=0.01, heap_interval=0.01)
    try:
        while calls[0] < 3:
            time.sleep(0.01)
    finally:
        memory.stop()
    assert memory.heap and all(b == 1 << 20 for _, b in memory.heap)
    assert len(memory.heap) < calls[0]
