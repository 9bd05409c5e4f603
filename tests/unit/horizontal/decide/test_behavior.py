"""``behavior``: the HPA algorithm against worked examples, and its parsing.

Sources of the expected numbers (each case names its origin):

* ``k8s TestScalingWithRules`` / ``TestNormalizeDesiredReplicasWithBehavior`` /
  ``TestStoreScaleEvents``: kubernetes ``pkg/controller/podautoscaler/horizontal_test.go``.
  Only the cases that do not depend on the HPA's own minReplicas/maxReplicas or its
  default rules are taken (we have neither); their inputs and expected counts are copied
  as they are, times in seconds before "now".
* ``seed 001``: the HPA article in /work/shared/seeds (the Kubernetes documentation's
  gentler scale-down, 4 pods or 10 % per minute: 80 wanting 10 goes 80 -> 72 -> ... -> 20;
  the default scale-up, double or +4 per 15 s; a 300 s window keeps pods five more minutes).
"""

from __future__ import annotations

import itertools

import pytest

from cpa.go.json import GoJsonError, parse
from cpa.horizontal.decide.behavior import (
    Behavior,
    BehaviorError,
    BehaviorStage,
    BehaviorState,
    Policy,
    Rules,
    apply,
    parse_behavior,
)
from cpa.horizontal.decide.modes.registry import parse_configmap_data
from cpa.horizontal.decide.params import ParamsError
from tests.unit.configured import ladder_params, linear_params, parse_ladder, parse_linear


def rules(pods: int = 0, pods_period: int = 0, percent: int = 0, percent_period: int = 0,
          window: int = 0, select: str = "Max") -> Rules:
    """The k8s tests' ``generateScalingRules``: a Pods then a Percent policy, if non-zero."""
    policies = []
    if pods:
        policies.append(Policy("Pods", pods, pods_period))
    if percent:
        policies.append(Policy("Percent", percent, percent_period))
    return Rules(window, select, tuple(policies))


def uniform(changes: list[int], period: int) -> list[tuple[float, int]]:
    """The k8s tests' ``generateEventsUniformDistribution``: events spread over the last
    ``period`` seconds, each in the middle of its segment (times relative to now = 0)."""
    segment = period / len(changes)
    return [(-(period - segment * (i + 1) + segment / 2), change)
            for i, change in enumerate(changes)]


UP, DOWN = "up", "down"


