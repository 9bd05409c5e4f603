"""The ``/cpvpa`` daemon's I/O pieces with fakes: the config file's identity rule, the
template PATCH (body, content type, container order, error hints), the Node counts' probe
(watch, or a list per poll where RBAC refuses the watch)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest

from cpa.kube.api import ApiError
from cpa.vertical.daemon.configfile import ConfigFile
from cpa.vertical.daemon.node_source import NodeCounts
from cpa.vertical.daemon.writer import STRATEGIC_MERGE, TemplateWriter, WriteError
from cpa.vertical.decide.cpva_config import decode_config
from cpa.vertical.decide.formula import compute
from cpa.vertical.decide.patch import PatchTarget
from cpa.vertical.decide.state import UNCHANGED, FileRead

# --- the config file ------------------------------------------------------------------------


def test_a_new_file_is_read_once_and_the_same_inode_never_again(tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text('{"a": {}}')
    file = ConfigFile(str(path))
    assert file.poll() == FileRead(content='{"a": {}}')
    assert file.poll() == UNCHANGED
    path.write_text('{"b": {}}')  # rewritten in place: same inode, as CPVA: not seen
    assert file.poll() == UNCHANGED
    new = tmp_path / "new"
    new.write_text('{"c": {}}')
    os.replace(new, path)  # a new file at the path: seen
    assert file.poll() == FileRead(content='{"c": {}}')


def test_a_configmap_volume_update_is_seen_through_its_symlinks(tmp_path: Path) -> None:
    (tmp_path / "..v1").mkdir()
    (tmp_path / "..v1" / "key").write_text("1")
    (tmp_path / "..data").symlink_to("..v1")
    (tmp_path / "key").symlink_to("..data/key")
    file = ConfigFile(str(tmp_path / "key"))
    assert file.poll().content == "1"
    (tmp_path / "..v2").mkdir()
    (tmp_path / "..v2" / "key").write_text("2")
    (tmp_path / "..tmp").symlink_to("..v2")
    os.replace(tmp_path / "..tmp", tmp_path / "..data")
    assert file.poll().content == "2"


def test_missing_and_unreadable_files(tmp_path: Path) -> None:
    file = ConfigFile(str(tmp_path / "absent"))
    read = file.poll()
    assert read.error is not None and "can't stat file" in read.error
    calls: list[str] = []

    def failing_read(path: str) -> bytes:
        calls.append(path)
        raise PermissionError(13, "Permission denied")

    (tmp_path / "there").write_text("{}")
    file = ConfigFile(str(tmp_path / "there"), read=failing_read)
    first = file.poll()
    assert first.error is not None and "Permission denied" in first.error
    assert file.poll() == UNCHANGED and len(calls) == 1  # CPVA's order: seen, then read


def test_no_file_configured_and_bytes_that_are_not_utf8(tmp_path: Path) -> None:
    assert ConfigFile("").poll() == UNCHANGED
    path = tmp_path / "config"
    path.write_bytes(b'{"c\xff": null}')
    content = ConfigFile(str(path)).poll().content
    assert content is not None
    assert set(decode_config(content) or {}) == {"c\ufffd"}  # Go: U+FFFD per bad byte


# --- the template PATCH ---------------------------------------------------------------------


class PatchApi:
    def __init__(self, get: dict[str, Any] | ApiError, answer: dict[str, Any] | ApiError
                 ) -> None:
        self.get = get
        self.answer = answer
        self.gets: list[str] = []
        self.sent: list[tuple[str, str, bytes, str]] = []

    def get_json(self, path: str, query: Mapping[str, str] | None = None, *,
                 deadline: float | None = None) -> dict[str, Any]:
        self.gets.append(path)
        if isinstance(self.get, ApiError):
            raise self.get
        return self.get

    def send_json(self, method: str, path: str, body: Any, *,
                  deadline: float | None = None) -> dict[str, Any]:
        raise AssertionError("not JSON")

    def send_raw(self, method: str, path: str, data: bytes, content_type: str, *,
                 deadline: float | None = None) -> dict[str, Any]:
        self.sent.append((method, path, data, content_type))
        if isinstance(self.answer, ApiError):
            raise self.answer
        return self.answer


def workload(*names: str) -> dict[str, Any]:
    return {"spec": {"template": {"spec": {"containers": [
        {"name": n, "image": "x"} for n in names]}}}}


TWO = decode_config('{"b": {"requests": {"cpu": {"base": "1m"}}},'
                    ' "a": {"limits": {"memory": {"base": "1Mi"}}}}')
FORBIDDEN = ApiError(403, "Forbidden", "cannot get")


def containers_sent(api: PatchApi, index: int = -1) -> list[str]:
    body = json.loads(api.sent[index][2])
    return [c["name"] for c in body["spec"]["template"]["spec"]["containers"]]


def test_the_patch_is_cpvas_body_as_a_strategic_merge() -> None:
    api = PatchApi(FORBIDDEN, workload("b", "a"))
    writer = TemplateWriter(api, "ns", PatchTarget("DaemonSet", "agent"))
    body = writer.write(compute(TWO, 3, 24))
    [(method, path, data, content_type)] = api.sent
    assert (method, path, content_type) == (
        "PATCH", "/apis/apps/v1/namespaces/ns/daemonsets/agent", STRATEGIC_MERGE)
    assert data.decode() == body == (
        '{"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"name":"agent"},"spec":'
        '{"template":{"spec":{"containers":[{"name":"b","resources":{"requests":{"cpu":"1m"}}},'
        '{"name":"a","resources":{"limits":{"memory":"1048576"}}}]}}}}')


def test_container_order_comes_from_the_template() -> None:
    # Unknown at first and no get allowed (CPVA's RBAC): the config's order.
    api = PatchApi(FORBIDDEN, workload("a", "sidecar", "b"))
    writer = TemplateWriter(api, "ns", PatchTarget("Deployment", "d"))
    writer.write(compute(TWO, 1, 1))
    assert containers_sent(api) == ["b", "a"] and api.gets == [
        "/apis/apps/v1/namespaces/ns/deployments/d"]
    writer.write(compute(TWO, 1, 1))  # then the response's order, no second GET
    assert containers_sent(api) == ["a", "b"] and len(api.gets) == 1
    # With get allowed the first PATCH already has the template's order.
    api = PatchApi(workload("a", "b"), workload("a", "b"))
    TemplateWriter(api, "ns", PatchTarget("Deployment", "d")).write(compute(TWO, 1, 1))
    assert containers_sent(api) == ["a", "b"]


def test_dry_run_sends_nothing() -> None:
    api = PatchApi(FORBIDDEN, {})
    body = TemplateWriter(api, "ns", PatchTarget("ReplicaSet", "r"), dry_run=True).write(
        compute(TWO, 1, 1))
    assert api.sent == [] and json.loads(body)["kind"] == "ReplicaSet"


@pytest.mark.parametrize(("error", "hint"), [
    (ApiError(403, "Forbidden", "no"), "grant patch on daemonsets in group apps"),
    (ApiError(404, "NotFound", "no"), "does not exist in namespace ns"),
    (ApiError(422, "Invalid", "containers[1].image: Required value"),
     "the target has no container 'b'"),
    (ApiError(0, "ConnectionError", "cannot reach"), "cannot reach"),
])
def test_failed_patches_say_what_to_do(error: ApiError, hint: str) -> None:
    api = PatchApi(workload("a"), error)
    with pytest.raises(WriteError, match=hint):
        TemplateWriter(api, "ns", PatchTarget("DaemonSet", "agent")).write(compute(TWO, 1, 1))


# --- the Node counts ------------------------------------------------------------------------


class NodesApi:
    """One page of Nodes; the watch probe answers ``watch``."""

    def __init__(self, watch: ApiError | None) -> None:
        self.watch = watch
        self.lists = 0
        self.streams: list[Mapping[str, str]] = []
        self.capacities = ["4", "8"]

    def get_json(self, path: str, query: Mapping[str, str] | None = None, *,
                 deadline: float | None = None) -> dict[str, Any]:
        raise AssertionError

    def send_json(self, method: str, path: str, body: Any, *,
                  deadline: float | None = None) -> dict[str, Any]:
        raise AssertionError

    def get_raw(self, path: str, query: Mapping[str, str], accept: str = "") -> tuple[
            str, bytes]:
        self.lists += 1
        items = [{"metadata": {"name": f"n{i}", "resourceVersion": "7"},
                  "status": {"capacity": {"cpu": cpu}, "allocatable": {"cpu": "1"}}}
                 for i, cpu in enumerate(self.capacities)]
        return "application/json", json.dumps(
            {"metadata": {"resourceVersion": "7"}, "items": items}).encode()

    def stream(self, path: str, query: Mapping[str, str], read_timeout: float,
               accept: str = "", deadline: float | None = None,
               pace: float = 0.0) -> Any:
        self.streams.append(query)
        if self.watch is not None:
            raise self.watch
        return _Closed()


class _Closed:
    headers: ClassVar[dict[str, str]] = {}

    def close(self) -> None: ...

    def release_conn(self) -> None: ...


class FakeReflector:
    """The real reflector's list, without its thread."""

    def __init__(self, api: NodesApi, store: Any) -> None:
        from cpa.nodes.watch import NodeReflector

        self._real = NodeReflector(api, store, capacity=True)
        self.started = False

    def list_once(self) -> None:
        self._real.list_once()

    @property
    def resource_version(self) -> str:
        return self._real.resource_version

    def start(self) -> None:
        self.started = True

    def stop(self) -> None: ...


