"""``behavior``: stabilization windows and rate policies with the HPA's semantics (ours, opt-in).

Why: upstream writes the formula's count on every poll, so a node count that wobbles around
a threshold adds and removes a replica every few minutes (upstream issues #65, #128). The
Horizontal Pod Autoscaler solved the same problem with ``spec.behavior``; operators know its
shape and its meaning, so we take both rather than invent a third scheme. A ``behavior``
object inside the ``linear`` or ``ladder`` value (upstream ignores the unknown key) opts in;
without it nothing here runs and the decision is upstream's.

The algorithm is a port of kubernetes ``pkg/controller/podautoscaler/horizontal.go``:

* ``stabilizeRecommendationWithBehaviors``: every poll's formula result ("recommendation")
  is kept with its time. A scale-up aims at the LOWEST recommendation inside the scaleUp
  window, a scale-down at the HIGHEST inside the scaleDown window; the current count is
  moved towards that aim only (windows hold, they never overshoot). A window of W seconds
  covers recommendations strictly newer than ``now - W``, plus this poll's.
* ``convertDesiredReplicasWithBehaviorRate`` with ``calculateScaleUpLimitWithScalingRules``,
  ``calculateScaleDownLimitWithBehaviors`` and ``getReplicasChangePerPeriod``: each policy
  limits the change relative to the replicas at the start of its period (current replicas
  minus what we added, plus what we removed, strictly within the last ``periodSeconds``).
  Pods: start +/- value. Percent: up ``ceil(start * (1 + value/100))``, down
  ``trunc(start * (1 - value/100))``, in float64 exactly as Go computes them. selectPolicy
  Max (default) takes the policy allowing the largest change, Min the smallest, Disabled
  forbids that direction. A limit behind the current count holds the count where it is.

Differences from the HPA, on purpose: a direction that is absent or has no policies is not
rate-limited, and an absent window is 0 (the HPA fills in defaults: 300 s down, 100 % or
4 pods per 15 s up). Arithmetic is in Python integers, so huge values cannot wrap around
as the HPA's int32 sums can. History is kept in memory, like the HPA's, up to the longest
window and period the API allows (3600 s and 1800 s), whatever the current behavior says:
a behavior edited in place is judged against the same history the HPA would have.

The state is explicit (:class:`BehaviorState`) and time is an argument, so the daemon, ``cpa
simulate`` and ``cpa explain`` run this one implementation with their own clocks.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Final, NamedTuple

from cpa.go.json import (
    Field,
    GoJsonError,
    JsonValue,
    Number,
    as_object,
    decode_fields,
    describe,
    go_int,
    go_string,
    members_by_field,
)
from cpa.horizontal.decide.steps import Step, plural

__all__ = [
    "MAX_PERIOD_SECONDS",
    "MAX_WINDOW_SECONDS",
    "Behavior",
    "BehaviorDoc",
    "BehaviorError",
    "BehaviorStage",
    "BehaviorState",
    "Outcome",
    "Policy",
    "Rules",
    "apply",
    "behavior_problems",
    "decode_behavior",
    "parse_behavior",
]

MAX_WINDOW_SECONDS: Final = 3600
"""The HPA API's limit on stabilizationWindowSeconds, and how long recommendations are kept."""
MAX_PERIOD_SECONDS: Final = 1800
"""The HPA API's limit on periodSeconds, and how long scale events are kept."""
POLICY_TYPES: Final = ("Pods", "Percent")
SELECT_POLICIES: Final = ("Max", "Min", "Disabled")
_INT32_MIN: Final = -(2**31)
_INT32_MAX: Final = 2**31 - 1

_BEHAVIOR_FIELDS: Final = ("scaleUp", "scaleDown")
_RULES_FIELDS: Final = ("stabilizationWindowSeconds", "selectPolicy", "policies")
_POLICY_FIELDS: Final = {"type": Field("type", go_string),
                          "value": Field("value", lambda v, at: _go_int32(v, at)),
                          "periodSeconds": Field("period_seconds",
                                                 lambda v, at: _go_int32(v, at))}


# ----------------------------------------------------------------------------- the types


