"""``load`` (ours, opt-in): a second axis sized by the load the add-on serves.

Why: the proportional count sizes DNS for the cluster, not for its traffic; an HPA on CPU
lags by a metrics window plus a sync period. Knative's autoscaler (KPA) scrapes each Pod
and runs a stable and a panic window at once; this key brings that to ``linear`` and
``ladder``::

    "load": {"metric": "coredns_dns_requests_total", "port": 9153, "path": "/metrics",
             "targetPerReplica": 5000, "stableWindowSeconds": 60,
             "panicWindowPercentage": 10, "panicThresholdPercentage": 200}

or, where Prometheus already has the rate::

    "load": {"targetPerReplica": 5000,
             "prometheus": {"url": "https://prometheus.monitoring:9090",
                            "query": "sum(rate(coredns_dns_requests_total[1m]))"}}

The windows and the panic rule are :mod:`cpa.horizontal.decide.windows`; how the result meets the
proportional count is :func:`cpa.horizontal.decide.decision.decide` (the proportional count is the
floor). This module only reads and validates the key, with the same Go-json rules as
upstream's keys (case-insensitive names, ``null`` resets, a repeated key decodes over the
earlier one). The bounds of the windows are Knative's (``pkg/autoscaler/config/config.go``
and ``pkg/apis/autoscaling/register.go``: a stable window of 6 s to 1 h in whole seconds,
a panic window of 1-100 % of it, a panic threshold of 110-1000 %).
"""

from __future__ import annotations

import re
from typing import Final, NamedTuple

from cpa.go.json import (
    Field,
    JsonValue,
    decode_struct,
    describe,
    format_go_float,
    go_bool,
    go_float,
    go_int,
    go_string,
)
from cpa.redact import redact_url

__all__ = ["FIELD", "Load", "LoadDoc", "Prometheus", "decode_load", "load_problems"]

FIELD: Final = "load"
STABLE_WINDOW_MIN: Final = 6       # Knative's autoscaling.WindowMin
STABLE_WINDOW_MAX: Final = 3600    # autoscaling.WindowMax
PANIC_WINDOW_PCT: Final = (1.0, 100.0)       # PanicWindowPercentageMin/Max
PANIC_THRESHOLD_PCT: Final = (110.0, 1000.0)  # PanicThresholdPercentageMin/Max
SCRAPE_INTERVAL: Final = (0.5, 60.0)
MAX_CONCURRENT: Final = 256
_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_PATH = re.compile(r"/[!-~]*")  # printable ASCII, no space: it goes into a request line


class Prometheus(NamedTuple):
    """The optional second source: one instant query whose scalar is the rate."""

    url: str
    query: str
    ca_file: str = ""
    bearer_token_file: str = ""
    insecure_skip_verify: bool = False

    def fields(self) -> dict[str, object]:
        out: dict[str, object] = {"url": redact_url(self.url), "query": self.query}
        if self.ca_file:
            out["caFile"] = self.ca_file
        if self.bearer_token_file:
            out["bearerTokenFile"] = self.bearer_token_file
        if self.insecure_skip_verify:
            out["insecureSkipVerify"] = True
        return out


class Load(NamedTuple):
    """The ``load`` key of one parameters value, validated."""

    target_per_replica: float
    metric: str = ""
    port: int = 0
    path: str = "/metrics"
    stable_window_seconds: int = 60
    panic_window_percentage: float = 10.0
    panic_threshold_percentage: float = 200.0
    scrape_interval_seconds: float = 2.0
    scrape_timeout_seconds: float = 1.0
    max_concurrent_scrapes: int = 10
    prometheus: Prometheus | None = None

    @property
    def panic_window_seconds(self) -> float:
        """Knative's panic window: the stable window times the percentage, rounded to the
        second, at least one second (``pkg/reconciler/autoscaling/resources/metric.go``
        ``MakeMetric``, lines 49-52)."""
        seconds = round(self.stable_window_seconds * self.panic_window_percentage / 100.0)
        return float(max(1, seconds))

    @property
    def panic_threshold(self) -> float:
        """The threshold as Knative's decider holds it: a ratio (200 % is 2.0)."""
        return self.panic_threshold_percentage / 100.0

    @property
    def source(self) -> str:
        """``pods`` (the target's own Pods) or ``prometheus``."""
        return "prometheus" if self.prometheus is not None else "pods"

    def fields(self) -> dict[str, object]:
        """The key as the ConfigMap spells it."""
        out: dict[str, object] = {}
        if self.prometheus is None:
            out.update(metric=self.metric, port=self.port, path=self.path)
        out.update(targetPerReplica=self.target_per_replica,
                   stableWindowSeconds=self.stable_window_seconds,
                   panicWindowPercentage=self.panic_window_percentage,
                   panicThresholdPercentage=self.panic_threshold_percentage,
                   scrapeIntervalSeconds=self.scrape_interval_seconds,
                   scrapeTimeoutSeconds=self.scrape_timeout_seconds)
        if self.prometheus is None:
            out["maxConcurrentScrapes"] = self.max_concurrent_scrapes
        else:
            out["prometheus"] = self.prometheus.fields()
        return out


