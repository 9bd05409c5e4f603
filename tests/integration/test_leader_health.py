"""A replica that cannot lead says so, and two replicas never lead at once (issue 27, #5
and #8), with the real daemons against the real API server.

- A ServiceAccount without the Lease rule: ``/last-poll`` 500 naming the rule, every poll
  period counted as a failed poll, ``*_leader`` 0 from the first scrape (both daemons).
- A "ghost" Lease (another holder, ``leaseDurationSeconds: 2147483647``): one
  ``leader.lease_ghost`` warning, the holder's duration in ``/metrics``, and the record's
  age past three lease durations, which is what ``ProportionalAutoscalerNoLeader`` fires on.
- ``holderIdentity`` emptied by hand while one of two replicas leads: the leadership
  intervals of the two (from their own ``leader.started``/``leader.stopped`` events) never
  overlap.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.controlplane import AdminClient, ControlPlane
from tests.controlplane.client import ApiError
from tests.integration.support import (
    AutoscalerProcess,
    coredns_and_nodes,
    create_nodes,
    wait_polls,
    wait_replicas,
    wait_until,
)
from tests.integration.test_observability import BASE_RULES, LEASES, args, identity
from tests.integration.test_vertical import (
    CPVA_RBAC,
    granted,
    sizing,
    targets_on_three_nodes,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

SHORT = ("--leader-elect-lease-duration=3s", "--leader-elect-renew-deadline=2s",
         "--leader-elect-retry-period=500ms")
RULE = 'resources: ["leases"], verbs: ["get", "create", "update"]'


def lease_path(namespace: str, name: str) -> str:
    return f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"


def errors(proc: AutoscalerProcess) -> float:
    return proc.metrics()[f'{proc.prefix}_polls_total{{result="error"}}']


def test_without_the_lease_rule_last_poll_fails_naming_it_and_errors_count(
        controlplane: ControlPlane, namespace: str, no_nodes: None, start: Any) -> None:
    admin = controlplane.admin()
    coredns_and_nodes(admin, namespace, "nolease", 2, cpu="4")
    kubeconfig = identity(controlplane, namespace, "nolease", [])  # no Lease rule
    proc = start(*args(namespace, "--leader-elect", *SHORT), kubeconfig=kubeconfig)
    proc.wait_healthy()
    leader_at_start = proc.metrics()["cpa_leader"]
    try:
        body = proc.wait_poll_error("leader election", timeout=30)
    finally:
        status, text = proc.last_poll()
        print(f"\n/last-poll: {status} {text[:300]!r}; cpa_leader at the first scrape: "
              f"{leader_at_start}; errors counted: {errors(proc)}")
    assert RULE in body and "forbidden" in body and namespace in body
    first = errors(proc)
    wait_until("more failed polls counted", lambda: errors(proc) >= first + 2, 30)
    m = proc.metrics()
    assert m["cpa_leader"] == 0 and leader_at_start == 0
    assert m["cpa_leader_lease_errors_total"] >= 2
    assert m['cpa_polls_total{result="success"}'] == 0
    assert proc.events("scale.changed") == []


def test_cpvpa_without_the_lease_rule_says_so_too(
        controlplane: ControlPlane, namespace: str, no_nodes: None, cpvpa: Any) -> None:
    targets_on_three_nodes(controlplane, namespace, "v-nolease", "daemonset/agent")
    kubeconfig = granted(controlplane, namespace, CPVA_RBAC)  # CPVA's rules: no Lease
    proc = cpvpa(*sizing(namespace, "daemonset/agent"), "--leader-elect", *SHORT,
                 kubeconfig=kubeconfig)
    proc.wait_healthy()
    leader_at_start = proc.metrics()["cpvpa_leader"]
    body = proc.wait_poll_error("leader election", timeout=30)
    assert RULE in body
    first = errors(proc)
    wait_until("more failed polls counted", lambda: errors(proc) >= first + 2, 30)
    assert proc.metrics()["cpvpa_leader"] == 0 and leader_at_start == 0
    assert proc.metrics()["cpvpa_leader_lease_errors_total"] >= 2


def test_leader_is_0_before_the_first_lease_even_while_the_node_list_fails(
        controlplane: ControlPlane, namespace: str, no_nodes: None, start: Any) -> None:
    """The old race: ``cpa_leader`` was 1 in every scrape until the election began (after
    the first Node list). With no right to list Nodes that is forever."""
    admin = controlplane.admin()
    coredns_and_nodes(admin, namespace, "nonodes", 2, cpu="4")
    rbac = "rbac.authorization.k8s.io/v1"
    subject = [{"kind": "ServiceAccount", "name": "nonodes", "namespace": namespace}]
    admin.apply({"apiVersion": rbac, "kind": "Role",
                 "metadata": {"name": "nonodes", "namespace": namespace},
                 "rules": [*BASE_RULES, LEASES]})
    admin.apply({"apiVersion": rbac, "kind": "RoleBinding",
                 "metadata": {"name": "nonodes", "namespace": namespace}, "subjects": subject,
                 "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                             "name": "nonodes"}})
    kubeconfig = controlplane.kubeconfig_for(
        f"system:serviceaccount:{namespace}:nonodes",
        ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"])
    proc = start(*args(namespace, "--leader-elect"), kubeconfig=kubeconfig)
    proc.wait_healthy()
    proc.wait_poll_error("waiting for the first Node list")
    samples = [proc.metrics()["cpa_leader"] for _ in range(5)]
    print(f"\ncpa_leader before the first Node list: {samples}")
    assert samples == [0] * 5


def put_ghost(admin: AdminClient, namespace: str, name: str) -> None:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    admin.post(f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases", {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"holderIdentity": "ghost-of-a-deleted-tool",
                 "leaseDurationSeconds": 2147483647, "acquireTime": now, "renewTime": now,
                 "leaseTransitions": 0}})


def test_a_ghost_lease_is_a_warning_a_metric_and_the_no_leader_condition(
        controlplane: ControlPlane, namespace: str, no_nodes: None, start: Any) -> None:
    admin = controlplane.admin()
    coredns_and_nodes(admin, namespace, "ghost", 2, cpu="4")
    put_ghost(admin, namespace, "obs-params")
    kubeconfig = identity(controlplane, namespace, "ghost", [LEASES])
    proc = start(*args(namespace, "--leader-elect", *SHORT), kubeconfig=kubeconfig)
    proc.wait_healthy()

    def ghost_warned() -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = proc.events("leader.lease_ghost")
        return found

    try:
        [warning] = wait_until("the ghost warning", ghost_warned, 30)
    finally:
        m = proc.metrics()
        print(f"\nghost Lease: /last-poll {proc.last_poll()[0]}, cpa_leader "
              f"{m['cpa_leader']}, errors {errors(proc)}, warnings "
              f"{len(proc.events('leader.lease_ghost'))}")
    assert warning["holder"] == "ghost-of-a-deleted-tool"
    assert warning["lease_duration_seconds"] == 2147483647
    assert "kubectl delete lease" in warning["hint"]

    def unchanged_past_three_durations() -> dict[str, float] | None:
        m = proc.metrics()
        over = m["cpa_leader_lease_unchanged_seconds"] > 3 * m[
            "cpa_leader_lease_duration_seconds"]
        return m if over else None

    m = wait_until("the alert's condition", unchanged_past_three_durations, 30)
    assert m["cpa_leader_lease_holder_duration_seconds"] == 2147483647
    assert m["cpa_leader_lease_duration_seconds"] == 3
    assert m["cpa_leader"] == 0 and m["cpa_leader_lease_errors_total"] == 0
    assert len(proc.events("leader.lease_ghost")) == 1, "once, not once per look"
    assert admin.get(lease_path(namespace, "obs-params"))["spec"]["holderIdentity"] == \
        "ghost-of-a-deleted-tool"

    admin.delete(lease_path(namespace, "obs-params"))  # the fix the hint gives
    wait_replicas(admin, namespace, "deployment", "coredns", 2)  # 2 nodes, 8 cores: 2
    assert proc.metrics()["cpa_leader"] == 1 and proc.events("leader.started")


def _intervals(proc: AutoscalerProcess, now: float) -> list[tuple[float, float]]:
    """When ``proc`` led, by its own events (a leadership not ended yet ends ``now``)."""
    events = [(datetime.fromisoformat(e["timestamp"].replace("Z", "+00:00")).timestamp(),
               e["event"]) for e in proc.events("leader.started") + proc.events("leader.stopped")
              + proc.events("leader.released")]
    out, began = [], None
    for at, name in sorted(events):
        if name == "leader.started":
            began = at
        elif began is not None:
            out.append((began, at))
            began = None
    if began is not None:
        out.append((began, now))
    return out


def _empty_holder(admin: Any, path: str) -> str:
    """Write ``holderIdentity: ""`` into the Lease; the holder it had. A renew between the
    read and the write makes the write a 409 (the Lease changed): read it again and retry."""
    for _ in range(20):
        obj = admin.get(path)
        before = str(obj["spec"]["holderIdentity"])
        obj["spec"]["holderIdentity"] = ""
        try:
            admin.put(path, obj)
        except ApiError as exc:
            if exc.status != 409:
                raise
            continue
        return before
    raise AssertionError(f"{path}: every write of an empty holder met a renew (409)")


def test_an_emptied_holder_never_makes_two_leaders(
        controlplane: ControlPlane, namespace: str, no_nodes: None, start: Any) -> None:
    """Issue 27 #8: after ``holderIdentity: ""`` client-go (and we, before) let a follower
    take the Lease at once while the old leader led on until its renew deadline. The
    follower here retries four times as often as the leader renews, which made that the
    likely outcome of each edit."""
    admin = controlplane.admin()
    coredns_and_nodes(admin, namespace, "empty", 2, cpu="4")
    kubeconfig = identity(controlplane, namespace, "empty", [LEASES])
    lease = ("--leader-elect-lease-duration=6s", "--leader-elect-renew-deadline=4s")
    first = start(*args(namespace, "--leader-elect", *lease,
                        "--leader-elect-retry-period=2s"), kubeconfig=kubeconfig)
    wait_until("the first to lead", lambda: first.events("leader.started"), 60)
    second = start(*args(namespace, "--leader-elect", *lease,
                         "--leader-elect-retry-period=500ms"), kubeconfig=kubeconfig)
    second.wait_healthy()
    wait_polls(first, count=2)
    both_sampled = 0
    for edit in range(3):
        before = _empty_holder(admin, lease_path(namespace, "obs-params"))
        edited = time.monotonic()
        while time.monotonic() - edited < 12:  # two lease durations: it is taken again
            leading = [p.metrics()["cpa_leader"] for p in (first, second)]
            both_sampled += leading == [1, 1]
            time.sleep(0.1)
        after = admin.get(lease_path(namespace, "obs-params"))["spec"]["holderIdentity"]
        print(f"\nedit {edit + 1}: holder {before[-8:]} -> '' -> {after[-8:]}")
    now = time.time()
    a, b = _intervals(first, now), _intervals(second, now)
    overlaps = [(x, y) for x in a for y in b if x[0] < y[1] and y[0] < x[1]]
    overlap_seconds = sum(min(x[1], y[1]) - max(x[0], y[0]) for x, y in overlaps)
    print(f"leadership: first {len(a)} interval(s), second {len(b)}; overlapping "
          f"{overlap_seconds:.1f}s; samples with both at cpa_leader 1: {both_sampled}")
    assert overlaps == [], "two replicas led at once"
    assert both_sampled == 0
    # Still one writer afterwards.
    create_nodes(admin, "empty", 2, cpu="4", start=2)  # 4 nodes, 16 cores: 4
    wait_replicas(admin, namespace, "deployment", "coredns", 4)


def test_cpvpa_an_emptied_holder_is_waited_out(
        controlplane: ControlPlane, namespace: str, no_nodes: None, cpvpa: Any) -> None:
    """The same Lease code in /cpvpa: the emptied record is not taken at once."""
    admin = targets_on_three_nodes(controlplane, namespace, "v-empty", "deployment/addon")
    flags = (*sizing(namespace, "deployment/addon"), "--leader-elect",
             "--leader-elect-lease-duration=6s", "--leader-elect-renew-deadline=4s")
    one = cpvpa(*flags, "--leader-elect-retry-period=2s")
    wait_until("one leads", lambda: one.events("leader.started"), 60)
    two = cpvpa(*flags, "--leader-elect-retry-period=500ms")
    two.wait_healthy()
    path = lease_path(namespace, "cpvpa-deployment-addon")
    obj = admin.get(path)
    obj["spec"]["holderIdentity"] = ""
    admin.put(path, obj)
    edited = time.monotonic()
    both = 0
    while time.monotonic() - edited < 12:
        both += [p.metrics()["cpvpa_leader"] for p in (one, two)] == [1, 1]
        time.sleep(0.1)
    now = time.time()
    a, b = _intervals(one, now), _intervals(two, now)
    overlaps = [(x, y) for x in a for y in b if x[0] < y[1] and y[0] < x[1]]
    print(f"\ncpvpa: overlapping leaderships {overlaps}; samples with both at 1: {both}")
    assert overlaps == [] and both == 0
    assert admin.get(path)["spec"].get("holderIdentity")  # taken again
