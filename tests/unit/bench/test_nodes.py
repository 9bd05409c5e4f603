"""The benchmark's node generator and metric parsing (no control plane needed)."""

from __future__ import annotations

import json

import pytest

from bench import measure, nodes
from bench.run import _crossing, expected_replicas, memory_problem, percentile, reaction_batch
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


def test_batches_cross_a_boundary_at_their_last_write() -> None:
    """Adding, the count ends at 16k+1; removing, at 16k: only the last write changes the
    replica count, in either direction."""
    for n in (1_000, 5_000, 15_000, 65_000, 130_000):
        want = reaction_batch(n)
        assert 16 <= want <= 256
        up = _crossing(n, want, up=True)
        assert (n + up) % 16 == 1 and abs(up - want) <= 16
        assert expected_replicas(ClusterCounts(n + up - 1, 0, 0, 0)) < \
            expected_replicas(ClusterCounts(n + up, 0, 0, 0))
        down = _crossing(n + up, want, up=False)
        assert (n + up - down) % 16 == 0 and abs(down - want) <= 16
        assert expected_replicas(ClusterCounts(n + up - down + 1, 0, 0, 0)) > \
            expected_replicas(ClusterCounts(n + up - down, 0, 0, 0))


def test_percentile_is_numpys_linear() -> None:
    assert percentile([1.0], 90) == 1.0
    assert percentile([4.0, 1.0, 3.0, 2.0], 50) == 2.5
    assert abs(percentile([float(x) for x in range(1, 11)], 90) - 9.1) < 1e-9


def test_an_implementation_is_not_run_where_its_memory_would_not_fit(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(measure, "mem_available_mib", lambda: 12_000.0)
    rows = [{"impl": "upstream", "nodes": 65_000, "peak_rss_mib": 2_600.0},
            {"impl": "ours", "nodes": 65_000, "peak_rss_mib": 40.0}]
    assert memory_problem("ours", 130_000, rows) == ""
    assert memory_problem("upstream", 130_000, rows) == ""  # ~6,500 + 2,048 fit
    monkeypatch.setattr(measure, "mem_available_mib", lambda: 8_000.0)
    assert "6,500 MiB" in memory_problem("upstream", 130_000, rows)
    assert memory_problem("upstream", 1_000, []) == ""  # nothing to scale from


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
