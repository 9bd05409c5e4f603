"""``/cpvpa``'s second round (issue 32) as a real process against the real API server:
several targets per instance, StatefulSets, ``--events``, and the fallback's budget.

As in ``test_vertical.py`` there is no controller-manager or kubelet: the tests create the
Pods a controller would (owned by their workload, marked Running through the status
subresource), the API server's ``pods/resize`` validates and stores resizes, and its
Eviction API marks an evicted Pod for deletion (``deletionTimestamp``: the Pod is bound to
a Node whose kubelet never confirms). Expected values are CPVA's formula, written out.
"""


from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.controlplane import AdminClient, ControlPlane
from tests.integration.support import create_nodes, wait_polls, wait_until
from tests.integration.test_vertical import (
    CONFIG,
    CPVA_RBAC,
    EXPECTED,
    config_dir,
    create_pod,
    create_target,
    granted,
    pod_resources,
    sizing,
    targets_on_three_nodes,
    template_resources,
    three_nodes,
)

pytestmark = pytest.mark.integration

GUARANTEED = {"requests": {"cpu": "5m", "memory": "32Mi"},
              "limits": {"cpu": "5m", "memory": "32Mi"}}
# Only requests move: a Guaranteed Pod would become Burstable, so every resize is refused
# (reason qos) and the fallback acts.
REQUESTS_ONLY = {"c": {"requests": {"cpu": {"base": "10m", "step": "1m", "coresPerStep": 1},
                                    "memory": {"base": "64Mi", "step": "1Mi",
                                               "nodesPerStep": 1}}}}
RESIZED = {"cpu": "34m", "memory": "70254592"}  # 3 Nodes of 8 cores


