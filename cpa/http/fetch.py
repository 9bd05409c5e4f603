"""GET a URL through the same connections, deadline and framing as the API client: the
load axis's Pod metrics pages and Prometheus queries.

One rule for every such fetch:

* one deadline for the whole fetch, redirects included, from connecting to the last byte:
  a server that trickles its answer fails at the deadline, not after it;
* redirects (301, 302, 303, 307, 308) are followed, at most :data:`MAX_REDIRECTS`, as
  Go's ``http.Client`` does; the credentials (the ``Authorization`` given, or the
  ``user:password@`` of the URL, sent as Basic) go only to the origin (scheme, host and
  port) they were given for: a redirect elsewhere is followed without them, stricter
  than Go (which keeps them for a subdomain);
* an answer larger than the caller's limit is a failure, not memory;
* no error text carries a credential: a URL is shown with its password hidden
  (:func:`cpa.redact.redact_url`), a header never.

Connections are kept alive per origin (a :class:`~cpa.http.pool.Pool` each); the least
recently used origin's pool is closed beyond :data:`MAX_POOLS` (Pods come and go).
"""

from __future__ import annotations

import base64
import collections
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from typing import NamedTuple

from cpa import redact
from cpa.http.errors import (
    ConnectError,
    DeadlineExceeded,
    HeaderError,
    ProtocolError,
    ReadTimeoutError,
)
from cpa.http.message import field_value_problem
from cpa.http.pool import Pool

__all__ = ["MAX_REDIRECTS", "FetchError", "Fetched", "Fetcher"]

MAX_REDIRECTS = 10  # Go's http.Client gives up after 10
MAX_POOLS = 256
CONNECT_TIMEOUT = 5.0
_REDIRECTS = frozenset({301, 302, 303, 307, 308})


class FetchError(Exception):
    """No answer: ``reason`` is one word for a metric label (``timeout``, ``connect``,
    ``read``, ``too_large``, ``redirect``, ``url``); the message says what happened, with
    the URL's password hidden."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class Fetched(NamedTuple):
    """An answer (any status but a redirect that was followed), its body whole."""

    status: int
    body: bytes
    content_type: str
    url: str
    """Where it came from (after redirects), its password hidden."""


class _Target(NamedTuple):
    origin: tuple[str, str, int]  # scheme, host, port
    path: str  # path and query
    basic: str | None  # the Basic header of the URL's user information


def _parse(url: str) -> _Target:
    """The origin, path and credentials of an ``http(s)://`` URL; :class:`FetchError` for
    anything else."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise FetchError("url", f"{redact.redact_url(url)} is not a URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise FetchError("url", f"{redact.redact_url(url)} is not an http:// or https:// URL")
    default = 443 if parts.scheme == "https" else 80
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    basic = None
    if parts.username is not None:
        user = urllib.parse.unquote(parts.username)
        password = urllib.parse.unquote(parts.password or "")
        redact.remember(password)
        basic = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    return _Target((parts.scheme, parts.hostname, port or default), path, basic)


def _server(origin: tuple[str, str, int]) -> str:
    scheme, host, port = origin
    return f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"


