"""The command line without sharp edges: help everywhere, one-line errors with the right
exit code, quiet broken pipes, exact numbers, the project's own manifests as input, and one
validator of counts for explain and simulate."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpa.cli import main, run_daemon
from cpa.tools.explain import explain_main
from cpa.tools.inputs import InputError, cluster_counts, data_from_file
from cpa.tools.simulate import load_timeline

REPO = Path(__file__).resolve().parents[2]
PLAIN = json.dumps({"linear": '{"nodesPerReplica":16}'})
NODES = ["--nodes", "3", "--cores", "12"]


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err and "Error:" not in err, err
    return lines[0]


# --- help ----------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [["-h"], ["--help"], ["help"], ["run", "-h"],
                                  ["run", "--help"], ["explain", "-h"], ["simulate", "--help"],
                                  ["help", "explain"], ["help", "simulate"], ["help", "run"]])
def test_help_everywhere(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert out.strip() and not err
    assert ("usage" in out.lower())


def test_daemon_dash_h_is_help(capsys: pytest.CaptureFixture[str]) -> None:
    """pflag answers -h with the usage; it used to be "unknown shorthand flag"."""
    assert run_daemon(["-h"]) == 0
    assert "--default-params" in capsys.readouterr().out


def test_cpa_without_a_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    out, err = capsys.readouterr()
    assert not out and "usage: cpa" in err


# --- flag syntax: one line, exit 2 ---------------------------------------------------


@pytest.mark.parametrize("argv", [
    ["explain", "--output", "yaml"], ["explain", "--frobnicate"], ["explain", "--data"],
    ["simulate"], ["simulate", "--timeline"], ["simulate", "--timeline", "x", "--nope=1"],
    ["run", "--nope"], ["run", "-x"], ["run", "--poll-period-seconds=ten"], ["nope"],
])
def test_flag_syntax_errors_are_one_line_exit_2(argv: list[str],
                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert not out
    line = one_line(err)
    assert line.startswith("cpa") and "see --help" in line


# Python's and argparse's own phrases: a message in them is not in the project's words.
PYTHONS_WORDS = ("invalid literal", "invalid int value", "invalid choice", "unrecognized "
                 "arguments", "the following arguments", "expected one argument",
                 "ignored explicit argument", "argument --")


@pytest.mark.parametrize(("argv", "nearest"), [
    (["explain", "--node", "40"], "--nodes"),
    (["explain", "--cor=4", "--nodes=3"], "--cores"),
    (["explain", "--verticl"], "--vertical"),
    (["simulate", "--timline", "x"], "--timeline"),  # before "--timeline is required"
    (["simulate", "--timeline", "x", "--all-row"], "--all-rows"),
    (["advise", "--max-per-replca", "3"], "--max-per-replica"),
    (["advise", "--hepl"], "--help"),
    (["explain", "--vertical", "--nodse", "3"], "--nodes"),  # explain's own flag
    (["explain", "--vertical", "--targt", "x"], "--target"),  # /cpvpa's flag
    (["run", "--node", "3"], "--nodelabels"),
])
def test_every_command_names_the_nearest_flag(argv: list[str], nearest: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    line = one_line(capsys.readouterr().err)
    assert "unknown flag: " in line and "did you mean" in line, line
    assert nearest in line.split("did you mean", 1)[1], line


@pytest.mark.parametrize(("argv", "words"), [
    (["explain", "-o", "yaml"], "--output 'yaml': give text or json"),
    (["simulate", "--timeline", "x", "--output=csv"], "--output 'csv': give text or json"),
    (["explain", "--nodes"], "flag needs an argument: --nodes"),
    (["explain", "--vertical", "--cores"], "flag needs an argument: --cores"),
    (["advise", "--timeline"], "flag needs an argument: --timeline"),
    (["explain", "--from-cluster=yes"], "--from-cluster takes no value (given 'yes')"),
    (["simulate", "--data", "{}"], "--timeline is required"),
    (["explain", "nodes=3"], "unexpected argument 'nodes=3'"),
])
def test_flag_errors_are_in_our_words(argv: list[str], words: str,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    line = one_line(capsys.readouterr().err)
    assert words in line
    assert not [phrase for phrase in PYTHONS_WORDS if phrase in line], line


def test_vertical_counts_are_checked_in_our_words(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "--vertical", "--nodes=abc", "--cores=1",
                 "--default-config={}"]) == 1
    line = one_line(capsys.readouterr().err)
    assert "--nodes is 'abc', not a number" in line
    assert not [phrase for phrase in PYTHONS_WORDS if phrase in line], line


@pytest.mark.parametrize("command", ["explain", "simulate", "advise"])
def test_help_lists_every_flag_and_only_those(command: str, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """The help is the parser's own, and no flag's help names a flag the command lacks
    (simulate's once named explain's --from-cluster)."""
    import re

    from cpa.tools import advise, simulate
    from cpa.tools import explain as explain_module
    module = {"explain": explain_module, "simulate": simulate, "advise": advise}[command]
    known = {f"--{name}" for name in module._parser().known_flags()} - {"--help"}
    monkeypatch.setenv("COLUMNS", "1000")  # no flag name broken at its hyphen
    assert main([command, "--help"]) == 0
    text = capsys.readouterr().out
    named = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*[a-z]", text)) - {"--help"}
    # Help may name the daemon's flag --default-params and explain's --vertical mode.
    assert named - known == set(), named - known
    assert known - named == set(), known - named


def test_explain_help_lists_vertical(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "--help"]) == 0
    assert "--vertical" in capsys.readouterr().out
    assert main(["explain", "--vertical", "--help"]) == 0
    assert "--default-config" in capsys.readouterr().out


# --- input errors: one line, exit 1 --------------------------------------------------


def explain(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["explain", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(("argv", "fragment"), [
    (["--data", PLAIN, "--nodes", "3", "--cores", "1e400"],
     "--cores is 1e400, more than 9223372036854775807 cores"),
    (["--data", PLAIN, "--nodes", "1e400", "--cores", "1"], "--nodes is 1e400, more than"),
    (["--data", PLAIN, "--nodes", "3", "--cores", "nan"], "--cores is 'nan', not a number"),
    (["--data", PLAIN, "--nodes", "3.5", "--cores", "1"], "--nodes is 3.5; give a whole"),
    (["--data", PLAIN, "--nodes", "3", "--cores", "12", "--schedulable-nodes", "5"],
     "more schedulable than total: --schedulable-nodes is 5, --nodes 3"),
    (["--data", PLAIN, "--nodes", "3", "--cores", "1", "--schedulable-cores", "1001m"],
     "more schedulable than total: --schedulable-cores is 1001m"),
    (["--data", PLAIN, *NODES, "--current-replicas", "99999999999999999999"],
     "--current-replicas is 99999999999999999999, more than 2147483647"),
])
def test_bad_counts_are_one_line(argv: list[str], fragment: str,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = explain(argv, capsys)
    assert code == 1 and not out
    assert fragment in one_line(err)


def test_huge_counts_are_exact_in_messages(capsys: pytest.CaptureFixture[str]) -> None:
    data = json.dumps({"linear": '{"nodesPerReplica":1,"min":9223372036854775807}'})
    code, out, _ = explain(["--data", data, *NODES], capsys)
    assert code == 1
    assert "9223372036854775808 replicas" in out and "9223372036854776000" not in out


def test_non_utf8_files_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes("data:\n  linear: '{}' # caf\xe9\n".encode("latin-1"))
    code, _, err = explain(["--configmap-file", str(bad), *NODES], capsys)
    assert code == 1
    assert "is not UTF-8 text (byte 26 is 0xe9); save it as UTF-8" in one_line(err)
    assert main(["simulate", "--timeline", str(bad), "--data", PLAIN]) == 1
    assert "--timeline: " in one_line(capsys.readouterr().err)


def test_a_path_no_file_can_have_is_one_line(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """A NUL in a file's name (a generated command line found it): one line, exit 1, not an
    internal error."""
    timeline = tmp_path / "t.csv"
    timeline.write_text("t,nodes,cores\n0,1,1\n")
    assert main(["simulate", "--timeline", str(timeline), "--configmap-file", "a\x00b"]) == 1
    err = one_line(capsys.readouterr().err)
    assert "--configmap-file: cannot read 'a\\x00b': embedded null byte" in err
    assert "internal error" not in err
    code, _, err = explain(["--configmap-file", "\x00", *NODES], capsys)
    assert code == 1 and "internal error" not in err and "embedded null byte" in err


def test_plot_to_a_text_file_is_refused_before_any_work(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    timeline = tmp_path / "t.csv"
    timeline.write_text("t,nodes,cores\n0,3,12\n")
    out_file = tmp_path / "out.txt"
    assert main(["simulate", "--timeline", str(timeline), "--data", PLAIN, "--plot",
                 str(out_file)]) == 1
    out, err = capsys.readouterr()
    assert not out and not out_file.exists()
    assert "the file name ends in .txt" in one_line(err) and ".png" in err


def test_an_unexpected_error_is_one_line_asking_for_a_report(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import cpa.tools.explain as explain_module

    def broken(*_args: object) -> None:
        raise KeyError("surprise")

    monkeypatch.setattr(explain_module, "decide", broken)
    code, _, err = explain(["--data", PLAIN, *NODES], capsys)
    line = one_line(err)
    assert code == 1
    assert line.startswith("cpa explain: internal error at cpa/tools/explain.py:")
    assert "'surprise'" in line and "please report" in line and "KeyError" not in line


# --- broken pipes --------------------------------------------------------------------


def _cpa(*args: str) -> list[str]:
    exe = shutil.which("cpa")
    return [exe, *args] if exe else [sys.executable, "-m", "cpa", *args]


@pytest.mark.parametrize("argv", [
    _cpa("run", "--help"), _cpa("--help"),
    _cpa("explain", "--data", PLAIN, *NODES, "-o", "json"),
    _cpa("simulate", "--timeline", str(REPO / "examples/simulate/flapping-timeline.csv"),
         "--configmap-file", str(REPO / "examples/simulate/kube-dns-autoscaler-behavior.yaml")),
], ids=["run-help", "cpa-help", "explain", "simulate"])
def test_a_closed_pipe_is_quiet(argv: Sequence[str]) -> None:
    """`cpa ... | head -1`: the reader is gone before the first write."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run(argv, stdout=write_end, stderr=subprocess.PIPE, timeout=60,
                              check=False)
    finally:
        os.close(write_end)
    assert proc.stderr == b"" and proc.returncode == 0


