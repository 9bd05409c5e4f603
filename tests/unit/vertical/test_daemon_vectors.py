"""The ``/cpvpa`` daemon's poll loop against CPVA's own ``pollAPIServer``, step by step.

``fixtures/cpva_vectors.json`` holds 300 poll sequences recorded from CPVA v0.8.9's code
(cluster sizes, config files written as new files, rewritten in place, deleted, failing
Node lists and PATCHes) with what CPVA sent at each step. Here they drive the daemon's own
pieces -- :class:`VerticalAutoscaler`, :class:`ConfigFile` over real files in a temporary
directory (so the inode rule is the file system's), :class:`TemplateWriter` over a fake
API -- and every PATCH must be CPVA's, byte for byte but for the order of the containers
(Go's map order is random; the recording sorted them by name).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from cpa.kube.api import ApiError
from cpa.vertical.daemon.configfile import ConfigFile
from cpa.vertical.daemon.cpvpa_loop import VerticalAutoscaler, VerticalLoopConfig
from cpa.vertical.daemon.target import TargetLoop
from cpa.vertical.daemon.writer import STRATEGIC_MERGE, TemplateWriter
from cpa.vertical.decide.cpva_config import decode_config
from cpa.vertical.decide.patch import PatchTarget
from cpa.vertical.decide.state import InvalidConfigPolicy, VerticalState
from tests.unit.vertical.test_vectors import check_all, vectors


class RecordingApi:
    """PATCHes recorded (or failed on demand); GET refused, as CPVA's RBAC refuses it."""

    def __init__(self) -> None:
        self.patches: list[tuple[str, str, str]] = []
        self.fail = False

    def get_json(self, path: str, query: Any = None, *,
                 deadline: float | None = None) -> dict[str, Any]:
        raise ApiError(403, "Forbidden", f"cannot get {path}")

    def send_json(self, method: str, path: str, body: Any, *,
                  deadline: float | None = None) -> dict[str, Any]:
        raise AssertionError("the writer sends raw strategic-merge bytes")

    def send_raw(self, method: str, path: str, data: bytes, content_type: str, *,
                 deadline: float | None = None) -> dict[str, Any]:
        assert method == "PATCH"
        self.patches.append((path, data.decode(), content_type))
        if self.fail:
            raise ApiError(500, "InternalError", "the oracle's patch failure")
        return {}


def sorted_containers(body: str) -> Any:
    doc = json.loads(body)
    doc["spec"]["template"]["spec"]["containers"].sort(key=lambda c: c["name"])
    return doc


class Files:
    """The config file, changed on disk as the oracle changed it.

    A file that is replaced or deleted is moved aside rather than freed: a file system
    may give a freed inode number to the next new file, which ``SameFile`` (CPVA's) and
    ``ConfigFile`` (ours) would then take for the old file. The oracle's files were all
    distinct, and so is a kubelet's ConfigMap update (the new directory is written before
    the old one goes)."""

    def __init__(self, root: Path) -> None:
        self.path = root / "config"
        self.aside = root / "aside"
        self.aside.mkdir()
        self._n = 0

    def _move_aside(self) -> None:
        if self.path.exists():
            self._n += 1
            os.link(self.path, self.aside / str(self._n))

    def apply(self, step: dict[str, Any]) -> None:
        if "write" in step:  # a new file: a new inode, as a ConfigMap update
            self._move_aside()
            self._n += 1
            tmp = self.path.with_name(f"config.{self._n}")
            tmp.write_text(step["write"])
            os.replace(tmp, self.path)
        elif "inplace" in step:  # the same inode (a new one only if there was none)
            with open(self.path, "w") as f:
                f.write(step["inplace"])
        elif step.get("delete"):
            self._move_aside()
            self.path.unlink(missing_ok=True)


def run_case(case: dict[str, Any], root: Path) -> None:
    default = decode_config(case["default"]) if case["default"] else None
    files = Files(root)
    api = RecordingApi()
    target = PatchTarget(case["kind"], "target")
    writer = TemplateWriter(api, "ns", target)
    step_counts: list[tuple[int, int] | None] = [None]

    def counts() -> tuple[int, int]:
        current = step_counts[0]
        if current is None:
            raise ApiError(500, "InternalError", "the oracle's list failure")
        return current

    loop = VerticalAutoscaler(
        VerticalLoopConfig(), counts, ConfigFile(str(files.path) if case["file"] else ""),
        [TargetLoop(VerticalState(default, InvalidConfigPolicy.KEEP_PREVIOUS), writer)])
    for i, (step, result) in enumerate(zip(case["steps"], case["results"], strict=True)):
        files.apply(step)
        step_counts[0] = None if step.get("list_error") else (step["nodes"], step["cores"])
        api.fail = bool(step.get("patch_error"))
        before = len(api.patches)
        polled = loop.poll_once()
        sent = api.patches[before:]
        if "panic" in result:  # CPVA dies here; we fail the poll and write nothing
            assert sent == [] and polled.error and "milli-units" in polled.error, (
                f"step {i}: {polled.error}")
            return
        assert bool(sent) == result["tried"], f"step {i}: wrote {sent}, CPVA {result}"
        if sent:
            [(path, body, content_type)] = sent
            assert content_type == STRATEGIC_MERGE
            assert path == f"/apis/apps/v1/namespaces/ns/{case['kind'].lower()}s/target"
            assert sorted_containers(body) == sorted_containers(result["patch"]), (
                f"step {i}: {body} != {result['patch']}")
            assert (polled.error is None) == (not step.get("patch_error")), (
                f"step {i}: {polled.error}")


def test_the_daemons_polls_write_what_cpva_writes(tmp_path: Path) -> None:
    cases = [c for c in vectors()["polls"] if "startup_error" not in c]
    assert len(cases) >= 200
    counter = iter(range(len(cases)))

    def check(case: dict[str, Any]) -> None:
        root = tmp_path / f"case-{next(counter)}"
        root.mkdir()
        run_case(case, root)

    check_all(cases, check)