# (name, direction of the rules, rules, event history (added if up, removed if down),
#  current, desired, expected)
RATE_CASES = [
    ("k8s scaleUpLimit is the limit because scaleUpLimit < maxReplicas with user policies",
     UP, rules(0, 0, 1, 60), [], 3, 1000, 4),
    ("k8s scaleUp with pods policy larger than percent policy",
     UP, rules(100, 60, 100, 60), [], 10, 500, 110),
    ("k8s scaleUp with percent policy larger than pods policy",
     UP, rules(2, 60, 100, 60), [], 10, 500, 20),
    ("k8s scaleUp with spec MaxReplicas limitation with large pod policy",
     UP, rules(100, 60), [], 10, 50, 50),
    ("k8s scaleUp with spec MaxReplicas limitation with large percent policy",
     UP, rules(10000, 60), [], 10, 50, 50),
    ("k8s scaleUp with pod policy limitation", UP, rules(30, 60), [], 10, 50, 40),
    ("k8s scaleUp with percent policy limitation", UP, rules(0, 0, 200, 60), [], 10, 50, 30),
    ("k8s scaleDown with percent policy larger than pod policy",
     DOWN, rules(20, 60, 1, 60, 300), [], 100, 2, 80),
    ("k8s scaleDown with pod policy larger than percent policy",
     DOWN, rules(2, 60, 1, 60, 300), [], 100, 2, 98),
    ("k8s scaleDown with pod policy limitation", DOWN, rules(5, 60, 0, 0, 300), [], 10, 2, 5),
    ("k8s scaleDown with percent policy limitation",
     DOWN, rules(0, 0, 50, 60, 300), [], 10, 5, 5),
    ("k8s scaleUp with currentReplicas limitation with rate.PeriodSeconds with a lot of "
     "recent scale up events", UP, rules(5, 120), uniform([1, 5, 9], 120), 100, 500, 100),
    ("k8s scaleUp with pod policy and previous scale up events",
     UP, rules(150, 120), uniform([1, 5, 9], 120), 100, 500, 235),
    ("k8s scaleUp with percent policy and previous scale up events",
     UP, rules(0, 0, 200, 120), uniform([1, 5, 9], 120), 100, 500, 255),
    ("k8s scaleDown with pod policy limitation and previous events",
     DOWN, rules(5, 120, 0, 0, 300), uniform([1, 5, 9], 120), 100, 2, 100),
    ("k8s scaleDown with percent policy limitation and previous events",
     DOWN, rules(0, 0, 50, 120, 300), uniform([2, 4, 6], 120), 100, 0, 56),
    ("k8s scaleDown with previous events preventing further scale down",
     DOWN, rules(0, 0, 10, 120, 300), uniform([10, 10, 10], 120), 100, 0, 100),
    ("k8s scaleDown with with previous events still allowing more scale down",
     DOWN, rules(0, 0, 1000, 120, 300), uniform([10, 10, 10], 120), 10, 5, 5),
    ("k8s check 'outdated' flag for events for one behavior for up",
     UP, rules(1000, 60), uniform([8, 12, 9, 11], 120), 100, 200, 200),
    ("k8s check that events were not marked 'outdated' for two different policies in the "
     "behavior for up", UP, rules(1000, 120, 100, 60), uniform([8, 12, 9, 11], 120),
     100, 200, 200),
    ("k8s check that events were marked 'outdated' for two different policies in the "
     "behavior for up", UP, rules(1000, 30, 100, 60), uniform([8, 12, 9, 11], 120),
     100, 200, 200),
    ("k8s check 'outdated' flag for events for one behavior for down",
     DOWN, rules(1000, 60, 0, 0, 300), uniform([8, 12, 9, 11], 120), 100, 5, 5),
    ("k8s check that events were not marked 'outdated' for two different policies in the "
     "behavior for down", DOWN, rules(1000, 120, 100, 60, 300), uniform([8, 12, 9, 11], 120),
     100, 5, 5),
    ("k8s check that events were marked 'outdated' for two different policies in the "
     "behavior for down", DOWN, rules(1000, 30, 100, 60, 300), uniform([8, 12, 9, 11], 120),
     100, 5, 5),
    # seed 001: the HPA's default scale-up rules, double or +4 per 15 s, whichever is more
    ("seed default scale-up doubles", UP, rules(4, 15, 100, 15), [], 10, 50, 20),
    ("seed default scale-up adds 4 to small counts", UP, rules(4, 15, 100, 15), [], 2, 50, 6),
    # ours: Min takes the smallest change; Disabled none
    ("Min going up takes the smaller allowance",
     UP, rules(2, 60, 100, 60, select="Min"), [], 10, 500, 12),
    ("Min going down takes the smaller allowance",
     DOWN, rules(20, 60, 1, 60, select="Min"), [], 100, 2, 99),
    ("Disabled never scales up", UP, rules(100, 60, select="Disabled"), [], 3, 9, 3),
    ("Disabled never scales down", DOWN, Rules(0, "Disabled", ()), [], 9, 3, 9),
    ("no policies: not rate-limited (the HPA requires one)", DOWN, Rules(), [], 9, 1, 1),
    ("a percentage of 0 replicas is 0: no scale-up from zero",
     UP, rules(0, 0, 900, 60), [], 0, 3, 0),
]


@pytest.mark.parametrize(("name", "direction", "rule", "events", "current", "desired",
                          "expected"), RATE_CASES, ids=[c[0] for c in RATE_CASES])
