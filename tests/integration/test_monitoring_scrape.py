"""Every metric the shipped alert rules and dashboard name is in a real scrape of the daemon.

The names are read from the rule and panel expressions (tests/monitoring.py), so a metric
renamed in the daemon, or a typo in a panel, fails here rather than as an empty panel or an
alert that can never fire in someone's cluster.

Some series exist only with an opt-in feature the dashboard shows: the zones counted (a
``zones`` key), an HPA floor target's clamp (``--target hpa/NAME``) and what a dry run would
write (``--dry-run``), the Lease's (``--leader-elect``), a contended target
(``--watch-targets``). So the daemon runs twice, with all
of them: once writing (and leading), once dry.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.controlplane import ControlPlane
from tests.integration.support import coredns_and_nodes, wait_replicas, wait_until
from tests.integration.test_targets import create_hpa, floor
from tests.monitoring import exposed_names, names_used

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

# 4 Nodes of 4 cores: ceil(4 / 2) = 2 replicas; the Nodes carry no zone label, so they
# are one zone ("") and the zone floor (1 per zone) changes nothing.
PARAMS = json.dumps({"linear": {"nodesPerReplica": 2, "min": 1, "max": 10, "zones": {}}})


def scrape(proc: Any, ready: str) -> str:
    """A /metrics body once it contains ``ready`` (a series of a poll that decided)."""
    def scraped() -> str | None:
        status, text = proc.health("/metrics")
        return text if status == 200 and ready in text else None

    body: str = wait_until(f"a scrape with {ready}", scraped, 30)
    return body


def test_rules_and_dashboard_metrics_are_all_exposed(controlplane: ControlPlane,
                                                     namespace: str, no_nodes: None,
                                                     start: Any) -> None:
    admin = controlplane.admin()
    coredns_and_nodes(admin, namespace, "mon", 4, cpu="4")
    create_hpa(admin, namespace, "coredns", 1, 10)
    common = (f"--namespace={namespace}", "--configmap=mon-params",
              "--target=deployment/coredns,hpa/coredns", f"--default-params={PARAMS}")
    # The admin's kubeconfig: the test identity may not write HPAs (test_targets.py checks
    # the RBAC that needs).
    proc = start(*common, "--leader-elect", "--watch-targets",
                 kubeconfig=controlplane.admin_kubeconfig)
    wait_replicas(admin, namespace, "deployment", "coredns", 2, proc=proc)
    wait_until("the HPA floor at 2", lambda: floor(admin, namespace, "coredns") == 2)
    proc.wait_poll_ok()
    body = scrape(proc, "cpa_desired_replicas 2.0")
    assert "cpa_params_max_replicas 10.0" in body
    assert 'cpa_cluster_zones{scope="all"} 1.0' in body
    assert 'cpa_hpa_floor_clamped{target="horizontalpodautoscaler/coredns"} 0.0' in body
    assert "cpa_dry_run 0.0" in body
    assert 'cpa_target_contended{target="deployment/coredns"} 0.0' in body
    assert "cpa_leader 1.0" in body and "cpa_leader_lease_duration_seconds 15.0" in body
    proc.stop()

    dry = start(*common, "--dry-run", kubeconfig=controlplane.admin_kubeconfig)
    dry.wait_poll_ok()
    dry_body = scrape(dry, 'cpa_dry_run_replicas{target="deployment/coredns"} 2.0')
    assert "cpa_dry_run 1.0" in dry_body

    exposed = exposed_names(body) | exposed_names(dry_body)
    used = names_used()
    assert len(used) >= 18
    missing = {name: sorted(where) for name, where in used.items() if name not in exposed}
    assert not missing, f"named by the rules/dashboard but not exposed: {missing}"
