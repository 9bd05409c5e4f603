"""/metrics: what a poll result becomes in Prometheus' text format."""

from __future__ import annotations

import re

from cpa.horizontal.daemon.cpa_loop import PollResult
from cpa.horizontal.daemon.cpa_metrics import Metrics
from cpa.horizontal.daemon.watchdogs import Overwrite
from cpa.horizontal.decide.decision import Decision
from cpa.kube.targets import ScaleResult, Target
from cpa.nodes.counts import ClusterCounts
from cpa.nodes.watch import WatchStatus
from tests.unit.configured import linear_params

COREDNS = Target("deployment", "coredns")
OTHER = Target("statefulset", "typha")


def value(text: str, series: str) -> float:
    """The sample of one series (name plus labels exactly as exposed)."""
    match = re.search(rf"^{re.escape(series)} (\S+)$", text, re.MULTILINE)
    assert match, f"{series} not in:\n{text}"
    return float(match.group(1))


def counted(**optional: int) -> PollResult:
    """A successful poll whose counts include the ``optional`` ones (zones, objects)."""
    r = result()
    r.counts = ClusterCounts(40, 160, 38, 152, **optional)
    return r


def shown_only_while_counted(m: Metrics, family: str, counted: PollResult) -> str:
    """The exposition once ``counted`` is observed, after checking that a poll without
    the optional counts shows no ``family`` series."""
    m.observe(result())
    assert family not in m.exposition().decode()
    m.observe(counted)
    return m.exposition().decode()


def gone_once_no_longer_counted(m: Metrics, family: str) -> None:
    """A poll without the optional counts (the key was removed from the ConfigMap) drops
    every ``family`` series."""
    m.observe(result())
    assert family not in m.exposition().decode()


def assert_values(text: str, expected: dict[str, float]) -> None:
    """Each series (name plus labels exactly as exposed) has its expected sample."""
    assert {series: value(text, series) for series in expected} == expected


def result(ok: bool = True) -> PollResult:
    r = PollResult(started=100.0, duration=0.004)
    r.counts = ClusterCounts(40, 160, 38, 152)
    r.params = linear_params(256.0, 16.0, 1, 0, True, True)
    r.decision = Decision("linear", 3, 40, 160, ())
    r.scales = [ScaleResult(COREDNS, 2, 3, True), ScaleResult(OTHER, 3, 3, False)]
    if not ok:
        r.error = "boom"
    return r


def test_a_poll_becomes_gauges_and_counters() -> None:
    status = WatchStatus(True, False, 50.0, "refused", 4)
    m = Metrics([COREDNS, OTHER], lambda: status, clock=lambda: 80.0, wall=lambda: 1.7e9)
    text = m.exposition().decode()
    # present before any poll
    assert_values(text, {
        'cpa_scale_writes_total{target="deployment/coredns"}': 0,
        'cpa_polls_total{result="error"}': 0,
        'cpa_params_info{mode="ladder"}': 0,
        "cpa_leader": 1,
        "cpa_early_polls_total": 0,
    })
    m.observe(result())
    m.observe(result(ok=False))
    early = result()
    early.early = True  # --react-to-node-changes
    m.observe(early)
    text = m.exposition().decode()
    assert_values(text, {
        'cpa_target_replicas{target="deployment/coredns"}': 3,
        'cpa_target_replicas{target="statefulset/typha"}': 3,
        "cpa_desired_replicas": 3,
        'cpa_cluster_nodes{scope="all"}': 40,
        'cpa_cluster_nodes{scope="schedulable"}': 38,
        'cpa_cluster_cores{scope="all"}': 160,
        'cpa_cluster_cores{scope="schedulable"}': 152,
        'cpa_polls_total{result="success"}': 2,
        'cpa_polls_total{result="error"}': 1,
        "cpa_early_polls_total": 1,
        "cpa_poll_duration_seconds_count": 3,
        'cpa_poll_duration_seconds_bucket{le="0.005"}': 3,
        'cpa_scale_writes_total{target="deployment/coredns"}': 3,
        'cpa_scale_writes_total{target="statefulset/typha"}': 0,
        "cpa_last_successful_poll_timestamp_seconds": 1.7e9,
        'cpa_params_info{mode="linear"}': 1,
        "cpa_node_watch_restarts_total": 4,
        "cpa_node_counts_stale_seconds": 30,
    })
    assert "process_resident_memory_bytes" in text  # the library's process metrics
    assert "_created" not in text


def test_overwrites_and_leadership() -> None:
    m = Metrics([COREDNS])
    r = result()
    r.overwritten = [Overwrite(COREDNS, 3, 7)]
    m.observe(r)
    m.set_leader(False)
    text = m.exposition().decode()
    assert value(text, 'cpa_scale_overwritten_total{target="deployment/coredns"}') == 1
    assert value(text, "cpa_leader") == 0


def test_the_bounds_of_the_parameters_in_force() -> None:
    """min and max (linear) for the at-max alert; 0 when the mode has none."""
    from tests.unit.configured import ladder_params

    m = Metrics([COREDNS])
    r = result()
    r.params = linear_params(256.0, 16.0, 2, 50, True, True)
    m.observe(r)
    text = m.exposition().decode()
    assert value(text, "cpa_params_min_replicas") == 2
    assert value(text, "cpa_params_max_replicas") == 50
    r.params = ladder_params(((1, 1),), ((1, 1),))
    m.observe(r)
    text = m.exposition().decode()
    assert value(text, "cpa_params_min_replicas") == value(text, "cpa_params_max_replicas") == 0


