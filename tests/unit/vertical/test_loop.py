"""The ``/cpvpa`` poll loop with fakes: CPVA's order, its write decision and retries, the
in-place mode's template policy and fallbacks, leadership, and the metrics it feeds."""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Mapping
from typing import Any

import pytest

from cpa.kube.api import ApiError
from cpa.vertical.daemon.configfile import ConfigFile
from cpa.vertical.daemon.cpvpa_loop import VerticalAutoscaler, VerticalLoopConfig
from cpa.vertical.daemon.cpvpa_metrics import VerticalMetrics
from cpa.vertical.daemon.inplace import InPlaceResizer
from cpa.vertical.daemon.target import TargetLoop
from cpa.vertical.daemon.writer import TemplateWriter
from cpa.vertical.decide.cpva_config import decode_config
from cpa.vertical.decide.patch import PatchTarget
from cpa.vertical.decide.state import InvalidConfigPolicy, VerticalState

CONFIG = decode_config('{"c": {"requests": {"cpu": {"base": "10m", "step": "1m", '
                       '"coresPerStep": 1}, "memory": {"base": "64Mi"}}}}')
DS_PATH = "/apis/apps/v1/namespaces/ns/daemonsets/agent"


class Cluster:
    """A DaemonSet, its Pods and the answers the API gives about them."""

    def __init__(self, strategy: str = "RollingUpdate") -> None:
        self.ds: dict[str, Any] = {
            "metadata": {"name": "agent", "uid": "ds-uid"},
            "spec": {"selector": {"matchLabels": {"app": "agent"}},
                     "updateStrategy": {"type": strategy},
                     "template": {"spec": {"containers": [
                         {"name": "c", "image": "x",
                          "resources": {"requests": {"cpu": "5m", "memory": "32Mi"},
                                        "limits": {"memory": "1Gi"}}}]}}}}
        self.pods: list[dict[str, Any]] = [self.new_pod("p1"), self.new_pod("p2")]
        self.template_patches: list[str] = []
        self.resizes: list[tuple[str, str]] = []
        self.resize_error: ApiError | None = None
        self.resize_faults: dict[str, list[ApiError]] = {}  # Pod -> its next answers
        self.get_faults: dict[str, ApiError] = {}  # path -> raised on every GET of it
        self.resize_tries: list[str] = []  # every resize PATCH sent, by Pod
        self.patch_error: ApiError | None = None

    def new_pod(self, name: str) -> dict[str, Any]:
        containers = copy.deepcopy(self.ds["spec"]["template"]["spec"]["containers"])
        return {"metadata": {"name": name, "uid": f"uid-{name}", "ownerReferences": [
                    {"uid": "ds-uid", "controller": True}]},
                "spec": {"containers": containers},
                "status": {"phase": "Running", "qosClass": "Burstable"}}

    def get_json(self, path: str, query: Mapping[str, str] | None = None, *,
                 deadline: float | None = None) -> dict[str, Any]:
        if path in self.get_faults:
            raise self.get_faults[path]
        if path == DS_PATH:
            return copy.deepcopy(self.ds)
        if path == "/api/v1/namespaces/ns/pods":
            assert query == {"labelSelector": "app=agent"}
            return {"items": copy.deepcopy(self.pods)}
        raise ApiError(404, "NotFound", path)

    def send_json(self, method: str, path: str, body: Any, *,
                  deadline: float | None = None) -> dict[str, Any]:
        raise AssertionError

    def send_raw(self, method: str, path: str, data: bytes, content_type: str, *,
                 deadline: float | None = None) -> dict[str, Any]:
        body = json.loads(data)
        if path == DS_PATH:
            if self.patch_error is not None:
                raise self.patch_error
            self.template_patches.append(data.decode())
            for patch in body["spec"]["template"]["spec"]["containers"]:
                self._merge(self.ds["spec"]["template"]["spec"]["containers"], patch)
            return copy.deepcopy(self.ds)
        name = path.split("/")[-2]
        self.resize_tries.append(name)
        if self.resize_faults.get(name):
            raise self.resize_faults[name].pop(0)
        if self.resize_error is not None:
            raise self.resize_error
        self.resizes.append((name, data.decode()))
        pod = next(p for p in self.pods if p["metadata"]["name"] == name)
        for patch in body["spec"]["containers"]:
            self._merge(pod["spec"]["containers"], patch)
        return copy.deepcopy(pod)

    @staticmethod
    def _merge(containers: list[dict[str, Any]], patch: dict[str, Any]) -> None:
        target = next(c for c in containers if c["name"] == patch["name"])
        for kind, values in patch["resources"].items():
            target.setdefault("resources", {}).setdefault(kind, {}).update(values)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make_loop(cluster: Cluster, *, in_place: bool = False, template: str = "when-safe",
              counts: list[tuple[int, int]] | None = None, clock: Clock | None = None,
              metrics: VerticalMetrics | None = None) -> VerticalAutoscaler:
    sizes = counts if counts is not None else [(3, 24)]
    target = PatchTarget("DaemonSet", "agent")
    resizer = (InPlaceResizer(cluster, "ns", target, template=template,
                              deferred_timeout=60, clock=clock or Clock())
               if in_place else None)
    return VerticalAutoscaler(
        VerticalLoopConfig(in_place=in_place), lambda: sizes[-1], ConfigFile(""),
        [TargetLoop(VerticalState(CONFIG, InvalidConfigPolicy.REFUSE),
                    TemplateWriter(cluster, "ns", target), resizer=resizer)],
        observers=[metrics.observe] if metrics else [])


