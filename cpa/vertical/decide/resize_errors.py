"""Which failed ``pods/resize`` answers mean "this Pod cannot be resized in place" (fall back
to the template) and which only mean "not now" (retry the Pod at a later poll).

The fallback patches the pod template, and for a RollingUpdate DaemonSet or a Deployment
its controller then replaces every Pod: the restart in-place mode exists to avoid. So it is
taken only on an answer that will be the same next time:

* 404: the API server has no ``pods/resize`` (before 1.33, or the feature gate off);
* 403: RBAC denies ``patch`` on ``pods/resize`` (the operator must add the rule);
* 422: the API server refused the resize itself (validation: e.g. a QoS class change).

Everything else is retried with a per-Pod backoff (:mod:`cpa.vertical.decide.backoff`) and never
falls back: 5xx (an etcd leader change, an overloaded server), 409 (the server's own
optimistic-concurrency retries ran out), 429 (priority and fairness; one with
``Retry-After`` is already retried inside the request by the client), no answer at all
(status 0: a timeout, a reset, a refused connection), and any other status (400, 401 while
a token rotates, ...): none of them says that the next try will fail too.

Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["FALLBACK_STATUSES", "RETRY_REASONS", "Verdict", "classify"]

FALLBACK_STATUSES: Final[dict[int, str]] = {
    404: "unsupported",
    403: "forbidden",
    422: "invalid",
}
"""HTTP status -> the fallback reason (``cpvpa_resize_fallbacks_total{reason}``)."""

RETRY_REASONS: Final = ("server_error", "conflict", "too_many_requests", "connection",
                        "other")
"""The ``reason`` label of ``cpvpa_resize_retries_total``, every value it can take."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """What to do about one failed request: fall back (``reason`` is a fallback reason) or
    retry the Pod later (``reason`` is one of :data:`RETRY_REASONS`)."""

    fallback: bool
    reason: str


def classify(status: int) -> Verdict:
    """The verdict on an :class:`~cpa.kube.api.ApiError`'s ``status`` (0: no answer)."""
    if status in FALLBACK_STATUSES:
        return Verdict(True, FALLBACK_STATUSES[status])
    if status == 0:
        return Verdict(False, "connection")
    if status >= 500:
        return Verdict(False, "server_error")
    if status == 409:
        return Verdict(False, "conflict")
    if status == 429:
        return Verdict(False, "too_many_requests")
    return Verdict(False, "other")
