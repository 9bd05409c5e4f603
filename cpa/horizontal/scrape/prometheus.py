"""The load axis's second source: an instant query to a Prometheus server.

For clusters that already scrape the add-on: ``/api/v1/query`` with the configured query,
whose one number is the rate (a scalar, or a vector of exactly one series: ``sum(...)``).
The request goes through the one HTTP client (:mod:`cpa.http.fetch`): one deadline for the
whole query, redirects followed with the credentials kept to the configured server, no
credential in any error. TLS: a CA file (else the system's), optionally no verification.
The bearer token is read from its file as the API server's token is
(:class:`cpa.kube.tokenfile.FileToken`: again every minute and after a 401, which sends the
query once more with a new token, the last good token kept, one that cannot be sent
refused by its byte); ``user:password@`` in the URL is sent as
Basic authentication, as Go's client sends it. The range query serves ``cpa advise``.
"""

from __future__ import annotations

import json
import math
import ssl
import urllib.parse
from typing import Any

from cpa import __version__, redact
from cpa.horizontal.decide.load import Prometheus
from cpa.http.fetch import Fetched, Fetcher, FetchError
from cpa.kube.tokenfile import FileToken, TokenFileError

__all__ = ["PrometheusClient", "PrometheusError"]

MAX_ANSWER_BYTES = 8 * 1024 * 1024


class PrometheusError(Exception):
    """The query gave no usable number; ``reason`` is a short word for a metric label."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def _fetch(fetcher: Fetcher, url: str, timeout: float, authorization: str | None) -> Fetched:
    try:
        return fetcher.get(url, timeout=timeout, max_bytes=MAX_ANSWER_BYTES,
                           accept="application/json", authorization=authorization)
    except FetchError as exc:
        raise PrometheusError(exc.reason, f"cannot query Prometheus: {exc}") from None


def _context(source: Prometheus) -> ssl.SSLContext | None:
    if not source.url.startswith("https:"):
        return None
    try:
        context = ssl.create_default_context(cafile=source.ca_file or None)
    except (OSError, ssl.SSLError) as exc:
        raise PrometheusError("tls", f"load.prometheus.caFile {source.ca_file}: "
                                     f"{getattr(exc, 'strerror', None) or exc}") from None
    if source.insecure_skip_verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


class PrometheusClient:
    """Queries one Prometheus server as ``source`` says (thread-safe)."""

    def __init__(self, source: Prometheus) -> None:
        self.source = source
        self._shown = redact.redact_url(source.url)
        self._fetcher: Fetcher | None = None
        self._token = FileToken(source.bearer_token_file) if source.bearer_token_file \
            else None

    def close(self) -> None:
        """Cut a query in flight and refuse new ones (the source was replaced or removed)."""
        if self._fetcher is not None:
            self._fetcher.abort()

    def instant(self, timeout: float) -> float:
        """The query's one number now (raises :class:`PrometheusError`)."""
        data = self._get("/api/v1/query", {"query": self.source.query}, timeout)
        kind, result = data.get("resultType"), data.get("result")
        if kind == "scalar" and isinstance(result, list) and len(result) == 2:
            return _number(result[1])
        if kind == "vector" and isinstance(result, list):
            if len(result) == 1 and isinstance(result[0], dict):
                value = result[0].get("value")
                if isinstance(value, list) and len(value) == 2:
                    return _number(value[1])
            if not result:
                raise PrometheusError("no_result", "the query gave no series (is the metric "
                                                   "scraped? does the query match?)")
            raise PrometheusError("many_series", f"the query gave {len(result)} series, not "
                                                 "one: wrap it in sum(...)")
        raise PrometheusError("query", f"the query gave a {kind}, not one number")

    def range_query(self, start: float, end: float, step: float,
                    timeout: float = 30.0) -> list[tuple[float, float]]:
        """(time, value) pairs of the query over [start, end] (Unix seconds), for advice."""
        data = self._get("/api/v1/query_range",
                         {"query": self.source.query, "start": f"{start:.3f}",
                          "end": f"{end:.3f}", "step": f"{step:g}"}, timeout)
        result = data.get("result")
        if data.get("resultType") != "matrix" or not isinstance(result, list) \
                or len(result) != 1:
            count = len(result) if isinstance(result, list) else 0
            raise PrometheusError("many_series", f"the range query gave {count} series, not "
                                                 "one: wrap it in sum(...)")
        values = result[0].get("values") if isinstance(result[0], dict) else None
        out: list[tuple[float, float]] = []
        for pair in values or ():
            if isinstance(pair, list) and len(pair) == 2:
                try:
                    out.append((float(pair[0]), _number(pair[1])))
                except PrometheusError:
                    continue  # a NaN point is a gap, as in a graph
        return out

    def _authorization(self) -> str | None:
        if self._token is None:
            return None
        try:
            return self._token()
        except TokenFileError as exc:
            raise PrometheusError("token", f"load.prometheus.bearerTokenFile: {exc}") from None

    def _get(self, api: str, params: dict[str, str], timeout: float) -> Any:
        if self._fetcher is None:
            self._fetcher = Fetcher(ssl_context=_context(self.source),
                                    user_agent=f"cluster-proportional-autoscaler-py/"
                                               f"{__version__}")
        url = self.source.url.rstrip("/") + api + "?" + urllib.parse.urlencode(params)
        sent = self._authorization()
        answer = _fetch(self._fetcher, url, timeout, sent)
        if answer.status == 401 and self._token is not None:
            # The token file is read again after a 401, and the query sent once more if it
            # holds another token (as the API server's client does).
            self._token.unauthorized(sent)
            again = self._authorization()
            if again != sent:
                answer = _fetch(self._fetcher, url, timeout, again)
        try:
            doc = json.loads(answer.body)
        except ValueError:
            doc = None
        if answer.status != 200:
            detail = doc.get("error") if isinstance(doc, dict) else None
            raise PrometheusError("http", f"Prometheus at {self._shown} answered HTTP "
                                          f"{answer.status}" + (f": {str(detail)[:300]}"
                                                                if detail else ""))
        if doc is None:
            raise PrometheusError("parse", f"Prometheus at {self._shown} answered something "
                                           "that is not JSON")
        if not isinstance(doc, dict) or doc.get("status") != "success":
            error = doc.get("error") if isinstance(doc, dict) else None
            raise PrometheusError("query", f"Prometheus refused the query: {error}")
        return doc.get("data") or {}


def _number(text: object) -> float:
    try:
        value = float(str(text))
    except ValueError:
        raise PrometheusError("parse", f"the query's value {text!r} is not a number") from None
    if not math.isfinite(value):
        raise PrometheusError("not_finite", f"the query gave {text}, not a finite rate")
    if value < 0:
        raise PrometheusError("negative", f"the query gave {value:g}: a rate below zero "
                                          "(a counter going backwards, or not a rate)")
    return value