def resources(obj: dict[str, Any]) -> dict[str, Any]:
    spec = obj["spec"]["template"]["spec"] if "template" in obj["spec"] else obj["spec"]
    return dict(spec["containers"][0]["resources"])


WANT = {"requests": {"cpu": "34m", "memory": "67108864"}, "limits": {"memory": "1Gi"}}


# --- CPVA's order and write decision ----------------------------------------------------------


def test_a_failed_node_count_ends_the_poll_before_the_config_file(tmp_path: Any) -> None:
    stats: list[str] = []

    def stat(path: str) -> os.stat_result:
        stats.append(path)
        return os.stat(tmp_path)

    def counts() -> tuple[int, int]:
        raise ApiError(500, "InternalError", "etcd is down")

    cluster = Cluster()
    loop = VerticalAutoscaler(VerticalLoopConfig(), counts, ConfigFile("/x", stat=stat),
                              [TargetLoop(VerticalState(CONFIG), TemplateWriter(
                                  cluster, "ns", PatchTarget("DaemonSet", "agent")))])
    result = loop.poll_once()
    assert result.error is not None and result.error.startswith("Error getting cluster size")
    assert stats == [] and cluster.template_patches == []


def test_first_poll_writes_then_only_changes_and_failures_are_retried() -> None:
    cluster = Cluster()
    sizes = [(3, 24)]
    loop = make_loop(cluster, counts=sizes)
    assert loop.poll_once().first.written is not None
    assert loop.poll_once().first.written is None and len(cluster.template_patches) == 1
    assert resources(cluster.ds) == WANT
    cluster.patch_error = ApiError(500, "InternalError", "flaky")
    sizes.append((4, 32))
    failed = loop.poll_once()
    assert failed.first.write_failed
    assert failed.error is not None and "Update failure" in failed.error
    cluster.patch_error = None
    assert loop.poll_once().first.written is not None  # retried at the next poll
    assert resources(cluster.ds)["requests"]["cpu"] == "42m"
    loop.forget_written()  # leadership lost and regained: written again at once
    assert loop.poll_once().first.written is not None and len(cluster.template_patches) == 3


# --- in place ----------------------------------------------------------------------------


def test_in_place_resizes_pods_and_leaves_a_rolling_template_alone() -> None:
    cluster = Cluster("RollingUpdate")
    loop = make_loop(cluster, in_place=True)
    first = loop.poll_once()
    assert first.error is None and first.first.inplace is not None
    assert sorted(first.first.inplace.resized) == ["p1", "p2"]
    assert all(resources(p) == WANT for p in cluster.pods)
    assert cluster.template_patches == [] and first.first.template_skipped
    assert {(d.container, d.kind, d.resource) for d in first.first.drift} == {
        ("c", "requests", "cpu"), ("c", "requests", "memory")}
    again = loop.poll_once()
    assert again.first.inplace is not None and again.first.inplace.resized == []
    cluster.pods.append(cluster.new_pod("p3"))  # created later from the old template
    third = loop.poll_once()
    assert third.first.inplace is not None and third.first.inplace.resized == ["p3"]


