"""Which failed ``pods/resize`` answers fall back to the template (only 403, 404, 422) and
which are retried at a later poll (everything else: 5xx, 409, 429, no answer, any other)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cpa.vertical.decide.resize_errors import FALLBACK_STATUSES, RETRY_REASONS, Verdict, classify


@pytest.mark.parametrize(("status", "verdict"), [
    (404, Verdict(True, "unsupported")),
    (403, Verdict(True, "forbidden")),
    (422, Verdict(True, "invalid")),
    (500, Verdict(False, "server_error")),
    (502, Verdict(False, "server_error")),
    (503, Verdict(False, "server_error")),
    (504, Verdict(False, "server_error")),
    (409, Verdict(False, "conflict")),
    (429, Verdict(False, "too_many_requests")),
    (0, Verdict(False, "connection")),  # no answer: a timeout, a reset, a refused connect
    (400, Verdict(False, "other")),
    (401, Verdict(False, "other")),  # a token being rotated
    (410, Verdict(False, "other")),
    (418, Verdict(False, "other")),
])
def test_the_verdict_on_each_status(status: int, verdict: Verdict) -> None:
    assert classify(status) == verdict


def test_only_403_404_and_422_fall_back() -> None:
    assert {s for s in range(0, 600) if classify(s).fallback} == {403, 404, 422}
    assert set(FALLBACK_STATUSES) == {403, 404, 422}


@given(st.integers(min_value=0, max_value=999))
def test_every_retry_reason_is_a_declared_metric_label(status: int) -> None:
    verdict = classify(status)
    if not verdict.fallback:
        assert verdict.reason in RETRY_REASONS
    else:
        assert verdict.reason in FALLBACK_STATUSES.values()