# --- parsing, with Go's encoding/json semantics ------------------------------------------


class _PrometheusDoc:
    __slots__ = ("ca_file", "insecure", "query", "token_file", "url")

    def __init__(self) -> None:
        self.url = self.query = self.ca_file = self.token_file = ""
        self.insecure = False


class LoadDoc:
    """A ``load`` being decoded: Go's zero values until a member sets them; ``None`` for
    a number is "absent" (its default applies)."""

    __slots__ = ("concurrent", "interval", "metric", "panic_pct", "path", "port",
                 "prometheus", "stable", "target", "threshold_pct", "timeout")

    def __init__(self) -> None:
        self.metric = ""
        self.path: str | None = None
        self.port: int | None = None
        self.target: float | None = None
        self.stable: int | None = None
        self.panic_pct: float | None = None
        self.threshold_pct: float | None = None
        self.interval: float | None = None
        self.timeout: float | None = None
        self.concurrent: int | None = None
        self.prometheus: _PrometheusDoc | None = None


_PROM_FIELDS: Final = {
    "url": Field("url", go_string), "query": Field("query", go_string),
    "caFile": Field("ca_file", go_string), "bearerTokenFile": Field("token_file", go_string),
    "insecureSkipVerify": Field("insecure", go_bool)}


def _decode_prometheus(value: JsonValue, where: str, into: _PrometheusDoc | None
                       ) -> _PrometheusDoc | None:
    return decode_struct(value, where, into, _PROM_FIELDS, _PrometheusDoc)


def decode_load(value: JsonValue, where: str, into: LoadDoc | None) -> LoadDoc | None:
    """Decode one ``load`` member (type errors raise
    :class:`~cpa.go.json.GoJsonError`); ``into`` is what an earlier member of the
    same name decoded. ``None`` back: no load axis (JSON null)."""
    return decode_struct(value, where, into, _FIELDS, LoadDoc)


# The struct's fields in Go's order (a key that folds to two matches the first).
_FIELDS: Final = {
    "metric": Field("metric", go_string), "port": Field("port", go_int),
    "path": Field("path", go_string), "targetPerReplica": Field("target", go_float),
    "stableWindowSeconds": Field("stable", go_int),
    "panicWindowPercentage": Field("panic_pct", go_float),
    "panicThresholdPercentage": Field("threshold_pct", go_float),
    "scrapeIntervalSeconds": Field("interval", go_float),
    "scrapeTimeoutSeconds": Field("timeout", go_float),
    "maxConcurrentScrapes": Field("concurrent", go_int),
    "prometheus": Field("prometheus", _decode_prometheus, nested=True),
}


def _num(number: float) -> str:
    return format_go_float(number)


