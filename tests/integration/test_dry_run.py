"""``--dry-run`` with the real daemon, as an admin (every write it tried would succeed):
the targets, the ConfigMap, Events and Leases stay untouched, while the logs and /metrics
say what it would have written."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.controlplane import ApiError, ControlPlane
from tests.integration.support import (
    KUBE_DNS_DEFAULTS,
    configmap,
    create_configmap,
    create_nodes,
    wait_polls,
    wait_until,
)
from tests.integration.test_targets import coredns_under_hpa, hpa_path

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

CM = "dry-params"


def test_a_dry_run_writes_nothing(controlplane: ControlPlane, namespace: str, no_nodes: None,
                                  start: Any) -> None:
    admin = controlplane.admin()
    coredns_under_hpa(admin, namespace, 10)
    create_nodes(admin, "dry", 40, cpu="4")
    deployment = f"/apis/apps/v1/namespaces/{namespace}/deployments/coredns"
    before = {path: admin.get(path)["metadata"]["resourceVersion"]
              for path in (deployment, hpa_path(namespace, "coredns"))}
    proc = start(f"--namespace={namespace}", f"--configmap={CM}",
                 "--target=deployment/coredns,hpa/coredns",
                 f"--default-params={KUBE_DNS_DEFAULTS}", "--events", "--leader-elect",
                 "--dry-run", kubeconfig=controlplane.admin_kubeconfig)
    # 40 Nodes, 160 cores with kube-dns's defaults: ceil(40 / 16) = 3.
    wait_until("both would-scale lines", lambda: len(proc.events("dry_run.would_scale")) == 2)
    would = {e["target"]: (e["old"], e["new"]) for e in proc.events("dry_run.would_scale")}
    assert would == {"deployment/coredns": (1, 3), "horizontalpodautoscaler/coredns": (1, 3)}
    (started,) = proc.events("dry_run")
    assert started["suppressed"] == ["--events", "--leader-elect"]
    assert proc.events("configmap.would_create")
    wait_polls(proc, count=3)
    metrics = proc.metrics()
    assert metrics["cpa_dry_run"] == 1 and metrics["cpa_desired_replicas"] == 3
    assert metrics['cpa_dry_run_replicas{target="deployment/coredns"}'] == 3
    assert metrics['cpa_target_replicas{target="deployment/coredns"}'] == 1
    assert metrics['cpa_scale_writes_total{target="deployment/coredns"}'] == 0
    assert metrics["cpa_leader"] == 1  # it polls: no Lease, so no follower either

    # Now a ConfigMap of its own: read, decided on, left as it is.
    create_configmap(admin, namespace, CM, {"linear": json.dumps({"nodesPerReplica": 8})})
    cm_version = configmap(admin, namespace, CM)["metadata"]["resourceVersion"]
    wait_until("the would-scale line for 5",
               lambda: any(e["new"] == 5 for e in proc.events("dry_run.would_scale")))
    wait_polls(proc, count=2)
    proc.wait_poll_ok()

    after = {path: admin.get(path)["metadata"]["resourceVersion"] for path in before}
    assert after == before, "the targets were not written"
    assert admin.get(hpa_path(namespace, "coredns"))["spec"]["minReplicas"] == 1
    assert configmap(admin, namespace, CM)["metadata"]["resourceVersion"] == cm_version
    assert not admin.get(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")["items"]
    with pytest.raises(ApiError) as lease:
        admin.get(f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{CM}")
    assert lease.value.status == 404
    assert not admin.get(f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases")["items"]
    assert not proc.events("scale.changed") and not proc.events("configmap.created")