def test_rate_policies(name: str, direction: str, rule: Rules, events: list[tuple[float, int]],
                       current: int, desired: int, expected: int) -> None:
    behavior = Behavior(scale_up=rule) if direction == UP else Behavior(scale_down=rule)
    state = BehaviorState()
    if direction == UP:
        state.scale_up_events = list(events)
    else:
        state.scale_down_events = list(events)
    outcome = apply(behavior, state, desired, current, now=0.0)
    assert outcome.replicas == expected
    assert outcome.desired == desired and outcome.current == current
    keys = [step.key for step in outcome.steps]
    if desired != current:
        assert f"behavior.policy.{direction}" in keys, keys
    assert outcome.shaped == (expected != desired)


# (name, earlier recommendations (seconds ago, replicas), current, desired, up window,
#  down window, expected)
WINDOW_CASES = [
    ("k8s empty recommendations for scaling down", [], 100, 5, 0, 0, 5),
    ("k8s simple scale down stabilization", [(120, 4), (60, 5)], 100, 3, 0, 180, 5),
    ("k8s simple scale up stabilization", [(120, 4), (60, 5)], 1, 7, 300, 0, 4),
    ("k8s no scale down stabilization", [(120, 1), (60, 2)], 100, 3, 300, 0, 3),
    ("k8s no scale up stabilization", [(120, 4), (60, 5)], 1, 3, 0, 300, 3),
    ("k8s no scale down stabilization, reuse recommendation element",
     [(600, 10), (540, 9)], 100, 3, 0, 0, 3),
    ("k8s no scale up stabilization, reuse recommendation element",
     [(600, 10), (540, 9)], 1, 100, 0, 0, 100),
    ("k8s scale down stabilization, reuse one of obsolete recommendation element",
     [(600, 10), (60, 4), (120, 5), (540, 9)], 100, 3, 0, 180, 5),
    ("k8s scale up stabilization, reuse one of obsolete recommendation element",
     [(6000, 10), (60, 6), (120, 5), (180, 9)], 1, 100, 300, 0, 5),
    # ours: the window's edge is exclusive, as Go's time.After(now - window)
    ("a recommendation exactly one window old is out", [(300, 9)], 9, 3, 0, 300, 3),
    ("a recommendation just inside the window holds", [(299.5, 9)], 9, 3, 0, 300, 9),
    ("the window only holds: between current and desired", [(60, 12)], 5, 3, 0, 600, 5),
]


@pytest.mark.parametrize(("name", "history", "current", "desired", "up", "down", "expected"),
                         WINDOW_CASES, ids=[c[0] for c in WINDOW_CASES])
def test_stabilization_windows(name: str, history: list[tuple[float, int]], current: int,
                               desired: int, up: int, down: int, expected: int) -> None:
    behavior = Behavior(scale_up=Rules(up), scale_down=Rules(down))
    state = BehaviorState(recommendations=[(-ago, r) for ago, r in history])
    outcome = apply(behavior, state, desired, current, now=0.0)
    assert outcome.replicas == expected
    assert state.recommendations[-1] == (0.0, desired)  # this poll's is kept


@pytest.mark.parametrize(("events", "expected"), [
    ([(61, 7)], 0),
    ([(58, 7)], 7),
    ([(61, 7), (59, 6)], 6),
    ([(29, 8), (59, 6), (61, 7), (61, 9)], 14),
    ([(58, 7), (59, 6)], 13),
    ([(60, 5)], 0),  # exactly one period ago: out (Go's After is strict)
])
def test_replicas_changed_per_period(events: list[tuple[float, int]], expected: int) -> None:
    """k8s TestStoreScaleEvents: getReplicasChangePerPeriod(60, events)."""
    state = BehaviorState()
    assert state.change_in_period([(-ago, c) for ago, c in events], 60, 0.0) == expected


def follow(behavior: Behavior, start: int, desired: list[int], period: float
           ) -> list[int]:
    """Poll every ``period`` seconds; the target follows every write."""
    state, current, seen = BehaviorState(), start, [start]
    for i, want in enumerate(desired):
        now = i * period
        outcome = apply(behavior, state, want, current, now)
        if outcome.replicas != current:
            state.record_scale(current, outcome.replicas, now)
            current = outcome.replicas
        seen.append(current)
    return seen


