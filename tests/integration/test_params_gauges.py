"""Issue 27 #6: ``cpa_params_min_replicas`` / ``cpa_params_max_replicas`` follow every edit
of the ConfigMap, not only a change of the mode's name (the at-max alert reads the max).

The real daemon against the real API server: an edit of ``min`` and ``max`` within
``linear`` must move both gauges on ``/metrics``; they used to keep the first version's.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.controlplane import ControlPlane
from tests.integration.support import (
    coredns_and_nodes,
    create_configmap,
    put_configmap_data,
    wait_polls,
    wait_replicas,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

CM = "gauge-params"


def bounds(proc: Any) -> tuple[float, float]:
    samples = proc.metrics()
    return samples["cpa_params_min_replicas"], samples["cpa_params_max_replicas"]


def test_an_edit_of_max_within_linear_moves_the_gauges(
        controlplane: ControlPlane, namespace: str, no_nodes: None, start: Any) -> None:
    admin = controlplane.admin()
    coredns_and_nodes(admin, namespace, f"pg-{namespace[-6:]}", 4)
    create_configmap(admin, namespace, CM, {"linear": '{"nodesPerReplica":1,"max":10}'})
    proc = start(f"--namespace={namespace}", f"--configmap={CM}",
                 "--target=deployment/coredns")
    wait_replicas(admin, namespace, "deployment", "coredns", 4, proc=proc)
    wait_polls(proc, count=1)
    first = bounds(proc)

    put_configmap_data(admin, namespace, CM,
                       {"linear": '{"nodesPerReplica":1,"min":2,"max":3}'})
    wait_replicas(admin, namespace, "deployment", "coredns", 3, proc=proc)  # capped by max
    wait_polls(proc, count=2)
    second = bounds(proc)
    print(f"\n(min, max) gauges: {first} with max 10, then {second} after the edit to "
          "min 2, max 3")
    assert first == (1.0, 10.0)  # linear's default min is 1
    assert second == (2.0, 3.0)
