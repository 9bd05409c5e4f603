"""The one place that sends HTTP requests to the Kubernetes API server.

Plain HTTP (:mod:`cpa.http`) rather than the generated client: the poll's objects are
tiny (a ConfigMap and a Scale per target) and the node watch must decode bytes straight into
trimmed records; the generated models would cost tens of MiB to import and gigabytes to hold
a large NodeList. Errors become :class:`ApiError` carrying the HTTP status and the server's
message.

Every request but a watch has one deadline, connect to last byte (``timeout``, 30 s unless
the caller's ``deadline`` is sooner): a server that answers slowly, or drip-feeds its
answer, fails the request at the deadline. A 429 (or a 5xx) with ``Retry-After`` is tried
again after that many seconds, as client-go does (up to 10 times), but never waits more
than :data:`~cpa.kube.api.RETRY_AFTER_CAP` at a time nor past the deadline.

A GET whose connection is reset or closed is sent again, as Go and client-go do: at once
when a kept-alive connection broke before the first byte of the answer (Go's transport),
else after one second (client-go's rule for a GET: a connection reset or a probable EOF
counts as ``Retry-After: 1``), within the same 10 tries and the deadline. A write never is.

A request answered 401 is sent once more, a write too, when the credentials then give
another token (a token file read again, an exec plugin run again): the server did nothing
with the refused request, and a rotated token that was revoked costs no failed poll.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar
from urllib.parse import urlencode

from cpa import __version__
from cpa.http.errors import (
    ConnectError,
    DeadlineExceeded,
    ProtocolError,
    ReadTimeoutError,
    probable_eof,
)
from cpa.http.message import field_value_problem
from cpa.http.pool import Pool
from cpa.kube.api import RETRY_AFTER_CAP, ApiError, StreamResponse
from cpa.kube.clientconfig import ConfigError, Connection
from cpa.kube.tokenfile import TokenFileError
from cpa.kube.wire import JSON, api_error

__all__ = ["ApiError", "KubeApi"]

USER_AGENT = f"cluster-proportional-autoscaler-py/{__version__}"
DEFAULT_TIMEOUT = 30.0  # a whole request, connect to last byte (a stream: each read)
CONNECT_TIMEOUT = 5.0  # an API server that does not accept in 5 s is unreachable for now
MAX_RETRIES = 10  # client-go's default for Retry-After
RESET_RETRY_SECONDS = 1.0  # client-go's artificial Retry-After for a GET's reset or EOF
MAX_KEPT = 64  # decoded answers kept (the ConfigMap and each target's scale: a handful)
T = TypeVar("T")
ABORT_GRACE = 1.0  # after abort(): what a request may still take (the Lease release)


def _target(path: str, query: Mapping[str, str] | None) -> str:
    if not query:
        return path
    return path + "?" + urlencode(query)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ReadTimeoutError | ConnectError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def retry_after(status: int, headers: Mapping[str, str]) -> int | None:
    """The seconds a 429 or 5xx answer asks us to wait (``Retry-After`` in whole seconds,
    the only form client-go reads), else None: such an answer is not retried."""
    if status != 429 and status < 500:
        return None
    value = headers.get("Retry-After")
    if value is None:
        return None
    try:
        seconds = int(value.strip())
    except ValueError:
        return None
    return max(0, seconds)


class KubeApi:
    """A thread-safe client for one API server connection: implements
    :class:`cpa.kube.api.StreamingApi`."""

    def __init__(self, conn: Connection, timeout: float = DEFAULT_TIMEOUT,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.conn = conn
        self.timeout = timeout
        self._clock = clock
        self._pool = Pool(conn.server, conn.ssl_context, conn.server_name, clock)
        self._aborted = threading.Event()
        self._kept: dict[str, tuple[bytes, Callable[[dict[str, Any]], Any], Any]] = {}

    def abort(self, grace: float = ABORT_GRACE) -> None:
        """Cut every request in flight and end every Retry-After wait (SIGTERM); requests
        made afterwards get at most ``grace`` seconds."""
        self._aborted.set()
        self._pool.abort(grace)

    def _headers(self, content_type: str | None = None, accept: str = JSON
                 ) -> dict[str, str]:
        headers = {"Accept": accept, "User-Agent": USER_AGENT}
        try:
            auth = self.conn.authorization()
        except (ConfigError, TokenFileError) as exc:  # an exec plugin that fails to refresh
            # its token; a token file that has never held one
            raise ApiError(0, "Unauthorized", f"no credentials for the API server: {exc}"
                           ) from exc
        if auth:
            problem = field_value_problem(auth)
            if problem is not None:  # an auth-provider's token: the others are checked
                raise ApiError(0, "Unauthorized",  # where they are read
                               f"the credentials for the API server from {self.conn.source} "
                               f"cannot be sent: the Authorization header {problem}")
            headers["Authorization"] = auth
        if content_type:
            headers["Content-Type"] = content_type
        return headers

    def _refused(self, status: int, headers: Mapping[str, str]) -> bool:
        """A 401: tell the credentials which header was refused (a token file is read
        again, an exec plugin run again; not when they hold another token already). True
        when they give another header now: the request is worth sending once more, since
        the server did nothing with the refused one (a token rotated, then revoked)."""
        if status != 401 or self.conn.unauthorized is None:
            return False
        refused = headers.get("Authorization")
        self.conn.unauthorized(refused)
        try:
            return self.conn.authorization() != refused
        except (ConfigError, TokenFileError):  # said by the next request, as it fails
            return False

    def request(self, method: str, path: str, *, query: Mapping[str, str] | None = None,
                body: Any = None, timeout: float | None = None,
                deadline: float | None = None, raw: bytes | None = None,
                content_type: str = JSON) -> bytes:
        """Send one request; return the body of a 2xx answer, raise :class:`ApiError`.

        It must be complete by ``timeout`` seconds from now (the client's, 30 s, unless
        given) or by ``deadline`` (a :func:`time.monotonic` time) if that comes first.
        ``body`` is encoded as JSON; ``raw`` is sent as it is, as ``content_type`` (a
        strategic-merge patch, whose bytes the caller wrote)."""
        data = raw if raw is not None else (
            json.dumps(body).encode() if body is not None else None)
        limit = timeout or self.timeout
        end = self._clock() + limit
        if deadline is not None and deadline < end:
            end, limit = deadline, max(0.0, deadline - self._clock())
        target = _target(path, query)
        # A GET on a kept-alive connection that the server (or a middlebox) dropped as we
        # sent it fails before any byte of its answer; like Go's transport, send it once
        # more on another connection. Only then: never on a new connection, never after a
        # byte of the answer or a timeout, and never a write.
        reconnects = 1 if method == "GET" else 0
        retries = 0
        reauthorized = False
        while True:
            try:
                headers = self._headers(content_type if data is not None else None)
                resp = self._pool.request(
                    method, target, body=data, headers=headers,
                    connect_timeout=CONNECT_TIMEOUT, read_timeout=limit, deadline=end)
                try:
                    answer = resp.read()
                finally:
                    resp.release_conn()
            except (OSError, ProtocolError) as exc:
                if self._reconnect(exc, method, path, limit, reconnects):
                    reconnects -= 1
                    continue
                self._or_again(exc, method, path, retries, end)
                retries += 1
                continue
            if 200 <= resp.status < 300:
                return answer
            if self._refused(resp.status, headers) and not reauthorized:
                reauthorized = True
                continue
            wait = retry_after(resp.status, resp.headers)
            if (wait is None or retries >= MAX_RETRIES
                    or not self._wait_retry(min(wait, RETRY_AFTER_CAP), end)):
                raise api_error(resp.status, answer, resp.headers.get("Content-Type"))
            retries += 1

    def _reconnect(self, exc: BaseException, method: str, path: str, limit: float,
                   reconnects: int) -> bool:
        """A request that failed without an answer: True to send it once more on another
        connection (a kept-alive one dropped as we sent it); raise :class:`ApiError` for a
        deadline; False to look further (:meth:`_or_again`)."""
        if isinstance(exc, DeadlineExceeded):
            raise ApiError(0, "Timeout",
                           f"{method} {path}: no complete answer from the API server at "
                           f"{self.conn.server} within the request's {limit:.0f}s "
                           "deadline (connect to last byte)") from exc
        return isinstance(exc, ConnectError) and bool(reconnects) and exc.retryable

    def _or_again(self, exc: BaseException, method: str, path: str, retries: int,
                  end: float) -> None:
        """Return to send the request again after a reset (a GET, a second later); else
        raise :class:`ApiError` saying what failed."""
        if self._again_after_reset(method, exc, retries, end):
            return
        if isinstance(exc, ConnectError):
            raise ApiError(0, "ConnectionError",
                           f"{method} {path}: cannot reach the API server at "
                           f"{self.conn.server}: {exc}") from exc
        raise ApiError(0, "ConnectionError",
                       f"{method} {path}: the API server at {self.conn.server} did "
                       f"not answer: {_describe(exc)}") from exc

    def _again_after_reset(self, method: str, exc: BaseException, retries: int,
                           end: float) -> bool:
        """client-go's rule: a GET whose connection was reset or closed (at any point) is
        tried again after a second, up to the retry limit and within the deadline."""
        return (method == "GET" and probable_eof(exc) and retries < MAX_RETRIES
                and self._wait_retry(RESET_RETRY_SECONDS, end))

    def _wait_retry(self, seconds: float, end: float) -> bool:
        """Wait ``seconds`` before trying again; False (do not) when that would leave no
        time before ``end``, or when aborted."""
        if self._clock() + seconds >= end:
            return False
        return not self._aborted.wait(seconds)

    def get_json(self, path: str, query: Mapping[str, str] | None = None, *,
                 deadline: float | None = None) -> dict[str, Any]:
        return _json_object(self.request("GET", path, query=query, deadline=deadline), path)

    def get_decoded(self, path: str, decode: Callable[[dict[str, Any]], T]) -> T:
        """``decode(GET path)``, kept with the answer's bytes: while they are the same (the
        object did not change: the same resourceVersion, the same bytes) the kept value is
        returned, not parsed and decoded again (a steady poll's JSON was a tenth of its
        CPU). ``decode`` must make a value nobody changes (see
        :func:`cpa.kube.api.get_decoded`); a value it refuses to make is not kept."""
        data = self.request("GET", path)
        kept = self._kept.get(path)
        if kept is not None and kept[1] is decode and kept[0] == data:
            value: T = kept[2]
            return value
        value = decode(_json_object(data, path))
        if len(self._kept) >= MAX_KEPT and path not in self._kept:
            self._kept.clear()
        self._kept[path] = (data, decode, value)
        return value

    def send_json(self, method: str, path: str, body: Any, *,
                  deadline: float | None = None) -> dict[str, Any]:
        doc = json.loads(self.request(method, path, body=body, deadline=deadline))
        return doc if isinstance(doc, dict) else {}

    def send_raw(self, method: str, path: str, data: bytes, content_type: str, *,
                 deadline: float | None = None) -> dict[str, Any]:
        """Send bytes the caller encoded (a strategic-merge patch) as ``content_type``;
        return the answer's object."""
        doc = json.loads(self.request(method, path, raw=data, content_type=content_type,
                                      deadline=deadline))
        return doc if isinstance(doc, dict) else {}

    def stream(self, path: str, query: Mapping[str, str], read_timeout: float,
               accept: str = JSON, deadline: float | None = None) -> StreamResponse:
        """Open a long-running GET (a watch) and return the unread response.

        The caller reads it with :func:`cpa.kube.wire.lines` (JSON) or
        :func:`cpa.kube.wire.frames` (protobuf), as its Content-Type says, and must
        ``release_conn()`` it. A watch has no deadline (``read_timeout`` bounds each read);
        an error answer's ``Retry-After`` is in the :class:`ApiError`, for the caller's
        backoff.
        """
        target = _target(path, query)
        try:
            headers = self._headers(accept=accept)
            resp = self._pool.request(
                "GET", target, body=None, headers=headers,
                connect_timeout=min(CONNECT_TIMEOUT, self.timeout),
                read_timeout=read_timeout, deadline=deadline)
            if not 200 <= resp.status < 300:
                try:
                    data = resp.read()
                finally:
                    resp.release_conn()
                self._refused(resp.status, headers)
                error = api_error(resp.status, data, resp.headers.get("Content-Type"))
                error.retry_after = retry_after(resp.status, resp.headers)
                raise error
        except DeadlineExceeded as exc:
            raise ApiError(0, "Timeout", f"GET {path}: no complete answer from the API server "
                                         f"at {self.conn.server} within the request's "
                                         "deadline (connect to last byte)") from exc
        except (OSError, ProtocolError) as exc:
            raise ApiError(0, "ConnectionError",
                           f"GET {path}: cannot reach the API server at {self.conn.server}: "
                           f"{_describe(exc)}") from exc
        return resp

    def get_raw(self, path: str, query: Mapping[str, str], accept: str = JSON
                ) -> tuple[str, bytearray]:
        """A GET whose body the caller decodes itself (a NodeList page, into trimmed records):
        (Content-Type, body), within the client's deadline.

        The body is read in chunks into one bytearray: a whole ``read()`` plus a copy would
        hold a large page twice, which shows in the peak memory of a large cluster's sync.
        """
        resp = self.stream(path, query, read_timeout=self.timeout, accept=accept,
                           deadline=self._clock() + self.timeout)
        content_type = resp.headers.get("Content-Type") or ""
        body = bytearray()
        try:
            for chunk in resp.stream(65536, decode_content=True):
                body += chunk
        except DeadlineExceeded as exc:
            raise ApiError(0, "Timeout", f"GET {path}: no complete answer within the "
                                         f"request's {self.timeout:.0f}s deadline (connect "
                                         "to last byte)") from exc
        except (OSError, ProtocolError) as exc:
            raise ApiError(0, "ConnectionError", f"GET {path}: {_describe(exc)}") from exc
        finally:
            resp.release_conn()
        return content_type, body


def _json_object(data: bytes, path: str) -> dict[str, Any]:
    """The JSON object a GET of ``path`` answered; anything else is the server's fault."""
    doc = json.loads(data)
    if not isinstance(doc, dict):
        raise ApiError(0, "BadResponse", f"GET {path}: expected a JSON object")
    return doc