def test_head_of_the_output_is_quiet() -> None:
    """The README's pipe, in a shell with pipefail: one line out, nothing on stderr."""
    command = " ".join(_quote(a) for a in _cpa(
        "simulate", "--timeline", str(REPO / "examples/simulate/flapping-timeline.csv"),
        "--configmap-file", str(REPO / "examples/simulate/kube-dns-autoscaler-behavior.yaml")))
    shell = subprocess.run(["bash", "-o", "pipefail", "-c", f"{command} | head -1"],
                           capture_output=True, text=True, timeout=60, check=False)
    assert shell.returncode == 0, shell.stderr
    assert shell.stderr == "" and len(shell.stdout.splitlines()) == 1


def _quote(arg: str) -> str:
    return "'" + arg.replace("'", "'\\''") + "'"


# --- --configmap-file: the project's own files ---------------------------------------

MANIFESTS = sorted([*REPO.glob("manifests/*.yaml"), *REPO.glob("manifests/examples/*.yaml"),
                    *REPO.glob("examples/**/*.yaml")])


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_project_manifest_with_parameters_explains(
        path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = path.read_text()
    has_params = "kind: ConfigMap" in text or "--default-params" in text
    code, out, err = explain(["--configmap-file", str(path), "--nodes", "40", "--cores",
                              "160", "--pods", "3000", "--services", "400"], capsys)
    if not has_params:
        assert code == 1 and "has no ConfigMap" in one_line(err)
        return
    assert code == 0, err
    assert out.rstrip().splitlines()[-1].startswith("=> ")


def test_kustomization_is_not_a_configmap(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = explain(["--configmap-file", str(REPO / "manifests/kustomization.yaml"),
                            *NODES], capsys)
    assert code == 1 and "has no ConfigMap" in err


def test_several_configmaps_need_a_name(tmp_path: Path) -> None:
    path = tmp_path / "two.yaml"
    path.write_text("kind: ConfigMap\nmetadata: {name: a}\ndata: {linear: '{\"min\": 1}'}\n"
                    "---\n"
                    "kind: ConfigMap\nmetadata: {name: b}\ndata: {ladder: '{}'}\n")
    with pytest.raises(InputError, match=r"2 ConfigMaps \('a', 'b'\): pick one with "
                                         r"--configmap NAME"):
        data_from_file(str(path))
    assert data_from_file(str(path), "b") == ({"ladder": "{}"}, str(path))
    with pytest.raises(InputError, match="no ConfigMap named 'c'"):
        data_from_file(str(path), "c")


def test_a_list_and_a_deployment_with_defaults(tmp_path: Path) -> None:
    listed = tmp_path / "list.json"
    listed.write_text(json.dumps({"kind": "List", "items": [
        {"kind": "ServiceAccount", "metadata": {"name": "x"}},
        {"kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"linear": "{}"}}]}))
    assert data_from_file(str(listed))[0] == {"linear": "{}"}
    data, origin = data_from_file(str(REPO / "manifests/kube-dns-autoscaler.yaml"))
    assert data is not None and json.loads(data["linear"])["nodesPerReplica"] == 16
    assert "--default-params of the autoscaler" in origin


# --- one validator of counts ---------------------------------------------------------

_count = st.one_of(st.integers(-3, 2**64).map(str), st.sampled_from(
    ["", "0", "3920m", "1.5", "1e3", "1e400", "-0", "2k", "1Ki", "x", "nan", "inf", "3.0",
     " 7 ", "0.0001", "100n"]))


@settings(max_examples=300, deadline=None)
@given(_count, _count, st.one_of(st.none(), _count), st.one_of(st.none(), _count))
def test_explain_and_simulate_accept_the_same_counts(
        nodes: str, cores: str, sched_nodes: str | None, sched_cores: str | None) -> None:
    """What explain takes on its command line, simulate takes in a timeline row, with the
    same counts as the result; what one refuses, the other refuses."""
    import contextlib
    import io
    import tempfile

    argv = ["--data", PLAIN, "--nodes", nodes, "--cores", cores, "-o", "json"]
    if sched_nodes is not None:
        argv += ["--schedulable-nodes", sched_nodes]
    if sched_cores is not None:
        argv += ["--schedulable-cores", sched_cores]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        explain_main(argv)
    explained = json.loads(printed.getvalue()).get("counts")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "t.json")
        row = {"t": 0, "nodes": nodes, "cores": cores}
        row |= {"schedulable_nodes": sched_nodes} if sched_nodes is not None else {}
        row |= {"schedulable_cores": sched_cores} if sched_cores is not None else {}
        path.write_text(json.dumps([row]))
        try:
            simulated = load_timeline(str(path))[0].counts
        except InputError:
            simulated = None
    try:
        direct = cluster_counts(nodes, cores, sched_nodes, sched_cores)
    except InputError:
        direct = None
    assert simulated == direct
    if direct is None:
        assert explained is None
    else:
        assert explained is not None
        assert (explained["total_nodes"], explained["total_cores"],
                explained["schedulable_nodes"], explained["schedulable_cores"]) == (
            direct.total_nodes, direct.total_cores, direct.schedulable_nodes,
            direct.schedulable_cores)
