"""Every metric the shipped alert rules and dashboard name is in a real scrape of the daemon.

The names are read from the rule and panel expressions (tests/monitoring.py), so a metric
renamed in the daemon, or a typo in a panel, fails here rather than as an empty panel or an
alert that can never fire in someone's cluster.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.controlplane import ControlPlane
from tests.integration.support import coredns_and_nodes, wait_replicas, wait_until
from tests.monitoring import exposed_names, names_used

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def test_rules_and_dashboard_metrics_are_all_exposed(controlplane: ControlPlane,
                                                     namespace: str, no_nodes: None,
                                                     start: Any) -> None:
    admin = controlplane.admin()
    coredns_and_nodes(admin, namespace, "mon", 4, cpu="4")
    proc = start(f"--namespace={namespace}", "--configmap=mon-params",
                 "--target=deployment/coredns",
                 '--default-params={"linear":{"nodesPerReplica":2,"min":1,"max":10}}')
    wait_replicas(admin, namespace, "deployment", "coredns", 2, proc=proc)
    proc.wait_poll_ok()
    def scraped() -> str | None:
        status, text = proc.health("/metrics")
        return text if status == 200 and "cpa_desired_replicas 2.0" in text else None

    body = wait_until("a scrape after a successful poll", scraped, 30)
    exposed = exposed_names(body)
    used = names_used()
    assert len(used) >= 15
    missing = {name: sorted(where) for name, where in used.items() if name not in exposed}
    assert not missing, f"named by the rules/dashboard but not exposed: {missing}"
    assert "cpa_params_max_replicas 10.0" in body
