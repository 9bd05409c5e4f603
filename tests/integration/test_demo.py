"""`make demo`'s whole story, as a newcomer reads it: each step shows the ConfigMap data in
effect when it was written, the writes the autoscaler made during the step and why, and
the last step's write lands when its cordoning is complete (the same counts every run).

tests/integration/test_make_env.py runs the demo's first step through `make`; this runs
all of them with this environment's interpreter."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.controlplane import ensure_binaries

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def _steps(out: str) -> dict[str, str]:
    """Each banner's title and the text under it."""
    parts = re.split(r"^=== (.*)$", out, flags=re.M)
    return {title: body for title, body in zip(parts[1::2], parts[2::2], strict=True)}


def test_the_demo_tells_its_story_truthfully() -> None:
    env = dict(os.environ, CPA_CONTROLPLANE_BIN=str(ensure_binaries()))
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "demo.py")],
                          capture_output=True, text=True, timeout=300, check=False, env=env,
                          cwd=REPO)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    steps = _steps(proc.stdout)
    first, second, third, fourth = (next(body for title, body in steps.items()
                                          if title.startswith(f"step {n}:"))
                                    for n in range(1, 5))
    # The data the autoscaler created, and the data the demo wrote, printed when written.
    assert "created by the autoscaler from its --default-params" in first
    assert re.search(r'^    linear: \{"coresPerReplica":256,"includeUnschedulableNodes":true',
                     first, re.M)
    assert "written by the demo; no includeUnschedulableNodes" in third
    assert re.search(r'^    ladder: \{"coresToReplicas"', third, re.M)
    assert "ConfigMap is unchanged" in second and "ConfigMap is unchanged" in fourth
    for body, replicas in ((first, 2), (second, 6), (third, 5), (fourth, 3)):
        assert "  why: " in body
        assert f"wrote spec.replicas = {replicas} to deployment/coredns" in body
        writes = re.findall(r"^  scale\.changed (\d+) -> (\d+)", body, re.M)
        assert writes and int(writes[-1][1]) == replicas, body
    # Only the last cordon crosses the ladder's step: one write, with the final counts.
    assert re.findall(r"^  scale\.changed .*$", fourth, re.M) == [
        "  scale.changed 5 -> 3 (ladder, 15 nodes, 480 cores counted)"]
    log = next(body for title, body in steps.items() if title.startswith("what the"))
    assert [line.strip() for line in log.splitlines() if " -> " in line][-1] == \
        "5 -> 3 (ladder, 15 nodes, 480 cores)"
