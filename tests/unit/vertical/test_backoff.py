"""The per-Pod retry backoff of in-place resizes: exponential, bounded, reset by a success,
forgotten with the Pod."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cpa.vertical.decide.backoff import DEFAULT_POLICY, Backoff, BackoffPolicy


@pytest.mark.parametrize(("failures", "delay"), [
    (1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (9, 256.0), (10, 300.0), (11, 300.0),
    (10**6, 300.0),  # a huge count neither overflows nor passes the cap
])
def test_the_default_delays(failures: int, delay: float) -> None:
    assert DEFAULT_POLICY.delay(failures) == delay


@given(st.floats(min_value=0.01, max_value=100), st.floats(min_value=1.0, max_value=10),
       st.floats(min_value=0.01, max_value=10_000), st.integers(min_value=1, max_value=5000))
def test_delays_grow_and_never_pass_the_cap(initial: float, factor: float, cap: float,
                                            failures: int) -> None:
    policy = BackoffPolicy(initial, factor, cap)
    assert 0 < policy.delay(failures) <= cap
    assert policy.delay(failures) <= policy.delay(failures + 1)
    assert policy.delay(1) == min(initial, cap)


def test_a_failing_key_waits_longer_each_time_and_a_success_resets_it() -> None:
    backoff: Backoff[str] = Backoff()
    now = 100.0
    assert backoff.due("a", now)  # never failed
    waits = []
    for _ in range(4):
        attempt = backoff.failed("a", now)
        assert not backoff.due("a", now) and not backoff.due("a", attempt.next_at - 0.001)
        assert backoff.due("a", attempt.next_at)
        waits.append(attempt.delay)
        now = attempt.next_at
    assert waits == [1.0, 2.0, 4.0, 8.0]
    assert backoff.due("b", now)  # one key's failures hold no other back
    backoff.succeeded("a")
    assert backoff.due("a", now) and backoff.failed("a", now).delay == 1.0


def test_keys_no_longer_seen_are_forgotten() -> None:
    backoff: Backoff[str] = Backoff()
    backoff.failed("gone", 0.0)
    backoff.failed("kept", 0.0)
    backoff.keep_only(["kept", "new"])
    assert len(backoff) == 1 and backoff.get("gone") is None
    assert backoff.get("kept") is not None


def test_a_flapping_key_is_tried_at_most_log2_times_in_a_window() -> None:
    """One try per 1 s poll for an hour, every try failing: the backoff lets few through."""
    backoff: Backoff[str] = Backoff()
    tries = 0
    for second in range(3600):
        if backoff.due("p", float(second)):
            tries += 1
            backoff.failed("p", float(second))
    # 1+2+4+...+256 = 511 s for the first 9 tries, then one per 300 s.
    assert tries == 9 + (3600 - 511 + 299) // 300
