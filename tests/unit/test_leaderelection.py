"""Leader election against an in-memory Lease with resourceVersions, on a fake clock."""

from __future__ import annotations

import copy
import random
from datetime import UTC, datetime, timedelta
from typing import Any

from cpa.daemon.leaderelection import LeaderElector, LeaseConfig
from cpa.kube.api import ApiError

PATH = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/dns"


class LeaseApi:
    """One Lease object with optimistic concurrency, like the API server's."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.rv = 0
        self.down = False
        self.writes: list[str] = []

    def get_json(self, path: str, query: Any = None) -> dict[str, Any]:
        assert path == PATH
        if self.down:
            raise ApiError(0, "ConnectionError", "unreachable")
        if self.lease is None:
            raise ApiError(404, "NotFound", "leases.coordination.k8s.io \"dns\" not found")
        return copy.deepcopy(self.lease)

    def send_json(self, method: str, path: str, body: Any) -> dict[str, Any]:
        if self.down:
            raise ApiError(0, "ConnectionError", "unreachable")
        if method == "POST":
            assert path == PATH.rsplit("/", 1)[0]
            if self.lease is not None:
                raise ApiError(409, "AlreadyExists", "exists")
        else:
            assert method == "PUT" and path == PATH and self.lease is not None
            if body["metadata"]["resourceVersion"] != self.lease["metadata"]["resourceVersion"]:
                raise ApiError(409, "Conflict", "the object has been modified")
        self.rv += 1
        body = copy.deepcopy(body)
        body["metadata"]["resourceVersion"] = str(self.rv)
        self.lease = body
        self.writes.append(body["spec"].get("holderIdentity", ""))
        return copy.deepcopy(body)

    @property
    def holder(self) -> str:
        return str((self.lease or {}).get("spec", {}).get("holderIdentity", ""))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def wall(self) -> datetime:
        return datetime(2026, 11, 30, tzinfo=UTC) + timedelta(seconds=self.now)


def elector(api: LeaseApi, clock: Clock, name: str, changes: list[tuple[str, bool]]
            ) -> LeaderElector:
    config = LeaseConfig("kube-system", "dns", name)
    return LeaderElector(api, config, on_change=lambda leading: changes.append((name, leading)),
                         clock=clock, wall=clock.wall, rng=random.Random(1))


def test_one_leader_and_takeover_after_the_lease_duration() -> None:
    api, clock, changes = LeaseApi(), Clock(), []
    a, b = elector(api, clock, "a", changes), elector(api, clock, "b", changes)
    a.tick()
    b.tick()
    assert a.is_leader() and not b.is_leader()
    assert api.holder == "a"
    spec = api.lease["spec"]  # type: ignore[index]
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
    assert b.is_leader() and api.holder == "b"
    assert api.lease["spec"]["leaseTransitions"] == 1  # type: ignore[index]
    assert changes == [("a", True), ("b", True)]


def test_a_leader_that_cannot_renew_stops_writing_by_the_deadline() -> None:
    api, clock, changes = LeaseApi(), Clock(), []
    a = elector(api, clock, "a", changes)
    a.tick()
    assert a.is_leader()
    api.down = True
    clock.now += 9.9
    assert a.is_leader()
    clock.now += 0.2  # 10.1 s since the last renewal: even a hung request cannot help
    assert not a.is_leader()
    a.tick()
    assert changes == [("a", True), ("a", False)]
    api.down = False
    a.tick()  # the record is still ours: renewed, leading again
    assert a.is_leader() and changes[-1] == ("a", True)


def test_release_hands_over_at_once() -> None:
    api, clock, changes = LeaseApi(), Clock(), []
    a, b = elector(api, clock, "a", changes), elector(api, clock, "b", changes)
    a.tick()
    b.tick()
    assert a.release() and not a.is_leader()
    assert api.holder == "" and api.lease["spec"]["leaseDurationSeconds"] == 1  # type: ignore[index]
    clock.now += 0.5
    b.tick()
    assert b.is_leader()


def test_a_lost_race_is_not_leadership() -> None:
    """Both see no Lease; one create wins, the other gets 409 and follows."""
    api, clock, changes = LeaseApi(), Clock(), []
    a, b = elector(api, clock, "a", changes), elector(api, clock, "b", changes)
    real_get = api.get_json

    def get_then_b_creates(path: str, query: Any = None) -> dict[str, Any]:
        try:
            return real_get(path)
        finally:
            if api.lease is None:
                api.get_json = real_get  # type: ignore[method-assign]
                b.tick()

    api.get_json = get_then_b_creates  # type: ignore[method-assign]
    a.tick()
    assert b.is_leader() and not a.is_leader()


def test_forbidden_lease_is_reported_not_raised() -> None:
    class Forbidden(LeaseApi):
        def get_json(self, path: str, query: Any = None) -> dict[str, Any]:
            raise ApiError(403, "Forbidden", "leases is forbidden")

    clock = Clock()
    a = elector(Forbidden(), clock, "a", [])
    assert a.tick() > 0
    assert not a.is_leader()