class Policy(NamedTuple):
    """One HPAScalingPolicy: change by ``value`` pods or percent per ``period_seconds``."""

    type: str
    value: int
    period_seconds: int

    def fields(self) -> dict[str, object]:
        return {"type": self.type, "value": self.value, "periodSeconds": self.period_seconds}

    def describe(self) -> str:
        unit = "%" if self.type == "Percent" else ""
        return f"{self.type} {self.value}{unit} per {self.period_seconds} s"


class Rules(NamedTuple):
    """One direction's HPAScalingRules, defaults filled in (window 0, selectPolicy Max)."""

    stabilization_window_seconds: int = 0
    select_policy: str = "Max"
    policies: tuple[Policy, ...] = ()

    def fields(self) -> dict[str, object]:
        return {"stabilizationWindowSeconds": self.stabilization_window_seconds,
                "selectPolicy": self.select_policy,
                "policies": [p.fields() for p in self.policies]}


class Behavior(NamedTuple):
    """The ``behavior`` object; a direction that is ``None`` is neither delayed nor limited."""

    scale_up: Rules | None = None
    scale_down: Rules | None = None

    def fields(self) -> dict[str, object]:
        """As the ConfigMap spells it, for logs and ``explain``."""
        out: dict[str, object] = {}
        if self.scale_up is not None:
            out["scaleUp"] = self.scale_up.fields()
        if self.scale_down is not None:
            out["scaleDown"] = self.scale_down.fields()
        return out


# ----------------------------------------------------------------------------- decoding
#
# Decoded as Go's encoding/json would decode the HPA's types into a *Behavior field:
# pointer fields (the directions, the window, selectPolicy) and the policies slice become
# nil on JSON null; the policy's plain fields ignore null; a repeated key decodes into what
# is already there (objects merge, a policies array reuses its backing elements, exactly as
# cpa.horizontal.decide.modes.ladder does for its pairs); int32 fields reject 1.5, 2.0, 1e2 and
# overflow.


class _PolicyDoc:
    """One HPAScalingPolicy being decoded; Go zero values until a member sets them."""

    __slots__ = ("period_seconds", "type", "value")

    def __init__(self) -> None:
        self.type = ""
        self.value = 0
        self.period_seconds = 0


class _RulesDoc:
    """One HPAScalingRules being decoded; ``None`` is Go's nil pointer (or nil slice)."""

    __slots__ = ("backing", "length", "policies_nil", "select_policy", "window")

    def __init__(self) -> None:
        self.window: int | None = None
        self.select_policy: str | None = None
        self.backing: list[_PolicyDoc] = []
        self.length = 0
        self.policies_nil = True


class BehaviorDoc:
    """A ``behavior`` being decoded; ``None`` directions are Go's nil pointers."""

    __slots__ = ("scale_down", "scale_up")

    def __init__(self) -> None:
        self.scale_up: _RulesDoc | None = None
        self.scale_down: _RulesDoc | None = None


def _go_int32(value: JsonValue, where: str) -> int:
    number = go_int(value, where)
    if _INT32_MIN <= number <= _INT32_MAX:
        return number
    assert isinstance(value, Number)
    raise GoJsonError(f"{where}: {describe(value)} is out of range for a 32-bit integer "
                      f"(it must lie between {_INT32_MIN} and {_INT32_MAX})")


def _decode_policies(doc: _RulesDoc, value: JsonValue, where: str) -> None:
    if value is None or value == ():
        # null gives a nil slice, [] a fresh empty one: the old backing array is gone.
        doc.backing, doc.length, doc.policies_nil = [], 0, value is None
        return
    if not isinstance(value, tuple):
        raise GoJsonError(f"{where}: expected an array of policies, got {describe(value)}")
    for index, item in enumerate(value):
        if index >= len(doc.backing):
            doc.backing.append(_PolicyDoc())
        if item is None:
            continue  # null into a struct element leaves it as it was
        at = f"{where}[{index}]"
        obj = as_object(item, at)
        assert obj is not None
        decode_fields(obj, _POLICY_FIELDS, doc.backing[index], at)
    doc.length, doc.policies_nil = len(value), False