def test_seed_gentler_scale_down_sequence() -> None:
    """seed 001: 4 pods or 10 % per minute; 80 wanting 10, one step per minute."""
    behavior = Behavior(scale_down=rules(4, 60, 10, 60))
    seen = follow(behavior, 80, [10] * 11, 60.0)
    assert seen == [80, 72, 64, 57, 51, 45, 40, 36, 32, 28, 24, 20]


def test_seed_gentler_scale_down_at_the_hpa_sync_period() -> None:
    """The same with a poll every 15 s (the HPA's sync period): still one step a minute."""
    behavior = Behavior(scale_down=rules(4, 60, 10, 60))
    seen = follow(behavior, 80, [10] * 41, 15.0)
    assert seen[::4] == [80, 72, 64, 57, 51, 45, 40, 36, 32, 28, 24]
    assert seen[1:4] == [72, 72, 72]


def test_seed_window_keeps_pods_for_the_window() -> None:
    """seed 001: with a 300 s scale-down window pods stay five more minutes; with 0 s they
    go at the next check."""
    desired = [10] * 4 + [2] * 40  # load ends at t=60 (poll every 15 s)
    held = follow(Behavior(scale_down=Rules(300)), 10, desired, 15.0)
    # The last 10 was recommended at t=45; it leaves the window at t=345, poll 23.
    assert held.index(2) == 1 + 23
    assert follow(Behavior(scale_down=Rules(0)), 10, desired, 15.0).index(2) == 1 + 4


def test_eks_like_flapping_is_held_and_scale_up_is_not() -> None:
    """The issue's example: 600 s scale-down window, 33 % per 180 s; scale-up +10 per 60 s."""
    behavior = parse_behavior(parse(
        '{"scaleDown":{"stabilizationWindowSeconds":600,"selectPolicy":"Max",'
        '"policies":[{"type":"Percent","value":33,"periodSeconds":180}]},'
        '"scaleUp":{"stabilizationWindowSeconds":0,'
        '"policies":[{"type":"Pods","value":10,"periodSeconds":60}]}}'))
    assert behavior is not None
    # The formula flaps 3 <-> 4 every two minutes for 20 minutes (poll every 30 s).
    desired = ([3] * 4 + [4] * 4) * 5
    seen = follow(behavior, 3, desired, 30.0)
    assert seen[1:5] == [3, 3, 3, 3]
    assert set(seen[5:]) == {4}, "up at once, then never down inside the window"
    # Up by more than 10 in a minute is limited; down after the window by 33 % per 3 min.
    seen = follow(behavior, 3, [30] * 4 + [3] * 60, 30.0)
    assert seen[1:5] == [13, 13, 23, 23]
    assert seen.index(23) == 3
    down = seen[5:]  # after the polls at t=120, 150, ...
    # The last 30 was recommended at t=90: the window holds 23 until t=690.
    assert down[:19] == [23] * 19 and down[19] < 23, "the window holds 23 for 600 s"
    drops = [i for i in range(1, len(down)) if down[i] < down[i - 1]]
    assert [down[i] for i in drops] == [15, 10, 6, 4, 3]
    assert all(b - a >= 6 for a, b in itertools.pairwise(drops)), "one per 180 s"


def test_no_behavior_is_the_formula_exactly() -> None:
    state = BehaviorState()
    outcome = apply(None, state, 7, 3, 0.0)
    assert (outcome.replicas, outcome.steps, outcome.shaped) == (7, (), False)
    assert state == BehaviorState()


def test_steps_explain_window_and_policy() -> None:
    behavior = Behavior(scale_down=Rules(600, "Max", (Policy("Percent", 33, 180),)))
    state = BehaviorState(recommendations=[(-100.0, 9)])
    outcome = apply(behavior, state, 3, 9, 0.0)
    assert outcome.replicas == 9
    assert [s.key for s in outcome.steps] == ["behavior.window.down", "behavior.result"]
    assert "highest recommendation is 9" in outcome.steps[0].text
    assert "window 600 s" in outcome.reason
    outcome = apply(behavior, BehaviorState(), 3, 9, 0.0)
    assert outcome.replicas == 6  # trunc(9 * 0.67) = 6
    assert [s.key for s in outcome.steps] == ["behavior.window.down", "behavior.policy.down",
                                              "behavior.result"]
    assert "Percent 33% per 180 s" in outcome.steps[1].text
    assert "instead of the formula's 3" in outcome.steps[2].text


