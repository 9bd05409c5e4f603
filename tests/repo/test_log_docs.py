"""docs/observability.md's log tables stay true to the code and to upstream.

- The "Log events" table names every event the daemon can log, and only those (read from
  the logging calls in cpa/, so a new event without a row fails here).
- The JSON format's keys are what a real JSON line carries, in that order, and the
  ``component`` values listed are the loggers the code creates.
- The table of upstream's glog messages has a row for each message upstream v1.10.3 logs,
  and every event it maps one to is a documented event.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOC = (REPO / "docs" / "observability.md").read_text()

# Every glog call of upstream v1.10.3 outside vendor/ and the tests (`git grep glog. v1.10.3`
# in kubernetes-sigs/cluster-proportional-autoscaler), as the table quotes them. The flag
# validation lines of cmd/.../options.go are one row ("flag validation") and tested in
# test_flags.py; `glog.Errorf("%v", err)` after NewAutoScaler is the "failed start" row.
UPSTREAM_GLOG = (
    "Scaling Namespace: %s, Target: %s",
    "ConfigMap not found: %v, will create one with default params",
    "Created ConfigMap %v in namespace %v",
    "Updated ConfigMap %v in namespace %v",
    "Cluster status: SchedulableNodes[%v], TotalNodes[%v], SchedulableCores[%v], "
    "TotalCores[%v]",
    "Replicas are not as expected : updating %s/%s from %d to %d",
    "Set control mode to %v",
    "ConfigMap version change (old: %s new: %s) - rebuilding params",
    "Detected ConfigMap version change",
    "Params from apiserver: %v",
    "Defaulting min replicas count to 1 for linear controller",
    "Total nodes %5d, schedulable nodes: %5d",
    "Total cores %5d, schedulable cores: %5d",
    "Expected replica count: %3d",
    "Error while getting cluster status: %v",
    "Error syncing configMap with apiserver: %v",
    "Error calculating expected replicas number: %v",
    "Update failure: %s",
    "Error ensuring controller: %v",
    "Maximum number of api server polling attempts (%d) have been reached. Exiting "
    "application.",
    "Falling back to extensions/v1beta1, error using apps/v1: %v",
    'glog.Fatal(http.ListenAndServe(":8080", nil))',
    "--configmap parameter cannot be empty",
    "`%v` of a failed start",
)

_CALL = re.compile(
    r'\.(?:info|warning|error|exception|debug|critical)\(\s*"([a-z_]+(?:\.[a-z_]+)*)"')


def section(title: str) -> str:
    """The text of a ``###`` section of the page, up to the next heading."""
    start = DOC.index(f"### {title}\n")
    end = DOC.find("\n#", start + 1)
    return DOC[start:end if end != -1 else None]


def table_rows(text: str) -> list[list[str]]:
    """The cells of a Markdown table's body rows."""
    rows = []
    for line in text.splitlines():
        if line.startswith("| ") and not line.startswith("| ---"):
            rows.append([c.strip() for c in line.strip().strip("|").split(" | ")])
    return rows[1:]  # the header


def documented_events() -> set[str]:
    return {name for row in table_rows(section("Log events"))
            for name in re.findall(r"`([^`]+)`", row[0])}


def logged_events() -> dict[str, set[str]]:
    """Event name -> the files of the daemon (not /cpvpa: docs/vertical.md) that log it."""
    found: dict[str, set[str]] = {}
    for path in (REPO / "cpa").rglob("*.py"):
        if "vertical" in path.relative_to(REPO / "cpa").parts:
            continue
        for match in _CALL.finditer(path.read_text()):
            found.setdefault(match.group(1), set()).add(str(path.relative_to(REPO)))
    return found


def test_the_reader_finds_the_logging_calls() -> None:
    assert _CALL.findall('log.info("scale.changed", a=1)\nself._log.warning(\n    "x.y",') == [
        "scale.changed", "x.y"]
    assert _CALL.findall('log.info("two words")') == []


def test_every_event_the_daemon_logs_has_a_row_and_every_row_is_logged() -> None:
    logged = logged_events()
    documented = documented_events()
    assert len(logged) >= 30
    undocumented = {name: sorted(files) for name, files in logged.items()
                    if name not in documented}
    assert not undocumented, f"add a row to the Log events table: {undocumented}"
    stale = documented - set(logged)
    assert not stale, f"documented but never logged: {sorted(stale)}"


def test_the_json_keys_are_the_documented_ones_in_order() -> None:
    keys_table = table_rows(section("The JSON format"))
    always = [row[0].strip("`") for row in keys_table if row[1] == "yes"]
    assert always == ["timestamp", "level", "event", "component"]
    done = subprocess.run(
        [sys.executable, "-c", "from cpa import logs\nlogs.configure(0, 'json')\n"
         "logs.get_logger('autoscaler').warning('scale.overwritten', target='deployment/x', "
         "ours=3, found=5, hint=None)"],
        capture_output=True, text=True, check=True, timeout=60, cwd=REPO)
    event = json.loads(done.stderr)
    assert list(event)[:4] == always
    assert list(event)[4:] == ["target", "ours", "found", "hint"]
    assert event["hint"] is None and event["ours"] == 3  # null and numbers, as documented
    assert event["level"] == "warning" and event["timestamp"].endswith("Z")
    component_row = next(row for row in keys_table if row[0] == "`component`")
    listed = set(re.findall(r"`([a-z]+)`", component_row[2]))
    used = set()
    for path in (REPO / "cpa").rglob("*.py"):
        if "vertical" not in path.relative_to(REPO / "cpa").parts:
            used |= set(re.findall(r'get_logger\("([a-z_]+)"\)', path.read_text()))
    assert used == listed


def test_each_upstream_glog_message_has_a_row_mapped_to_a_real_event() -> None:
    text = section("Upstream's log messages, and ours")
    rows = table_rows(text)
    first_column = "\n".join(row[0] for row in rows)
    missing = [message for message in UPSTREAM_GLOG if message not in first_column]
    assert not missing, f"no row for upstream's {missing}"
    documented = documented_events()
    for row in rows:
        ours = row[-1]
        named = [t for t in re.findall(r"`([^`]+)`", ours)
                 if re.fullmatch(r"[a-z_]+(\.[a-z_]+)+|starting|stopped", t)]
        unknown = [t for t in named if t not in documented]
        assert not unknown, f"{row[0]}: {unknown} is not a documented event"