def _decode_rules(value: JsonValue, where: str, into: _RulesDoc | None) -> _RulesDoc | None:
    obj = as_object(value, where)
    if obj is None:
        return None  # null sets the pointer to nil
    doc = into if into is not None else _RulesDoc()
    for name, member in members_by_field(obj, _RULES_FIELDS):
        at = f"{where}.{name}"
        if name == "stabilizationWindowSeconds":
            doc.window = None if member is None else _go_int32(member, at)
        elif name == "selectPolicy":
            doc.select_policy = None if member is None else go_string(member, at)
        else:
            _decode_policies(doc, member, at)
    return doc


def decode_behavior(value: JsonValue, where: str,
                    into: BehaviorDoc | None = None) -> BehaviorDoc | None:
    """Decode one ``behavior`` member (type errors raise :class:`GoJsonError`).

    ``into`` is what an earlier member of the same name decoded, so a repeated key merges
    into it as Go's decoder does; ``None`` back means Go's nil pointer (no behavior).
    """
    obj = as_object(value, where)
    if obj is None:
        return None
    doc = into if into is not None else BehaviorDoc()
    for name, member in members_by_field(obj, _BEHAVIOR_FIELDS):
        if name == "scaleUp":
            doc.scale_up = _decode_rules(member, f"{where}.scaleUp", doc.scale_up)
        else:
            doc.scale_down = _decode_rules(member, f"{where}.scaleDown", doc.scale_down)
    return doc


def _rules_problems(doc: _RulesDoc, where: str) -> list[str]:
    """The HPA API's validation of one direction, minus "at least one policy"."""
    problems: list[str] = []
    if doc.window is not None and not 0 <= doc.window <= MAX_WINDOW_SECONDS:
        problems.append(
            f"{where}.stabilizationWindowSeconds is {doc.window}; it must be between 0 and "
            f"{MAX_WINDOW_SECONDS} seconds (or absent for 0)")
    if doc.select_policy is not None and doc.select_policy not in SELECT_POLICIES:
        problems.append(
            f'{where}.selectPolicy is "{doc.select_policy}"; it must be "Max", "Min" or '
            '"Disabled", spelled exactly so (or absent for "Max")')
    for index, policy in enumerate(doc.backing[: doc.length]):
        at = f"{where}.policies[{index}]"
        if policy.type not in POLICY_TYPES:
            shown = f'is "{policy.type}"' if policy.type else "is missing"
            problems.append(f'{at}.type {shown}; it must be "Pods" or "Percent", spelled '
                            "exactly so")
        if policy.value <= 0:
            problems.append(f"{at}.value is {_zero_or_absent(policy.value)}; it must be more "
                            "than 0 (pods for Pods, a percentage of the replicas for Percent)")
        if not 1 <= policy.period_seconds <= MAX_PERIOD_SECONDS:
            problems.append(f"{at}.periodSeconds is {_zero_or_absent(policy.period_seconds)}; "
                            f"it must be between 1 and {MAX_PERIOD_SECONDS} seconds")
    return problems


def _zero_or_absent(number: int) -> str:
    return "0 or absent" if number == 0 else str(number)


def behavior_problems(doc: BehaviorDoc | None, where: str = "behavior"
                      ) -> tuple[Behavior | None, list[str]]:
    """Validate a decoded ``behavior``: the value (``None`` if invalid or absent) and every
    problem, each naming the field, its value and how to fix it."""
    if doc is None:
        return None, []
    problems: list[str] = []
    built: dict[str, Rules | None] = {}
    for name, rules in (("scaleUp", doc.scale_up), ("scaleDown", doc.scale_down)):
        if rules is None:
            built[name] = None
            continue
        problems += _rules_problems(rules, f"{where}.{name}")
        built[name] = Rules(
            stabilization_window_seconds=rules.window or 0,
            select_policy=rules.select_policy or "Max",
            policies=tuple(Policy(p.type, p.value, p.period_seconds)
                           for p in rules.backing[: rules.length]))
    if problems:
        return None, problems
    return Behavior(scale_up=built["scaleUp"], scale_down=built["scaleDown"]), []