def test_history_is_bounded_by_the_api_limits() -> None:
    state = BehaviorState()
    for t in range(0, 10_000, 10):
        state.recommend(3, float(t))
        state.record_scale(3, 4, float(t))
    assert len(state.recommendations) == 360  # 3600 s / 10 s
    assert len(state.scale_up_events) == 180  # 1800 s / 10 s
    state.recommend(5, 9990.0)  # the same instant again (a retried write): replaced
    assert state.recommendations[-1] == (9990.0, 5) and len(state.recommendations) == 360


def test_stage_keeps_one_state_per_target_and_reports_holds_once() -> None:
    stage = BehaviorStage()
    behavior = Behavior(scale_down=Rules(600))
    assert stage.shape("a", behavior, 5, 5, 0.0).replicas == 5
    held = stage.shape("a", behavior, 3, 5, 10.0)
    assert held.replicas == 5 and stage.newly_held("a", held)
    assert not stage.newly_held("a", stage.shape("a", behavior, 3, 5, 20.0))
    # target b has no history: nothing holds it
    assert stage.shape("b", behavior, 3, 5, 20.0).replicas == 3
    stage.reset()
    assert stage.shape("a", behavior, 3, 5, 30.0).replicas == 3


# ----------------------------------------------------------------------------- parsing

ISSUE_LINEAR = ('{"coresPerReplica":256,"nodesPerReplica":16,"preventSinglePointFailure":true,'
                '"behavior":{"scaleDown":{"stabilizationWindowSeconds":600,"selectPolicy":"Max",'
                '"policies":[{"type":"Percent","value":33,"periodSeconds":180}]},'
                '"scaleUp":{"stabilizationWindowSeconds":0,'
                '"policies":[{"type":"Pods","value":10,"periodSeconds":60}]}}}')
EKS = Behavior(scale_up=Rules(0, "Max", (Policy("Pods", 10, 60),)),
               scale_down=Rules(600, "Max", (Policy("Percent", 33, 180),)))


def test_the_issue_example_parses() -> None:
    params = parse_linear(ISSUE_LINEAR)
    assert params == linear_params(256, 16, 1, 0, True, False, EKS)
    assert params.fields()["behavior"] == {
        "scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                    "policies": [{"type": "Pods", "value": 10, "periodSeconds": 60}]},
        "scaleDown": {"stabilizationWindowSeconds": 600, "selectPolicy": "Max",
                      "policies": [{"type": "Percent", "value": 33, "periodSeconds": 180}]}}
    ladder = parse_ladder('{"nodesToReplicas":[[1,1]],"behavior":{"scaleDown":'
                          '{"stabilizationWindowSeconds":60}}}')
    assert ladder == ladder_params((), ((1, 1),), False, Behavior(scale_down=Rules(60)))


def test_without_behavior_params_are_as_before() -> None:
    params = parse_configmap_data({"linear": '{"nodesPerReplica":16}'})
    assert params.shared.behavior is None and "behavior" not in params.fields()
    assert params == linear_params(0, 16, 1, 0, False, False)
    # behavior takes part in equality: the daemon notices a changed behavior
    assert parse_linear(ISSUE_LINEAR) != parse_linear(ISSUE_LINEAR.replace("600", "300"))


