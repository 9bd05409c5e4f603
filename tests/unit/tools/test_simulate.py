"""`cpa simulate`: timelines in, the daemon's decisions out; clear errors for bad timelines."""

from __future__ import annotations

import builtins
import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cpa.tools.simulate import load_timeline, simulate, simulate_main, writes
from tests.fakes import FakeApi
from tests.unit.horizontal.daemon.test_autoscaler import CM, COREDNS, make

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "simulate"
WINDOW = json.dumps({"linear": '{"nodesPerReplica":16,"behavior":{"scaleDown":'
                               '{"stabilizationWindowSeconds":600}}}'})
PLAIN = json.dumps({"linear": '{"nodesPerReplica":16}'})
FLAP_CSV = "t,nodes,cores\n0,30,240\n30,34,272\n60,30,240\n90,34,272\n120,30,240\n700,30,240\n"


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = simulate_main(args)
    out, err = capsys.readouterr()
    return code, out, err


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_text_table_with_and_without_behavior(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    timeline = write(tmp_path, "t.csv", FLAP_CSV)
    code, out, _ = run(["--timeline", timeline, "--data", WINDOW], capsys)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["t", "nodes", "cores", "desired", "replicas", "reason"]
    table = [line.split(None, 5) for line in lines[1:-1]]
    assert [(r[3], r[4]) for r in table] == [("2", "2"), ("3", "3"), ("2", "3"), ("3", "3"),
                                            ("2", "3"), ("2", "2")]
    assert "window 600 s" in table[2][5]
    assert lines[-1] == "2 scale writes from 2 replicas (without behavior: 4)."
    code, out, _ = run(["--timeline", timeline, "--data", PLAIN, "--all-rows"], capsys)
    rows = [line.split() for line in out.splitlines()[1:-1]]
    assert len(rows) == 6
    assert all(r[3] == r[4] for r in rows), "without behavior the formula's count is written"


def test_json_output_csv_and_json_timelines_agree(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    csv_path = write(tmp_path, "t.csv", FLAP_CSV)
    rows = [dict(zip(("t", "nodes", "cores"), map(int, line.split(",")), strict=True))
            for line in FLAP_CSV.splitlines()[1:]]
    json_path = write(tmp_path, "t.json", json.dumps(rows))
    _, from_csv, _ = run(["--timeline", csv_path, "--data", WINDOW, "-o", "json"], capsys)
    _, from_json, _ = run(["--timeline", json_path, "--data", WINDOW, "-o", "json"], capsys)
    assert from_csv == from_json
    doc = json.loads(from_csv)
    assert list(doc) == ["steps"]
    assert list(doc["steps"][0]) == ["t", "nodes", "cores", "desired", "replicas", "reason"]
    assert doc["steps"][2] == {"t": 60, "nodes": 30, "cores": 240, "desired": 2,
                               "replicas": 3, "reason": doc["steps"][2]["reason"]}


def test_start_replicas_and_schedulable_columns(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    timeline = write(tmp_path, "t.csv", "t,nodes,cores,schedulable_nodes\n0,40,160,20\n"
                                        "10,40,160,40\n")
    data = json.dumps({"linear": '{"nodesPerReplica":10,"behavior":{"scaleUp":{"policies":'
                                 '[{"type":"Pods","value":1,"periodSeconds":60}]}}}'})
    _, out, _ = run(["--timeline", timeline, "--data", data, "-o", "json",
                     "--start-replicas", "1"], capsys)
    steps = json.loads(out)["steps"]
    assert [(s["desired"], s["replicas"]) for s in steps] == [(2, 2), (4, 2)]
    _, out, _ = run(["--timeline", timeline, "--data", data, "-o", "json"], capsys)
    assert [s["replicas"] for s in json.loads(out)["steps"]] == [2, 3]


@pytest.mark.parametrize(("text", "fragment"), [
    ("t,nodes,cores\n0,3,12\n0,4,16\n", "t must increase from row to row; t 0 comes after t 0"),
    ("t,nodes,cores\n10,3,12\n5,4,16\n", "t 5 comes after t 10"),
    ("t,nodes\n0,3\n", "the CSV header must name t, nodes and cores"),
    ("t,nodes,cores\n0,-3,12\n", "line 2: nodes is -3; it cannot be negative"),
    ("t,nodes,cores\n0,2.5,12\n", "line 2: nodes is 2.5; give a whole number"),
    ("t,nodes,cores\n0,3,1.5\n", None),  # cores are a quantity, as in cpa explain
    ("t,nodes,cores\n0,3,3920m\n", None),
    ("t,nodes,cores\n0,3,-1\n", "cores is -1; it cannot be negative"),
    ("t,nodes,cores\n0,3,1e400\n", "cores is 1e400, more than 9223372036854775807 cores"),
    ("t,nodes,cores\n0,99999999999999999999,1\n",
     "nodes is 99999999999999999999, more than 9223372036854775807"),
    ("t,nodes,cores,schedulable_cores\n0,3,4,4001m\n", "more schedulable than total"),
    ("t,nodes,cores\n0,3,x\n", "cores is 'x', not a number of cores"),
    ("t,nodes,cores\n0,3,\n", "cores is missing"),
    ("t,nodes,cores\n0,3,12,9\n", "more cells than columns"),
    ("t,nodes,cores,node\n0,3,12,1\n", "unknown column 'node'"),
    ("t,nodes,cores,schedulable_nodes\n0,3,12,4\n", "more schedulable than total"),
    ("t,nodes,cores\n", "the timeline has no rows"),
    ("t,nodes,cores\nnan,3,12\n", "give a finite number"),
    ('[{"t":0,"nodes":3}]', "item 0: missing column 'cores'"),
    ('[{"t":0,"nodes":3,"cores":true}]', "cores is True; give a number"),
    ('[{"t":0,"nodes":3,"cores":"12"}]', None),  # a string that is a number is fine
    ('{"t":0}', "a JSON timeline is a list of objects"),
    ("[1,2]", "a JSON timeline is a list of objects"),
    ("[{", "not valid JSON"),
    ("[]", "the timeline has no rows"),
])
def test_bad_timelines_are_one_line_exit_1(text: str, fragment: str | None, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    timeline = write(tmp_path, "t.txt", text)
    code, out, err = run(["--timeline", timeline, "--data", PLAIN], capsys)
    if fragment is None:
        assert code == 0, err
        return
    assert code == 1, out
    assert err.startswith("cpa simulate: ") and fragment in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    code, out, _ = run(["--timeline", timeline, "--data", PLAIN, "-o", "json"], capsys)
    assert code == 1 and fragment in json.loads(out)["error"]


@pytest.mark.parametrize(("args", "fragment"), [
    (["--timeline", "/nonexistent/t.csv", "--data", PLAIN], "cannot read /nonexistent/t.csv"),
    (["--timeline", "{t}"], "give the parameters: --data, --configmap-file or --default-params"),
    (["--timeline", "{t}", "--data", PLAIN, "--compare"], "give --plot FILE.png too"),
    (["--timeline", "{t}", "--data", PLAIN, "--start-replicas", "-1"], "cannot be negative"),
    (["--timeline", "{t}", "--data", json.dumps({"linear": '{"nodesPerReplica":16,'
                                                           '"behavior":{"scaleUp":[]}}'})],
     "invalid parameters from --data"),
    (["--timeline", "{t}", "--data", json.dumps({"linear": '{"nodesPerReplica":1,'
                                                           '"min":2147483648}'})],
     "t 0: the parameters give 2147483648 replicas"),
])
def test_bad_flags(args: list[str], fragment: str, tmp_path: Path,
                   capsys: pytest.CaptureFixture[str]) -> None:
    timeline = write(tmp_path, "t.csv", FLAP_CSV)
    code, _, err = run([a.replace("{t}", timeline) for a in args], capsys)
    assert code == 1 and fragment in err and "Traceback" not in err, err


def test_simulate_is_what_the_daemon_does() -> None:
    """The committed example timeline through simulate and through the real poll loop (fake
    API, the timeline's t as the clock): the same writes, poll for poll."""
    rows = load_timeline(str(EXAMPLE / "flapping-timeline.csv"))[::3]
    data = {"linear": '{"nodesPerReplica":16,"coresPerReplica":256,'
                      '"preventSinglePointFailure":true,"behavior":{"scaleDown":'
                      '{"stabilizationWindowSeconds":600,"policies":[{"type":"Percent",'
                      '"value":33,"periodSeconds":180}]},"scaleUp":{"policies":'
                      '[{"type":"Pods","value":2,"periodSeconds":120}]}}}'}
    from cpa.horizontal.decide.modes.registry import parse_configmap_data

    steps = simulate(parse_configmap_data(data), rows)
    api = FakeApi()
    api.add_scale(COREDNS, steps[0].desired)
    api.set_configmap(CM, data)
    now = [0.0]
    current = [rows[0].counts]
    autoscaler = make(api, lambda: current[0], clock=lambda: now[0])
    daemon = []
    for row in rows:
        now[0], current[0] = row.t, row.counts
        assert autoscaler.poll_once().error is None
        daemon.append(api.objects[COREDNS]["spec"]["replicas"])
    assert daemon == [s.replicas for s in steps]
    assert any(s.replicas != s.desired for s in steps), "the behavior did something"


def test_the_example_flaps_without_behavior_and_not_with_it() -> None:
    from cpa.horizontal.decide.modes.registry import parse_configmap_data
    from cpa.tools.inputs import data_from_file

    data, _origin = data_from_file(str(EXAMPLE / "kube-dns-autoscaler-behavior.yaml"))
    params = parse_configmap_data(data)
    rows = load_timeline(str(EXAMPLE / "flapping-timeline.csv"))
    with_behavior = simulate(params, rows)
    without = simulate(params, rows, with_behavior=False)
    downs = [b for a, b in itertools.pairwise(without) if b.replicas < a.replicas]
    assert len(downs) >= 10, "the example is a flapping cluster"
    start = with_behavior[0].desired
    assert writes(with_behavior, start) * 3 < writes(without, start), "no more flapping"
    flapping = [s for s in with_behavior if 30 * 60 <= s.t < 100 * 60]
    assert len({s.replicas for s in flapping}) == 1 < len({s.desired for s in flapping})
    assert max(s.replicas for s in with_behavior) == max(s.desired for s in with_behavior), \
        "scale-up still reaches the formula's peak"


def test_plot_draws_both_panels(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    timeline = write(tmp_path, "t.csv", FLAP_CSV)
    png = tmp_path / "out.png"
    code, _, err = run(["--timeline", timeline, "--data", WINDOW, "--plot", str(png),
                        "--compare"], capsys)
    assert code == 0, err
    data = png.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    single = tmp_path / "single.png"
    run(["--timeline", timeline, "--data", WINDOW, "--plot", str(single)], capsys)
    single_height = int.from_bytes(single.read_bytes()[20:24], "big")
    assert width == 1000 and height > single_height * 1.5, "two panels, one above the other"


def test_plot_without_matplotlib_is_a_clear_error(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    real_import = builtins.__import__

    def no_matplotlib(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("matplotlib"):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    timeline = write(tmp_path, "t.csv", FLAP_CSV)
    code, _, err = run(["--timeline", timeline, "--data", WINDOW, "--plot",
                        str(tmp_path / "x.png")], capsys)
    assert code == 1
    assert "--plot needs matplotlib: pip install 'cluster-proportional-autoscaler-py[plot]'" \
        in err
    assert not (tmp_path / "x.png").exists()


def test_the_cpa_command_runs_simulate(tmp_path: Path) -> None:
    timeline = write(tmp_path, "t.csv", "t,nodes,cores\n0,3,12\n5,2,12\n")
    proc = subprocess.run([sys.executable, "-m", "cpa", "simulate", "--timeline", timeline,
                           "--data", PLAIN, "-o", "json"], capture_output=True, text=True,
                          timeout=60, check=False, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads(proc.stdout)["steps"]) == 2
    usage = subprocess.run([sys.executable, "-m", "cpa", "--help"], capture_output=True,
                           text=True, timeout=60, check=False, cwd=REPO)
    assert "simulate  replay a timeline" in usage.stdout


# --- only what changed, and a plot that reads ---------------------------------------------


def _table(out: str) -> list[list[str]]:
    """The table's rows (without the header and the summary lines), split in columns."""
    rows = [line.split(None, 5) for line in out.splitlines()[1:]]
    return [row for row in rows if len(row) > 1 and row[1].isdigit()]


def test_the_text_shows_the_rows_where_something_changed(
        capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--timeline", str(EXAMPLE / "flapping-timeline.csv"), "--configmap-file",
            str(EXAMPLE / "kube-dns-autoscaler-behavior.yaml")]
    _, every, _ = run([*args, "--all-rows"], capsys)
    _, default, _ = run(args, capsys)
    all_rows = _table(every)
    assert len(all_rows) == 1080
    decided = [(r[3], r[4]) for r in all_rows]
    expected = [r for i, r in enumerate(all_rows) if i == 0 or decided[i] != decided[i - 1]]
    assert _table(default) == expected
    assert 2 < len(expected) < 100
    assert f"{len(expected)} of 1080 rows shown" in default
    assert "rows shown" not in every
    assert default.splitlines()[-1] == every.splitlines()[-1], "the same summary"


def test_changed_covers_the_load_axis() -> None:
    from cpa.tools.simulate import SimStep, changed

    def step(t: float, load: int | None, panic: bool = False) -> SimStep:
        return SimStep(t, 3, 12, 3, 3, "unchanged", proportional=3, load=load, panic=panic)

    assert changed([step(0, 2), step(1, 2), step(2, 4), step(3, 4, True), step(4, 4, True),
                    step(5, None)]) == [True, False, True, True, False, True]


def _axes_of(panels: list[tuple[str, Any]], start: int) -> Any:
    from cpa.tools.simulate import figure

    return figure(panels, start).axes


def test_the_plot_reads_as_it_says() -> None:
    """Every legend entry is something drawn (and everything drawn has one), the replica
    panels share one scale, the windows that held the replicas are marked, and the titles
    count the writes the text counts."""
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    from cpa.tools.inputs import data_from_file, parse_params

    for timeline, configmap, period in (
            ("flapping-timeline.csv", "kube-dns-autoscaler-behavior.yaml", 0.0),
            ("dns-load-timeline.csv", "kube-dns-autoscaler-load.yaml", 10.0)):
        params = parse_params(*data_from_file(str(EXAMPLE / configmap)))
        rows = load_timeline(str(EXAMPLE / timeline))
        steps = simulate(params, rows, poll_period=period)
        start = steps[0].desired
        other = simulate(params, rows, start, with_behavior=False, poll_period=period,
                         with_load=False)
        axes = _axes_of([("with", steps), ("upstream", other)], start)
        replica_axes = axes[1:]
        assert len({ax.get_ylim() for ax in replica_axes}) == 1, "one scale"
        for ax, panel in zip(replica_axes, (steps, other), strict=True):
            drawn = {line.get_label() for line in ax.get_lines()
                     if any(y == y for y in line.get_ydata())}  # not all NaN
            drawn |= {patch.get_label() for patch in ax.patches}
            legend = {text.get_text() for text in ax.get_legend().get_texts()}
            assert legend == drawn, (timeline, legend, drawn)
            assert ax.get_title(loc="left").endswith(f": {writes(panel, start)} scale writes")
        assert "held by a stabilization window" in {p.get_label()
                                                    for p in replica_axes[0].patches}
        assert not replica_axes[1].patches, "upstream has no behavior to hold anything"
        plt.close(replica_axes[0].figure)


def test_the_summary_counts_what_the_compared_panel_draws(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """With a load key the plot compares with the proportional count alone: the text names
    that count too, so the picture's title and the text agree."""
    code, out, err = run(["--timeline", str(EXAMPLE / "dns-load-timeline.csv"),
                          "--configmap-file", str(EXAMPLE / "kube-dns-autoscaler-load.yaml"),
                          "--poll-period-seconds", "10"], capsys)
    assert code == 0, err
    summary = next(line for line in out.splitlines() if "scale writes from" in line)
    assert "the proportional count alone, upstream's: 0)" in summary
    assert "without behavior: " in summary