def test_zones_are_a_gauge_only_while_counted() -> None:
    m = Metrics([COREDNS])
    zoned = counted(total_zones=3, schedulable_zones=2)
    assert_values(shown_only_while_counted(m, "cpa_cluster_zones{", zoned), {
        'cpa_cluster_zones{scope="all"}': 3, 'cpa_cluster_zones{scope="schedulable"}': 2})
    gone_once_no_longer_counted(m, "cpa_cluster_zones{")


def test_pods_and_services_are_a_gauge_only_while_counted() -> None:
    m = Metrics([COREDNS])
    both = counted(pods=150000, services=20000)
    text = shown_only_while_counted(m, "cpa_cluster_objects{", both)
    assert value(text, 'cpa_cluster_objects{kind="pods"}') == 150000
    assert value(text, 'cpa_cluster_objects{kind="services"}') == 20000
    m.observe(counted(pods=10))
    text = m.exposition().decode()
    assert 'cpa_cluster_objects{kind="services"}' not in text
    gone_once_no_longer_counted(m, "cpa_cluster_objects{")


def test_an_edit_within_a_mode_moves_the_bounds() -> None:
    """Issue 27 #6: a new ConfigMap version whose mode is still linear but whose max
    changed moves cpa_params_max_replicas (it was set only when the mode's name
    changed)."""
    m = Metrics([COREDNS])
    r = result()
    r.params, r.params_version = linear_params(256.0, 16.0, 2, 50, True, True), "7"
    m.observe(r)
    assert value(m.exposition().decode(), "cpa_params_max_replicas") == 50
    r = result()
    r.params, r.params_version = linear_params(256.0, 16.0, 3, 20, True, True), "8"
    m.observe(r)
    text = m.exposition().decode()
    assert_values(text, {
        "cpa_params_max_replicas": 20,
        "cpa_params_min_replicas": 3,
        'cpa_params_info{mode="linear"}': 1,
    })
    r = result(ok=False)  # an invalid version: no parameters, the gauges stay
    r.params, r.params_version = None, "9"
    m.observe(r)
    assert value(m.exposition().decode(), "cpa_params_max_replicas") == 20


def test_under_leader_election_leader_starts_at_0_and_the_lease_is_exposed() -> None:
    from cpa.runtime.leaderelection import LeaseStatus

    plain = Metrics([COREDNS]).exposition().decode()
    assert value(plain, "cpa_leader") == 1 and "cpa_leader_lease" not in plain
    assert value(plain, "cpa_log_lines_dropped_total") == 0
    m = Metrics([COREDNS], leader_elect=True)
    assert value(m.exposition().decode(), "cpa_leader") == 0
    m.watch_lease(lambda: LeaseStatus("no", 47.5, 2147483647.0, 15.0, 3))
    m.failed_lease()
    text = m.exposition().decode()
    assert_values(text, {
        "cpa_leader_lease_unchanged_seconds": 47.5,
        "cpa_leader_lease_duration_seconds": 15,
        "cpa_leader_lease_holder_duration_seconds": 2147483647,
        "cpa_leader_lease_errors_total": 3,
        'cpa_polls_total{result="error"}': 1,
    })


def test_target_nodes_only_while_target_placement_is_in_force() -> None:
    m = Metrics([COREDNS, OTHER])
    placed = result()
    placed.target_counts = {COREDNS: ClusterCounts(3, 12, 2, 8), OTHER: ClusterCounts(7, 28, 7, 28)}
    text = shown_only_while_counted(m, "cpa_target_nodes{", placed)
    assert_values(text, {
        'cpa_target_nodes{set="all",target="deployment/coredns"}': 3,
        'cpa_target_nodes{set="schedulable",target="deployment/coredns"}': 2,
        'cpa_target_nodes{set="all",target="statefulset/typha"}': 7,
    })
    failed = PollResult(started=0.0, error="the API server is down")
    m.observe(failed)  # no parameters read: the last counts stay
    assert "cpa_target_nodes{" in m.exposition().decode()
    gone_once_no_longer_counted(m, "cpa_target_nodes{")


def test_steady_gauges_follow_every_change_after_polls_that_changed_nothing() -> None:
    """The count, desired and replica gauges are set only when their value changes: a
    change after steady polls still shows, and a change back too."""
    m = Metrics([COREDNS], lambda: WatchStatus(True, False, 0.0, "", 0), clock=lambda: 80.0,
                wall=lambda: 1.7e9)
    steady = [result(), result(), result()]
    for r in steady:
        r.scales = [ScaleResult(COREDNS, 3, 3, False)]
        m.observe(r)
    grown = result()
    grown.counts = ClusterCounts(41, 164, 39, 156)
    grown.decision = Decision("linear", 4, 41, 164, ())
    grown.scales = [ScaleResult(COREDNS, 3, 4, True)]
    m.observe(grown)
    text = m.exposition().decode()
    assert_values(text, {
        'cpa_cluster_nodes{scope="all"}': 41,
        'cpa_cluster_cores{scope="schedulable"}': 156,
        "cpa_desired_replicas": 4,
        'cpa_target_replicas{target="deployment/coredns"}': 4,
    })
    m.observe(steady[0])
    text = m.exposition().decode()
    assert_values(text, {
        'cpa_cluster_nodes{scope="all"}': 40,
        "cpa_desired_replicas": 3,
        'cpa_target_replicas{target="deployment/coredns"}': 3,
    })