def test_in_place_patches_an_on_delete_template_too() -> None:
    cluster = Cluster("OnDelete")
    loop = make_loop(cluster, in_place=True)
    result = loop.poll_once()
    assert result.error is None and len(cluster.template_patches) == 1
    assert resources(cluster.ds) == WANT and all(resources(p) == WANT for p in cluster.pods)
    assert result.first.template_skipped is None


def test_in_place_never_and_always() -> None:
    cluster = Cluster("OnDelete")
    make_loop(cluster, in_place=True, template="never").poll_once()
    assert cluster.template_patches == []
    cluster = Cluster("RollingUpdate")
    make_loop(cluster, in_place=True, template="always").poll_once()
    assert len(cluster.template_patches) == 1


@pytest.mark.parametrize(("error", "reason"), [
    (ApiError(404, "NotFound", "the server could not find the requested resource"),
     "unsupported"),
    (ApiError(403, "Forbidden", "cannot patch pods/resize"), "forbidden"),
    (ApiError(422, "Invalid", "Pod QoS is immutable"), "invalid"),
])
def test_a_refused_resize_falls_back_to_the_template_once_per_change(
        error: ApiError, reason: str) -> None:
    cluster = Cluster("RollingUpdate")
    cluster.resize_error = error
    metrics = VerticalMetrics()
    sizes = [(3, 24)]
    loop = make_loop(cluster, in_place=True, counts=sizes, metrics=metrics)
    first = loop.poll_once()
    assert first.first.fallbacks == [reason] and first.error is not None
    assert len(cluster.template_patches) == 1 and resources(cluster.ds) == WANT
    second = loop.poll_once()  # same values: no new fallback, nothing to patch
    assert second.first.fallbacks == [] and len(cluster.template_patches) == 1
    sizes.append((4, 32))
    third = loop.poll_once()
    assert third.first.fallbacks == [reason] and len(cluster.template_patches) == 2
    text = metrics.exposition().decode()
    assert f'cpvpa_resize_fallbacks_total{{reason="{reason}"}} 2.0' in text


TRANSIENT = [
    (ApiError(500, "InternalError", "etcdserver: leader changed"), "server_error"),
    (ApiError(503, "ServiceUnavailable", "the server is shutting down"), "server_error"),
    (ApiError(409, "Conflict", "the object has been modified"), "conflict"),
    (ApiError(429, "TooManyRequests", "too many requests"), "too_many_requests"),
    (ApiError(0, "ConnectionError", "PATCH: the API server did not answer: reset"),
     "connection"),
    (ApiError(0, "Timeout", "PATCH: no complete answer within 30s"), "connection"),
    (ApiError(401, "Unauthorized", "Unauthorized"), "other"),
]


@pytest.mark.parametrize(("error", "reason"), TRANSIENT)
def test_a_transient_resize_error_is_retried_next_poll_and_never_falls_back(
        error: ApiError, reason: str) -> None:
    cluster = Cluster("RollingUpdate")
    cluster.resize_faults["p1"] = [error]
    clock = Clock()
    metrics = VerticalMetrics()
    loop = make_loop(cluster, in_place=True, clock=clock, metrics=metrics)
    first = loop.poll_once()
    assert first.first.fallbacks == [] and cluster.template_patches == []
    assert first.first.inplace is not None and first.first.inplace.resized == ["p2"]
    [retry] = first.first.inplace.retries
    assert (retry.pod, retry.reason, retry.failures, retry.retry_in) == ("p1", reason, 1, 1.0)
    assert first.error is not None and "retried at a later poll" in first.error
    assert first.first.template_skipped  # the policy's own decision, as if p1 had been resized
    text = metrics.exposition().decode()
    assert f'cpvpa_resize_retries_total{{reason="{reason}"}} 1.0' in text
    assert "cpvpa_pod_resizes_retrying 1.0" in text
    clock.now += 10  # the next poll, at the default period
    second = loop.poll_once()
    assert second.error is None and second.first.inplace is not None
    assert second.first.inplace.resized == ["p1"] and second.first.inplace.retries == []
    assert all(resources(p) == WANT for p in cluster.pods)
    assert cluster.template_patches == [] and cluster.resize_tries.count("p1") == 2
    text = metrics.exposition().decode()
    assert "cpvpa_pod_resizes_retrying 0.0" in text
    assert "cpvpa_resize_fallbacks_total{" not in text  # no fallback series ever made


