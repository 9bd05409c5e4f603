"""Leader election against an in-memory Lease with resourceVersions, on a fake clock."""

from __future__ import annotations

import random
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from cpa.daemon.leaderelection import LeaderElector, LeaseConfig
from cpa.kube.api import ApiError
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


def test_one_leader_and_takeover_after_the_lease_duration() -> None:
    api, clock, changes = FakeApi(), Clock(), Changes()
    a, b = elector(api, clock, "a", changes), elector(api, clock, "b", changes)
    a.tick()
    b.tick()
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


def test_a_leader_that_cannot_renew_stops_writing_by_the_deadline() -> None:
    api, clock, changes = FakeApi(), Clock(), Changes()
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
    api, clock, changes = FakeApi(), Clock(), Changes()
    a, b = elector(api, clock, "a", changes), elector(api, clock, "b", changes)
    a.tick()
    b.tick()
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

        def get_json(self, path: str, query: Mapping[str, str] | None = None
                     ) -> dict[str, Any]:
            try:
                return super().get_json(path, query)
            finally:
                if not self.raced:
                    self.raced = True
                    b.tick()

    api, clock, changes = Race(), Clock(), Changes()
    a, b = elector(api, clock, "a", changes), elector(api, clock, "b", changes)
    a.tick()
    assert b.is_leader() and not a.is_leader()


def test_forbidden_lease_is_reported_not_raised() -> None:
    class Forbidden(FakeApi):
        def get_json(self, path: str, query: Mapping[str, str] | None = None
                     ) -> dict[str, Any]:
            raise ApiError(403, "Forbidden", "leases is forbidden")

    clock = Clock()
    a = elector(Forbidden(), clock, "a", [])
    assert a.tick() > 0
    assert not a.is_leader()
