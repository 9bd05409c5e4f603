"""``cpa simulate`` with the Pods and Services axes (ours): ``pods``/``services`` columns,
used by parameters that count them, ignored by those that do not; bad cells are one line
that names the row and the column."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cpa import redact
from cpa.tools.simulate import simulate_main


@pytest.fixture(autouse=True)
def _no_remembered_credentials() -> None:
    """Other tests in this process remember credentials (a token file holding "second"),
    which the tools scrub from what they print: this output is checked to the letter."""
    redact.forget_all()

AXES = json.dumps({"linear": '{"nodesPerReplica":16,"podsPerReplica":1000,'
                             '"servicesPerReplica":100}'})
PODS = json.dumps({"linear": '{"nodesPerReplica":16,"podsPerReplica":1000}'})
LADDER = json.dumps({"ladder": '{"nodesToReplicas":[[0,1]],"podsToReplicas":[[0,1],'
                               '[5000,4]]}'})
PLAIN = json.dumps({"linear": '{"nodesPerReplica":16}'})
TIMELINE = "t,nodes,cores,pods,services\n0,10,40,3000,150\n60,10,40,9000,150\n" \
           "120,10,40,9000,1250\n"


def run(tmp_path: Path, text: str, data: str, capsys: pytest.CaptureFixture[str],
        *extra: str) -> tuple[int, str, str]:
    path = tmp_path / "t.csv"
    path.write_text(text)
    code = simulate_main(["--timeline", str(path), "--data", data, *extra])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(("data", "desired", "shown"), [
    (AXES, [3, 9, 13], ["pods", "services"]),  # the largest axis wins
    (PODS, [3, 9, 9], ["pods"]),  # only the counted kind is shown
    (LADDER, [1, 4, 4], ["pods"]),
    (PLAIN, [1, 1, 1], []),  # without the keys the columns change nothing
])
def test_the_axes_use_the_columns(data: str, desired: list[int], shown: list[str],
                                  tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(tmp_path, TIMELINE, data, capsys, "-o", "json")
    assert code == 0, err
    steps = json.loads(out)["steps"]
    assert [s["desired"] for s in steps] == desired
    assert [k for k in ("pods", "services") if k in steps[0]] == shown
    code, out, _ = run(tmp_path, TIMELINE, data, capsys, "--all-rows")
    header = out.splitlines()[0].split()
    assert header == ["t", "nodes", "cores", *shown, "desired", "replicas", "reason"]


def test_without_the_columns_nothing_changes(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    plain = "t,nodes,cores\n0,10,40\n60,40,160\n"
    with_columns = "t,nodes,cores,pods,services\n0,10,40,1,1\n60,40,160,1,1\n"
    _, before, _ = run(tmp_path, plain, PLAIN, capsys, "-o", "json")
    _, after, _ = run(tmp_path, with_columns, PLAIN, capsys, "-o", "json")
    assert before == after
    assert list(json.loads(before)["steps"][0]) == ["t", "nodes", "cores", "desired",
                                                    "replicas", "reason"]


@pytest.mark.parametrize(("text", "data", "fragment"), [
    ("t,nodes,cores\n0,3,12\n", PODS,
     "t 0: the parameters have a pods axis: give the timeline a pods column"),
    ("t,nodes,cores,pods\n0,3,12,5\n", AXES,
     "t 0: the parameters have a services axis: give the timeline a services column"),
    ("t,nodes,cores,pods\n0,3,12,5\n60,3,12,\n", PODS, "t 60: the parameters have a pods"),
    ("t,nodes,cores,pods\n0,3,12,-5\n", PODS, "line 2: pods is -5; it cannot be negative"),
    ("t,nodes,cores,services\n0,3,12,-1\n", PLAIN, "services is -1; it cannot be negative"),
    ("t,nodes,cores,pods\n0,3,12,many\n", PODS, "line 2: pods is 'many', not a number"),
    ("t,nodes,cores,pods\n0,3,12,12.5\n", PODS, "pods is 12.5; give a whole number"),
    ("t,nodes,cores,pods\n0,3,12,inf\n", PODS, "pods is inf; give a finite number"),
    ("t,nodes,cores,pods\n0,3,12,nan\n", PODS, "pods is nan; give a finite number"),
    ("t,nodes,cores,pods\n0,3,12,1e400\n", PODS,
     "pods is 1e400, more than 9223372036854775807"),
    ("t,nodes,cores,pods\n0,3,12,99999999999999999999999\n", PODS,
     "more than 9223372036854775807; give at most"),
    ("t,nodes,cores,pods\n0,3,12,9223372036854775807\n", PODS,  # counted, too many replicas
     "t 0: the parameters give 9223372036854776 replicas, more than a scale subresource"),
    ('[{"t":0,"nodes":3,"cores":12,"pods":true}]', PODS, "item 0: pods is True; give a"),
    ('[{"t":0,"nodes":3,"cores":12,"pods":[1]}]', PODS, "item 0: pods is [1], not a number"),
    ('[{"t":0,"nodes":3,"cores":12,"pods":"7000"}]', PODS, None),  # a number as text is fine
    ('[{"t":0,"nodes":3,"cores":12,"pods":7e3}]', PODS, None),
    ("t,nodes,cores,pod\n0,3,12,5\n", PODS, "unknown column 'pod'"),
])
def test_bad_cells_are_one_line_exit_1(text: str, data: str, fragment: str | None,
                                       tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(tmp_path, text, data, capsys)
    if fragment is None:
        assert code == 0, err
        assert out.splitlines()[1].split()[3] == "7000"
        return
    assert code == 1, out
    assert err.startswith("cpa simulate: ") and fragment in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