def test_a_pod_that_keeps_failing_is_backed_off_and_a_success_resets_it() -> None:
    cluster = Cluster("RollingUpdate")
    cluster.resize_faults["p1"] = [ApiError(500, "InternalError", "flaky")] * 6
    clock = Clock()
    loop = make_loop(cluster, in_place=True, clock=clock)
    tried_at: list[float] = []
    for _ in range(40):  # a 1 s poll period, 40 s
        before = cluster.resize_tries.count("p1")
        result = loop.poll_once()
        assert result.first.fallbacks == [] and cluster.template_patches == []
        if cluster.resize_tries.count("p1") > before:
            tried_at.append(clock.now - 1000)
        else:  # waiting: said, not sent
            assert result.first.inplace is not None
            [waiting] = result.first.inplace.retries
            assert not waiting.failed_now and waiting.retry_in > 0
        clock.now += 1
    # Six failures, waits 1, 2, 4, 8, 16, 32 s after them; the seventh try succeeds.
    assert tried_at == [0, 1, 3, 7, 15, 31]
    assert resources(cluster.pods[0]) != WANT
    clock.now = 1000 + 31 + 32
    assert loop.poll_once().error is None and resources(cluster.pods[0]) == WANT
    cluster.pods[0]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1m"
    cluster.resize_faults["p1"] = [ApiError(500, "InternalError", "again")]
    again = loop.poll_once()  # after a success the count starts again from one
    assert again.first.inplace is not None and again.first.inplace.retries[0].failures == 1
    assert again.first.inplace.retries[0].retry_in == 1.0


def test_one_pods_backoff_holds_no_other_pod_back_and_a_gone_pod_is_forgotten() -> None:
    cluster = Cluster("RollingUpdate")
    cluster.resize_error = ApiError(500, "InternalError", "down")
    clock = Clock()
    loop = make_loop(cluster, in_place=True, clock=clock)
    loop.poll_once()
    loop.poll_once()  # not due: nothing sent
    assert cluster.resize_tries == ["p1", "p2"]
    cluster.resize_error = None
    cluster.pods.append(cluster.new_pod("p3"))  # a new Pod is tried at once
    result = loop.poll_once()
    assert result.first.inplace is not None and result.first.inplace.resized == ["p3"]
    assert [r.pod for r in result.first.inplace.retries] == ["p1", "p2"]
    del cluster.pods[0]
    cluster.pods.append(cluster.new_pod("p1"))  # p1 replaced: same name, a new uid
    cluster.pods[-1]["metadata"]["uid"] = "uid-p1-new"
    result = loop.poll_once()
    assert result.first.inplace is not None and result.first.inplace.resized == ["p1"]


@pytest.mark.parametrize("path", [DS_PATH, "/api/v1/namespaces/ns/pods"])
@pytest.mark.parametrize("error", [error for error, _ in TRANSIENT])
def test_a_transient_error_reading_the_target_or_its_pods_patches_nothing(
        path: str, error: ApiError) -> None:
    cluster = Cluster("RollingUpdate")
    cluster.get_faults[path] = error
    loop = make_loop(cluster, in_place=True)
    result = loop.poll_once()
    assert result.error is not None and result.first.fallbacks == []
    assert cluster.template_patches == [] and cluster.resizes == []
    del cluster.get_faults[path]
    result = loop.poll_once()
    assert result.error is None and cluster.template_patches == []
    assert all(resources(p) == WANT for p in cluster.pods)


def test_a_refusal_still_falls_back_beside_a_transient_error() -> None:
    cluster = Cluster("RollingUpdate")
    cluster.resize_faults["p1"] = [ApiError(500, "InternalError", "flaky")]
    cluster.resize_faults["p2"] = [ApiError(422, "Invalid", "Pod QoS is immutable")]
    result = make_loop(cluster, in_place=True).poll_once()
    assert result.first.fallbacks == ["invalid"] and len(cluster.template_patches) == 1
    assert result.error is not None
    assert "Pod p2: invalid" in result.error and "Pod p1: resize failed" in result.error