@pytest.mark.parametrize(("text", "expected"), [
    # case-insensitive keys, unknown keys ignored, as for upstream's fields
    ('{"SCALEDOWN":{"StabilizationWindowSeconds":60,"POLICIES":[{"Type":"Pods","VALUE":1,'
     '"periodseconds":30,"x":1}],"y":[]},"z":{}}',
     Behavior(scale_down=Rules(60, "Max", (Policy("Pods", 1, 30),)))),
    ('{"scale\u017fown":{}}', Behavior()),  # U+017F folds to S: not scaleDown's "D"
    ('{"\u017fcaleDown":{}}', Behavior(scale_down=Rules())),
    ("{}", Behavior()),
    ("null", None),
    ('{"scaleUp":null}', Behavior()),
    ('{"scaleUp":{"stabilizationWindowSeconds":null,"selectPolicy":null,"policies":null}}',
     Behavior(scale_up=Rules())),
    # a pointer member set to null is nil again: the window goes back to 0
    ('{"scaleUp":{"stabilizationWindowSeconds":60,"stabilizationWindowSeconds":null}}',
     Behavior(scale_up=Rules())),
    # a repeated object merges into the first (Go decodes into the same struct)
    ('{"scaleDown":{"stabilizationWindowSeconds":60},"scaleDown":{"selectPolicy":"Min"}}',
     Behavior(scale_down=Rules(60, "Min"))),
    # a repeated policies array reuses its elements: omitted fields keep the old values
    ('{"scaleUp":{"policies":[{"type":"Percent","value":5,"periodSeconds":60},'
     '{"type":"Pods","value":1,"periodSeconds":1}],"policies":[{"type":"Pods"}]}}',
     Behavior(scale_up=Rules(0, "Max", (Policy("Pods", 5, 60),)))),
    # ... and elements hidden by a shorter array come back into view
    ('{"scaleUp":{"policies":[{"type":"Pods","value":1,"periodSeconds":1},'
     '{"type":"Pods","value":2,"periodSeconds":2}],"policies":[null],"policies":[null,null]}}',
     Behavior(scale_up=Rules(0, "Max", (Policy("Pods", 1, 1), Policy("Pods", 2, 2))))),
    # [] is a fresh empty slice: nothing comes back
    ('{"scaleUp":{"policies":[{"type":"Pods","value":1,"periodSeconds":1}],"policies":[],'
     '"policies":[{"type":"Percent"}]}}', None),  # invalid: value 0 and period 0
    ('{"scaleUp":{"policies":[{"type":"Pods","value":1,"periodSeconds":1,"value":null}]}}',
     Behavior(scale_up=Rules(0, "Max", (Policy("Pods", 1, 1),)))),
    ('{"scaleUp":{"stabilizationWindowSeconds":-0}}', Behavior(scale_up=Rules())),
    ('{"scaleUp":{"stabilizationWindowSeconds":3600,"selectPolicy":"Disabled"}}',
     Behavior(scale_up=Rules(3600, "Disabled"))),
])
def test_go_json_decoding(text: str, expected: Behavior | None) -> None:
    if expected is None and text != "null":
        with pytest.raises(BehaviorError):
            parse_behavior(parse(text))
        return
    assert parse_behavior(parse(text)) == expected


