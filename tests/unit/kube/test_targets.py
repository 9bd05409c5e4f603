"""Targets beyond upstream's: the HPA floor (spec.minReplicas) and any resource with a scale
subresource, resolved through API discovery; against the typed fake API."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpa import logs
from cpa.horizontal.daemon.cpa_events import EventRecorder
from cpa.horizontal.daemon.cpa_loop import PollResult
from cpa.horizontal.daemon.cpa_metrics import Metrics
from cpa.horizontal.decide.decision import Decision
from cpa.horizontal.decide.steps import Step
from cpa.kube.discovery import ResolveError, resolve
from cpa.kube.hpafloor import ensure_floor, hpa_floor
from cpa.kube.targets import (
    _SUBDOMAIN,
    Current,
    Kind,
    ScaleResult,
    Target,
    is_dns1123_subdomain,
    parse_targets,
    scale_path,
)
from cpa.kube.writers import ensure_replicas, read_current
from cpa.nodes.counts import ClusterCounts
from cpa.tools.explain import TargetView, target_steps
from tests.fakes import FakeApi
from tests.unit.horizontal.daemon.test_autoscaler import COREDNS, counts, make

NS = "kube-system"
HPA_PATH = f"/apis/autoscaling/v2/namespaces/{NS}/horizontalpodautoscalers/coredns"
HPA = Target("horizontalpodautoscaler", "coredns")


def hpa(api: FakeApi, minimum: int | None = 2, maximum: int = 10) -> None:
    spec: dict[str, Any] = {"maxReplicas": maximum, "scaleTargetRef": {
        "apiVersion": "apps/v1", "kind": "Deployment", "name": "coredns"}}
    if minimum is not None:
        spec["minReplicas"] = minimum
    api.put(HPA_PATH, {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                       "metadata": {"name": "coredns"}, "spec": spec})


def min_replicas(api: FakeApi) -> int:
    return int(api.objects[HPA_PATH]["spec"]["minReplicas"])


# --- the HPA floor --------------------------------------------------------------------------


def test_the_count_becomes_min_replicas_with_a_merge_patch() -> None:
    api = FakeApi()
    hpa(api)
    res = ensure_replicas(api, NS, HPA, 4)
    assert (res.previous, res.replicas, res.changed, res.clamped_from) == (2, 4, True, None)
    assert api.calls == [("GET", HPA_PATH), ("PATCH", HPA_PATH)]
    assert min_replicas(api) == 4 and api.objects[HPA_PATH]["spec"]["maxReplicas"] == 10
    api.calls.clear()
    assert not ensure_replicas(api, NS, HPA, 4).changed
    assert api.calls == [("GET", HPA_PATH)], "no write when the floor is right"


def test_clamped_to_max_replicas_and_never_below_one() -> None:
    api = FakeApi()
    hpa(api, minimum=None, maximum=5)  # minReplicas absent: the API's default 1
    res = ensure_floor(api, NS, HPA, 9)
    assert (res.previous, res.replicas, res.clamped_from, res.max_replicas) == (1, 5, 9, 5)
    assert min_replicas(api) == 5
    res = ensure_floor(api, NS, HPA, 0)
    assert (res.replicas, res.clamped_from) == (1, 0) and min_replicas(api) == 1
    assert [hpa_floor(n, m) for n, m in [(0, None), (3, None), (3, 2), (3, 0)]] == [1, 3, 2, 3]


def test_a_conflict_is_retried_once_with_a_fresh_get() -> None:
    api = FakeApi()
    hpa(api)
    api.conflicts[HPA_PATH] = 1
    res = ensure_floor(api, NS, HPA, 3)
    assert res.changed and res.error is None and min_replicas(api) == 3
    assert [m for m, _ in api.calls] == ["GET", "PATCH", "GET", "PATCH"]
    api.conflicts[HPA_PATH] = 2
    failed = ensure_floor(api, NS, HPA, 4)
    assert failed.error is not None and "cannot set minReplicas to 4" in failed.error


def test_a_missing_hpa_fails_that_target() -> None:
    res = ensure_floor(FakeApi(), NS, HPA, 3)
    assert res.error is not None and "not found" in res.error and not res.changed


def test_the_loop_writes_the_floor_and_warns_once_per_clamp(capsys: pytest.CaptureFixture[str]
                                                            ) -> None:
    api = FakeApi()
    hpa(api, minimum=1, maximum=3)
    api.set_configmap(f"/api/v1/namespaces/{NS}/configmaps/kube-dns-autoscaler",
                      {"linear": '{"nodesPerReplica":1}'})
    logs.configure(0, "json")
    cluster = counts(6, 24)
    auto = make(api, lambda: cluster, target="hpa/coredns")
    first = auto.poll_once()
    assert first.ok and min_replicas(api) == 3
    assert first.scales[0].clamped_from == 6
    auto.poll_once()
    cluster = counts(2, 8)
    auto.poll_once()
    assert min_replicas(api) == 2
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()
             if line.startswith("{")]
    names = [line["event"] for line in lines]
    assert names.count("hpa.floor_clamped") == 1 and "hpa.floor_clamped.ended" in names
    warning = next(line for line in lines if line["event"] == "hpa.floor_clamped")
    assert (warning["wanted"], warning["min_replicas"], warning["max_replicas"]) == (6, 3, 3)
    metrics = Metrics([HPA])
    metrics.observe(first)
    text = metrics.exposition().decode()
    assert 'cpa_hpa_floor_clamped{target="horizontalpodautoscaler/coredns"} 1.0' in text
    assert 'cpa_target_replicas{target="horizontalpodautoscaler/coredns"} 3.0' in text


# --- any /scale resource, through discovery -------------------------------------------------

GROUP = {"kind": "APIGroup", "name": "example.com",
         "versions": [{"groupVersion": "example.com/v1", "version": "v1"},
                      {"groupVersion": "example.com/v1beta1", "version": "v1beta1"}],
         "preferredVersion": {"groupVersion": "example.com/v1", "version": "v1"}}


def resources(*items: tuple[str, str]) -> dict[str, Any]:
    return {"kind": "APIResourceList", "resources": [
        {"name": name, "kind": kind, "namespaced": True} for name, kind in items]}


def discovery(api: FakeApi, v1: dict[str, Any], v1beta1: dict[str, Any] | None = None) -> None:
    api.put("/apis/example.com", GROUP)
    api.put("/apis/example.com/v1", v1)
    api.put("/apis/example.com/v1beta1", v1beta1 or resources())


def test_a_custom_resource_with_scale_is_resolved_and_scaled() -> None:
    api = FakeApi()
    discovery(api, resources(("clones", "Clone"), ("clones/scale", "Scale"),
                             ("clones/status", "Clone")))
    (target,), _ = parse_targets("clones.example.com/x")
    resolved = resolve(api, target)
    assert resolved == target and resolved.api == Kind("Clone", "/apis/example.com/v1",
                                                       "clones", False)
    path = scale_path(NS, resolved)
    assert path == f"/apis/example.com/v1/namespaces/{NS}/clones/x/scale"
    api.add_scale(path, 1)
    assert ensure_replicas(api, NS, resolved, 3).changed and api.replicas(path) == 3
    assert read_current(api, NS, resolved) == Current(3)


def test_the_scale_subresource_may_live_in_another_version() -> None:
    api = FakeApi()
    discovery(api, resources(("clones", "Clone")),
              resources(("clones", "Clone"), ("clones/scale", "Scale")))
    resolved = resolve(api, Target("clones.example.com", "x"))
    assert resolved.api.api_version == "example.com/v1beta1"


@pytest.mark.parametrize(("target", "v1", "message"), [
    ("clones.example.com", resources(("clones", "Clone")), "has no scale subresource"),
    ("clowns.example.com", resources(("clones", "Clone"), ("clones/scale", "Scale")),
     "has no resource 'clowns' (it has: clones"),
    ("clones.nowhere.io", resources(), "serves no API group 'nowhere.io'"),
])
def test_resources_that_cannot_be_scaled_are_clear_errors(target: str, v1: dict[str, Any],
                                                          message: str) -> None:
    api = FakeApi()
    discovery(api, v1)
    with pytest.raises(ResolveError, match=re.escape(message)):
        resolve(api, Target(target, "x"))


def test_built_in_kinds_need_no_discovery() -> None:
    api = FakeApi()
    assert resolve(api, Target("deployment", "coredns")) == Target("deployment", "coredns")
    assert resolve(api, HPA) is HPA and api.calls == []


# --- what the operator sees ---------------------------------------------------------------


def test_an_event_says_the_floor_was_set() -> None:
    api = FakeApi()
    rec = EventRecorder(api, NS, "kube-dns-autoscaler", "pod-1")
    result = PollResult(started=0.0)
    result.counts = ClusterCounts(6, 24, 6, 24)
    result.decision = Decision("linear", 3, 6, 24, ())
    result.scales = [ScaleResult(HPA, 2, 3, True)]
    rec.observe(result)
    (_, event), = api.created
    assert event["note"].startswith("Set the floor (spec.minReplicas) of "
                                    "horizontalpodautoscaler/coredns from 2 to 3 (linear mode")
    assert event["regarding"]["kind"] == "HorizontalPodAutoscaler"
    assert event["regarding"]["apiVersion"] == "autoscaling/v2"


def test_explain_steps_for_the_target_kinds() -> None:
    view = TargetView(HPA, Current(2, 5))
    assert target_steps(view, 4)[0] == 4
    written, steps = target_steps(view, 9)
    assert written == 5 and steps == [Step("target.hpa_floor", steps[0].text)]
    assert "9 is above its maxReplicas 5, so 5 is written (clamped" in steps[0].text
    assert target_steps(view, 0)[0] == 1
    custom = Target("clones.example.com", "x", Kind("Clone", "/apis/example.com/v1", "clones",
                                                    False))
    written, (step,) = target_steps(TargetView(custom, Current(1)), 3)
    assert written == 3 and step.key == "target.resolved"
    assert "Clone in example.com/v1" in step.text
    assert target_steps(TargetView(Target("deployment", "x"), Current(1)), 3) == (3, [])
    assert COREDNS.endswith("/deployments/coredns/scale")


@pytest.mark.parametrize(("target", "path"), [
    (HPA, HPA_PATH), (Target("deployment", "coredns"), COREDNS),
    (Target("statefulset", "web"), scale_path(NS, Target("statefulset", "web")))])
def test_a_writer_reads_its_object_before_it_writes(target: Target, path: str) -> None:
    api = FakeApi()
    hpa(api)
    api.add_scale(COREDNS, 2)
    if target.kind == "statefulset":
        api.add_scale(path, 2)
    ensure_replicas(api, NS, target, 3)
    assert api.calls[0] == ("GET", path)


def test_a_target_is_the_same_target_resolved_or_not() -> None:
    """``resolved`` takes no part in equality or hashing: the resolved target is the one
    ``--target`` named (a dict keyed by either finds the other)."""
    clone = Kind("Clone", "/apis/example.com/v1", "clones", False)
    bare = Target("clones.example.com", "x")
    resolved = Target("clones.example.com", "x", clone)
    assert resolved == bare and hash(resolved) == hash(bare)
    assert {bare: 1}[resolved] == 1 and len({bare, resolved}) == 1
    assert resolved != Target("clones.example.com", "y", clone)
    assert resolved != Target("clones.example.org", "x", clone)
    pair: object = ("clones.example.com", "x")
    text: object = "clones.example.com/x"
    assert bare != pair and bare != text
    assert repr(resolved) == (
        "Target(kind='clones.example.com', name='x', resolved=Kind(name='Clone', "
        "api_prefix='/apis/example.com/v1', plural='clones', upstream=False, floor=False, "
        "namespaced=True))")
    assert repr(HPA) == "Target(kind='horizontalpodautoscaler', name='coredns', resolved=None)"
    assert str(resolved) == "clones.example.com/x"


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="ab09-._Z /", max_size=12) | st.from_regex(_SUBDOMAIN, fullmatch=True))
def test_the_name_check_is_the_dns1123_subdomain_pattern(name: str) -> None:
    """A target's name is checked without compiling the pattern at every start; the check
    is the pattern's full match (hypothesis, with the pattern's own names among the cases)."""
    assert is_dns1123_subdomain(name) == (re.fullmatch(_SUBDOMAIN, name) is not None)


@pytest.mark.parametrize("name", ["coredns", "a", "a-b.c-d", "0.0", "x" * 63])
def test_valid_names_pass(name: str) -> None:
    assert is_dns1123_subdomain(name)


@pytest.mark.parametrize("name", ["", "-a", "a-", "a..b", ".a", "a.", "A", "a_b", "a b", "é"])
def test_invalid_names_fail(name: str) -> None:
    assert not is_dns1123_subdomain(name)
