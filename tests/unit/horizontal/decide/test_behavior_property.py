"""Property tests: :func:`cpa.horizontal.decide.behavior.apply` against a deliberately plain model.

The model shares no code with ``cpa``: behaviors are plain dicts as the ConfigMap spells
them, the history is every poll and every write ever made (no pruning, no state object),
and each rule is a loop written straight from the HPA's description: the lowest
recommendation in the scaleUp window, the highest in the scaleDown window, the replicas at
the start of each policy's period recomputed from the list of writes. Percentages use
float64, as the HPA does (25 replicas + 12 % is 29 there, not 28).
"""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cpa.horizontal.decide.behavior import Behavior, BehaviorState, Policy, Rules, apply


def model(behavior: dict[str, Any], start: int, polls: list[tuple[float, int]]) -> list[int]:
    """The replicas after each poll, the target following every write."""
    seen: list[tuple[float, int]] = []  # (time, formula result) of every poll so far
    writes: list[tuple[float, int, int]] = []  # (time, before, after) of every write
    current = start
    out = []
    for now, desired in polls:
        up = behavior.get("scaleUp")
        down = behavior.get("scaleDown")
        up_window = up.get("stabilizationWindowSeconds", 0) if up else 0
        down_window = down.get("stabilizationWindowSeconds", 0) if down else 0
        lowest = desired
        highest = desired
        for when, value in seen:
            if when > now - up_window and value < lowest:
                lowest = value
            if when > now - down_window and value > highest:
                highest = value
        aim = current
        if aim < lowest:
            aim = lowest
        if aim > highest:
            aim = highest
        seen.append((now, desired))

        new = aim
        if aim != current:
            going_up = aim > current
            rules = up if going_up else down
            if rules is not None and rules.get("selectPolicy") == "Disabled":
                new = current
            elif rules is not None and rules.get("policies"):
                allowed = []
                for policy in rules["policies"]:
                    start_of_period = current
                    for when, before, after in writes:
                        if when > now - policy["periodSeconds"]:
                            start_of_period -= after - before
                    if going_up:
                        if policy["type"] == "Pods":
                            allowed.append(start_of_period + policy["value"])
                        else:
                            allowed.append(math.ceil(
                                float(start_of_period) * (1.0 + float(policy["value"]) / 100.0)))
                    else:
                        if policy["type"] == "Pods":
                            allowed.append(start_of_period - policy["value"])
                        else:
                            allowed.append(math.trunc(
                                float(start_of_period) * (1.0 - float(policy["value"]) / 100.0)))
                most_change = rules.get("selectPolicy", "Max") == "Max"
                if going_up:
                    limit = max(allowed) if most_change else min(allowed)
                    limit = max(limit, current)
                    new = min(aim, limit)
                else:
                    limit = min(allowed) if most_change else max(allowed)
                    limit = min(limit, current)
                    new = max(aim, limit)
        if new != current:
            writes.append((now, current, new))
            current = new
        out.append(current)
    return out


def to_behavior(spec: dict[str, Any]) -> Behavior:
    def rules(direction: dict[str, Any] | None) -> Rules | None:
        if direction is None:
            return None
        return Rules(direction.get("stabilizationWindowSeconds", 0),
                     direction.get("selectPolicy", "Max"),
                     tuple(Policy(p["type"], p["value"], p["periodSeconds"])
                           for p in direction.get("policies", [])))
    return Behavior(rules(spec.get("scaleUp")), rules(spec.get("scaleDown")))


def run(behavior: Behavior, start: int, polls: list[tuple[float, int]]) -> list[int]:
    state, current, out = BehaviorState(), start, []
    for now, desired in polls:
        outcome = apply(behavior, state, desired, current, now)
        assert min(current, desired) <= outcome.replicas <= max(current, desired)
        if outcome.replicas != current:
            state.record_scale(current, outcome.replicas, now)
            current = outcome.replicas
        out.append(current)
    return out