def _source_problems(doc: LoadDoc, problems: list[str]) -> Prometheus | None:
    """The source's keys: the target's Pods (metric, port, path) or Prometheus."""
    prom = doc.prometheus
    if prom is not None:
        if doc.metric or doc.port is not None:
            problems.append("load has both prometheus and metric/port; choose one source: "
                            "the target's Pods (metric, port, path) or prometheus")
        if not re.fullmatch(r"https?://[^\s/?#]+(/[^\s?#]*)?", prom.url):
            problems.append(f"load.prometheus.url is {describe(redact_url(prom.url))}; give "
                            'the server\'s base URL such as "http://prometheus.monitoring:9090"')
        if not prom.query.strip():
            problems.append("load.prometheus.query is empty; give a PromQL query whose "
                            'result is one number, e.g. "sum(rate(coredns_dns_requests_total'
                            '[1m]))"')
        return Prometheus(prom.url, prom.query, prom.ca_file, prom.token_file, prom.insecure)
    if not _METRIC_NAME.fullmatch(doc.metric):
        what = "absent" if not doc.metric else describe(doc.metric)
        problems.append(f"load.metric is {what}; give the name of the metric each Pod "
                        'exposes, e.g. "coredns_dns_requests_total" (or a prometheus '
                        "source)")
    if doc.port is None or not 1 <= doc.port <= 65535:
        what = "absent" if doc.port is None else str(doc.port)
        problems.append(f"load.port is {what}; give the Pods' metrics port, 1-65535 "
                        "(CoreDNS's prometheus plugin: 9153)")
    path = doc.path if doc.path is not None else _DEFAULT.path
    if not _PATH.fullmatch(path):
        problems.append(f"load.path is {describe(path)}; it must start with / and have no "
                        'spaces, e.g. "/metrics"')
    return None


_DEFAULT = Load(target_per_replica=0.0)
"""Every key's default, written once (in :class:`Load`)."""


def _check_range(problems: list[str], key: str, value: float, low: float, high: float,
                 meaning: str) -> None:
    if not low <= value <= high:
        problems.append(f"load.{key} is {_num(value)}; it must be between {_num(low)} and "
                        f"{_num(high)}{meaning}")


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


def load_problems(doc: LoadDoc | None) -> tuple[Load | None, list[str]]:
    """Validate a decoded ``load``: the value (None when absent or invalid) and every
    problem, each saying how to fix it."""
    if doc is None:
        return None, []
    problems: list[str] = []
    prometheus = _source_problems(doc, problems)
    target = doc.target
    if target is None or not target > 0:
        what = "absent" if target is None else _num(target)
        problems.append(f"load.targetPerReplica is {what}; give the rate one replica should "
                        "serve, a positive number such as 5000")
    stable = int(_or(doc.stable, _DEFAULT.stable_window_seconds))
    _check_range(problems, "stableWindowSeconds", stable, STABLE_WINDOW_MIN, STABLE_WINDOW_MAX,
                 " (Knative's bounds)")
    panic_pct = _or(doc.panic_pct, _DEFAULT.panic_window_percentage)
    _check_range(problems, "panicWindowPercentage", panic_pct, *PANIC_WINDOW_PCT,
                 " (percent of the stable window)")
    threshold = _or(doc.threshold_pct, _DEFAULT.panic_threshold_percentage)
    _check_range(problems, "panicThresholdPercentage", threshold, *PANIC_THRESHOLD_PCT,
                 " (percent of the Ready Pods)")
    interval = _or(doc.interval, _DEFAULT.scrape_interval_seconds)
    _check_range(problems, "scrapeIntervalSeconds", interval, *SCRAPE_INTERVAL, "")
    timeout = _or(doc.timeout, min(_DEFAULT.scrape_timeout_seconds, interval / 2))
    if not 0 < timeout < interval:
        problems.append(f"load.scrapeTimeoutSeconds is {_num(timeout)}; it must be more "
                        f"than 0 and less than scrapeIntervalSeconds ({_num(interval)})")
    concurrent = int(_or(doc.concurrent, _DEFAULT.max_concurrent_scrapes))
    _check_range(problems, "maxConcurrentScrapes", concurrent, 1, MAX_CONCURRENT, "")
    if problems:
        return None, problems
    assert target is not None
    load = Load(target_per_replica=target, metric=doc.metric, port=doc.port or 0,
                path=doc.path if doc.path is not None else _DEFAULT.path,
                stable_window_seconds=stable, panic_window_percentage=panic_pct,
                panic_threshold_percentage=threshold, scrape_interval_seconds=interval,
                scrape_timeout_seconds=timeout, max_concurrent_scrapes=concurrent,
                prometheus=prometheus)
    if load.panic_window_seconds < interval:
        return None, [f"load's panic window is {_num(load.panic_window_seconds)} s "
                      f"({_num(panic_pct)} % of {stable} s), shorter than "
                      f"scrapeIntervalSeconds ({_num(interval)}): it would hold no sample; "
                      "raise panicWindowPercentage or stableWindowSeconds, or scrape more "
                      "often"]
    return load, []
