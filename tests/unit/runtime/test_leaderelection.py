"""Leader election against an in-memory Lease with resourceVersions, on a fake clock."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cpa.kube.api import ApiError, get_decoded
from cpa.kube.targets import Target
from cpa.kube.writers import ensure_replicas
from cpa.runtime.leaderelection import GuardedApi, LeaderElector, LeaseConfig
from tests.fakes import FakeApi

PATH = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/dns"


def lease(api: FakeApi) -> dict[str, Any]:
    return api.objects[PATH]


def holder(api: FakeApi) -> str:
    return str(api.objects.get(PATH, {}).get("spec", {}).get("holderIdentity", ""))


class Changes(list[tuple[str, bool]]):
    """Each elector's leadership changes, in order: (name, leading)."""


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def wall(self) -> datetime:
        return datetime(2026, 11, 30, tzinfo=UTC) + timedelta(seconds=self.now)


def elector(api: FakeApi, clock: Clock, name: str, changes: list[tuple[str, bool]]
            ) -> LeaderElector:
    config = LeaseConfig("kube-system", "dns", name)
    return LeaderElector(api, config, on_change=lambda leading: changes.append((name, leading)),
                         clock=clock, wall=clock.wall, rng=random.Random(1))


def a_leads_b_follows() -> tuple[FakeApi, Clock, Changes, LeaderElector, LeaderElector]:
    """Two electors of one Lease after a round each: a took it, b found it held."""
    api, clock, changes = FakeApi(), Clock(), Changes()
    a, b = elector(api, clock, "a", changes), elector(api, clock, "b", changes)
    a.tick()
    b.tick()
    return api, clock, changes, a, b


def test_one_leader_and_takeover_after_the_lease_duration() -> None:
    api, clock, changes, a, b = a_leads_b_follows()
    assert a.is_leader() and not b.is_leader()
    assert holder(api) == "a"
    spec = lease(api)["spec"]
    assert spec["leaseDurationSeconds"] == 15 and spec["leaseTransitions"] == 0
    for _ in range(10):  # a renews every 2 s; b keeps seeing a fresh record
        clock.now += 2
        a.tick()
        b.tick()
        assert a.is_leader() and not b.is_leader()
    # a dies (no more ticks). b waits a whole lease duration by its own clock.
    for _ in range(7):
        clock.now += 2
        b.tick()
    assert not b.is_leader(), "took over before the lease expired (14 s < 15 s)"
    clock.now += 2
    b.tick()
    assert b.is_leader() and holder(api) == "b"
    assert lease(api)["spec"]["leaseTransitions"] == 1
    assert changes == [("a", True), ("b", True)]


def test_a_leader_that_cannot_renew_stops_at_the_round_deadline_as_client_go() -> None:
    api, clock, changes = FakeApi(), Clock(), Changes()
    a = elector(api, clock, "a", changes)
    assert a.tick() == 0.0  # acquired: the renew loop begins at once
    assert a.tick() == 2.0  # renewed (at 1000); the next round in a retry period
    api.down = True
    clock.now += 2  # 1002: a round begins, with its deadline at 1012
    a.tick()
    assert a.is_leader()
    while True:
        wait = a.tick()
        if changes[-1] == ("a", False):
            break
        clock.now += wait
        assert clock.now <= 1012, "no try is scheduled past the round's deadline"
    assert clock.now == 1012, "stopped leading at the round's deadline, not later"
    assert not a.is_leader() and changes == [("a", True), ("a", False)]
    api.down = False
    a.tick()  # the record is still ours: renewed, leading again
    assert a.is_leader() and changes[-1] == ("a", True)


def test_lease_requests_carry_the_round_deadline_and_a_hung_one_ends_the_leadership_on_time(
        ) -> None:
    """A Lease request that hangs is cut at the round's deadline (the transport enforces
    the deadline it is given): leader.stopped and cpa_leader come at that moment."""

    class Hanging(FakeApi):
        hang = False

        def get_json(self, path: str, query: Mapping[str, str] | None = None, *,
                     deadline: float | None = None) -> dict[str, Any]:
            if self.hang:
                assert deadline is not None, "a Lease request without a deadline"
                clock.now = deadline  # it hangs until the transport cuts it
                raise ApiError(0, "Timeout", "no complete answer within the deadline")
            return super().get_json(path, query, deadline=deadline)

    api, clock = Hanging(), Clock()
    stopped_at: list[float] = []
    a = elector(api, clock, "a", [])
    a.on_change = lambda leading: None if leading else stopped_at.append(clock.now)
    a.tick()
    a.tick()
    api.hang = True
    clock.now += 2
    a.tick()
    assert stopped_at == [1012.0]
    assert not a.is_leader()