_policy = st.fixed_dictionaries({
    "type": st.sampled_from(["Pods", "Percent"]),
    "value": st.one_of(st.integers(1, 12), st.integers(1, 1000)),
    "periodSeconds": st.one_of(st.sampled_from([15, 60, 180]), st.integers(1, 1800)),
})
_rules = st.fixed_dictionaries({}, optional={
    "stabilizationWindowSeconds": st.one_of(st.sampled_from([0, 30, 300, 600]),
                                            st.integers(0, 3600)),
    "selectPolicy": st.sampled_from(["Max", "Min", "Disabled"]),
    "policies": st.lists(_policy, max_size=3),
})
_behavior = st.fixed_dictionaries({}, optional={"scaleUp": _rules, "scaleDown": _rules})


@st.composite
def _timeline(draw: st.DrawFn) -> list[tuple[float, int]]:
    """Polls at increasing times (gaps from 1 s to 20 min) with formula results that
    wander, flap or jump."""
    count = draw(st.integers(1, 60))
    now = draw(st.integers(0, 10**6))
    level = draw(st.integers(0, 60))
    polls = []
    for _ in range(count):
        now += draw(st.one_of(st.sampled_from([10, 15, 30, 60]), st.integers(1, 1200)))
        level = max(0, level + draw(st.one_of(st.integers(-3, 3), st.integers(-60, 60))))
        polls.append((float(now), level))
    return polls


@settings(max_examples=400, deadline=None)
@given(_behavior, st.integers(0, 80), _timeline())
def test_apply_agrees_with_the_plain_model(spec: dict[str, Any], start: int,
                                           polls: list[tuple[float, int]]) -> None:
    assert run(to_behavior(spec), start, polls) == model(spec, start, polls)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 80), _timeline())
def test_an_empty_behavior_follows_the_formula(start: int,
                                               polls: list[tuple[float, int]]) -> None:
    assert run(Behavior(), start, polls) == [desired for _, desired in polls]
    assert run(Behavior(Rules(), Rules()), start, polls) == [d for _, d in polls]


@settings(max_examples=200, deadline=None)
@given(_rules, st.integers(0, 80), _timeline())
def test_scale_down_disabled_never_goes_down(down: dict[str, Any], start: int,
                                             polls: list[tuple[float, int]]) -> None:
    down = {**down, "selectPolicy": "Disabled"}
    seen = run(to_behavior({"scaleDown": down}), start, polls)
    assert all(b >= a for a, b in zip([start, *seen], seen, strict=False))


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 3600), st.integers(0, 80), _timeline())
def test_no_scale_down_while_a_higher_recommendation_is_in_the_window(
        window: int, start: int, polls: list[tuple[float, int]]) -> None:
    seen = run(to_behavior({"scaleDown": {"stabilizationWindowSeconds": window}}), start,
               polls)
    current = start
    for index, ((now, _), after) in enumerate(zip(polls, seen, strict=True)):
        if after < current:
            recent = [d for t, d in polls[: index + 1] if t > now - window]
            assert after == max(recent), "a scale-down goes exactly to the window's highest"
        current = after


def test_float64_percentages_as_the_hpa() -> None:
    """The HPA computes ceil(25 * (1 + 12/100)) in float64: 28.000000000000004 -> 29; and
    trunc(5 * (1 - 80/100)) = trunc(0.9999999999999998) = 0. Kept, to be the HPA."""
    up = Behavior(scale_up=Rules(0, "Max", (Policy("Percent", 12, 60),)))
    assert apply(up, BehaviorState(), 100, 25, 0.0).replicas == 29
    assert model({"scaleUp": {"policies": [{"type": "Percent", "value": 12,
                                            "periodSeconds": 60}]}}, 25, [(0.0, 100)]) == [29]
    down = Behavior(scale_down=Rules(0, "Max", (Policy("Percent", 80, 60),)))
    assert apply(down, BehaviorState(), 0, 5, 0.0).replicas == 0