class BehaviorError(ValueError):
    """A ``behavior`` the HPA API would refuse; the message lists every problem."""


def parse_behavior(value: JsonValue, where: str = "behavior") -> Behavior | None:
    """Decode and validate one ``behavior`` value: :class:`GoJsonError` for what Go's
    decoder refuses, :class:`BehaviorError` for what the HPA's validation refuses."""
    behavior, problems = behavior_problems(decode_behavior(value, where), where)
    if problems:
        raise BehaviorError("; ".join(problems))
    return behavior


# ----------------------------------------------------------------------------- the state

@dataclass(slots=True)
class BehaviorState:
    """What the algorithm remembers between polls, for one target.

    ``recommendations`` are ``(time, formula result)``, one per poll; the events are
    ``(time, replicas added)`` and ``(time, replicas removed)``, one per write. Times are
    seconds on whatever clock the caller passes as ``now`` (monotonic in the daemon, the
    timeline's ``t`` in ``cpa simulate``)."""

    recommendations: list[tuple[float, int]] = field(default_factory=list)
    scale_up_events: list[tuple[float, int]] = field(default_factory=list)
    scale_down_events: list[tuple[float, int]] = field(default_factory=list)

    def recommend(self, desired: int, now: float) -> None:
        """Keep this poll's recommendation (a second call at the same time replaces it:
        a scale write retried within one poll must not count twice)."""
        if self.recommendations and self.recommendations[-1][0] == now:
            self.recommendations.pop()
        self.recommendations.append((now, desired))
        cutoff = now - MAX_WINDOW_SECONDS
        if self.recommendations[0][0] <= cutoff:
            self.recommendations = [r for r in self.recommendations if r[0] > cutoff]

    def record_scale(self, previous: int, new: int, now: float) -> None:
        """A write from ``previous`` to ``new`` replicas succeeded at ``now``
        (the HPA's ``storeScaleEvent``)."""
        if new > previous:
            self.scale_up_events.append((now, new - previous))
        elif new < previous:
            self.scale_down_events.append((now, previous - new))
        cutoff = now - MAX_PERIOD_SECONDS
        for events in (self.scale_up_events, self.scale_down_events):
            if events and events[0][0] <= cutoff:
                events[:] = [e for e in events if e[0] > cutoff]

    def change_in_period(self, events: list[tuple[float, int]], period: int,
                         now: float) -> int:
        """``getReplicasChangePerPeriod``: the replicas changed strictly after
        ``now - period``."""
        cutoff = now - period
        return sum(change for at, change in events if at > cutoff)


# ----------------------------------------------------------------------------- the algorithm


class Outcome(NamedTuple):
    """What the behavior made of one poll's formula result for one target."""

    desired: int
    """The formula's count (upstream's decision)."""
    current: int
    """The target's replicas before this poll (the scale GET's value)."""
    replicas: int
    """What is to be written: between ``current`` and ``desired``, both included."""
    steps: tuple[Step, ...]
    reason: str
    """One short line: what decided ``replicas`` (for tables and log fields)."""

    @property
    def shaped(self) -> bool:
        """True when the behavior wrote something other than the formula's count."""
        return self.replicas != self.desired