def test_a_deferred_resize_waits_then_falls_back() -> None:
    cluster = Cluster("RollingUpdate")
    clock = Clock()
    loop = make_loop(cluster, in_place=True, clock=clock)
    loop.poll_once()  # resized; now the kubelet defers it
    for p in cluster.pods:
        p["status"]["conditions"] = [{"type": "PodResizePending", "status": "True",
                                      "reason": "Deferred", "message": "not enough room"}]
    waiting = loop.poll_once()
    assert waiting.first.inplace is not None
    assert sorted(waiting.first.inplace.pending) == ["p1", "p2"]
    assert waiting.error is None and cluster.template_patches == []
    clock.now += 61
    late = loop.poll_once()
    assert late.first.fallbacks == ["deferred"] and len(cluster.template_patches) == 1


def test_an_infeasible_resize_falls_back_at_once() -> None:
    cluster = Cluster("RollingUpdate")
    cluster.pods[0]["status"]["conditions"] = [
        {"type": "PodResizePending", "status": "True", "reason": "Infeasible",
         "message": "Node didn't have enough capacity: cpu"}]
    result = make_loop(cluster, in_place=True).poll_once()
    assert result.first.fallbacks == ["infeasible"] and len(cluster.template_patches) == 1
    assert result.error is not None and "enough capacity" in result.error


def test_pods_of_another_owner_and_pods_not_running_are_left_alone() -> None:
    cluster = Cluster("RollingUpdate")
    cluster.pods[0]["metadata"]["ownerReferences"][0]["uid"] = "someone-else"
    cluster.pods[1]["status"]["phase"] = "Pending"
    result = make_loop(cluster, in_place=True).poll_once()
    assert result.first.inplace is not None and result.first.inplace.resized == []
    assert cluster.resizes == []


# --- metrics ------------------------------------------------------------------------------


def test_metrics_show_computed_and_written_values_and_drop_removed_ones() -> None:
    cluster = Cluster()
    metrics = VerticalMetrics()
    loop = make_loop(cluster, metrics=metrics)
    loop.poll_once()
    text = metrics.exposition().decode()
    assert 'cpvpa_computed{container="c",kind="requests",resource="cpu"} 0.034' in text
    assert ('cpvpa_written{container="c",kind="requests",resource="memory"} 6.7108864e+07'
            in text)
    assert 'cpvpa_writes_total{result="success"} 1.0' in text
    loop.state.default_config = decode_config('{"c": {"limits": {"cpu": {"base": "1"}}}}')
    loop.state.current = None  # as if the config had been rebuilt without the requests
    loop.poll_once()
    text = metrics.exposition().decode()
    assert 'resource="memory"' not in text.split("cpvpa_computed")[1].split("# HELP")[0]
    assert 'cpvpa_computed{container="c",kind="limits",resource="cpu"} 1.0' in text


def test_a_follower_does_not_poll_but_warms_its_node_counts() -> None:
    import threading

    cluster = Cluster()
    warmed: list[int] = []
    stop = threading.Event()

    def may_write() -> bool:
        if cluster.template_patches:
            stop.set()
        return len(warmed) >= 2  # leader from the third period on

    loop = VerticalAutoscaler(
        VerticalLoopConfig(poll_period_seconds=0.01), lambda: (3, 24), ConfigFile(""),
        [TargetLoop(VerticalState(CONFIG),
                    TemplateWriter(cluster, "ns", PatchTarget("DaemonSet", "agent")))],
        may_write=may_write, warm=lambda: warmed.append(1),
        on_follower=lambda: reported.append(1))
    reported: list[int] = []
    assert loop.run(stop) == 0
    assert len(warmed) == 2 and len(cluster.template_patches) == 1
    assert len(reported) == 2, "a follower reports (its Lease) each period it does not poll"


def test_the_leader_gauge_starts_at_0_under_leader_election_and_drops_are_exposed() -> None:
    assert "cpvpa_leader 1.0" in VerticalMetrics().exposition().decode()
    metrics = VerticalMetrics(leader_elect=True)
    metrics.failed_lease()
    text = metrics.exposition().decode()
    assert "cpvpa_leader 0.0" in text and 'cpvpa_polls_total{result="error"} 1.0' in text
    assert "cpvpa_log_lines_dropped_total 0.0" in text