def test_writes_stop_at_the_renew_deadline_of_the_last_renewal() -> None:
    api, clock = FakeApi(), Clock()
    a = elector(api, clock, "a", [])
    guarded = GuardedApi(api, a, clock)
    api.add_scale("/scale", 1)
    a.tick()  # acquired at 1000
    a.tick()  # renewed, an attempt that began at 1000
    guarded.send_json("PUT", "/scale", {"kind": "Scale", "spec": {"replicas": 2},
                                        "metadata": {"resourceVersion": "101"}})
    assert api.deadlines[-1] == ("PUT", "/scale", 1010.0), "cut to the renew deadline"
    api.down = True  # renewals fail from now on
    clock.now += 2
    a.tick()
    clock.now = 1009.4
    body = api.objects["/scale"]
    api.down = False
    guarded.send_json("PUT", "/scale", body)  # 0.6 s left: sent, with that deadline
    assert api.deadlines[-1][2] == 1010.0
    clock.now = 1009.6
    sent = len(api.calls)
    with pytest.raises(ApiError, match="not sent: this replica may no longer hold the Lease"):
        guarded.send_json("PUT", "/scale", api.objects["/scale"])
    assert len(api.calls) == sent, "a refused write never reaches the API server"
    assert a.is_leader(), "still leading (client-go's round ends at 1012), yet not writing"
    assert guarded.get_json("/scale")["spec"]["replicas"] == 2, "reads pass through"


def test_the_409_retry_is_guarded_too() -> None:
    """ensure_replicas GETs again and PUTs once more after a 409: that PUT is checked
    again, just before it is sent."""

    class SlowConflict(FakeApi):
        def send_json(self, method: str, path: str, body: Any, *,
                      deadline: float | None = None) -> dict[str, Any]:
            if path == "/apis/apps/v1/namespaces/ns/deployments/dns/scale":
                clock.now += 9.6  # the first PUT took long, then conflicted
            return super().send_json(method, path, body, deadline=deadline)

    api, clock = SlowConflict(), Clock()
    a = elector(api, clock, "a", [])
    a.tick()
    a.tick()
    path = "/apis/apps/v1/namespaces/ns/deployments/dns/scale"
    api.add_scale(path, 1)
    api.conflicts[path] = 1
    result = ensure_replicas(GuardedApi(api, a, clock), "ns", Target("deployment", "dns"), 3)
    assert result.error is not None and "not sent" in result.error
    assert [c for c in api.calls if c == ("PUT", path)] == [("PUT", path)], "one PUT, not two"


def test_a_follower_writes_nothing() -> None:
    api, clock = FakeApi(), Clock()
    a, b = elector(api, clock, "a", []), elector(api, clock, "b", [])
    a.tick()
    b.tick()
    with pytest.raises(ApiError, match="not sent"):
        GuardedApi(api, b, clock).send_json("POST", "/x", {"metadata": {"name": "n"}})


def test_release_hands_over_at_once() -> None:
    api, clock, _, a, b = a_leads_b_follows()
    assert a.release() and not a.is_leader()
    assert holder(api) == "" and lease(api)["spec"]["leaseDurationSeconds"] == 1
    clock.now += 0.5
    b.tick()
    assert b.is_leader()


def test_a_lost_race_is_not_leadership() -> None:
    """Both see no Lease; one create wins, the other gets 409 and follows."""

    class Race(FakeApi):
        """b runs its whole tick right after a's first GET is answered."""

        raced = False

        def get_json(self, path: str, query: Mapping[str, str] | None = None, *,
                     deadline: float | None = None) -> dict[str, Any]:
            try:
                return super().get_json(path, query, deadline=deadline)
            finally:
                if not self.raced:
                    self.raced = True
                    b.tick()

    api, clock, changes = Race(), Clock(), Changes()
    a, b = elector(api, clock, "a", changes), elector(api, clock, "b", changes)
    a.tick()
    assert b.is_leader() and not a.is_leader()


