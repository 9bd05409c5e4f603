"""The load axis in the poll loop, with a scripted axis (what the daemon's LoadStage would
answer); the axis in ``cpa simulate``, ``cpa explain`` and ``cpa advise`` is
tests/unit/tools/test_load.py's."""

from __future__ import annotations

import json
import threading
from typing import Any

from cpa.horizontal.decide.load import Load
from cpa.horizontal.decide.windows import LoadAxis, unavailable
from cpa.kube.targets import Target
from tests.fakes import FakeApi
from tests.unit.horizontal.daemon.test_autoscaler import (
    CM,
    COREDNS,
    _running,
    _stopped,
    _until,
    counts,
    make,
)

LOAD = {"metric": "m_total", "port": 9153, "targetPerReplica": 100,
        "stableWindowSeconds": 20, "panicWindowPercentage": 20}


def linear(**extra: Any) -> str:
    return json.dumps({"nodesPerReplica": 16, "max": 9, "load": LOAD, **extra})


class Axes:
    """A scripted load axis: what the daemon's LoadStage would answer."""

    def __init__(self, *answers: LoadAxis) -> None:
        self.answers = list(answers)
        self.asked: list[tuple[Target, Load, float]] = []
        self.retired = 0

    def axis(self, target: Target, load: Load, now: float) -> LoadAxis:
        self.asked.append((target, load, now))
        return self.answers.pop(0)

    def retire(self) -> None:
        self.retired += 1


def test_the_loop_writes_the_larger_and_the_floor_holds() -> None:
    api = FakeApi()
    api.add_scale(COREDNS, 1)
    api.set_configmap(CM, {"linear": linear()})
    axes = Axes(LoadAxis(5, ()), unavailable("down"), LoadAxis(50, ()))
    a = make(api, counts(40, 160), load=axes)
    first = a.poll_once()  # proportional 3, load 5
    assert first.error is None and api.replicas(COREDNS) == 5
    assert first.decision is not None and first.decision.proportional == 3
    assert a.poll_once().error is None and api.replicas(COREDNS) == 3  # the axis out
    assert a.poll_once().error is None and api.replicas(COREDNS) == 9  # max caps the load
    assert [t for t, _l, _n in axes.asked] == [Target("deployment", "coredns")] * 3
    api.set_configmap(CM, {"linear": json.dumps({"nodesPerReplica": 16})})
    assert a.poll_once().error is None and api.replicas(COREDNS) == 3
    assert axes.retired == 1  # no load key any more: the scrapers stop


def test_without_a_load_key_the_axis_is_never_asked() -> None:
    api = FakeApi()
    api.add_scale(COREDNS, 1)
    api.set_configmap(CM, {"linear": json.dumps({"nodesPerReplica": 16})})
    axes = Axes()
    a = make(api, counts(40, 160), load=axes)
    assert a.poll_once().error is None and api.replicas(COREDNS) == 3
    assert axes.asked == []


def test_with_a_load_key_a_wake_from_a_scrape_polls_at_once() -> None:
    """A scrape that makes a panic likely calls wake() from its thread: while a load key is
    in force the loop takes it at once, an hour before the period's next poll (without one
    and without leader election, nothing wakes the loop between its polls)."""
    api = FakeApi()
    api.add_scale(COREDNS, 1)
    api.set_configmap(CM, {"linear": linear()})
    axes = Axes(LoadAxis(5, ()), LoadAxis(7, ()))
    a = make(api, counts(40, 160), "--poll-period-seconds=3600", load=axes)
    stop, thread, codes = _running(a)
    _until("the first poll's write", lambda: api.replicas(COREDNS) == 5)
    waker = threading.Timer(0.2, a.wake)  # a scrape, while the loop waits
    waker.start()
    _until("the woken poll", lambda: api.replicas(COREDNS) == 7)
    assert a.polls == 2
    waker.join()
    _stopped(a, stop, thread, codes)
