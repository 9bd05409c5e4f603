"""``--dry-run``: the loop computes everything and makes only GETs; what it would have
written is logged once and exported."""

from __future__ import annotations

import json

import pytest

from cpa import logs
from cpa.horizontal.cpa_flags import parse_args
from cpa.horizontal.daemon.cpa_metrics import Metrics
from cpa.kube.targets import Target
from tests.fakes import FakeApi
from tests.unit.horizontal.daemon.test_autoscaler import (
    CM,
    COREDNS,
    DEFAULTS,
    counts,
    events,
    make,
)

HPA_PATH = "/apis/autoscaling/v2/namespaces/kube-system/horizontalpodautoscalers/coredns"


def test_the_flag_is_off_by_default() -> None:
    assert parse_args([], {}).dry_run is False
    assert parse_args(["--dry-run"], {}).dry_run is True


def test_a_dry_run_makes_only_gets(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure(0, "json")
    api = FakeApi()
    api.add_scale(COREDNS, 1)
    cluster = counts(40, 160)
    auto = make(api, lambda: cluster, f"--default-params={DEFAULTS}", "--dry-run")
    first = auto.poll_once()
    assert first.ok and first.decision is not None and first.decision.replicas == 3
    assert CM not in api.objects, "the ConfigMap is not created"
    assert api.replicas(COREDNS) == 1, "the target is not written"
    (res,) = first.scales
    assert (res.previous, res.replicas, res.changed, res.dry_run) == (1, 3, False, True)
    auto.poll_once()
    cluster = counts(80, 320)
    auto.poll_once()
    assert {method for method, _ in api.calls} == {"GET"}
    assert [(e["old"], e["new"]) for e in events(capsys, "dry_run.would_scale")] == [
        (1, 3), (1, 5)], "once per pair of counts"
    metrics = Metrics([Target("deployment", "coredns")], dry_run=True)
    metrics.observe(first)
    text = metrics.exposition().decode()
    assert "cpa_dry_run 1.0" in text
    assert 'cpa_dry_run_replicas{target="deployment/coredns"} 3.0' in text
    assert 'cpa_target_replicas{target="deployment/coredns"} 1.0' in text
    assert 'cpa_scale_writes_total{target="deployment/coredns"} 0.0' in text
    assert "cpa_desired_replicas 3.0" in text
    assert "cpa_dry_run 0.0" in Metrics([]).exposition().decode()


def test_the_configmap_that_would_be_created_is_logged_once(
        capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure(0, "json")
    api = FakeApi()
    api.add_scale(COREDNS, 2)
    auto = make(api, counts(16, 128), f"--default-params={DEFAULTS}", "--dry-run")
    for _ in range(3):
        assert auto.poll_once().ok
    (would,) = events(capsys, "configmap.would_create")
    assert json.loads(would["data"]["linear"])["nodesPerReplica"] == 16
    assert not api.created


def test_a_dry_run_writes_no_hpa_floor_either() -> None:
    api = FakeApi()
    api.put(HPA_PATH, {"kind": "HorizontalPodAutoscaler",
                       "spec": {"minReplicas": 1, "maxReplicas": 4}})
    auto = make(api, counts(40, 160), f"--default-params={DEFAULTS}", "--dry-run",
                target="hpa/coredns")
    (res,) = auto.poll_once().scales
    assert (res.previous, res.replicas, res.dry_run) == (1, 3, True)
    assert api.objects[HPA_PATH]["spec"]["minReplicas"] == 1
    assert {method for method, _ in api.calls} == {"GET"}