class Fetcher:
    """GETs by URL, each within one deadline (see the module doc); thread-safe.

    ``ssl_context`` verifies ``https`` servers (the system's CAs when None);
    ``user_agent`` and ``accept`` go with every request."""

    def __init__(self, *, ssl_context: ssl.SSLContext | None = None, user_agent: str,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._ssl = ssl_context
        self._agent = user_agent
        self._clock = clock
        self._lock = threading.Lock()
        self._pools: collections.OrderedDict[tuple[str, str, int], Pool] = \
            collections.OrderedDict()
        self._aborted = False

    def get(self, url: str, *, timeout: float, max_bytes: int, accept: str = "*/*",
            authorization: str | None = None) -> Fetched:
        """The answer to ``GET url`` within ``timeout`` seconds, its body at most
        ``max_bytes`` (raises :class:`FetchError`). ``authorization`` (a header value) is
        sent to the URL's own origin only."""
        deadline = self._clock() + timeout
        target = _parse(url)
        owner = target.origin
        credential = authorization or target.basic
        if credential is not None and field_value_problem(credential) is not None:
            raise FetchError("credentials", f"the credentials for {redact.redact_url(url)} "
                                            f"{field_value_problem(credential)}: not sent")
        shown = redact.redact_url(url)
        for _ in range(MAX_REDIRECTS + 1):
            headers = {"User-Agent": self._agent, "Accept": accept}
            if credential is not None and target.origin == owner:
                headers["Authorization"] = credential
            status, body, fields = self._once(target, headers, deadline, max_bytes, shown,
                                               timeout)
            location = fields.get("location")
            if status not in _REDIRECTS or not location:
                return Fetched(status, body, fields.get("content-type") or "", shown)
            url = urllib.parse.urljoin(_server(target.origin) + target.path, location)
            shown = redact.redact_url(url)
            target = _parse(url)
        raise FetchError("redirect", f"{shown}: more than {MAX_REDIRECTS} redirects")

    def retain_hosts(self, hosts: set[str]) -> None:
        """Close the connections to every host not in ``hosts`` (Pods that went away)."""
        with self._lock:
            gone = [origin for origin in self._pools if origin[1] not in hosts]
            pools = [self._pools.pop(origin) for origin in gone]
        for pool in pools:
            pool.close()

    def abort(self) -> None:
        """Cut every fetch in flight, and refuse new ones (the owner is stopping)."""
        with self._lock:
            self._aborted = True
            pools = list(self._pools.values())
        for pool in pools:
            pool.abort(0.0)

    def _pool(self, origin: tuple[str, str, int]) -> Pool:
        with self._lock:
            pool = self._pools.get(origin)
            if pool is not None:
                self._pools.move_to_end(origin)
                return pool
            pool = self._pools[origin] = Pool(_server(origin), self._ssl, clock=self._clock)
            if self._aborted:
                pool.abort(0.0)
            while len(self._pools) > MAX_POOLS:
                self._pools.popitem(last=False)[1].close()
            return pool

    def _once(self, target: _Target, headers: dict[str, str], deadline: float,
              max_bytes: int, shown: str, timeout: float
              ) -> tuple[int, bytes, Mapping[str, str]]:
        """One request and its answer; a kept-alive connection the server had dropped is
        replaced once, as Go's transport does."""
        pool = self._pool(target.origin)
        for again in (True, False):
            try:
                return _request(pool, target.path, headers, deadline - self._clock(),
                                deadline, max_bytes)
            except ConnectError as exc:
                if again and exc.retryable:
                    continue
                raise FetchError("connect", f"cannot reach {shown}: {exc}") from None
            except (DeadlineExceeded, ReadTimeoutError):
                raise FetchError("timeout", f"{shown}: no complete answer within "
                                            f"{timeout:g} s") from None
            except _TooLarge:
                raise FetchError("too_large", f"{shown}: the answer is larger than "
                                              f"{max_bytes} bytes") from None
            except HeaderError as exc:
                raise FetchError("credentials", f"{shown}: {exc}") from None
            except (ProtocolError, OSError) as exc:
                raise FetchError("read", f"{shown}: a broken answer "
                                         f"({type(exc).__name__}: {exc})") from None
        raise AssertionError("unreachable")


class _TooLarge(Exception):
    pass


def _request(pool: Pool, path: str, headers: dict[str, str], left: float, deadline: float,
             max_bytes: int) -> tuple[int, bytes, Mapping[str, str]]:
    resp = pool.request("GET", path, body=None, headers=headers,
                        connect_timeout=min(CONNECT_TIMEOUT, max(left, 0.001)),
                        read_timeout=max(left, 0.001), deadline=deadline)
    body = bytearray()
    try:
        for piece in resp.stream(65536):
            body += piece
            if len(body) > max_bytes:
                raise _TooLarge
    finally:
        resp.release_conn()
    return resp.status, bytes(body), resp.headers
