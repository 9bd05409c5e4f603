"""The DNS benchmark's pure parts: dnsperf's output read (bench.dnsload), the load profile,
the run's figures (bench.dnssummary) and our daemon's log lines (bench.dnscluster)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench import dnsload
from bench.dnscluster import autoscaler_events, parse_time
from bench.dnsload import Phase, Profile, Slice
from bench.dnssummary import (
    Sample,
    capacity_seconds,
    changes,
    percentile,
    replica_seconds,
    summarize,
    windows,
)

# dnsperf 2.10.0 with -v -W (trimmed): per-query lines, a late answer's warning, statistics.
DNSPERF = """\
DNS Performance Testing Tool
Version 2.10.0

[Status] Command line: dnsperf -s 10.0.0.10 -p 53 -d q.txt -l 1 -Q 4 -c 5 -t 2 -q 100 -v -W
[Status] Sending queries (to 10.0.0.10:53)
> NOERROR host1.e2e.test A 0.000590
> NOERROR host2.e2e.test A 0.001390
> NOERROR host1.e2e.test A 0.250000
[Timeout] Query timed out: msg id 3
Warning: received a response with an unexpected (maybe timed out) id: 3
[Status] Testing complete (time limit)

Statistics:

  Queries sent:         4
  Queries completed:    3 (75.00%)
  Queries lost:         1 (25.00%)

  Response codes:       NOERROR 3 (100.00%)
