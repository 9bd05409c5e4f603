"""``--watch-targets`` on the real API server: another writer's replica count (a client with
its own field manager, writing through the scale subresource) is answered at once, a poll
period of 60 s notwithstanding, and the writer is named from managedFields in the log, the
metric and an Event; a writer that keeps undoing ours is answered at the period only (and
``cpa explain --from-cluster`` names it); a dry run reports and writes nothing; a
ServiceAccount without the watch's rights is told which rule to add.

The reaction time (the foreign write's answer to our count back) is measured and printed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.controlplane import ControlPlane
from tests.controlplane.client import AdminClient
from tests.integration.support import (
    AutoscalerProcess,
    coredns_and_nodes,
    coredns_flags,
    create_configmap,
    explain_json,
    replicas,
    service_account,
    wait_replicas,
    wait_until,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

CM = "watch-params"
EXAMPLE = (Path(__file__).resolve().parents[2] / "manifests" / "examples"
           / "watch-targets-rbac.yaml")
EVENTS = [{"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create"]}]
SERIES = 'cpa_foreign_writes_total{manager="gitops-tool",target="deployment/coredns"}'
CONTENDED = 'cpa_target_contended{target="deployment/coredns"}'


def example_rules() -> list[dict[str, Any]]:
    """The rules manifests/examples/watch-targets-rbac.yaml grants."""
    (role,) = [d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d and d["kind"] == "Role"]
    rules: list[dict[str, Any]] = role["rules"]
    return rules


def foreign_write(admin: AdminClient, namespace: str, count: int,
                  manager: str = "gitops-tool") -> tuple[float, str]:
    """``count`` written through the scale subresource as ``manager``: when (monotonic),
    and the resourceVersion the write made."""
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments/coredns/scale"
    scale = admin.get(path)
    scale["spec"]["replicas"] = count
    written = admin.put(f"{path}?fieldManager={manager}", scale)
    return time.monotonic(), str(written["metadata"]["resourceVersion"])


def answered(admin: AdminClient, namespace: str, ours: int, write: tuple[float, str]) -> float:
    """Seconds from the foreign write until the API server sends the change that puts our
    count back (a watch from the write's resourceVersion: no polling in between)."""
    at, version = write
    admin.watch_until(
        f"/apis/apps/v1/namespaces/{namespace}/deployments?watch=1&resourceVersion={version}"
        "&fieldSelector=metadata.name%3Dcoredns&timeoutSeconds=30",
        lambda event: event["object"]["spec"]["replicas"] == ours)
    return time.monotonic() - at


def started(controlplane: ControlPlane, namespace: str, start: Callable[..., AutoscalerProcess],
            *extra: str) -> tuple[AdminClient, AutoscalerProcess]:
    """coredns at 4 replicas (4 Nodes, one replica each) under a daemon with
    ``--watch-targets`` and a 60 s poll period, as a ServiceAccount with the example's
    rules (and Events')."""
    admin = controlplane.admin()
    coredns_and_nodes(admin, namespace, "watch", 4)
    create_configmap(admin, namespace, CM, {"linear": '{"nodesPerReplica":1}'})
    kubeconfig = service_account(controlplane, namespace, "watcher",
                                 extra=[*example_rules(), *EVENTS])
    proc = start(*coredns_flags(namespace, CM, "--watch-targets", *extra), poll_period=60,
                 kubeconfig=kubeconfig)
    wait_replicas(admin, namespace, "deployment", "coredns", 4, proc=proc)
    wait_until("the deployments watched", lambda: proc.events("objects.synced"), 30)
    return admin, proc


def test_a_foreign_count_is_answered_at_once_and_its_writer_named(
        controlplane: ControlPlane, namespace: str, no_nodes: None,
        start: Callable[..., AutoscalerProcess]) -> None:
    admin, proc = started(controlplane, namespace, start, "--events")
    polls = proc.polls()
    took = answered(admin, namespace, 4, foreign_write(admin, namespace, 1))
    print(f"\n--watch-targets: a foreign write answered in {took * 1000:.0f} ms "
          "(poll period 60 s)")
    assert took < 30, "answered by a period's poll, not at once"  # the period is 60 s
    wait_until("the poll counted", lambda: proc.polls() > polls or None)
    assert proc.polls() == polls + 1  # one poll, woken by the watch
    (event,) = wait_until("target.foreign_write", lambda: proc.events("target.foreign_write"))
    assert (event["target"], event["manager"], event["ours"], event["found"]) == (
        "deployment/coredns", "gitops-tool", 4, 1)
    assert event["answer"] == "at once"
    assert wait_until("the counter", lambda: proc.metrics().get(SERIES)) == 1
    assert proc.metrics()[CONTENDED] == 0

    def warning() -> dict[str, Any] | None:
        items = admin.get(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")["items"]
        return next((e for e in items if e["reason"] == "ForeignWrite"), None)

    note = wait_until("a ForeignWrite Event", warning)
    assert note["type"] == "Warning" and note["regarding"]["name"] == "coredns"
    assert "gitops-tool" in note["note"], note["note"]


def test_a_writer_that_keeps_undoing_ours_is_answered_at_the_period_only(
        controlplane: ControlPlane, namespace: str, no_nodes: None,
        start: Callable[..., AutoscalerProcess]) -> None:
    admin, proc = started(controlplane, namespace, start)
    times = [answered(admin, namespace, 4, foreign_write(admin, namespace, count))
             for count in (1, 2, 1)]
    print(f"\nthree foreign writes answered in {[round(t * 1000) for t in times]} ms")
    assert wait_until("contended", lambda: proc.metrics().get(CONTENDED) == 1 or None)
    (began,) = proc.events("target.contended")
    assert began["manager"] == "gitops-tool"
    polls = proc.polls()
    foreign_write(admin, namespace, 2)
    wait_until("the answer deferred", lambda: proc.events("target.answer_deferred"))
    assert replicas(admin, namespace, "deployment", "coredns") == 2  # not answered
    assert proc.polls() == polls
    assert proc.metrics()[SERIES] == 3
    doc = explain_json(controlplane.admin_kubeconfig, namespace, CM,
                       "--target=deployment/coredns")
    assert (doc["target"]["current"], doc["target"]["last_writer"]) == (2, "gitops-tool")
    assert doc["steps"][-1]["key"] == "target.writer"


def test_without_the_watch_rights_the_poll_names_the_rule(
        controlplane: ControlPlane, namespace: str, no_nodes: None,
        start: Callable[..., AutoscalerProcess]) -> None:
    admin = controlplane.admin()
    coredns_and_nodes(admin, namespace, "nowatch", 2)
    create_configmap(admin, namespace, CM, {"linear": '{"nodesPerReplica":1}'})
    kubeconfig = service_account(controlplane, namespace, "nowatcher")
    proc = start(*coredns_flags(namespace, CM, "--watch-targets"), kubeconfig=kubeconfig)
    wait_replicas(admin, namespace, "deployment", "coredns", 2, proc=proc)  # still written
    body = proc.wait_poll_error("--watch-targets")
    assert "apiGroups [apps] resources [deployments] verbs [get, list, watch]" in body, body


def test_a_dry_run_reports_the_foreign_count_and_writes_nothing(
        controlplane: ControlPlane, namespace: str, no_nodes: None,
        start: Callable[..., AutoscalerProcess]) -> None:
    admin = controlplane.admin()
    coredns_and_nodes(admin, namespace, "dry", 4)
    create_configmap(admin, namespace, CM, {"linear": '{"nodesPerReplica":1}'})
    kubeconfig = service_account(controlplane, namespace, "drywatcher", extra=example_rules())
    proc = start(*coredns_flags(namespace, CM, "--watch-targets", "--dry-run", "--events"),
                 poll_period=60, kubeconfig=kubeconfig)
    wait_until("the would-be write", lambda: proc.events("dry_run.would_scale"))
    wait_until("the deployments watched", lambda: proc.events("objects.synced"), 30)
    foreign_write(admin, namespace, 2)
    (event,) = wait_until("target.foreign_write", lambda: proc.events("target.foreign_write"))
    assert (event["manager"], event["ours"], event["found"]) == ("gitops-tool", None, 2)
    assert replicas(admin, namespace, "deployment", "coredns") == 2  # nothing written
    assert not admin.get(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")["items"]
