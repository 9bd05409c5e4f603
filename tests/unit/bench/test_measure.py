"""bench.measure: PlaneMemory (the API server's memory over a window, from this process's
own RSS and a scripted /metrics) and the interpreter ours is installed with."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
from ocibuild import debian

from bench.measure import SHIPPED_PYTHON, PlaneMemory, shipped_interpreter


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


def test_ours_is_measured_on_the_interpreter_the_image_ships(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert SHIPPED_PYTHON == debian.PYTHON  # the image's Debian package
    monkeypatch.delenv("CPA_BENCH_PYTHON", raising=False)
    debians = tmp_path / SHIPPED_PYTHON
    debians.write_text("#!/bin/sh\n")
    debians.chmod(0o755)
    path, said = shipped_interpreter((str(tmp_path / "missing"), str(debians)))
    assert path == str(debians) and "the image's interpreter" in said
    path, said = shipped_interpreter((str(tmp_path / "missing"),))
    assert path == sys.executable and "no /usr/bin/python3.11" in said
    monkeypatch.setenv("CPA_BENCH_PYTHON", "/opt/py/bin/python3")
    assert shipped_interpreter((str(debians),))[0] == "/opt/py/bin/python3"
