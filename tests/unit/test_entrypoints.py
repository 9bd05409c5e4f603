"""Entry points, health endpoints and `cpa explain`, without a cluster."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import urllib3

from cpa import VERSION_TEXT, __version__
from cpa.cli import main, run_daemon
from cpa.failures import missing_module
from cpa.runtime.health import HealthState, serve
from cpa.tools.explain import explain_main

DEFAULTS = ('{"linear":{"coresPerReplica":256,"nodesPerReplica":16,'
            '"preventSinglePointFailure":true,"includeUnschedulableNodes":true}}')


def test_health_endpoints() -> None:
    state = HealthState()
    server = serve(state, 0, "127.0.0.1")
    port = server.server_address[1]
    http = urllib3.PoolManager(retries=False)
    try:
        def get(path: str) -> tuple[int, bytes]:
            resp = http.request("GET", f"http://127.0.0.1:{port}{path}")
            return resp.status, resp.data

        assert get("/healthz") == (200, b"")
        assert get("/last-poll") == (200, b"")
        state.record("configmap kube-system/x not found")
        assert get("/last-poll") == (
            500, b"Encountered error at last poll cycle: configmap kube-system/x not found")
        assert get("/healthz") == (200, b"")
        assert get("/nope")[0] == 404
        state.record(None)
        assert get("/last-poll") == (200, b"")
    finally:
        server.shutdown()


def test_version_everywhere(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_daemon(["--version"]) == 0
    assert main(["--version"]) == 0
    assert main(["run", "--version"]) == 0
    assert capsys.readouterr().out.splitlines() == [VERSION_TEXT] * 3
    assert VERSION_TEXT.split()[0] == __version__ and "v1.10.3" in VERSION_TEXT


def test_python_dash_m_is_cpa() -> None:
    out = subprocess.run([sys.executable, "-m", "cpa", "--version"], capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == VERSION_TEXT


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_daemon(["--nope"]) == 2
    assert "unknown flag: --nope" in capsys.readouterr().err
    assert main(["frobnicate"]) == 2


def test_validation_exit_1_lists_every_problem(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_daemon(["--poll-period-seconds=0"]) == 1
    err = capsys.readouterr().err
    for fragment in ("--target", "--configmap", "--namespace", "--poll-period-seconds"):
        assert fragment in err


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_daemon(["--help"]) == 0
    out = capsys.readouterr().out
    assert "--default-params" in out and "--nodelabels" in out


def explain(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = explain_main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_explain_text_walks_the_seed_example(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = explain(["--nodes", "16", "--cores", "128", "--default-params", DEFAULTS],
                           capsys)
    assert code == 0
    assert "ceil of 16 over 16, which is 1" in out
    assert "ceil of 128 over 256, which is 1" in out
    assert "preventSinglePointFailure" in out
    assert out.strip().endswith("=> 2 replicas")


def test_explain_json(capsys: pytest.CaptureFixture[str]) -> None:
    data = json.dumps({"linear": '{"coresPerReplica":2,"nodesPerReplica":1,"min":1,'
                                 '"max":100,"preventSinglePointFailure":true}'})
    code, out, _ = explain(["--data", data, "--nodes", "4", "--cores", "13", "-o", "json"],
                           capsys)
    doc = json.loads(out)
    assert code == 0 and doc["mode"] == "linear" and doc["replicas"] == 7
    assert [s["key"] for s in doc["steps"]][-1] == "winner"


def test_explain_schedulable_counts(capsys: pytest.CaptureFixture[str]) -> None:
    data = json.dumps({"linear": '{"nodesPerReplica":1}'})
    code, out, _ = explain(["--data", data, "--nodes", "10", "--cores", "40",
                            "--schedulable-nodes", "6", "--schedulable-cores", "3920m",
                            "-o", "json"], capsys)
    doc = json.loads(out)
    assert code == 0
    assert doc["replicas"] == 6 and doc["counts"]["schedulable_cores"] == 4


def test_explain_configmap_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "cm.yaml"
    path.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata:\n"
                    "  ladder: '{\"coresToReplicas\":[[1,1],[64,3],[512,5],[1024,7],"
                    "[2048,10],[4096,15]],\"nodesToReplicas\":[[1,1],[2,2]]}'\n")
    code, out, _ = explain(["--configmap-file", str(path), "--nodes", "100", "--cores", "400"],
                           capsys)
    assert code == 0 and out.strip().endswith("=> 3 replicas")


@pytest.mark.parametrize("args,fragment", [
    (["--nodes", "1", "--cores", "1"], "parameters"),
    (["--data", "{}", "--cores", "1"], "--nodes"),
    (["--data", "[1]", "--nodes", "1", "--cores", "1"], "--data"),
    (["--data", '{"linear":"{\\"min\\":-1,\\"nodesPerReplica\\":1}"}', "--nodes", "1",
      "--cores", "1"], "min"),
    (["--default-params", "{", "--nodes", "1", "--cores", "1"], "--default-params"),
    (["--data", '{"linear":"{}"}', "--nodes", "1", "--cores", "lots"], "--cores"),
    (["--from-cluster"], "--configmap"),
])
def test_explain_errors_exit_1(args: list[str], fragment: str,
                               capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = explain(args, capsys)
    assert code == 1 and fragment in err
    code, out, err = explain([*args, "-o", "json"], capsys)
    assert code == 1 and fragment in json.loads(out)["error"]


def test_daemon_path_does_not_import_the_kubernetes_client() -> None:
    """The generated client is not in the image and would multiply the daemon's memory;
    nor does the daemon import a protobuf library, or ``http.client`` with its ``email``
    parser (cpa.http reads answers itself)."""
    code = ("import sys, cpa.cli, cpa.horizontal.daemon.cpa_loop, cpa.nodes.watch, "
            "cpa.nodes.store, cpa.kube.clientconfig, cpa.kube.client, cpa.nodes.proto, "
            "cpa.runtime.health;"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('kubernetes', 'requests', 'pydantic', 'google', 'http', 'email', "
            "'matplotlib')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_a_missing_dependency_names_the_package_and_the_fix(tmp_path: Path) -> None:
    """The daemon on an interpreter without our dependencies (``-S``: no site-packages, as
    a distribution's python3 that never had them installed): one line naming the package
    and how to install it, exit 1; not "internal error ... this is a bug"."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    repo = Path(__file__).resolve().parents[2]
    code = (f"import sys; sys.path.insert(0, {str(repo)!r}); "
            "sys.argv[0] = 'cluster-proportional-autoscaler'; "
            "from cpa.cli import daemon_main; daemon_main()")
    proc = subprocess.run(
        [sys.executable, "-S", "-c", code, f"--kubeconfig={kubeconfig}", "--namespace=x",
         "--configmap=x", "--target=deployment/x", "--health-port=1"],
        capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr
    named = re.match(r"cluster-proportional-autoscaler: the Python package '([\w-]+)'"
                     r"(?: \(module '\w+'\))?, which this program needs, is not installed for "
                     + re.escape(sys.executable) + ": install the program", lines[0])
    assert named and named.group(1) in ("pyyaml", "structlog", "msgspec",
                                        "prometheus_client"), lines[0]
    assert "make install" in lines[0] and f"pip install {named.group(1)}" in lines[0]
    assert "bug" not in lines[0] and "Traceback" not in proc.stderr


def test_a_missing_module_of_ours_asks_for_a_reinstall() -> None:
    text = missing_module(ModuleNotFoundError("No module named 'cpa.gone'", name="cpa.gone"))
    assert text.startswith("the installation is incomplete:") and "make install" in text
    other = missing_module(ModuleNotFoundError("No module named 'six'", name="six"))
    assert other.startswith("the Python package 'six', which this program needs")
    yaml = missing_module(ModuleNotFoundError("No module named 'yaml'", name="yaml"))
    assert yaml.startswith("the Python package 'pyyaml' (module 'yaml'), which this program")
    assert "pip install pyyaml" in yaml
