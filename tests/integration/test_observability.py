"""Metrics, Events and leader election with the real daemon and the real API server."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.controlplane import ControlPlane
from tests.integration.support import (
    cordon,
    coredns_and_nodes,
    create_nodes,
    put_configmap_data,
    replicas,
    service_account,
    set_node_ready,
    wait_polls,
    wait_replicas,
    wait_until,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

CM = "obs-params"
BASE_RULES: list[dict[str, Any]] = [
    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "create"]},
    {"apiGroups": ["apps"], "resources": ["deployments/scale"], "verbs": ["get", "update"]},
]
EVENTS = {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create"]}
LEASES = {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
          "verbs": ["get", "create", "update"]}


def identity(plane: ControlPlane, namespace: str, name: str, extra: list[dict[str, Any]]
             ) -> Path:
    """A ServiceAccount with the addon's rules (nodes cluster-wide, the rest in the
    namespace) plus ``extra`` in the namespace; returns its kubeconfig."""
    return service_account(plane, namespace, name, extra, rules=BASE_RULES)


def args(namespace: str, *extra: str) -> list[str]:
    return [f"--namespace={namespace}", f"--configmap={CM}", "--target=deployment/coredns",
            '--default-params={"linear":{"coresPerReplica":4,"nodesPerReplica":2}}', *extra]


def events(plane: ControlPlane, namespace: str, reason: str) -> list[dict[str, Any]]:
    items = plane.admin().get(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")["items"]
    return [e for e in items if e.get("reason") == reason]


def test_metrics_equal_the_cluster_and_the_target(controlplane: ControlPlane, namespace: str,
                                                 no_nodes: None, start: Any) -> None:
    admin = controlplane.admin()
    names = coredns_and_nodes(admin, namespace, "m", 10, cpu="3500m")
    cordon(admin, names[0])
    set_node_ready(admin, names[1], False)
    proc = start(*args(namespace))
    # schedulable: 8 nodes, 28 cores -> max(ceil(28/4), ceil(8/2)) = 7
    wait_replicas(admin, namespace, "deployment", "coredns", 7, proc=proc)
    wait_until("two polls", lambda: proc.metrics()['cpa_polls_total{result="success"}'] >= 2, 30)
    m = proc.metrics()
    assert m['cpa_cluster_nodes{scope="all"}'] == 10
    assert m['cpa_cluster_nodes{scope="schedulable"}'] == 8
    assert m['cpa_cluster_cores{scope="all"}'] == 35
    assert m['cpa_cluster_cores{scope="schedulable"}'] == 28
    assert m["cpa_desired_replicas"] == 7
    assert m['cpa_target_replicas{target="deployment/coredns"}'] == replicas(
        admin, namespace, "deployment", "coredns")
    assert m['cpa_scale_writes_total{target="deployment/coredns"}'] == 1
    assert m['cpa_params_info{mode="linear"}'] == 1
    assert m['cpa_params_info{mode="ladder"}'] == 0
    assert m['cpa_polls_total{result="error"}'] == 0
    assert m["cpa_poll_duration_seconds_count"] >= 2
    assert abs(m["cpa_last_successful_poll_timestamp_seconds"] - time.time()) < 30
    assert m["cpa_node_watch_restarts_total"] == 0
    assert m["cpa_node_counts_stale_seconds"] == 0
    assert m["cpa_leader"] == 1
    assert m["process_resident_memory_bytes"] > 0
    assert proc.health("/healthz") == (200, "")
    assert proc.last_poll() == (200, "")


@pytest.mark.api_paths
def test_events_after_a_scale_and_for_a_bad_configmap(controlplane: ControlPlane,
                                                     namespace: str, no_nodes: None,
                                                     start: Any) -> None:
    admin = controlplane.admin()
    coredns_and_nodes(admin, namespace, "ev", 4, cpu="4")  # max(ceil(16/4), ceil(4/2)) = 4
    proc = start(*args(namespace, "--events"),
                 kubeconfig=identity(controlplane, namespace, "with-events", [EVENTS]))
    wait_replicas(admin, namespace, "deployment", "coredns", 4, proc=proc)
    scaled = wait_until("a Scaled event", lambda: events(controlplane, namespace, "Scaled"), 30)
    event = scaled[0]
    assert event["type"] == "Normal"
    assert event["regarding"]["kind"] == "Deployment" and event["regarding"]["name"] == "coredns"
    assert event["note"].startswith("Scaled deployment/coredns from 1 to 4 replicas (linear")
    assert event["reportingController"] == "cluster-proportional-autoscaler"

    put_configmap_data(admin, namespace, CM, {"linear": '{"min":-1,"nodesPerReplica":1}'})
    warned = wait_until("an InvalidParameters event",
                        lambda: events(controlplane, namespace, "InvalidParameters"), 30)
    wait_polls(proc, count=3)  # more polls, same resourceVersion: still one Warning
    warned = events(controlplane, namespace, "InvalidParameters")
    assert len(warned) == 1
    assert warned[0]["type"] == "Warning"
    assert warned[0]["regarding"]["kind"] == "ConfigMap"
    assert "min is -1" in warned[0]["note"]


def test_without_the_event_permission_it_keeps_scaling(controlplane: ControlPlane,
                                                      namespace: str, no_nodes: None,
                                                      start: Any) -> None:
    admin = controlplane.admin()
    coredns_and_nodes(admin, namespace, "ne", 4, cpu="4")
    proc = start(*args(namespace, "--events"),
                 kubeconfig=identity(controlplane, namespace, "no-events", []))
    wait_replicas(admin, namespace, "deployment", "coredns", 4, proc=proc)
    create_nodes(admin, "ne", 4, cpu="4", start=4)  # 8 nodes, 32 cores: 8
    wait_replicas(admin, namespace, "deployment", "coredns", 8, proc=proc)
    proc.wait_poll_ok()
    forbidden = proc.events("events.forbidden")
    assert len(forbidden) == 1, "one clear line, not one per change"
    assert "events-rbac.yaml" in forbidden[0]["hint"]
    assert events(controlplane, namespace, "Scaled") == []


@pytest.mark.api_paths
def test_leader_election_one_writer_and_takeover(controlplane: ControlPlane, namespace: str,
                                                 no_nodes: None, start: Any) -> None:
    admin = controlplane.admin()
    coredns_and_nodes(admin, namespace, "le", 4, cpu="4")
    kubeconfig = identity(controlplane, namespace, "ha", [LEASES])
    first = start(*args(namespace, "--leader-elect"), kubeconfig=kubeconfig)
    wait_replicas(admin, namespace, "deployment", "coredns", 4, proc=first)
    second = start(*args(namespace, "--leader-elect"), kubeconfig=kubeconfig)
    wait_until("the second to be up", lambda: second.health("/healthz")[0] == 200, 60)
    lease = admin.get(f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{CM}")
    holder = lease["spec"]["holderIdentity"]
    assert first.metrics()["cpa_leader"] == 1 and second.metrics()["cpa_leader"] == 0

    create_nodes(admin, "le", 2, cpu="4", start=4)  # 6 nodes, 24 cores: 6
    wait_replicas(admin, namespace, "deployment", "coredns", 6, proc=first)
    wait_polls(first, count=3)  # time for the follower to have polled, had it done so
    assert second.events("scale.changed") == [] and second.events("poll.failed") == []
    assert not any(True for _ in second.events("configmap.created"))

    first.signal(signal.SIGKILL)  # no chance to release the Lease
    killed = time.monotonic()
    wait_until("the follower to take over",
               lambda: second.events("leader.started") and second.metrics()["cpa_leader"] == 1,
               40)
    took = time.monotonic() - killed
    new_holder = admin.get(
        f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{CM}")["spec"]
    assert new_holder["holderIdentity"] != holder
    create_nodes(admin, "le", 2, cpu="4", start=6)  # 8 nodes: 8
    wait_replicas(admin, namespace, "deployment", "coredns", 8, proc=second)
    print(f"\nleader killed: the follower took over after {took:.1f}s (lease 15s); "
          f"leaseTransitions={new_holder['leaseTransitions']}")
    # The follower tries every retry period times 1 + U(0, 1.2), up to 4.4 s (client-go's
    # jitter): it can see the last renewal up to one such try late, and acquires at the first
    # try after the lease ran out from then; 2 s more for this check to see the metric.
    assert took <= 15 + 2 * (2 * 2.2) + 2, "takeover within the lease duration plus two tries"

    # A clean stop hands over at once.
    third = start(*args(namespace, "--leader-elect"), kubeconfig=kubeconfig)
    wait_until("the third to follow", lambda: third.health("/healthz")[0] == 200, 60)
    second.signal(signal.SIGTERM)
    assert second.wait_exit(10) == 0
    released = time.monotonic()
    wait_until("the third to lead", lambda: third.events("leader.started"), 30)
    print(f"clean stop: handed over after {time.monotonic() - released:.1f}s")
    assert replicas(admin, namespace, "deployment", "coredns") == 8


def test_react_to_node_changes_only_the_leader_polls_early(
        controlplane: ControlPlane, namespace: str, no_nodes: None, start: Any) -> None:
    """--react-to-node-changes with a poll period of an hour: only an early poll can write,
    only the leader makes one, and a node change that leaves the decision alone is looked
    at (--v=5 logs each look) but makes no poll."""
    admin = controlplane.admin()
    coredns_and_nodes(admin, namespace, "re", 4, cpu="4")  # 4 nodes, 16 cores: 4
    kubeconfig = identity(controlplane, namespace, "re", [LEASES])
    flags = args(namespace, "--leader-elect", "--react-to-node-changes", "--v=5")
    leader = start(*flags, poll_period=3600, kubeconfig=kubeconfig)
    wait_replicas(admin, namespace, "deployment", "coredns", 4, proc=leader)
    follower = start(*flags, poll_period=3600, kubeconfig=kubeconfig)
    wait_until("the follower to be up", lambda: follower.health("/healthz")[0] == 200, 60)
    assert leader.metrics()["cpa_leader"] == 1 and follower.metrics()["cpa_leader"] == 0
    assert leader.polls() == 1

    create_nodes(admin, "re", 2, cpu="4", start=4)  # 6 nodes, 24 cores: 6
    wait_replicas(admin, namespace, "deployment", "coredns", 6, proc=leader)
    assert leader.metrics()["cpa_early_polls_total"] >= 1
    assert leader.events("poll.early")[0]["desired_before"] == 4

    polls, looked = leader.polls(), len(leader.events("nodes.checked"))
    create_nodes(admin, "re", 1, cpu="0", start=6)  # 7 nodes (4), 24 cores (6): still 6
    wait_until("the loop to look at the new counts",
               lambda: len(leader.events("nodes.checked")) > looked, 30)
    assert leader.events("nodes.checked")[-1]["moved"] is False
    assert leader.polls() == polls and leader.metrics()["cpa_early_polls_total"] == polls - 1
    assert replicas(admin, namespace, "deployment", "coredns") == 6

    assert follower.polls() == 0 and follower.events("nodes.checked") == []
    assert follower.events("poll.early") == [] and follower.events("scale.changed") == []
