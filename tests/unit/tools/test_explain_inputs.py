"""`cpa explain` answers every input with a result or one line of error, never a traceback.

Operators paste ConfigMaps from anywhere into it; the inputs below are the ones that broke
it before (a 4,301-digit integer, 5,000 nested arrays, a count that overflows int32) and
whatever hypothesis makes of the ConfigMap's data.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpa.tools.explain import explain_main

NODES = ["--nodes", "3", "--cores", "12"]


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = explain_main(args)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(("data", "fragment"), [
    ({"linear": '{"nodesPerReplica":1,"min":' + "9" * 4301 + "}"}, "out of range"),
    ({"linear": '{"nodesPerReplica":1,"x":' + "[" * 5000 + "]" * 5000 + "}"}, None),
    ({"linear": '{"nodesPerReplica":1,"x":' + "[" * 10001 + "]" * 10001 + "}"}, "nested"),
    ({"linear": '{"nodesPerReplica":16,"min":2147483648}'}, "more than a scale subresource"),
    ({"ladder": '{"nodesToReplicas":[[0,4611686018427387904]]}'}, "more than a scale"),
])
def test_nasty_configmaps(data: dict[str, str], fragment: str | None,
                          capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["--data", json.dumps(data), *NODES], capsys)
    if fragment is None:  # 5,000 levels under an unknown key: fine, as in Go
        assert code == 0, err
        assert out.rstrip().endswith("=> 3 replicas")
        return
    assert code == 1
    assert fragment in out + err
    assert "Traceback" not in out + err
    code, out, _ = run(["--data", json.dumps(data), *NODES, "-o", "json"], capsys)
    assert code == 1
    assert fragment in json.loads(out)["error"]


def test_int32_overflow_still_shows_the_reasoning(capsys: pytest.CaptureFixture[str]) -> None:
    data = {"linear": '{"nodesPerReplica":16,"min":2147483648}'}
    code, out, _ = run(["--data", json.dumps(data), *NODES], capsys)
    assert code == 1
    assert "min 2147483648 lifts" in out
    assert out.rstrip().splitlines()[-1].startswith("=> error: the parameters give 2147483648")


def test_deeply_nested_data_flag_is_an_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    """--data itself is read with Python's json, which recurses."""
    code, _, err = run(["--data", "[" * 100_000, *NODES], capsys)
    assert code == 1
    assert err.startswith("cpa explain: ") and "Traceback" not in err


_text = st.one_of(
    st.text(max_size=60),
    st.sampled_from(['{"nodesPerReplica":', '{"coresToReplicas":[[', "[", "]", "{", "}",
                     ",", ":", "1e400", "-0", "9" * 30, "null", '"x"', "true", "\\u0000"]),
)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["linear", "ladder", "LINEAR", "other"]),
       st.lists(_text, max_size=8).map("".join),
       st.integers(-5, 10**12), st.text(max_size=12))
def test_any_configmap_gives_an_answer_or_one_error(
        key: str, value: str, nodes: int, cores: str) -> None:
    # capsys does not mix with hypothesis; explain_main's output is not needed here.
    code = explain_main([f"--data={json.dumps({key: value})}", f"--nodes={nodes}",
                         f"--cores={cores or '0'}", "-o", "json"])
    assert code in (0, 1)


def test_no_traceback_from_the_console_script() -> None:
    data = json.dumps({"linear": '{"min":' + "9" * 5000 + "}"})
    proc = subprocess.run([sys.executable, "-m", "cpa", "explain", "--data", data, *NODES],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert "out of range" in proc.stderr


# --- ours: the Pods and Services axes -------------------------------------------------------

POD_AXIS = json.dumps({"linear": '{"nodesPerReplica":16,"podsPerReplica":100,'
                                 '"servicesPerReplica":50}'})


def test_explain_shows_a_step_for_each_object_axis(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["--data", POD_AXIS, *NODES, "--pods", "2501", "--services", "30",
                          "-o", "json"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["replicas"] == 26
    assert doc["counts"]["pods"] == 2501 and doc["counts"]["services"] == 30
    keys = [step["key"] for step in doc["steps"]]
    assert {"pods.ceil", "pods.winner", "services.ceil", "services.winner"} <= set(keys)


@pytest.mark.parametrize(("extra", "fragment"), [
    ([], "give --pods N"),
    (["--pods", "-1", "--services", "1"], "cannot be negative"),
    (["--pods", "many", "--services", "1"], "not a number"),
    (["--pods", "1.5", "--services", "1"], "whole number"),
])
def test_explain_object_counts_given_wrong(extra: list[str], fragment: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["--data", POD_AXIS, *NODES, *extra], capsys)
    assert code != 0 and fragment in err and "Traceback" not in err