def test_forbidden_lease_is_reported_not_raised() -> None:
    api, clock = FakeApi(), Clock()
    api.fail_reads = ApiError(403, "Forbidden", "leases is forbidden")
    a = elector(api, clock, "a", [])
    assert a.tick() > 0
    assert not a.is_leader()


def test_release_is_bounded() -> None:
    api, clock = FakeApi(), Clock()
    a = elector(api, clock, "a", [])
    a.tick()
    assert a.release(timeout=1.0)
    assert [d for d in api.deadlines if d[0] == "PUT"][-1][2] == 1001.0


@pytest.mark.parametrize("spec", [
    {"holderIdentity": "b", "leaseDurationSeconds": "15"},  # client-go refuses a string
    {"holderIdentity": {"name": "b"}, "leaseDurationSeconds": 15},
    {"holderIdentity": "b", "leaseTransitions": 1.5},
])
def test_a_malformed_lease_is_not_taken_over(spec: dict[str, Any]) -> None:
    """A Lease that does not decode (as client-go's decoder would refuse it) is a failed
    round: not read as something it is not, never taken, never raised."""
    api = FakeApi()
    api.put(PATH, {"kind": "Lease", "spec": spec})
    clock = Clock()
    a = elector(api, clock, "a", [])
    for _ in range(3):
        a.tick()
        clock.now += 30.0  # longer than any lease duration
    assert not a.is_leader() and lease(api)["spec"] == spec
    assert not [c for c in api.calls if c[0] == "PUT"]


def test_forbidden_lease_is_a_problem_naming_the_rule_and_counted() -> None:
    api, clock = FakeApi(), Clock()
    api.fail_reads = ApiError(403, "Forbidden", 'leases.coordination.k8s.io "dns" is forbidden')
    a = elector(api, clock, "a", [])
    assert a.status().problem is None and a.status().errors == 0
    a.tick()
    clock.now += 3
    a.tick()
    status = a.status()
    assert status.problem is not None
    assert 'resources: ["leases"]' in status.problem
    assert '"get", "create", "update"' in status.problem
    assert "kube-system/dns" in status.problem and "forbidden" in status.problem
    assert status.errors == 2
    assert status.unchanged_seconds == 3  # never read: since the election began


def test_a_lease_answered_again_clears_the_problem() -> None:
    api, clock = FakeApi(), Clock()
    a = elector(api, clock, "a", [])
    api.down = True
    a.tick()
    assert a.status().problem is not None and "kube-system/dns" in str(a.status().problem)
    api.down = False
    clock.now += 3
    a.tick()
    assert a.status().problem is None and a.is_leader()
    assert a.status().unchanged_seconds == 0 and a.status().holder_duration == 15


def test_a_healthy_follower_sees_the_lease_change_and_a_dead_leader_stops_it() -> None:
    api, clock = FakeApi(), Clock()
    a, b = elector(api, clock, "a", []), elector(api, clock, "b", [])
    a.tick()
    b.tick()
    for _ in range(3):
        clock.now += 2
        a.tick()
        b.tick()
        assert b.status().unchanged_seconds == 0  # a renewed since b's last look
    for _ in range(3):  # a is gone, not yet expired: the record ages for b
        clock.now += 2
        b.tick()
    assert b.status().unchanged_seconds == 6 and b.status().problem is None


def _edit_spec(api: FakeApi, **spec: Any) -> None:
    obj = lease(api)
    obj["spec"].update(spec)
    api.put(PATH, obj)