@pytest.mark.parametrize(("behavior", "fragments"), [
    ('{"scaleDown":{"stabilizationWindowSeconds":1.5}}',
     ["linear.behavior.scaleDown.stabilizationWindowSeconds: expected an integer, got 1.5",
      "whole number"]),
    ('{"scaleDown":{"stabilizationWindowSeconds":2.0}}', ["expected an integer, got 2.0"]),
    ('{"scaleDown":{"stabilizationWindowSeconds":1e2}}', ["expected an integer, got 1e2"]),
    ('{"scaleDown":{"stabilizationWindowSeconds":"60"}}',
     ['expected an integer, got the string "60"']),
    ('{"scaleUp":{"policies":[{"type":"Pods","value":2147483648,"periodSeconds":1}]}}',
     ["policies[0].value: 2147483648 is out of range for a 32-bit integer",
      "use a smaller number"]),
    ('{"scaleUp":{"policies":[{"type":5}]}}',
     ["linear.behavior.scaleUp.policies[0].type: expected a string, got 5", 'e.g. "Percent"']),
    ('{"scaleUp":{"selectPolicy":true}}', ["selectPolicy: expected a string, got true"]),
    ('{"scaleUp":{"policies":{"type":"Pods"}}}',
     ["policies: expected an array of policies, got an object", '[{"type":"Percent"']),
    ('{"scaleUp":{"policies":[7]}}', ["policies[0]: expected a JSON object {...}, got 7"]),
    ('{"scaleUp":[]}', ["linear.behavior.scaleUp: expected a JSON object {...}, got an array"]),
    ("[]", ["linear.behavior: expected a JSON object {...}, got an array"]),
    ('"fast"', ['linear.behavior: expected a JSON object {...}, got the string "fast"']),
    ('{"scaleDown":{"stabilizationWindowSeconds":3601}}',
     ["behavior.scaleDown.stabilizationWindowSeconds is 3601; it must be between 0 and 3600"]),
    ('{"scaleDown":{"stabilizationWindowSeconds":-1}}',
     ["stabilizationWindowSeconds is -1; it must be between 0 and 3600"]),
    ('{"scaleDown":{"selectPolicy":"max"}}',
     ['behavior.scaleDown.selectPolicy is "max"; it must be "Max", "Min" or "Disabled"']),
    ('{"scaleUp":{"policies":[{"type":"pods","value":1,"periodSeconds":1}]}}',
     ['behavior.scaleUp.policies[0].type is "pods"; it must be "Pods" or "Percent"']),
    ('{"scaleUp":{"policies":[{"value":1,"periodSeconds":1}]}}',
     ["behavior.scaleUp.policies[0].type is missing"]),
    ('{"scaleUp":{"policies":[{"type":"Pods","periodSeconds":1}]}}',
     ["behavior.scaleUp.policies[0].value is 0 or absent; it must be more than 0"]),
    ('{"scaleUp":{"policies":[{"type":"Pods","value":-3,"periodSeconds":1}]}}',
     ["policies[0].value is -3; it must be more than 0"]),
    ('{"scaleUp":{"policies":[{"type":"Pods","value":1,"periodSeconds":1801}]}}',
     ["policies[0].periodSeconds is 1801; it must be between 1 and 1800 seconds"]),
    ('{"scaleUp":{"policies":[{"type":"Pods","value":1}]}}',
     ["policies[0].periodSeconds is 0 or absent; it must be between 1 and 1800"]),
])
def test_invalid_behavior_makes_the_configmap_invalid(behavior: str,
                                                      fragments: list[str]) -> None:
    text = '{"nodesPerReplica":16,"behavior":' + behavior + "}"
    with pytest.raises(ParamsError) as error:
        parse_configmap_data({"linear": text})
    message = str(error.value)
    assert message.startswith('ConfigMap key "linear": ')
    for fragment in fragments:
        assert fragment in message
    with pytest.raises(ParamsError) as ladder_error:
        parse_configmap_data({"ladder": '{"nodesToReplicas":[[1,1]],"behavior":'
                                        + behavior + "}"})
    assert str(ladder_error.value).startswith('ConfigMap key "ladder": ')


def test_every_problem_is_reported_at_once() -> None:
    text = ('{"nodesPerReplica":-1,"behavior":{"scaleUp":{"selectPolicy":"Fast"},'
            '"scaleDown":{"stabilizationWindowSeconds":7200,'
            '"policies":[{"type":"Pods","value":0,"periodSeconds":60}]}}}')
    with pytest.raises(ParamsError) as error:
        parse_linear(text)
    message = str(error.value)
    for fragment in ('scaleUp.selectPolicy is "Fast"', "stabilizationWindowSeconds is 7200",
                     "policies[0].value is 0 or absent", "nodesPerReplica is -1"):
        assert fragment in message


def test_behavior_null_is_no_behavior_and_type_errors_come_first() -> None:
    assert parse_linear('{"nodesPerReplica":1,"behavior":{"scaleUp":{}},"behavior":null}'
                        ).shared.behavior is None
    with pytest.raises(ParamsError, match="expected an integer"):
        parse_linear('{"nodesPerReplica":1,"behavior":{"scaleUp":{"policies":'
                     '[{"value":1.5}]}},"behavior":null}')
    with pytest.raises(GoJsonError):
        parse_behavior(parse('{"scaleUp":{"stabilizationWindowSeconds":true}}'))
