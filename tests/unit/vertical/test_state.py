"""cpa.vertical.decide.state: CPVA's poll decisions across polls, and our refuse policy."""

from __future__ import annotations

import pytest

from cpa.vertical.decide.cpva_config import decode_config
from cpa.vertical.decide.state import UNCHANGED, FileRead, InvalidConfigPolicy, Plan, VerticalState

DEFAULT = decode_config('{"app":{"requests":{"cpu":{"base":"10m","step":"1m","nodesPerStep":1}}},'
                        '"side":{"limits":{"memory":{"base":"8Mi"}}}}')
FILE = '{"app":{"requests":{"cpu":{"base":"20m","step":"5m","nodesPerStep":1}}}}'
KEEP, REFUSE = InvalidConfigPolicy.KEEP_PREVIOUS, InvalidConfigPolicy.REFUSE


def cpu(plan: Plan) -> str | None:
    if plan.computed is None or "app" not in plan.computed:
        return None
    return str(plan.computed["app"].requests["cpu"])


def poll(state: VerticalState, nodes: int, file: FileRead = UNCHANGED,
         succeed: bool = True) -> Plan:
    plan = state.plan(nodes, nodes * 4, file)
    if plan.write and succeed:
        assert plan.computed is not None
        state.written(plan.computed)
    return plan


@pytest.mark.parametrize("policy", [KEEP, REFUSE])
def test_writes_first_then_only_on_change_and_retries_failures(
        policy: InvalidConfigPolicy) -> None:
    state = VerticalState(DEFAULT, policy)
    first = poll(state, 3)
    assert first.write and first.config_set and cpu(first) == "13m"
    assert not poll(state, 3).write
    assert poll(state, 4, succeed=False).write  # failed: retried next poll
    again = poll(state, 4)
    assert again.write and not again.config_set
    assert not poll(state, 4).write


@pytest.mark.parametrize("policy", [KEEP, REFUSE])
def test_the_file_replaces_default_containers_and_keeps_the_others(
        policy: InvalidConfigPolicy) -> None:
    state = VerticalState(DEFAULT, policy)
    plan = poll(state, 2, FileRead(FILE))
    assert cpu(plan) == "30m"
    assert plan.computed is not None and sorted(plan.computed) == ["app", "side"]
    same_again = poll(state, 2, FileRead(FILE))  # a new file with the same numbers
    assert same_again.config_set and not same_again.write


@pytest.mark.parametrize("policy", [KEEP, REFUSE])
def test_an_empty_file_is_no_change(policy: InvalidConfigPolicy) -> None:
    state = VerticalState(DEFAULT, policy)
    poll(state, 2, FileRead(FILE))
    plan = poll(state, 3, FileRead(""))
    assert not plan.config_set and cpu(plan) == "35m"


@pytest.mark.parametrize("policy", [KEEP, REFUSE])
def test_a_read_error_fails_the_poll_and_keeps_the_state(policy: InvalidConfigPolicy) -> None:
    state = VerticalState(DEFAULT, policy)
    plan = poll(state, 2, FileRead(error="can't stat file: no such file or directory"))
    assert plan.error and "no such file" in plan.error and not plan.write
    assert state.current is None and poll(state, 2).write  # then the default applies


@pytest.mark.parametrize("policy", [KEEP, REFUSE])
def test_a_null_file_writes_no_containers_once_then_the_default(
        policy: InvalidConfigPolicy) -> None:
    """CPVA's nil-map quirk: null sets "no config", which the next poll rebuilds."""
    state = VerticalState(DEFAULT, policy)
    poll(state, 2)
    plan = poll(state, 2, FileRead("null"))
    assert plan.write and plan.computed == {}
    again = poll(state, 2)
    assert again.config_set and again.write and cpu(again) == "12m"


def test_keep_previous_ignores_an_invalid_file_after_logging_it_once() -> None:
    """CPVA fails open: the previous config keeps applying."""
    state = VerticalState(DEFAULT, KEEP)
    poll(state, 2, FileRead(FILE))
    bad = poll(state, 3, FileRead('{"app":{"requests":{"cpu":{"base":"lots"}}}}'))
    assert bad.error and "invalid config file" in bad.error and not bad.write
    after = poll(state, 3)
    assert after.error is None and after.write and cpu(after) == "35m"


def test_keep_previous_falls_back_to_the_default_when_the_first_file_is_invalid() -> None:
    state = VerticalState(DEFAULT, KEEP)
    assert poll(state, 2, FileRead("{oops")).error
    fallback = poll(state, 2)
    assert fallback.error is None and cpu(fallback) == "12m"


def test_refuse_fails_every_poll_until_the_file_changes() -> None:
    """Ours: fails closed, so a typo does not silently keep stale (or default) sizes."""
    state = VerticalState(DEFAULT, REFUSE)
    poll(state, 2, FileRead(FILE))
    poll(state, 3, FileRead("{oops"))
    for nodes in (3, 4, 5):
        plan = poll(state, nodes)
        assert plan.error and "until the file changes" in plan.error and not plan.write
    assert poll(state, 5, FileRead("")).error  # an empty file is no change
    fixed = poll(state, 5, FileRead(FILE))
    assert fixed.error is None and fixed.write and cpu(fixed) == "45m"


def test_refuse_on_the_first_file_does_not_fall_back_to_the_default() -> None:
    state = VerticalState(DEFAULT, REFUSE)
    assert poll(state, 2, FileRead("{oops")).error
    assert poll(state, 2).error


@pytest.mark.parametrize("policy", [KEEP, REFUSE])
def test_a_quantity_too_large_fails_the_poll_instead_of_the_process(
        policy: InvalidConfigPolicy) -> None:
    """CPVA panics (exit 2, then a crash loop); we report it on every poll."""
    state = VerticalState(decode_config('{"c":{"limits":{"memory":{"base":"9E"}}}}'), policy)
    for _ in range(2):
        plan = poll(state, 1)
        assert plan.error and "milli-units" in plan.error and not plan.write


def test_default_policy_is_refuse_and_no_default_means_no_containers() -> None:
    state = VerticalState(None)
    assert state.policy is REFUSE
    plan = poll(state, 1)
    assert plan.write and plan.computed == {} and plan.config == {}