def test_an_emptied_holder_is_waited_out_and_the_leader_steps_down_at_once() -> None:
    """Issue 27 #8: holderIdentity edited to "" by hand. client-go takes such a record at
    once, while the old leader leads (and may write) until its renew deadline: two
    leaders. Here the old leader stops at its next renewal, and nobody takes the record
    before it has been unchanged for its duration."""
    api, clock, changes, a, b = a_leads_b_follows()
    _edit_spec(api, holderIdentity="")
    clock.now += 0.5
    b.tick()
    assert not b.is_leader(), "took an emptied (not released) Lease at once"
    clock.now += 1.5
    a.tick()
    assert not a.is_leader(), "a leader that read someone else's record kept leading"
    assert a.write_deadline() is None
    assert changes == [("a", True), ("a", False)]
    leaders = []
    for _ in range(10):
        clock.now += 2
        a.tick()
        b.tick()
        leaders.append([e.is_leader() for e in (a, b)].count(True))
    assert max(leaders) == 1, "never two leaders"
    assert leaders[4] == 0 and leaders[-1] == 1  # taken once unchanged for 15 s


def test_a_foreign_holder_written_into_the_lease_ends_the_leadership_at_once() -> None:
    api, clock, changes = FakeApi(), Clock(), Changes()
    a = elector(api, clock, "a", changes)
    a.tick()
    _edit_spec(api, holderIdentity="someone-else")
    clock.now += 2
    a.tick()
    assert not a.is_leader() and changes == [("a", True), ("a", False)]


def test_the_step_down_says_why(capsys: pytest.CaptureFixture[str]) -> None:
    api, clock = FakeApi(), Clock()
    a = elector(api, clock, "a", [])
    a.tick()
    _edit_spec(api, holderIdentity="")
    clock.now += 2
    a.tick()
    assert "the Lease names another holder" in capsys.readouterr().err


def test_a_ghost_holder_is_warned_once_and_its_duration_shown(
        capsys: pytest.CaptureFixture[str]) -> None:
    api, clock = FakeApi(), Clock()
    api.put(PATH, {"kind": "Lease", "spec": {
        "holderIdentity": "ghost", "leaseDurationSeconds": 2147483647,
        "renewTime": "2026-11-30T00:00:00.000000Z"}})
    a = elector(api, clock, "a", [])
    for _ in range(3):
        a.tick()
        clock.now += 3
    assert not a.is_leader()
    status = a.status()
    assert status.holder_duration == 2147483647 and status.problem is None
    assert status.unchanged_seconds == 9
    err = capsys.readouterr().err
    assert err.count("leader.lease_ghost") == 1 and "kubectl delete lease" in err


def test_a_read_through_the_guard_reaches_the_client_s_kept_answers() -> None:
    """Under --leader-elect the poll's GETs pass the guard: a client that keeps decoded
    answers is asked for them (the ConfigMap and scale are not parsed every poll)."""
    class Keeping(FakeApi):
        def __init__(self) -> None:
            super().__init__()
            self.asked: list[str] = []

        def get_decoded(self, path: str, decode: Callable[[dict[str, Any]], Any]) -> Any:
            self.asked.append(path)
            return decode(self.get_json(path))

    api, clock = Keeping(), Clock()
    api.add_scale("/scale", 4)
    guarded = GuardedApi(api, elector(api, clock, "a", []), clock)
    assert get_decoded(guarded, "/scale", lambda doc: doc["spec"]["replicas"]) == 4
    assert api.asked == ["/scale"]


def test_a_deleted_lease_is_waited_out_by_the_follower_and_taken_back_by_the_leader() -> None:
    """Issue 47 #9: after ``kubectl delete lease``, client-go's follower creates the Lease
    at once and both replicas led (``cpa_leader 1`` on both) until the old leader's next
    renewal. Here the follower waits out the holder it last saw; the leader recreates it."""
    api, clock, _, a, b = a_leads_b_follows()
    del api.objects[PATH]
    clock.now += 0.2
    b.tick()
    assert not b.is_leader() and PATH not in api.objects, "took a deleted Lease at once"
    clock.now += 1.8
    a.tick()
    assert a.is_leader() and holder(api) == "a", "the leader recreates its Lease"
    for _ in range(10):
        clock.now += 2
        a.tick()
        b.tick()
        assert [a.is_leader(), b.is_leader()] == [True, False]


def test_a_deleted_lease_whose_leader_is_gone_is_taken_after_its_duration() -> None:
    api, clock, _, _, b = a_leads_b_follows()
    del api.objects[PATH]  # and a is gone: no more ticks
    for _ in range(7):
        clock.now += 2
        b.tick()
        assert not b.is_leader()
    clock.now += 2
    b.tick()
    assert b.is_leader() and holder(api) == "b"
