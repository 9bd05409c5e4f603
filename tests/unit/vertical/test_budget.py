"""The fallback's budget (``cpa.vertical.decide.budget``): grace period, at most N Pods per poll,
oldest refusal first."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpa.vertical.decide.budget import FallbackBudget, FallbackPlan


@pytest.mark.parametrize(("max_pods", "grace", "polls", "want"), [
    # No bound, no grace: every refused Pod is due at once (CPVA-like: the template).
    (0, 0.0, [(0.0, ["a", "b", "c"])], [FallbackPlan(("a", "b", "c"))]),
    # N=2: two per poll, the rest waits for the next poll.
    (2, 0.0, [(0.0, ["a", "b", "c"]), (1.0, ["c"])],
     [FallbackPlan(("a", "b"), ("c",)), FallbackPlan(("c",))]),
    # Grace 10s: nothing before it, then all (within the budget).
    (5, 10.0, [(0.0, ["a"]), (9.0, ["a"]), (10.0, ["a"])],
     [FallbackPlan(waiting=(("a", 10.0),)), FallbackPlan(waiting=(("a", 1.0),)),
      FallbackPlan(("a",))]),
    # Oldest refusal first, whatever the names.
    (1, 0.0, [(0.0, ["z"]), (1.0, ["a", "z"])],
     [FallbackPlan(("z",)), FallbackPlan(("z",), ("a",))]),
    # A Pod no longer refused is forgotten: refused again, it waits the whole grace again.
    (1, 5.0, [(0.0, ["a"]), (4.0, []), (6.0, ["a"]), (11.0, ["a"])],
     [FallbackPlan(waiting=(("a", 5.0),)), FallbackPlan(), FallbackPlan(waiting=(("a", 5.0),)),
      FallbackPlan(("a",))]),
])
def test_plans(max_pods: int, grace: float, polls: list[tuple[float, list[str]]],
               want: list[FallbackPlan]) -> None:
    budget = FallbackBudget(max_pods, grace)
    assert [budget.plan(refused, now) for now, refused in polls] == want


def test_negative_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="negative"):
        FallbackBudget(-1)
    with pytest.raises(ValueError, match="negative"):
        FallbackBudget(1, -0.5)


PODS = st.lists(st.sampled_from([f"p{i}" for i in range(12)]), max_size=12, unique=True)


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=1, max_value=5), st.floats(min_value=0, max_value=30),
       st.lists(st.tuples(st.floats(min_value=0, max_value=20), PODS), max_size=12))
def test_never_more_than_n_and_never_before_the_grace(
        max_pods: int, grace: float, steps: list[tuple[float, list[str]]]) -> None:
    budget = FallbackBudget(max_pods, grace)
    now = 0.0
    since: dict[str, float] = {}
    for gap, refused in steps:
        now += gap
        since = {pod: since.get(pod, now) for pod in refused}
        plan = budget.plan(refused, now)
        assert len(plan.restart) <= max_pods
        due = set(plan.restart) | set(plan.over_budget)
        assert due == {pod for pod in refused if now - since[pod] >= grace}
        assert {pod for pod, _ in plan.waiting} == set(refused) - due
        assert all(0 < left <= grace for _, left in plan.waiting)
        # The budget goes to the oldest refusals.
        if plan.over_budget:
            assert max(since[p] for p in plan.restart) <= min(since[p] for p in plan.over_budget)
        assert plan.due == bool(due)