def create_statefulset(admin: AdminClient, namespace: str, name: str, *,
                       strategy: dict[str, Any] | None = None, replicas: int = 1
                       ) -> dict[str, Any]:
    labels = {"app": name}
    spec: dict[str, Any] = {
        "replicas": replicas, "serviceName": name, "selector": {"matchLabels": labels},
        "template": {"metadata": {"labels": labels}, "spec": {"containers": [
            {"name": "c", "image": "registry.k8s.io/pause:3.10",
             "resources": {"requests": {"cpu": "5m"}}}]}}}
    if strategy is not None:
        spec["updateStrategy"] = strategy
    return admin.post(f"/apis/apps/v1/namespaces/{namespace}/statefulsets", {
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": namespace}, "spec": spec})


def statefulset_resources(admin: AdminClient, namespace: str, name: str) -> dict[str, Any]:
    obj = admin.get(f"/apis/apps/v1/namespaces/{namespace}/statefulsets/{name}")
    return dict(obj["spec"]["template"]["spec"]["containers"][0].get("resources") or {})


def owned_pod(admin: AdminClient, namespace: str, owner: dict[str, Any], name: str,
              resources: dict[str, Any]) -> None:
    """A Running Pod of ``owner`` on this module's Nodes."""
    create_pod(admin, namespace, owner, name, resources, node="v2-0000")


def terminating(admin: AdminClient, namespace: str) -> set[str]:
    pods = admin.get(f"/api/v1/namespaces/{namespace}/pods")["items"]
    return {p["metadata"]["name"] for p in pods if p["metadata"].get("deletionTimestamp")}


def events(admin: AdminClient, namespace: str, reason: str) -> list[dict[str, Any]]:
    found = admin.get(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")["items"]
    return [e for e in found if e.get("reason") == reason]


# --- 1. several targets ---------------------------------------------------------------------


def test_several_targets_one_count_each_written_on_its_own(
        controlplane: ControlPlane, namespace: str, no_nodes: None,
        cpvpa: Callable[..., Any], tmp_path: Path) -> None:
    admin = targets_on_three_nodes(controlplane, namespace, "v2", "deployment/metrics",
                                   "daemonset/agent", "deployment/broken")
    blocks = {
        "deployment/metrics": {"c": {"requests": {"cpu": {"base": "100m", "step": "1m",
                                                          "nodesPerStep": 1}}}},
        "DaemonSet/Agent": CONFIG,  # keys are read as --target is: any case
        # A container the target lacks: this target's PATCH fails every poll.
        "deployment/broken": {"sidecar": {"requests": {"cpu": {"base": "1m"}}}},
    }
    key, update = config_dir(tmp_path, blocks)
    proc = cpvpa("--target=deployment/metrics,daemonset/agent,deployment/broken",
                 f"--namespace={namespace}", f"--config-file={key}", "--leader-elect")
    wait_until("both good targets written", lambda: template_resources(
        admin, namespace, "deployment", "metrics") == {"requests": {"cpu": "103m"}}
        and template_resources(admin, namespace, "daemonset", "agent") == EXPECTED, 30)
    body = proc.wait_poll_error("deployment/broken: Update failure")
    assert "the target has no container 'sidecar'" in body
    assert "deployment/metrics:" not in body and "daemonset/agent:" not in body
    metrics = proc.metrics()
    assert metrics['cpvpa_target_ok{target="deployment/broken"}'] == 0
    assert metrics['cpvpa_target_ok{target="daemonset/agent"}'] == 1
    assert metrics['cpvpa_computed{container="c",kind="requests",resource="cpu",'
                   'target="daemonset/agent"}'] == 0.034
    assert metrics['cpvpa_written{container="c",kind="requests",resource="cpu",'
                   'target="deployment/metrics"}'] == 0.103
    assert metrics['cpvpa_writes_total{result="error",target="deployment/broken"}'] >= 1
    assert metrics['cpvpa_writes_total{result="success",target="daemonset/agent"}'] == 1
    # One Lease for the instance.
    leases = admin.get(f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases")
    assert [lease["metadata"]["name"] for lease in leases["items"]] == [
        f"cpvpa-deployment-metrics-{_digest('deployment/metrics,daemonset/agent,deployment/broken')}"]
    # The cluster grows: one count serves all, each target follows.
    create_nodes(admin, "v2", 1, cpu="8", start=3)
    wait_until("both targets at 4 Nodes", lambda: template_resources(
        admin, namespace, "deployment", "metrics") == {"requests": {"cpu": "104m"}}
        and template_resources(admin, namespace, "daemonset", "agent")["requests"][
            "cpu"] == "42m", 30)
    updates = [(e.get("target"), e["nodes"], e["cores"]) for e in proc.events("update")]
    assert ("deployment/metrics", 4, 32) in updates and ("daemonset/agent", 4, 32) in updates
    # A block fixed in the file: the broken target recovers, the others are not rewritten.
    blocks["deployment/broken"] = {"c": {"requests": {"cpu": {"base": "7m"}}}}
    update(blocks)
    wait_until("the fixed target", lambda: template_resources(
        admin, namespace, "deployment", "broken") == {"requests": {"cpu": "7m"}}, 30)
    proc.wait_poll_ok()


def _digest(keys: str) -> str:
    import hashlib

    return hashlib.sha256(keys.encode()).hexdigest()[:10]


def test_a_cpva_format_config_applies_to_every_target_and_blocks_are_checked(
        controlplane: ControlPlane, namespace: str, no_nodes: None,
        cpvpa: Callable[..., Any], tmp_path: Path) -> None:
    admin = targets_on_three_nodes(controlplane, namespace, "v2", "deployment/a",
                                   "replicaset/b")
    proc = cpvpa("--target=deployment/a, replicaset/b", f"--namespace={namespace}",
                 f"--default-config={json.dumps(CONFIG)}")
    wait_until("both targets", lambda: template_resources(
        admin, namespace, "deployment", "a") == EXPECTED and template_resources(
        admin, namespace, "replicaset", "b") == EXPECTED, 30)
    proc.wait_poll_ok()
    # A file whose block names a target the instance does not have: refused, said why.
    key, _ = config_dir(tmp_path, {"deployment/a": CONFIG, "deployment/typo": CONFIG})
    other = cpvpa("--target=deployment/a,replicaset/b", f"--namespace={namespace}",
                  f"--config-file={key}")
    body = other.wait_poll_error("which is not one of --target")
    assert "'deployment/typo'" in body


# --- 2. StatefulSets ------------------------------------------------------------------------


@pytest.mark.parametrize(("strategy", "says"), [
    (None, "the StatefulSet controller replaces every Pod"),
    ({"type": "OnDelete"}, "updateStrategy OnDelete"),
    ({"type": "RollingUpdate", "rollingUpdate": {"partition": 2}},
     "no Pod is updated until the partition is lowered"),
])
def test_statefulset_template_mode_writes_and_says_what_its_strategy_does(
        controlplane: ControlPlane, namespace: str, no_nodes: None,
        cpvpa: Callable[..., Any], strategy: dict[str, Any] | None, says: str) -> None:
    admin = three_nodes(controlplane, "v2")
    create_statefulset(admin, namespace, "db", strategy=strategy, replicas=2)
    proc = cpvpa("--target=statefulset/db", "--allow-statefulset",
                 f"--namespace={namespace}", f"--default-config={json.dumps(CONFIG)}")
    wait_until("the StatefulSet's template", lambda: statefulset_resources(
        admin, namespace, "db") == EXPECTED, 30)
    proc.wait_poll_ok()
    [rollout] = proc.events("update.rollout")
    assert says in rollout["rollout"]
    # The strategy is the StatefulSet's own: the write leaves it as it was.
    obj = admin.get(f"/apis/apps/v1/namespaces/{namespace}/statefulsets/db")
    assert obj["spec"]["updateStrategy"]["type"] == (strategy or {}).get("type",
                                                                          "RollingUpdate")


@pytest.mark.parametrize(("strategy", "template_patched"), [
    ({"type": "OnDelete"}, True),
    ({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}, False),
])
def test_statefulset_in_place_resizes_its_pods_by_selector(
        controlplane: ControlPlane, namespace: str, no_nodes: None,
        cpvpa: Callable[..., Any], strategy: dict[str, Any], template_patched: bool) -> None:
    admin = three_nodes(controlplane, "v2")
    sts = create_statefulset(admin, namespace, "db", strategy=strategy, replicas=2)
    burstable = {"requests": {"cpu": "5m", "memory": "32Mi"}, "limits": {"memory": "1Gi"}}
    owned_pod(admin, namespace, sts, "db-0", burstable)
    owned_pod(admin, namespace, sts, "db-1", burstable)
    # A Pod with the labels but another owner is not the set's.
    other = create_target(admin, namespace, "replicaset", "other")
    other["spec"]["selector"]["matchLabels"] = {"app": "db"}
    owned_pod(admin, namespace, other, "stranger", burstable)
    proc = cpvpa("--target=statefulset/db", "--allow-statefulset", "--resize-mode=in-place",
                 f"--namespace={namespace}", f"--default-config={json.dumps(REQUESTS_ONLY)}")
    want = {"requests": RESIZED, "limits": {"memory": "1Gi"}}
    wait_until("both Pods resized in place", lambda: all(
        pod_resources(admin, namespace, pod) == want for pod in ("db-0", "db-1")), 30)
    proc.wait_poll_ok()
    assert pod_resources(admin, namespace, "stranger") == burstable
    if template_patched:
        wait_until("the template (OnDelete: patching it restarts nothing)", lambda:
                   statefulset_resources(admin, namespace, "db")["requests"] == RESIZED, 30)
    else:
        wait_polls(proc, count=2)
        assert statefulset_resources(admin, namespace, "db") == {"requests": {"cpu": "5m"}}
        [skipped] = proc.events("resize.template_skipped")
        assert "StatefulSet's updateStrategy is RollingUpdate" in skipped["reason"]


# --- 3. Events ------------------------------------------------------------------------------


def test_events_on_each_change_and_each_fallback_regarding_the_workload(
        controlplane: ControlPlane, namespace: str, no_nodes: None,
        cpvpa: Callable[..., Any]) -> None:
    admin = three_nodes(controlplane, "v2")
    ds = create_target(admin, namespace, "daemonset", "agent")
    burstable = {"requests": {"cpu": "5m", "memory": "32Mi"}, "limits": {"memory": "1Gi"}}
    owned_pod(admin, namespace, ds, "agent-a", burstable)
    owned_pod(admin, namespace, ds, "agent-g", GUARANTEED)  # refused: qos
    proc = cpvpa("--target=daemonset/agent", "--resize-mode=in-place", "--events",
                 f"--namespace={namespace}", f"--default-config={json.dumps(REQUESTS_ONLY)}")
    wait_until("the fallback's Event", lambda: events(admin, namespace, "ResizeFallback"), 30)
    wait_until("the resize's and the write's Events", lambda: events(
        admin, namespace, "ResizedInPlace") and events(admin, namespace, "ResourcesUpdated"),
        30)
    [fallback] = events(admin, namespace, "ResizeFallback")
    assert fallback["type"] == "Warning"
    assert fallback["regarding"] == {"apiVersion": "apps/v1", "kind": "DaemonSet",
                                     "name": "agent", "namespace": namespace}
    assert "qos" in fallback["note"] and "agent-g" in fallback["note"]
    assert fallback["reportingController"] == "cluster-proportional-vertical-autoscaler"
    [resized] = events(admin, namespace, "ResizedInPlace")
    assert "agent-a" in resized["note"] and "cpu]=34m" in resized["note"]
    [updated] = events(admin, namespace, "ResourcesUpdated")
    assert "fallback" in updated["note"] and updated["regarding"]["kind"] == "DaemonSet"
    # A new change: one more of each, no Event for a poll that changed nothing.
    wait_polls(proc, count=2)
    assert len(events(admin, namespace, "ResizeFallback")) == 1
    create_nodes(admin, "v2", 1, cpu="8", start=3)
    wait_until("the second change's Events", lambda: len(events(
        admin, namespace, "ResourcesUpdated")) == 2 and len(events(
        admin, namespace, "ResizeFallback")) == 2, 30)


def test_events_without_the_rbac_rule_say_which_and_sizing_goes_on(
        controlplane: ControlPlane, namespace: str, no_nodes: None,
        cpvpa: Callable[..., Any]) -> None:
    admin = targets_on_three_nodes(controlplane, namespace, "v2", "daemonset/agent")
    kubeconfig = granted(controlplane, namespace, CPVA_RBAC)
    proc = cpvpa(*sizing(namespace, "daemonset/agent"), "--events", kubeconfig=kubeconfig)
    wait_until("the values", lambda: template_resources(
        admin, namespace, "daemonset", "agent") == EXPECTED, 30)
    [forbidden] = wait_until("the RBAC line", lambda: proc.events("events.forbidden"), 30)
    assert "grant create on events.k8s.io events" in forbidden["hint"]
    assert "sizing goes on without Events" in forbidden["hint"]
    proc.wait_poll_ok()


# --- 4. the fallback's budget ---------------------------------------------------------------


@pytest.mark.parametrize("kind", ["daemonset", "statefulset"])
def test_the_bounded_fallback_restarts_at_most_n_pods_per_poll(
        controlplane: ControlPlane, namespace: str, no_nodes: None,
        cpvpa: Callable[..., Any], kind: str) -> None:
    admin = three_nodes(controlplane, "v2")
    owner = (create_statefulset(admin, namespace, "agent", strategy={"type": "OnDelete"},
                                replicas=5) if kind == "statefulset" else
             create_target(admin, namespace, "daemonset", "agent", strategy="OnDelete"))
    pods = [f"agent-{i}" for i in range(5)]
    for pod in pods:
        owned_pod(admin, namespace, owner, pod, GUARANTEED)
    proc = cpvpa(f"--target={kind}/agent", "--allow-statefulset", "--resize-mode=in-place",
                 "--resize-fallback-max-pods-per-cycle=2", f"--namespace={namespace}",
                 f"--default-config={json.dumps(REQUESTS_ONLY)}", poll_period=2)
    wait_until("every Pod restarted", lambda: terminating(admin, namespace) == set(pods), 60)
    restarts = [e["pods"] for e in proc.events("resize.fallback_restart")]
    print(f"\n{kind}: Pods evicted per poll: {[len(r) for r in restarts]}")
    assert all(len(r) <= 2 for r in restarts), restarts
    assert sorted(p for r in restarts for p in r) == pods  # each Pod once
    assert len(restarts) >= 3
    template = admin.get(f"/apis/apps/v1/namespaces/{namespace}/{kind}s/agent")
    resources = template["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert resources["requests"] == RESIZED  # patched first: the new Pods get the values
    assert proc.metrics()["cpvpa_fallback_pod_restarts_total"] == 5


@pytest.mark.parametrize(("strategy", "pods", "flags", "error", "says"), [
    pytest.param(None, 2, (), "the fallback is held",
                 ("updateStrategy is RollingUpdate", "OnDelete"), id="held-rollingupdate"),
    pytest.param("OnDelete", 1, ("--resize-fallback-grace-period=1h",), "the fallback waits",
                 ("--resize-fallback-grace-period", "1 Pod(s)"), id="grace-period"),
])
def test_the_bounded_fallback_waits_where_the_template_would_roll_or_in_its_grace_period(
        controlplane: ControlPlane, namespace: str, no_nodes: None,
        cpvpa: Callable[..., Any], strategy: str | None, pods: int, flags: tuple[str, ...],
        error: str, says: tuple[str, ...]) -> None:
    """The fallback is held under a RollingUpdate template (patching it would roll every
    Pod), and delayed by its grace period: either way nothing is written or evicted."""
    admin = three_nodes(controlplane, "v2")
    ds = create_target(admin, namespace, "daemonset", "agent", strategy=strategy)
    for i in range(pods):
        owned_pod(admin, namespace, ds, f"agent-{i}", GUARANTEED)
    proc = cpvpa("--target=daemonset/agent", "--resize-mode=in-place",
                 "--resize-fallback-max-pods-per-cycle=1", *flags, f"--namespace={namespace}",
                 f"--default-config={json.dumps(REQUESTS_ONLY)}")
    body = proc.wait_poll_error(error)
    assert all(fragment in body for fragment in says), body
    wait_polls(proc, count=3)
    assert template_resources(admin, namespace, "daemonset", "agent") == {
        "requests": {"cpu": "5m"}}
    assert terminating(admin, namespace) == set()
    assert proc.metrics()["cpvpa_fallback_pods_waiting"] == pods
