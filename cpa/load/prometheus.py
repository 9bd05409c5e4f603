"""The load axis's second source: an instant query to a Prometheus server.

For clusters that already scrape the add-on: ``/api/v1/query`` with the configured query,
whose one number is the rate (a scalar, or a vector of exactly one series: ``sum(...)``).
TLS as the rest of the client reads it: a CA file (else the system's), optionally no
verification; a bearer token read from its file on every query, so a rotated token is
picked up. The range query serves ``cpa advise``.
"""

from __future__ import annotations

import contextlib
import json
import math
import ssl
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from cpa.decide.load import Prometheus

__all__ = ["PrometheusError", "instant", "range_query"]


class PrometheusError(Exception):
    """The query gave no usable number; ``reason`` is a short word for a metric label."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def _context(source: Prometheus) -> ssl.SSLContext | None:
    if not source.url.startswith("https:"):
        return None
    context = ssl.create_default_context(cafile=source.ca_file or None)
    if source.insecure_skip_verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def _get(source: Prometheus, api: str, params: dict[str, str], timeout: float) -> Any:
    url = source.url.rstrip("/") + api + "?" + urllib.parse.urlencode(params)
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    if source.bearer_token_file:
        try:
            with open(source.bearer_token_file, encoding="utf-8") as handle:
                token = handle.read().strip()
        except OSError as exc:
            raise PrometheusError("token", f"cannot read load.prometheus.bearerTokenFile "
                                           f"{source.bearer_token_file}: {exc.strerror}") from exc
        request.add_header("Authorization", f"Bearer {token}")
    try:
        context = _context(source)
        with urllib.request.urlopen(request, timeout=timeout, context=context) as answer:
            body = answer.read(8 * 1024 * 1024)
    except urllib.error.HTTPError as exc:
        detail = exc.read(2000).decode("utf-8", "replace")
        with contextlib.suppress(ValueError, AttributeError):
            detail = str(json.loads(detail).get("error") or detail)
        raise PrometheusError("http", f"Prometheus at {source.url} answered HTTP {exc.code}: "
                                      f"{detail[:300]}") from exc
    except ValueError as exc:  # a URL urllib cannot use
        raise PrometheusError("connect", f"cannot query {source.url}: {exc}") from exc
    except (urllib.error.URLError, OSError, ssl.SSLError) as exc:
        reason = getattr(exc, "reason", exc)
        word = "timeout" if "timed out" in str(reason) else "connect"
        raise PrometheusError(word, f"cannot reach Prometheus at {source.url}: "
                                    f"{reason}") from exc
    try:
        doc = json.loads(body)
    except ValueError as exc:
        raise PrometheusError("parse", f"Prometheus at {source.url} answered something "
                                       "that is not JSON") from exc
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


def instant(source: Prometheus, timeout: float) -> float:
    """The query's one number now (raises :class:`PrometheusError`)."""
    data = _get(source, "/api/v1/query", {"query": source.query}, timeout)
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
        raise PrometheusError("many_series", f"the query gave {len(result)} series, not one: "
                                             "wrap it in sum(...)")
    raise PrometheusError("query", f"the query gave a {kind}, not one number")


def range_query(source: Prometheus, start: float, end: float, step: float,
                timeout: float = 30.0) -> list[tuple[float, float]]:
    """(time, value) pairs of the query over [start, end] (Unix seconds), for advice."""
    data = _get(source, "/api/v1/query_range",
                {"query": source.query, "start": f"{start:.3f}", "end": f"{end:.3f}",
                 "step": f"{step:g}"}, timeout)
    result = data.get("result")
    if data.get("resultType") != "matrix" or not isinstance(result, list) or len(result) != 1:
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
