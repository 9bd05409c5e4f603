"""What the rest of the program needs from the Kubernetes API, as types only.

Why a module of its own: the poll loop, the ConfigMap and scale code and the node watch are
written against these small Protocols, not against :class:`cpa.kube.client.KubeApi`, so a test
fake is a plain class that type-checks, and importing the types never pulls in the HTTP client (the
``--version`` and ``--help`` paths stay instant).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol, TypeVar

T = TypeVar("T")

RETRY_AFTER_CAP = 10.0
"""The longest we wait at once because an answer said ``Retry-After`` (client-go has no cap
but its request's context; a daemon must not sleep for an hour on one header)."""


class ApiError(Exception):
    """A failed API request; ``status`` 0 means no HTTP answer (connection problem)."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{message} (HTTP {status} {reason})" if status else message)
        self.status = status
        self.reason = reason
        self.message = message
        self.retry_after: int | None = None
        """Seconds the server asked us to wait before trying again (``Retry-After``)."""

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def gone(self) -> bool:
        return self.status == 410

    @property
    def forbidden(self) -> bool:
        return self.status == 403


class Api(Protocol):
    """Single JSON requests: all the poll makes (ConfigMap GET/POST, scale GET/PUT).

    ``deadline`` (a :func:`time.monotonic` time) is when the request must be complete,
    connect to last byte, if that is sooner than the client's own timeout: a Lease renewal
    within its renew deadline, a write while the Lease is still ours."""

    def get_json(self, path: str, query: Mapping[str, str] | None = None, *,
                 deadline: float | None = None) -> dict[str, Any]:
        """GET a JSON object; raise :class:`ApiError` on failure."""
        ...

    def send_json(self, method: str, path: str, body: Any, *,
                  deadline: float | None = None) -> dict[str, Any]:
        """POST/PUT/PATCH a JSON body; return the answer's object."""
        ...


class StreamResponse(Protocol):
    """The part of an HTTP response a watch reads."""

    @property
    def headers(self) -> Mapping[str, str]:
        """The response headers (Content-Type says JSON lines or protobuf frames)."""
        ...

    def stream(self, amt: int, decode_content: bool = ...) -> Iterator[bytes]:
        ...

    def release_conn(self) -> None:
        ...

    def close(self) -> None:
        ...

    def shutdown(self) -> None:
        """Close the connection so that a blocked read returns at once."""
        ...


class StreamingApi(Api, Protocol):
    """What the node list and watch need on top: raw bodies and open streams."""

    def get_raw(self, path: str, query: Mapping[str, str], accept: str = ...
                ) -> tuple[str, bytes | bytearray]:
        """A GET whose body the caller decodes itself: (Content-Type, body)."""
        ...

    def stream(self, path: str, query: Mapping[str, str], read_timeout: float,
               accept: str = ..., deadline: float | None = ...) -> StreamResponse:
        """Open a long-running GET and return the unread response."""
        ...


class RawApi(Api, Protocol):
    """Requests whose body the caller encoded: the vertical autoscaler's strategic-merge
    patches (``application/strategic-merge-patch+json``), whose bytes are Go's."""

    def send_raw(self, method: str, path: str, data: bytes, content_type: str, *,
                 deadline: float | None = ...) -> dict[str, Any]:
        """Send ``data`` as ``content_type``; return the answer's object."""
        ...


def once_more_on_conflict(attempt: Callable[[], T]) -> T:
    """``attempt()``, and once more when the API server answered 409 (someone changed the
    object between our GET and our write; the second attempt GETs it again): client-go's
    ``RetryOnConflict`` with one retry. Ours: upstream fails the poll and waits a period."""
    try:
        return attempt()
    except ApiError as exc:
        if not exc.conflict:
            raise
    return attempt()


def get_decoded(api: Api, path: str, decode: Callable[[dict[str, Any]], T]) -> T:
    """``decode`` of the object at ``path``: what a poll reads every period (the ConfigMap,
    a target's scale). A client that keeps its last answers
    (:meth:`cpa.kube.client.KubeApi.get_decoded`) returns the same value, without parsing,
    while the answer's bytes stay the same, so ``decode`` must make a value nobody changes;
    any other (a test fake, the leader-elected wrapper of reads) decodes each answer."""
    keeping = getattr(api, "get_decoded", None)
    if keeping is not None:
        value: T = keeping(path, decode)
        return value
    return decode(api.get_json(path))
