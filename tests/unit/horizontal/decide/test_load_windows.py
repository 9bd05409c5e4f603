"""The load axis's arithmetic against Knative's own worked examples, and its properties.

Each table row is a test of knative/serving ``pkg/autoscaler/scaling/autoscaler_test.go``
(the test's name is the row's), replayed through
:func:`cpa.horizontal.decide.windows.scale` with the same stable and panic values, Ready
Pods, times and expected counts. Knative's tests run
with ``PanicThreshold: 2`` (200 %), a 60 s stable window and rate limits wide enough not to
matter in the rows taken (its scale-up/-down limits are ``behavior``'s job here, so the rows
that test them are not taken). A Knative autoscaler made with one Ready Pod is
``start(state, 1, t)``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from hypothesis import given, settings
from hypothesis import strategies as st

from cpa.horizontal.decide.decision import decide
from cpa.horizontal.decide.load import Load
from cpa.horizontal.decide.windows import (
    LoadAxis,
    PanicState,
    Reading,
    Sample,
    read_windows,
    scale,
    start,
    unavailable,
)
from cpa.nodes.counts import ClusterCounts
from tests.unit.configured import parse_ladder, parse_linear

STABLE = 60


def load(target: float, **kw: float) -> Load:
    return Load(target_per_replica=target, metric="m", port=9153, **kw)  # type: ignore[arg-type]


def reading(stable: float, panic: float | None, ready: int) -> Reading:
    return Reading(stable, panic, ready, 30, 3, 0.0)


class Step(NamedTuple):
    at: float
    stable: float
    panic: float
    ready: int
    want: int
    panicking: bool | None = None


def replay(target: float, steps: list[Step], created_with: int = 1,
           state: PanicState | None = None) -> PanicState:
    if state is None:
        state = PanicState()
        start(state, created_with, 0.0)
    params = load(target)
    for step in steps:
        out = scale(params, state, reading(step.stable, step.panic, step.ready), step.at)
        assert out.replicas == step.want, (step, out.steps)
        if step.panicking is not None:
            assert out.panicking is step.panicking, step
    return state


def test_stable_mode_increase_with_rps() -> None:
    # TestAutoscalerStableModeIncreaseWithRPS (autoscaler_test.go:408): target 10.
    replay(10, [Step(0, 50, 50, 1, 5), Step(1, 100, 99, 1, 10)])


def test_unpanic_after_slow_increase() -> None:
    # TestAutoscalerUnpanicAfterSlowIncrease (:418): 10 -> 25 in panic, +15 Pods by half
    # the window (the panic time does not move), and at the window's end plus one tick
    # (2 s, multiscaler.go:36) the panic ends: the stable 50.
    state = replay(1, [Step(0, 11, 25, 10, 25, True)])
    assert state.since == 0
    replay(1, [Step(30, 30, 41, 40, 41, True)], state=state)
    assert state.since == 0
    replay(1, [Step(62, 50, 56, 55, 50, False)], state=state)
    assert state.since is None and state.max_pods == 0


def test_extend_panic_window() -> None:
    # TestAutoscalerExtendPanicWindow (:453): still surging at half the window (80 / 40 >=
    # 2): the panic time moves to now.
    state = replay(1, [Step(0, 11, 25, 10, 25), Step(30, 30, 80, 40, 80)])
    assert state.since == 30


def test_stable_mode_decrease() -> None:
    # TestAutoscalerStableModeDecrease (:477): 8 Ready, 100 -> 10, then 50 -> 5 (no panic:
    # 10 / 8 < 2).
    replay(10, [Step(0, 100, 100, 8, 10, False), Step(1, 50, 50, 8, 5, False)])


def test_stable_mode_no_traffic_scale_to_zero() -> None:
    # TestAutoscalerStableModeNoTrafficScaleToZero (:487): the load axis may give 0 (the
    # proportional count is the floor of what is written).
    replay(10, [Step(0, 1, 0, 1, 1), Step(1, 0, 0, 1, 0)])


def test_panic_mode_exponential_track_and_stabilize() -> None:
    # TestAutoscalerPanicModeExponentialTrackAndStabilize (:509): target 1, traffic x6 per
    # step until 1296, then it holds.
    replay(1, [Step(0, 6, 6, 1, 6), Step(10, 36, 36, 6, 36), Step(11, 216, 216, 36, 216),
               Step(11, 1296, 1296, 216, 1296), Step(12, 1296, 1296, 1296, 1296)])


def test_scale_table() -> None:
    # TestAutoscalerScale (:542), the rows about the decision (not the burst capacity).
    rows = [  # label, target, stable, panic, ready, prepared panic (since, max), want
        ("AutoscalerStableModeNoChange", 10, 50, 50, 1, None, 5),
        ("AutoscalerPanicStableLargerThanPanic", 1, 50, 30, 5, (-5.0, 5), 50),
        ("AutoscalerPanicStableLessThanPanic", 1, 20, 30, 5, (-5.0, 5), 30),
        ("AutoscalerStableModeNoChangeAlreadyScaled", 10, 50, 50, 5, None, 5),
        ("AutoscalerPanicModeDoublePodCount", 10, 50, 100, 1, None, 10),
    ]
    for label, target, stable, panic, ready, prepared, want in rows:
        state = PanicState()
        start(state, 1, 0.0)
        if prepared is not None:
            state.since, state.max_pods = prepared
        out = scale(load(target), state, reading(stable, panic, ready), 0.0)
        assert out.replicas == want, label


def test_panic_then_unpanic_scale_down() -> None:
    # TestAutoscalerPanicThenUnPanicScaleDown (:658): the count stays at 100 while in panic
    # (30 s later, the traffic gone) and drops to 1 only after the stable window (61 s).
    replay(10, [Step(0, 100, 100, 1, 10), Step(1, 100, 1000, 10, 100, True),
                Step(31, 1, 1, 10, 100, True), Step(62, 1, 1, 10, 1, False)])


def test_start_in_panic_mode() -> None:
    # TestStartInPanicMode (:814): made with 0 or 1 Ready Pods, no panic and the ratchet at
    # that count; with 2, panic at 2.
    for ready in (0, 1):
        state = PanicState()
        assert not start(state, ready, 5.0)
        assert state.since is None and state.max_pods == ready
    state = PanicState()
    assert start(state, 2, 5.0)
    assert state.since == 5.0 and state.max_pods == 2


def test_first_decision_applies_the_start_rule() -> None:
    """The daemon's first poll is Knative's construction: 3 Ready Pods and a quiet stable
    window hold 3 for a stable window, then the stable count decides."""
    state = PanicState()
    params = load(100)
    first = scale(params, state, reading(10, 10, 3), 100.0)
    assert first.replicas == 3 and first.panicking
    assert any(step.key == "load.start" for step in first.steps)
    assert scale(params, state, reading(10, 10, 3), 159.0).replicas == 3
    assert scale(params, state, reading(10, 10, 3), 161.0).replicas == 1


# --- the windows -------------------------------------------------------------------------


def test_window_averages_and_edges() -> None:
    params = load(10)  # 60 s stable, 6 s panic
    samples = [Sample(t, float(t), 2) for t in range(0, 100, 2)]
    got = read_windows(samples, 98.0, params)
    assert got is not None
    # stable: samples at 40..98 (38 excluded: at exactly now - 60); panic: 94, 96, 98
    assert got.stable_samples == 30 and got.stable == sum(range(40, 100, 2)) / 30
    assert got.panic_samples == 3 and got.panic == (94 + 96 + 98) / 3
    assert got.ready == 2 and got.age == 0.0


def test_a_partial_window_averages_what_it_has() -> None:
    # bucketing.go:186-191: six seconds of data in a 60 s window average over those.
    got = read_windows([Sample(0, 100, 1), Sample(2, 200, 1), Sample(4, 300, 1)], 5.0,
                       load(10))
    assert got is not None and got.stable == 200 and got.stable_samples == 3


def test_no_sample_in_the_stable_window_is_no_reading() -> None:
    samples = [Sample(0, 1e6, 4)]
    assert read_windows(samples, 60.0, load(10)) is None  # older than the window: unused
    assert read_windows([], 0.0, load(10)) is None
    got = read_windows(samples, 30.0, load(10))
    assert got is not None and got.panic is None and got.age == 30.0


def test_no_panic_sample_cannot_start_a_panic() -> None:
    state = PanicState()
    start(state, 1, 0.0)
    out = scale(load(10), state, Reading(100, None, 1, 5, 0, 10.0), 10.0)
    assert out.replicas == 10 and not out.panicking and out.panic_replicas is None


# --- meeting the proportional count -------------------------------------------------------

COUNTS = ClusterCounts(total_nodes=40, total_cores=160, schedulable_nodes=40,
                       schedulable_cores=160)
LOAD = ('"load":{"metric":"coredns_dns_requests_total","port":9153,'
        '"targetPerReplica":5000}')


def test_the_proportional_count_is_the_floor_and_max_caps_the_load() -> None:
    params = parse_linear('{"nodesPerReplica":16,"max":6,' + LOAD + "}")
    assert decide(params, COUNTS).replicas == 3  # no axis given: upstream's count
    low = decide(params, COUNTS, LoadAxis(1, ()))
    assert (low.replicas, low.proportional, low.load) == (3, 3, 1)
    high = decide(params, COUNTS, LoadAxis(5, ()))
    assert high.replicas == 5
    capped = decide(params, COUNTS, LoadAxis(50, ()))
    assert capped.replicas == 6
    assert [s.key for s in capped.steps][-2:] == ["load.clamp.max", "load.combine"]
    out = decide(params, COUNTS, unavailable("Prometheus is down"))
    assert out.replicas == 3 and out.load is None
    assert any(s.key == "load.unavailable" for s in out.steps)


def test_ladder_has_no_cap_and_max_replicas_per_node_still_caps() -> None:
    params = parse_ladder('{"nodesToReplicas":[[1,1],[20,2]],"maxReplicasPerNode":1,'
                          + LOAD + "}")
    assert decide(params, COUNTS, LoadAxis(30, ())).replicas == 30
    assert decide(params, COUNTS, LoadAxis(300, ())).replicas == 40  # 40 Nodes x 1


# --- properties -----------------------------------------------------------------------------

rates = st.floats(min_value=0, max_value=1e7, allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(target=st.floats(min_value=0.5, max_value=1e5),
       polls=st.lists(st.tuples(rates, rates, st.integers(0, 500),
                                st.floats(min_value=0.5, max_value=30)),
                      min_size=1, max_size=40),
       threshold=st.sampled_from([110.0, 200.0, 1000.0]))
def test_panic_never_lowers_the_count(target: float,
                                      polls: list[tuple[float, float, int, float]],
                                      threshold: float) -> None:
    """While in panic (before and after a poll), the axis never gives less than it gave at
    the poll before; and in panic it is at least the stable and the panic counts."""
    params = load(target, panic_threshold_percentage=threshold)
    state = PanicState()
    now, last = 0.0, None
    for stable, panic, ready, gap in polls:
        now += gap
        was = state.since is not None
        out = scale(params, state, reading(stable, panic, ready), now)
        if out.panicking:
            assert out.replicas >= max(out.stable_replicas, out.panic_replicas or 0)
            if was and last is not None:
                assert out.replicas >= last
        else:
            assert out.replicas == math.ceil(stable / target)
        last = out.replicas


@settings(max_examples=300, deadline=None)
@given(nodes=st.integers(0, 5000), per=st.floats(min_value=1, max_value=64),
       maximum=st.integers(0, 200), axis=st.one_of(st.none(), st.integers(0, 10**6)))
def test_the_floor_always_holds(nodes: int, per: float, maximum: int,
                                axis: int | None) -> None:
    """Whatever the load axis says (or when it is out), the count is never below what the
    proportional formula alone gives, and the load never lifts it past max."""
    params = parse_linear(f'{{"nodesPerReplica":{per},"max":{maximum},' + LOAD + "}")
    counts = ClusterCounts(total_nodes=nodes, total_cores=nodes * 4, schedulable_nodes=nodes,
                           schedulable_cores=nodes * 4)
    alone = decide(params, counts).replicas
    given_axis = LoadAxis(axis, ()) if axis is not None else unavailable("down")
    both = decide(params, counts, given_axis)
    assert both.replicas >= alone
    if maximum:
        assert both.replicas <= max(alone, maximum)
    assert both.proportional == alone
