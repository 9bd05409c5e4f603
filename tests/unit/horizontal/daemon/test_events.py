"""Events: what is posted, and that failures never reach the poll."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from cpa import logs
from cpa.horizontal.daemon.cpa_events import NOTE_LIMIT, RETRY_FORBIDDEN_SECONDS, EventRecorder
from cpa.horizontal.daemon.cpa_loop import PollResult
from cpa.horizontal.decide.decision import Decision
from cpa.kube.api import ApiError
from cpa.kube.targets import ScaleResult, Target
from cpa.nodes.counts import ClusterCounts
from tests.fakes import FakeApi


def recorder(api: FakeApi, clock: list[float] | None = None) -> EventRecorder:
    now = clock or [0.0]
    return EventRecorder(api, "kube-system", "kube-dns-autoscaler", "cpa-7d9f-x2",
                         clock=lambda: now[0],
                         wall=lambda: datetime(2026, 11, 30, 12, 0, 1, 250000, UTC))


def scaled(*scales: ScaleResult) -> PollResult:
    r = PollResult(started=0.0)
    r.counts = ClusterCounts(40, 160, 38, 152)
    r.decision = Decision("linear", 3, 40, 160, ())
    r.scales = list(scales)
    return r


def test_a_replica_change_is_a_normal_event_regarding_the_target() -> None:
    api = FakeApi()
    rec = recorder(api)
    rec.observe(scaled(ScaleResult(Target("deployment", "coredns"), 2, 3, True),
                       ScaleResult(Target("replicationcontroller", "x"), 3, 3, False)))
    assert len(api.created) == 1
    path, body = api.created[0]
    assert path == "/apis/events.k8s.io/v1/namespaces/kube-system/events"
    assert body["type"] == "Normal" and body["reason"] == "Scaled" and body["action"] == "Scale"
    assert body["regarding"] == {"apiVersion": "apps/v1", "kind": "Deployment",
                                 "name": "coredns", "namespace": "kube-system"}
    assert body["reportingController"] == "cluster-proportional-autoscaler"
    assert body["reportingInstance"] == "cpa-7d9f-x2"
    assert body["eventTime"] == "2026-11-30T12:00:01.250000Z"
    assert body["metadata"]["name"].startswith("coredns.")
    assert body["note"].startswith("Scaled deployment/coredns from 2 to 3 replicas (linear mode: "
                                   "40 nodes and 160 cores counted")


def test_invalid_parameters_warn_once_per_resource_version() -> None:
    api = FakeApi()
    rec = recorder(api)
    for version in ("7", "7", "7", "9"):
        r = PollResult(started=0.0, error="bad", params_invalid="min is -1", params_version=version)
        rec.observe(r)
    assert [b["regarding"]["resourceVersion"] for _, b in api.created] == ["7", "9"]
    _, body = api.created[0]
    assert body["type"] == "Warning" and body["reason"] == "InvalidParameters"
    assert body["regarding"]["kind"] == "ConfigMap"
    assert body["regarding"]["name"] == "kube-dns-autoscaler"
    assert body["note"] == "min is -1"


@pytest.mark.parametrize(("configmap", "regarding"), [
    ("kube-dns-autoscaler", {"apiVersion": "v1", "kind": "ConfigMap",
                             "name": "kube-dns-autoscaler", "namespace": "kube-system"}),
    ("", None),
])
def test_invalid_mounted_parameters_regard_the_configmap_without_a_version(
        configmap: str, regarding: dict[str, str] | None) -> None:
    """--config-dir: the version is the directory's (..2026_...), never a resourceVersion;
    without --configmap there is no object to regard and no Event."""
    api = FakeApi()
    rec = EventRecorder(api, "kube-system", configmap, "pod", mounted=True)
    rec.observe(PollResult(started=0.0, error="bad", params_invalid="both keys",
                           params_version="..2026_12_02_06_00_00.1"))
    assert [b["regarding"] for _, b in api.created] == ([regarding] if regarding else [])


def test_notes_are_truncated_to_what_the_api_accepts() -> None:
    api = FakeApi()
    recorder(api).emit("Warning", "X", "Y", {"kind": "ConfigMap", "name": "c"}, "z" * 5000)
    assert len(api.created[0][1]["note"]) == NOTE_LIMIT


def test_forbidden_logs_one_line_and_retries_an_hour_later(
        capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure(0, "json")
    api = FakeApi(ApiError(403, "Forbidden", 'events.events.k8s.io is forbidden: User "x"'))
    clock = [0.0]
    rec = recorder(api, clock)
    change = scaled(ScaleResult(Target("deployment", "coredns"), 2, 3, True))
    for _ in range(5):
        rec.observe(change)  # never raises
    assert rec.failed == 1, "no request while forbidden"
    clock[0] += RETRY_FORBIDDEN_SECONDS
    api.fail_writes = None
    rec.observe(change)
    assert len(api.created) == 1
    events = [json.loads(line)["event"] for line in capsys.readouterr().err.splitlines()
              if line.startswith("{")]
    assert events.count("events.forbidden") == 1
    assert events.count("events.allowed") == 1


def test_any_failure_is_swallowed_and_logged() -> None:
    rec = recorder(FakeApi(RuntimeError("socket closed")))
    assert rec.emit("Normal", "Scaled", "Scale", {"name": "c"}, "n") is False
    assert rec.failed == 1


def test_a_change_shaped_by_behavior_says_so() -> None:
    from cpa.horizontal.decide.behavior import Outcome

    api = FakeApi()
    target = Target("deployment", "coredns")
    r = scaled(ScaleResult(target, 10, 7, True))
    r.behavior[target] = Outcome(desired=3, current=10, replicas=7, steps=(),
                                 reason="scale-down limited to 3 Pods per 60s")
    recorder(api).observe(r)
    note = api.created[0][1]["note"]
    assert note.endswith("the parameters gave 3, the behavior wrote 7: scale-down limited "
                         "to 3 Pods per 60s")


def test_with_target_placement_each_event_says_its_targets_own_counts() -> None:
    api = FakeApi()
    rec = recorder(api)
    core, other = Target("deployment", "core"), Target("deployment", "other")
    r = scaled(ScaleResult(core, 2, 3, True), ScaleResult(other, 1, 5, True))
    r.decisions = {core: Decision("linear", 3, 3, 12, ()), other: Decision("linear", 5, 5, 20, ())}
    r.target_counts = {core: ClusterCounts(3, 12, 3, 12), other: ClusterCounts(5, 20, 4, 16)}
    rec.observe(r)
    notes = [body["note"] for _, body in api.created]
    assert notes[0].startswith("Scaled deployment/core from 2 to 3 replicas (linear mode: 3 "
                               "nodes and 12 cores counted; the Nodes its Pod template fits on "
                               "are 3 nodes and 12 cores")
    assert "5 nodes and 20 cores counted; the Nodes its Pod template fits on are 5 nodes and " \
           "20 cores, 4 and 16 of them schedulable" in notes[1]