"""


def test_dnsperf_output_gives_sent_completed_lost_late_and_each_latency() -> None:
    piece = dnsload.parse(7, 5, DNSPERF)
    assert piece == Slice(7, 5, 4, 3, 1, 1, (0.00059, 0.00139, 0.25))


@pytest.mark.parametrize("output", [
    "",                                                     # killed before it printed
    DNSPERF.split("Statistics:")[0],                        # killed before its statistics
    DNSPERF.replace("Queries sent:         4", "Queries sent:         four"),
])
def test_dnsperf_output_without_statistics_is_refused_with_its_tail(output: str) -> None:
    with pytest.raises(ValueError, match="no statistics for second 3"):
        dnsload.parse(3, 10, output)


def test_dnsperf_output_that_does_not_add_up_is_refused() -> None:
    inconsistent = DNSPERF.replace("Queries lost:         1", "Queries lost:         9")
    with pytest.raises(ValueError, match="more answered and lost than sent"):
        dnsload.parse(3, 10, inconsistent)


def test_a_latency_line_without_a_number_is_not_a_latency() -> None:
    odd = DNSPERF.replace("> NOERROR host2.e2e.test A 0.001390", "> T host2.e2e.test A")
    assert dnsload.parse(0, 5, odd).latencies == (0.00059, 0.25)


def test_dnsperf_argv_leaves_room_for_every_query_of_the_second_to_be_outstanding() -> None:
    argv = dnsload.dnsperf_argv("10.0.0.10", Path("q.txt"), 1000)
    assert argv[argv.index("-Q") + 1] == "1000"
    assert int(argv[argv.index("-q") + 1]) >= 1000 * dnsload.TIMEOUT


PROFILE = Profile("p", (Phase(2, 1, 1), Phase(4, 1, 5), Phase(2, 5, 5)), jump=2)


def test_the_profile_rate_goes_linearly_through_each_phase() -> None:
    assert dnsload.rates(PROFILE, 100) == [100, 100, 100, 200, 300, 400, 500, 500]
    with pytest.raises(ValueError, match="past the profile's 8 s"):
        dnsload.multiple_at(PROFILE, 8)


def test_the_raised_load_ends_with_the_phase_that_begins_at_the_jump() -> None:
    assert PROFILE.jump_until == 6
    assert Profile("flat", (Phase(5, 1, 1),), jump=None).jump_until is None
    assert Profile("odd", (Phase(5, 1, 1),), jump=3).jump_until is None


def test_the_spike_jumps_fivefold_at_its_jump_and_comes_back() -> None:
    rates = dnsload.rates(dnsload.SPIKE, 10)
    jump = dnsload.SPIKE.jump
    assert jump is not None
    assert rates[jump - 1] == 10 and rates[jump] == 50 and rates[-1] == 10


def _slice(second: int, sent: int, lost: int, latencies: tuple[float, ...] = ()) -> Slice:
    return Slice(second, sent, sent, sent - lost, lost, 0, latencies)


def test_percentile_is_nearest_rank_and_none_for_nothing() -> None:
    assert percentile([], 0.5) is None
    assert percentile([3.0, 1.0, 2.0], 0.5) == 2.0
    assert percentile([float(i) for i in range(1, 101)], 0.99) == 99.0
    assert percentile([5.0], 0.0) == 5.0


def test_windows_sum_queries_and_take_percentiles_per_ten_seconds() -> None:
    slices = [_slice(s, 10, 1 if s >= 10 else 0, (0.001 * (s + 1),)) for s in range(15)]
    got = windows(slices)
    assert [w["start"] for w in got] == [0, 10]
    assert (got[0]["sent"], got[0]["lost"], got[1]["sent"], got[1]["lost"]) == (100, 0, 50, 5)
    assert got[0]["p50_ms"] == 5.0 and got[0]["p99_ms"] == 10.0
    assert windows([]) == []
    assert windows([_slice(0, 10, 10)])[0]["p50_ms"] is None  # all lost: no latency


def test_capacity_is_the_first_second_after_the_jump_from_which_ten_lose_little() -> None:
    lost = [0] * 5 + [50] * 4 + [0] * 3 + [50] + [0] * 10   # jump at 5; good from 13
    slices = [_slice(s, 100, n) for s, n in enumerate(lost)]
    assert capacity_seconds(slices, 5) == 8
    assert capacity_seconds(slices, None) is None
    assert capacity_seconds(slices[:20], 5) is None      # not ten good seconds before the end
    gap = [p for p in slices if p.second != 16]           # a second dnsperf gave nothing for
    assert capacity_seconds(gap, 5) is None
    assert capacity_seconds([], 5) is None
    assert capacity_seconds(slices, 5, until=22) is None  # the good run ends after the load
    assert capacity_seconds(slices, 5, until=23) == 8


def test_a_run_that_never_copes_has_no_capacity_when_the_load_goes_back() -> None:
    lost = [0] * 5 + [50] * 10 + [0] * 20                  # the load back down at 15
    slices = [_slice(s, 100, n) for s, n in enumerate(lost)]
    assert capacity_seconds(slices, 5) == 10
    assert capacity_seconds(slices, 5, until=15) is None


def test_replica_seconds_hold_each_sample_until_the_next_from_zero_to_the_end() -> None:
    samples = [Sample(-3.0, 1, 1), Sample(10.0, 3, 1), Sample(12.0, 3, 3), Sample(50.0, 1, 1)]
    assert replica_seconds(samples, 40) == 1 * 10 + 3 * 30
    assert replica_seconds(samples, 40, ready=True) == 1 * 12 + 3 * 28
    assert replica_seconds([], 40) == 0.0
    assert replica_seconds([Sample(5.0, 2, 2)], 10) == 20  # the first holds from 0


def test_changes_keep_the_first_sample_and_each_change() -> None:
    samples = [Sample(0.4, 1, 1), Sample(1.4, 1, 1), Sample(2.4, 2, 1), Sample(3.4, 2, 2)]
    assert changes(samples) == [[0.4, 1, 1], [2.4, 2, 1], [3.4, 2, 2]]


def test_summarize_totals_a_run() -> None:
    slices = [_slice(0, 100, 0, (0.001,)), _slice(1, 100, 20, (0.002,))]
    got = summarize(slices, [Sample(0.0, 1, 1)], 2, 1)
    assert (got["sent"], got["lost"], got["lost_percent"]) == (200, 20, 10.0)
    assert got["replica_seconds"] == 2 and got["peak_replicas"] == 1
    assert got["capacity_seconds"] is None and got["lost_per_second"] == [0, 20]


def test_our_daemons_decisions_are_read_from_its_timestamped_logs() -> None:
    t0 = parse_time("2026-12-07T07:00:00Z")
    logs = ("2026-12-07T07:00:12.123456789Z ts=x level=info event=scale.changed "
            'target="deployment/coredns" old=1 new=2 proportional=1 load=2\n'
            "2026-12-07T07:00:13Z event=load.panic.started ready=1\n"
            "2026-12-07T07:00:14Z event=poll.done\n"
            "unstamped event=scale.changed old=2 new=3\n"
            "not a log line at all\n")
    assert autoscaler_events(logs, t0) == [
        {"seconds": 12.1, "event": "scale.changed", "old": "1", "new": "2",
         "proportional": "1", "load": "2"},
        {"seconds": 13.0, "event": "load.panic.started", "ready": "1"}]


def test_the_plot_bins_lost_queries_into_means_drawn_as_steps() -> None:
    from bench.dnsplot import _binned, _steps

    assert _binned([2, 4, 6], 2) == ([0, 2, 3], [3.0, 6.0, 6.0])
    assert _binned([], 2) == ([], [])
    assert _steps([[-1.0, 1, 1], [5.0, 3, 1]], 10) == ([0.0, 5.0, 10], [1, 3, 3])
    assert _steps([], 10) == ([], [])


def test_the_goal_compares_the_load_axis_with_the_hpa_and_upstream_with_ours() -> None:
    from bench.dnssummary import goal

    runs: dict[str, dict[str, Any]] = {
        "upstream": {"lost_percent": 51.6}, "ours": {"lost_percent": 51.4},
            "ours_load": {"lost": 30, "replica_seconds": 1000, "capacity_seconds": 26},
            "hpa": {"lost": 90, "replica_seconds": 2000, "capacity_seconds": 21}}
    assert goal(runs) == {"lost_load_over_hpa": 0.333, "replica_seconds_load_over_hpa": 0.5,
                          "lost_at_most_a_third": True, "replica_seconds_no_more": True,
                          "capacity_within_10_s": False,
                          "lost_percent_upstream_vs_ours": [51.6, 51.4]}
    runs["hpa"]["lost"] = 0           # the HPA lost nothing: no share, not met
    runs["ours_load"]["capacity_seconds"] = None
    got = goal(runs)
    assert got["lost_load_over_hpa"] is None and not got["lost_at_most_a_third"]
    assert not got["capacity_within_10_s"]
    assert goal({}) == {}
