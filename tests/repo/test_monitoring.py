"""The alert rules and the dashboard we ship, checked with the real promtool.

promtool comes from scripts/install-promtool.sh (.cache/bin/promtool, built from the
Prometheus Go module), $PROMTOOL, or PATH; without it the promtool tests are skipped (CI
builds it: .ci/run). The metric names are checked against a live scrape of the daemon in
tests/integration/test_monitoring_scrape.py.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.monitoring import (
    CHART_FILES,
    DASHBOARD,
    RULE_TESTS,
    RULES,
    dashboard,
    dashboard_queries,
    find_promtool,
    metric_names,
    names_used,
    rules,
)

PROMTOOL = find_promtool()
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool not built yet: make test-tools (make test and make "
                             "monitoring-test build it), or set $PROMTOOL")

ALERTS = {"ProportionalAutoscalerPollsFailing", "ProportionalAutoscalerNoSuccessfulPoll",
          "ProportionalAutoscalerStaleNodeCounts", "ProportionalAutoscalerAnotherWriter",
          "ProportionalAutoscalerAtMaxReplicas", "ProportionalAutoscalerNoLeader",
          "ProportionalAutoscalerTargetContended"}


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=120,
                          check=False)


@needs_promtool
def test_promtool_checks_the_rules() -> None:
    done = promtool("check", "rules", str(RULES))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in done.stdout


@needs_promtool
def test_every_alert_passes_its_promtool_unit_tests() -> None:
    done = promtool("test", "rules", str(RULE_TESTS))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_the_alerts_are_the_seven_named_ones_with_severity_and_text() -> None:
    found = {rule["alert"]: rule for rule in rules()}
    assert set(found) == ALERTS
    for rule in found.values():
        assert rule["labels"]["severity"] in ("info", "warning", "critical")
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]


def test_each_alert_fires_in_a_test_and_a_healthy_series_stays_silent() -> None:
    """The unit tests are not vacuous: every alert is expected to fire at least once, and
    every test group has a series (a pod) for which nothing fires."""
    doc = yaml.safe_load(RULE_TESTS.read_text())
    fired: set[str] = set()
    for group in doc["tests"]:
        pods = {s["series"].split('pod="')[1].split('"')[0] for s in group["input_series"]}
        alerting = {alert["exp_labels"]["pod"] for case in group["alert_rule_test"]
                    for alert in case["exp_alerts"]}
        fired |= {case["alertname"] for case in group["alert_rule_test"] if case["exp_alerts"]}
        assert "healthy" in pods and "healthy" not in alerting, group["name"]
        assert pods - alerting - {"healthy"}, f"{group['name']}: no look-alike case"
    assert fired == ALERTS


@needs_promtool
def test_the_old_readme_rule_could_never_fire(tmp_path: Path) -> None:
    """`and` matches on every label, result included: without ignoring(result) the
    failing-polls alert never fires, and its unit test says so."""
    shutil.copy(RULE_TESTS, tmp_path / RULE_TESTS.name)
    text = RULES.read_text()
    assert "and ignoring(result)" in text
    (tmp_path / RULES.name).write_text(text.replace("and ignoring(result)", "and"))
    done = promtool("test", "rules", str(tmp_path / RULE_TESTS.name))
    assert done.returncode != 0
    assert "ProportionalAutoscalerPollsFailing" in done.stdout + done.stderr


@needs_promtool
def test_every_dashboard_query_is_valid_promql() -> None:
    queries = dashboard_queries()
    assert len(queries) >= 15
    for query in queries:
        done = promtool("--experimental", "promql", "format", query)
        assert done.returncode == 0, f"{query}\n{done.stdout}{done.stderr}"


def test_the_dashboard_is_importable_json() -> None:
    doc = dashboard()
    assert doc["uid"] and doc["title"] and doc["schemaVersion"] >= 36
    ids = [p["id"] for p in doc["panels"]]
    assert len(ids) == len(set(ids))
    variables = {v["name"] for v in doc["templating"]["list"]}
    assert variables == {"datasource", "namespace", "pod"}
    for panel in doc["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
            assert panel["targets"], panel["title"]


def test_metric_names_are_read_from_expressions() -> None:
    assert metric_names('rate(cpa_polls_total{result="error", a=~"x(y)"}[5m]) > 0 and '
                        'ignoring(result) rate(cpa_polls_total{result="success"}[5m]) == 0'
                        ) == {"cpa_polls_total"}
    assert metric_names("histogram_quantile(0.99, sum by (le) (rate(a_bucket[5m])))") == {
        "a_bucket"}
    assert metric_names("time() - b > 300 and on(pod) c == 1 offset 5m") == {"b", "c"}
    assert metric_names('sum without (pod) (x) / on () group_left y') == {"x", "y"}


def test_rules_and_dashboard_name_only_our_metrics_and_the_process_ones() -> None:
    """Every name is ours (cpa_) or prometheus_client's process metrics; the live check of
    each name is the integration test."""
    used = names_used()
    assert {"cpa_polls_total", "cpa_last_successful_poll_timestamp_seconds", "cpa_leader",
            "cpa_node_counts_stale_seconds", "cpa_scale_overwritten_total",
            "cpa_desired_replicas", "cpa_params_max_replicas", "cpa_cluster_zones",
            "cpa_hpa_floor_clamped", "cpa_dry_run", "cpa_dry_run_replicas"} <= set(used)
    assert all(n.startswith(("cpa_", "process_")) for n in used), sorted(used)


def test_the_chart_ships_the_same_files() -> None:
    """The chart's PrometheusRule and dashboard ConfigMap read copies under files/ (helm
    reads no file outside the chart); they must not drift from monitoring/."""
    for source in (RULES, DASHBOARD):
        repo = RULES.parents[1]
        assert (CHART_FILES / source.name).read_bytes() == source.read_bytes(), (
            f"cp {source.relative_to(repo)} {CHART_FILES.relative_to(repo)}/")
