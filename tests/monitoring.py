"""The shipped monitoring files as the tests read them: the alert rules, their promtool
unit tests, the Grafana dashboard, the PromQL expressions in both and the metric names
those expressions use; and where promtool is.

The metric names are read from the expressions (not listed by hand), so a metric renamed in
the daemon, or misspelt in a panel, fails the check against a live ``/metrics`` scrape
(tests/integration/test_monitoring_scrape.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
MONITORING = REPO / "monitoring"
RULES = MONITORING / "prometheus-rules.yaml"
RULE_TESTS = MONITORING / "prometheus-rules.test.yaml"
DASHBOARD = MONITORING / "grafana-dashboard.json"
CHART_FILES = REPO / "charts" / "cluster-proportional-autoscaler" / "files"

# Grafana's variables, replaced by values that make the expression plain PromQL.
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h",
                     "$namespace": ".*", "$pod": ".*"}
_KEYWORDS = frozenset({"and", "or", "unless", "bool", "offset", "by", "without", "on",
                       "ignoring", "group_left", "group_right", "inf", "nan", "atan2"})


def find_promtool() -> str | None:
    """$PROMTOOL, scripts/install-promtool.sh's build, or promtool on PATH."""
    for candidate in (os.environ.get("PROMTOOL"), str(REPO / ".cache" / "bin" / "promtool")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("promtool")


def rules() -> list[dict[str, Any]]:
    """Every rule of every group in the rules file."""
    doc = yaml.safe_load(RULES.read_text())
    return [rule for group in doc["groups"] for rule in group["rules"]]


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def dashboard_queries() -> list[str]:
    """Every PromQL expression of the dashboard: panel targets and variable queries (the
    selector of Grafana's ``label_values(selector, label)``), with Grafana's variables
    replaced."""
    doc = dashboard()
    exprs = [target["expr"] for panel in doc["panels"] for target in panel.get("targets", [])]
    for variable in doc["templating"]["list"]:
        query = variable.get("query")
        if isinstance(query, dict):
            exprs.append(re.sub(r"^label_values\((.*),\s*\w+\)$", r"\1", query["query"]))
    return [plain(e) for e in exprs]


def plain(expr: str) -> str:
    for name in sorted(GRAFANA_VARIABLES, key=len, reverse=True):
        expr = expr.replace(name, GRAFANA_VARIABLES[name])
    return expr


def metric_names(expr: str) -> set[str]:
    """The metric names an expression reads (``label_values(m, label)`` reads ``m``)."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # string literals
    expr = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # ranges and subqueries
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    names = set()
    for match in re.finditer(r"(?<![\w.])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?", expr):
        name, call = match.group(1), match.group(2)
        if call or name in _KEYWORDS or re.fullmatch(r"\d.*", name):
            continue
        names.add(name)
    return names


def names_used() -> dict[str, set[str]]:
    """Metric name -> where it is used (alert names, dashboard)."""
    used: dict[str, set[str]] = {}
    for rule in rules():
        for name in metric_names(rule["expr"]):
            used.setdefault(name, set()).add(f"alert {rule['alert']}")
    for expr in dashboard_queries():
        for name in metric_names(expr):
            used.setdefault(name, set()).add("dashboard")
    return used


def exposed_names(exposition: str) -> set[str]:
    """The series names of a Prometheus text exposition (``_bucket``, ``_total`` ... as
    exposed)."""
    names = set()
    for line in exposition.splitlines():
        if line and not line.startswith("#"):
            match = re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line)
            if match:
                names.add(match.group(0))
    return names


# prometheus-operator's CRDs, for applying the chart's PodMonitor, ServiceMonitor and
# PrometheusRule to a real API server: from the operator's Go module (its
# example/prometheus-operator-crd/ folder), fetched by `go mod download` into the module
# cache like every other Go dependency of the tests; no release download.
PROMETHEUS_OPERATOR_MODULE = "github.com/prometheus-operator/prometheus-operator"
PROMETHEUS_OPERATOR_VERSION = "v0.89.0"
OPERATOR_CRDS = ("podmonitors", "servicemonitors", "prometheusrules")


def operator_crds(workdir: Path) -> list[dict[str, Any]]:
    """The CustomResourceDefinitions of OPERATOR_CRDS; raises RuntimeError (with go's
    message) when the module cannot be had."""
    import subprocess

    go = shutil.which("go")
    if go is None:
        raise RuntimeError("go is not installed")
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=readonly"}
    done = subprocess.run(
        [go, "mod", "download", "-json",
         f"{PROMETHEUS_OPERATOR_MODULE}@{PROMETHEUS_OPERATOR_VERSION}"],
        capture_output=True, text=True, timeout=600, cwd=workdir, env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"go mod download failed: {done.stdout}{done.stderr}"[:2000])
    folder = Path(json.loads(done.stdout)["Dir"]) / "example" / "prometheus-operator-crd"
    return [yaml.safe_load((folder / f"monitoring.coreos.com_{name}.yaml").read_text())
            for name in OPERATOR_CRDS]