def _stabilize(behavior: Behavior, state: BehaviorState, desired: int, current: int,
               now: float, steps: list[Step]) -> tuple[int, str | None]:
    """The window stage: the count aimed at, and a reason if a window held it back."""
    up = behavior.scale_up.stabilization_window_seconds if behavior.scale_up else 0
    down = behavior.scale_down.stabilization_window_seconds if behavior.scale_down else 0
    lowest = highest = desired
    up_seen = down_seen = 0
    for at, recommendation in state.recommendations:
        if at > now - up:
            lowest = min(lowest, recommendation)
            up_seen += 1
        if at > now - down:
            highest = max(highest, recommendation)
            down_seen += 1
    aim = current
    if aim < lowest:
        aim = lowest
    if aim > highest:
        aim = highest
    state.recommend(desired, now)

    if desired > current:
        direction, window, seen, bound, word = "up", up, up_seen, lowest, "lowest"
    elif desired < current:
        direction, window, seen, bound, word = "down", down, down_seen, highest, "highest"
    else:
        steps.append(Step("behavior.none", (
            f"The target already has the formula's {plural(desired, 'replica')}, so there is "
            "nothing for the behavior to delay or limit.")))
        return aim, None
    name = f"scale{direction.capitalize()}"
    if window == 0:
        steps.append(Step(f"behavior.window.{direction}", (
            f"The {name} stabilization window is 0 s (or absent), so the scale-{direction} "
            f"from {current} aims straight at the formula's {desired}.")))
        return aim, None
    history = (f"{plural(seen, 'earlier recommendation')} plus this poll's {desired}"
               if seen else f"no earlier recommendation, only this poll's {desired}")
    text = (f"Over the {name} stabilization window of the last {window} s the {word} "
            f"recommendation is {bound} ({history}), ")
    if aim == current:
        text += f"so the target stays at {current} for now (no scale-{direction})."
        reason: str | None = f"{name} window {window} s: {word} recommendation {bound}, held"
    elif aim != desired:
        text += f"so the scale-{direction} from {current} aims at {aim}, not {desired}."
        reason = f"{name} window {window} s: {word} recommendation {aim}"
    else:
        text += f"so the scale-{direction} from {current} aims at the formula's {desired}."
        reason = None
    steps.append(Step(f"behavior.window.{direction}", text))
    return aim, reason


def _limit(rules: Rules, state: BehaviorState, current: int, up: bool, now: float
           ) -> tuple[int, list[str]]:
    """One direction's rate limit from its policies (requires at least one policy)."""
    lines: list[str] = []
    limit: int | None = None
    for policy in rules.policies:
        added = state.change_in_period(state.scale_up_events, policy.period_seconds, now)
        removed = state.change_in_period(state.scale_down_events, policy.period_seconds, now)
        start = current - added + removed
        if up:
            proposed = (start + policy.value if policy.type == "Pods" else
                        math.ceil(float(start) * (1 + float(policy.value) / 100)))
        else:
            proposed = (start - policy.value if policy.type == "Pods" else
                        int(float(start) * (1 - float(policy.value) / 100)))
        since = ("none added or removed since" if added == removed == 0 else
                 f"{added} added and {removed} removed since")
        line = (f"{policy.describe()}: the period began at {start} ({since}), so it allows "
                f"{'up' if up else 'down'} to {proposed}")
        if up and policy.type == "Percent" and start == 0:
            line += " (a percentage of 0 is 0: add a Pods policy to grow from zero)"
        lines.append(line)
        if limit is None:
            limit = proposed
        # Max = the largest change: the highest limit going up, the lowest going down.
        elif (rules.select_policy == "Max") == up:
            limit = max(limit, proposed)
        else:
            limit = min(limit, proposed)
    assert limit is not None
    return limit, lines


def _rate(behavior: Behavior, state: BehaviorState, aim: int, current: int, now: float,
          steps: list[Step]) -> tuple[int, str | None]:
    """The policy stage: how far towards ``aim`` this poll may go, and why if limited."""
    if aim == current:
        return current, None
    up = aim > current
    direction = "up" if up else "down"
    name = f"scale{direction.capitalize()}"
    rules = behavior.scale_up if up else behavior.scale_down
    key = f"behavior.policy.{direction}"
    if rules is None or (rules.select_policy != "Disabled" and not rules.policies):
        what = f"There is no {name} rule" if rules is None else f"{name} has no policies"
        steps.append(Step(key, f"{what}, so the scale-{direction} from {current} to {aim} "
                               "is not rate-limited."))
        return aim, None
    if rules.select_policy == "Disabled":
        steps.append(Step(key, f"{name} selectPolicy is Disabled, so the replicas never go "
                               f"{direction}: they stay at {current}."))
        return current, f"{name} disabled"
    limit, lines = _limit(rules, state, current, up, now)
    if len(lines) == 1:
        text = lines[0] + "."
    else:
        which = "largest" if rules.select_policy == "Max" else "smallest"
        text = ("; ".join(lines) + f". selectPolicy {rules.select_policy} takes the {which} "
                f"change: {limit}.")
    if (up and limit <= current) or (not up and limit >= current):
        text += (f" That allows no change from the current {current} yet (earlier changes "
                 "used up the period), so the target stays where it is.")
        steps.append(Step(key, text))
        return current, f"{name} policies: no change allowed yet"
    if (up and limit < aim) or (not up and limit > aim):
        text += f" So this poll goes to {limit} instead of {aim}."
        steps.append(Step(key, text))
        return limit, f"{name} policies allow {limit}"
    text += f" That covers the whole change to {aim}."
    steps.append(Step(key, text))
    return aim, None