def test_a_forbidden_watch_means_one_list_per_poll() -> None:
    api = NodesApi(ApiError(403, "Forbidden", "nodes is forbidden: cannot watch"))
    counts = NodeCounts(api, reflector=FakeReflector)  # type: ignore[arg-type]
    assert counts.counts() == (2, 12)
    assert counts.mode == "list" and api.streams[0]["resourceVersion"] == "7"
    api.capacities = ["4", "8", "16"]
    assert counts.counts() == (3, 28) and api.lists == 2


def test_an_allowed_watch_starts_the_reflector_and_lists_no_more() -> None:
    api = NodesApi(None)
    counts = NodeCounts(api, reflector=FakeReflector)  # type: ignore[arg-type]
    assert counts.counts() == (2, 12) and counts.mode == "watch"
    assert counts.reflector.started  # type: ignore[attr-defined]
    assert counts.counts() == (2, 12) and api.lists == 1


def test_a_probe_that_cannot_reach_the_server_is_retried_next_poll() -> None:
    api = NodesApi(ApiError(0, "ConnectionError", "down"))
    counts = NodeCounts(api, reflector=FakeReflector)  # type: ignore[arg-type]
    with pytest.raises(ApiError):
        counts.counts()
    assert counts.mode == ""
    api.watch = None
    assert counts.counts() == (2, 12) and counts.mode == "watch"
