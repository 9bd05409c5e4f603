"""The benchmark's node generator and metric parsing (no control plane needed)."""

from __future__ import annotations

import json

from bench import measure, nodes
from bench.run import _bump_to_boundary, expected_replicas
from cpa.nodes.counts import ClusterCounts


def test_nodes_are_gke_sized_and_valid() -> None:
    sizes = [len(json.dumps(nodes.node_object(i), separators=(",", ":"))) for i in range(50)]
    assert all(9_000 <= s <= 11_000 for s in sizes), sizes
    node = nodes.node_object(7)
    assert len(node["metadata"]["labels"]) >= 25
    assert len(node["status"]["images"]) >= 20
    assert len(node["status"]["conditions"]) >= 5
    assert node["status"]["allocatable"]["cpu"] in {m[1] for m in nodes.MACHINES}
    assert json.loads(node["metadata"]["annotations"]["csi.volume.kubernetes.io/nodeid"])


def test_state_matches_object() -> None:
    for i in range(200):
        obj, state = nodes.node_object(i), nodes.node_state(i)
        ready = next(c for c in obj["status"]["conditions"] if c["type"] == "Ready")
        assert (ready["status"] == "True") == state.ready
        assert bool(obj["spec"].get("unschedulable")) == state.unschedulable
        assert nodes.machine(i)[1] == obj["status"]["allocatable"]["cpu"]


def test_mix_and_counts() -> None:
    n = 20_000
    states = [nodes.node_state(i) for i in range(n)]
    assert abs(sum(s.unschedulable for s in states) / n - 0.05) < 0.005
    assert abs(sum(not s.ready for s in states) / n - 0.03) < 0.005
    assert len({s.millicores for s in states}) == len(nodes.MACHINES)
    c = nodes.counts(states)
    assert c.total_nodes == n
    assert c.total_cores == -(-sum(s.millicores for s in states) // 1000)
    assert c.schedulable_nodes == sum(s.schedulable for s in states)


def test_names_unique_and_stable() -> None:
    names = {nodes.node_name(i) for i in range(5000)}
    assert len(names) == 5000
    assert nodes.node_name(5) == nodes.node_name(5)
    assert nodes.node_name(5) != nodes.node_name(5, nodes.EXTRA_PREFIX)


def test_expected_replicas_kube_dns_defaults() -> None:
    # 65,000 nodes / 16 per replica dominates the cores axis.
    assert expected_replicas(ClusterCounts(65_000, 410_544, 59_878, 378_290)) == 4063


def test_batch_crosses_a_boundary_at_its_last_node() -> None:
    for n in (1_000, 5_000, 15_000, 65_000):
        m = _bump_to_boundary(n, n // 20)
        assert (n + m) % 16 == 1
        assert abs(m - n // 20) <= 16


def test_request_totals_parsing() -> None:
    text = "\n".join([
        "# TYPE apiserver_request_total counter",
        'apiserver_request_total{code="200",component="apiserver",dry_run="",group="",'
        'resource="configmaps",scope="resource",subresource="",verb="GET",version="v1"} 7',
        'apiserver_request_total{code="404",component="apiserver",dry_run="",group="",'
        'resource="configmaps",scope="resource",subresource="",verb="GET",version="v1"} 1',
        'apiserver_request_total{code="200",component="apiserver",dry_run="",group="apps",'
        'resource="deployments",scope="resource",subresource="scale",verb="PUT",'
        'version="v1"} 3',
        'apiserver_request_total{code="200",component="",dry_run="",group="",resource="",'
        'scope="",subresource="/metrics",verb="GET",version=""} 9',
    ])
    totals = measure.request_totals(text)
    assert totals == {("GET", "configmaps", ""): 8.0, ("PUT", "deployments", "scale"): 3.0}
    cats = measure.categorize(measure.delta({}, totals))
    assert cats["get_configmaps"] == 8 and cats["put_scale"] == 3 and cats["node_requests"] == 0