def apply(behavior: Behavior | None, state: BehaviorState, desired: int, current: int,
          now: float, floor: int = 0) -> Outcome:
    """One poll: what to write given the formula's ``desired`` and the target's ``current``.

    Records this poll's recommendation in ``state``; the caller records the write itself
    with :meth:`BehaviorState.record_scale` once it succeeded (as the HPA does). With no
    behavior the answer is ``desired`` with no steps, and ``state`` is left alone.

    ``floor`` (ours, the zone floor; at most ``desired``): a target below it is raised to it
    at once, whatever the windows and policies say, as the HPA raises a target below
    ``minReplicas`` without consulting its behavior.
    """
    if behavior is None:
        return Outcome(desired, current, desired, (), "formula (no behavior)")
    steps: list[Step] = []
    aim, held = _stabilize(behavior, state, desired, current, now, steps)
    replicas, limited = _rate(behavior, state, aim, current, now, steps)
    if replicas < floor:
        steps.append(Step("behavior.floor", (
            f"The zone floor is {floor}: a target below it is raised at once, past the "
            f"behavior (as the HPA raises a target below minReplicas), so {replicas} becomes "
            f"{floor}.")))
        replicas = floor
        limited = held = None
        if replicas != desired:
            limited = f"zone floor {floor}"
    if replicas == desired:
        result = (f"The behavior lets the formula's {desired} through."
                  if desired != current else "")
        reason = "formula" if desired != current else "unchanged"
    else:
        result = (f"The behavior writes {replicas} instead of the formula's {desired}"
                  + (" (no change this poll)." if replicas == current else "."))
        reason = limited or held or "behavior"
    if result:
        steps.append(Step("behavior.result", result))
    return Outcome(desired, current, replicas, tuple(steps), reason)


# ----------------------------------------------------------------------------- the daemon's stage


class BehaviorStage:
    """The daemon's stage between the formula and the scale writes: one state per target.

    Per target because the policies are relative to each target's own replicas and own
    writes: two targets may start from different counts, or one write may fail. The
    recommendations are the same for every target and are simply kept once per target.
    """

    def __init__(self) -> None:
        self._states: dict[Hashable, BehaviorState] = {}
        self._held: dict[Hashable, tuple[int, int]] = {}

    def shape(self, key: Hashable, behavior: Behavior, desired: int, current: int,
              now: float, floor: int = 0) -> Outcome:
        state = self._states.setdefault(key, BehaviorState())
        return apply(behavior, state, desired, current, now, floor)

    def state(self, key: Hashable) -> BehaviorState | None:
        """What is remembered for ``key`` (None: nothing yet); for inspection, not to change."""
        return self._states.get(key)

    def written(self, key: Hashable, previous: int, new: int, now: float) -> None:
        """A scale write succeeded: the policies count it from now on."""
        self._states.setdefault(key, BehaviorState()).record_scale(previous, new, now)

    def newly_held(self, key: Hashable, outcome: Outcome) -> bool:
        """True the first poll the behavior holds ``key`` at a count other than the
        formula's (once per episode and pair of counts, so logs do not repeat every poll)."""
        if not outcome.shaped or outcome.replicas != outcome.current:
            self._held.pop(key, None)
            return False
        pair = (outcome.desired, outcome.replicas)
        if self._held.get(key) == pair:
            return False
        self._held[key] = pair
        return True

    def reset(self) -> None:
        """Forget all history (the ConfigMap no longer has a ``behavior``)."""
        self._states.clear()
        self._held.clear()
