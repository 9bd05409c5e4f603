"""The load axis in ``cpa simulate`` (a qps column replayed through the windows), ``cpa
explain`` (its steps) and ``cpa advise``; the poll loop's is
tests/unit/horizontal/daemon/test_autoscaler_load.py's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cpa.kube.targets import Current, parse_targets
from cpa.tools.advise import Series, advise, advise_main
from cpa.tools.explain import explain_main
from cpa.tools.simulate import load_timeline, simulate, simulate_main
from tests.unit.configured import parse_linear
from tests.unit.horizontal.daemon.test_autoscaler_load import linear

# --- cpa simulate --------------------------------------------------------------------------

def timeline(tmp_path: Path, rates: list[str], step: int = 2) -> str:
    path = tmp_path / "t.csv"
    path.write_text("t,nodes,cores,qps\n" + "".join(
        f"{i * step},16,64,{q}\n" for i, q in enumerate(rates)))
    return str(path)


def test_simulate_replays_the_windows(tmp_path: Path) -> None:
    rates = ["100"] * 10 + ["2000"] * 5 + ["100"] * 30
    rows = load_timeline(timeline(tmp_path, rates))
    steps = simulate(parse_linear(linear()), rows)
    by_t = {s.t: s for s in steps}
    assert by_t[0].replicas == 1 and by_t[18].load == 1  # 100/s at 100 per replica
    surge = next(s for s in steps if s.panic)
    assert surge.t == 20 and surge.replicas == 9  # panic at once, capped by max 9
    # no scale-down in panic: 9 until the panic ends a stable window after the surge
    ended = next(s for s in steps if s.t > 20 and not s.panic)
    assert all(s.replicas == 9 for s in steps if 20 <= s.t < ended.t)
    assert ended.t > 28 + 20 and ended.replicas == 1
    assert all(s.replicas >= s.proportional for s in steps if s.proportional is not None)


def test_simulate_poll_period_and_gaps(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    path = timeline(tmp_path, ["100", "", "300", "300", "", "300", "300", "300"])
    data = json.dumps({"linear": linear()})
    assert simulate_main(["--timeline", path, "--data", data,
                          "--poll-period-seconds", "4", "--all-rows"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["t", "nodes", "cores", "qps", "proportional", "load", "mode",
                              "desired", "replicas", "reason"]
    assert [line.split()[0] for line in out[1:-2]] == ["0", "4", "8", "12"]
    assert out[2].split()[3] == "300" and out[-1].startswith("0.0")
    assert "replica-hours written" in out[-1]


def test_simulate_needs_a_qps_column_for_a_load_key(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.csv"
    path.write_text("t,nodes,cores\n0,1,1\n")
    assert simulate_main(["--timeline", str(path), "--data",
                          json.dumps({"linear": linear()})]) == 1
    assert "give the timeline a qps (or rate) column" in capsys.readouterr().err
    path.write_text("t,nodes,cores,qps\n0,1,1,-3\n")
    assert simulate_main(["--timeline", str(path), "--data",
                          json.dumps({"linear": linear()})]) == 1
    assert "give a rate of 0 or more" in capsys.readouterr().err


# --- cpa explain ---------------------------------------------------------------------------

def test_explain_shows_the_load_axis(capsys: pytest.CaptureFixture[str]) -> None:
    data = json.dumps({"linear": linear()})
    assert explain_main(["--data", data, "--nodes", "16", "--cores", "64",
                         "--stable-rate", "300", "--panic-rate", "800",
                         "--ready-pods", "2", "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["replicas"], doc["proportional"], doc["load"]) == (8, 1, 8)
    keys = [s["key"] for s in doc["steps"]]
    assert keys.index("load.stable") < keys.index("load.panic") < keys.index("load.combine")
    assert "load.history" in keys
    assert explain_main(["--data", data, "--nodes", "16", "--cores", "64"]) == 0
    assert "The parameters have a load key, not shown" in capsys.readouterr().out
    plain = json.dumps({"linear": json.dumps({"nodesPerReplica": 16})})
    assert explain_main(["--data", plain, "--nodes", "1", "--cores", "1",
                         "--stable-rate", "5"]) == 1
    assert "parameters with a load key" in capsys.readouterr().err


def test_explain_says_what_to_do_when_the_pods_are_out_of_reach(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """From a workstation the measuring scrape cannot reach the Pods' IPs: the message says
    that and names --stable-rate, which measures nothing."""
    import argparse

    from cpa.horizontal.scrape import scraper as scraper_module
    from cpa.tools import explain as explain_module
    from cpa.tools.inputs import InputError, parse_params

    class Unreachable:
        def __init__(self, *_args: object) -> None:
            pass

        def scrape_once(self) -> None:
            return None

        def status(self) -> object:
            return argparse.Namespace(fault="no Ready Pod answered (2 timed out)")

    monkeypatch.setattr(scraper_module, "Scraper", Unreachable)
    monkeypatch.setattr(explain_module, "_connect", lambda _args: None)
    monkeypatch.setattr("time.sleep", lambda _seconds: None)
    params = parse_params({"linear": linear()}, "test")
    view = explain_module.TargetView(parse_targets("deployment/coredns")[0][0],
                                     Current(3))
    args = argparse.Namespace(namespace="kube-system")
    with pytest.raises(InputError) as caught:
        explain_module._measure(args, params, view)
    message = str(caught.value)
    assert "no Ready Pod answered (2 timed out)" in message
    assert "outside the cluster" in message and "--stable-rate RATE" in message


# --- cpa advise ----------------------------------------------------------------------------

def test_advise_finds_fewer_replica_hours_within_the_bound() -> None:
    times = [float(t) for t in range(0, 3600, 2)]
    rates: list[float | None] = [2000.0 if 1200 <= t < 1800 else 200.0 for t in times]
    found, fixed = advise(Series(times, rates), bound=500, startup=0, poll_period=2,
                          tolerance=1.0)
    best = found[0]
    assert fixed == 4
    assert best.over_seconds <= 36 and best.replica_hours < fixed * 1.0
    assert best.peak_replicas >= 4


def test_advise_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = timeline(tmp_path, ["200"] * 100 + ["3000"] * 50 + ["200"] * 100)
    assert advise_main(["--timeline", path, "--max-per-replica", "1000",
                        "--tolerance-percent", "5", "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "settings replayed" in out and '"load": {"targetPerReplica"' in out
    assert advise_main(["--timeline", path, "--max-per-replica", "1000", "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["fixed_replicas"] == 3 and len(doc["candidates"]) == 10
    assert advise_main(["--max-per-replica", "5"]) == 1
    assert "--timeline FILE or --prometheus-url" in capsys.readouterr().err
    assert advise_main(["--prometheus-url", "nope", "--query", "x",
                        "--max-per-replica", "5"]) == 1
    assert "base URL" in capsys.readouterr().err
