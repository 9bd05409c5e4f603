"""Zone-aware replica counts with the real daemon: Nodes in three zones (and one without the
label), the zones key switched on while the daemon runs (the Nodes are listed again for the
label) and present from the start; the zone count follows Nodes added, removed and
relabelled through the watch."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.controlplane import ControlPlane
from tests.integration.support import (
    create_configmap,
    create_nodes,
    create_workload,
    explain_json,
    put_configmap_data,
    wait_polls,
    wait_replicas,
    wait_until,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

CM = "zone-params"
ZONE = "topology.kubernetes.io/zone"
KUBE_DNS = {"coresPerReplica": 256, "nodesPerReplica": 16, "preventSinglePointFailure": True,
            "includeUnschedulableNodes": True}


def test_replicas_cover_every_zone(controlplane: ControlPlane, namespace: str,
                                   no_nodes: None, start: Any) -> None:
    admin = controlplane.admin()
    create_workload(admin, namespace, "deployment", "coredns")
    for zone in ("zone-a", "zone-b", "zone-c"):
        create_nodes(admin, zone, 2, cpu="4", labels={ZONE: zone})
    create_configmap(admin, namespace, CM, {"linear": json.dumps(KUBE_DNS)})
    proc = start(f"--namespace={namespace}", f"--configmap={CM}",
                 "--target=deployment/coredns")
    # Upstream's answer for 6 Nodes: 1 by each axis, 2 by preventSinglePointFailure.
    wait_replicas(admin, namespace, "deployment", "coredns", 2, proc=proc)
    assert 'cpa_cluster_zones{scope="all"}' not in proc.metrics()

    put_configmap_data(admin, namespace, CM, {"linear": json.dumps(
        {**KUBE_DNS, "zones": {"topologyKey": ZONE, "minPerZone": 1}})})
    wait_replicas(admin, namespace, "deployment", "coredns", 3, proc=proc)
    relists = proc.events("nodes.relist_for_label")
    assert relists and relists[0]["label"] == ZONE
    assert proc.metrics()['cpa_cluster_zones{scope="all"}'] == 3

    # A Node without the label is one more zone, the zone "".
    create_nodes(admin, "nolabel", 1, cpu="4")
    wait_replicas(admin, namespace, "deployment", "coredns", 4, proc=proc)
    put_configmap_data(admin, namespace, CM, {"linear": json.dumps(
        {**KUBE_DNS, "zones": {"minPerZone": 2, "roundUpToZones": True}})})
    wait_replicas(admin, namespace, "deployment", "coredns", 8, proc=proc)
    admin.delete("/api/v1/nodes/nolabel-0000")
    wait_replicas(admin, namespace, "deployment", "coredns", 6, proc=proc)
    # Relabelled: zone-c keeps one Node, zone-d appears.
    admin.patch("/api/v1/nodes/zone-c-0001", {"metadata": {"labels": {ZONE: "zone-d"}}})
    wait_replicas(admin, namespace, "deployment", "coredns", 8, proc=proc)
    wait_until("cpa_cluster_zones 4",
               lambda: proc.metrics().get('cpa_cluster_zones{scope="all"}') == 4)
    changed = proc.events("scale.changed")[-1]
    assert changed["zones"] == 4 and changed["new"] == 8

    doc = explain_json(controlplane.admin_kubeconfig, namespace, CM)
    assert doc["replicas"] == 8 and doc["counts"]["total_zones"] == 4
    assert doc["zone_floor"] == 8
    assert [s["key"] for s in doc["steps"] if s["key"].startswith("zones.")] == [
        "zones.count", "zones.floor", "zones.round_up"]

    # Present from the start: the daemon's first poll has the Nodes listed again for the
    # label before it decides (one list, no failed poll).
    create_workload(admin, namespace, "deployment", "coredns2")
    fresh = start(f"--namespace={namespace}", f"--configmap={CM}",
                  "--target=deployment/coredns2")
    wait_replicas(admin, namespace, "deployment", "coredns2", 8, proc=fresh)
    fresh.wait_poll_ok()
    assert not fresh.events("poll.failed")
    assert fresh.events("scale.changed")[0]["zones"] == 4

    # The zones key removed: upstream's decision again, and no zone series.
    put_configmap_data(admin, namespace, CM, {"linear": json.dumps(KUBE_DNS)})
    wait_replicas(admin, namespace, "deployment", "coredns", 2, proc=proc)
    wait_polls(proc, count=1)
    assert 'cpa_cluster_zones{scope="all"}' not in proc.metrics()
    proc.wait_poll_ok()
