"""`cpa explain` with a ``behavior``: the window and policy steps, for one poll, no history."""

from __future__ import annotations

import json

import pytest

from cpa.tools.explain import explain_main

NODES = ["--nodes", "3", "--cores", "12"]
EKS = ('{"nodesPerReplica":1,"behavior":{"scaleDown":{"stabilizationWindowSeconds":600,'
       '"policies":[{"type":"Percent","value":33,"periodSeconds":180}]},'
       '"scaleUp":{"policies":[{"type":"Pods","value":1,"periodSeconds":60}]}}}')


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = explain_main(args)
    out, err = capsys.readouterr()
    return code, out, err


def data(linear: str) -> list[str]:
    return ["--data", json.dumps({"linear": linear})]


def test_text_shows_the_policy_that_shaped_the_result(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run([*data(EKS), *NODES, "--current-replicas", "9"], capsys)
    assert code == 0
    assert "for one poll with no history" in out
    assert "The target has 9 replicas now." in out
    assert "stabilization window of the last 600 s the highest recommendation is 3" in out
    assert "Percent 33% per 180 s: the period began at 9" in out
    assert out.rstrip().splitlines()[-1] == (
        "=> 6 replicas (the formula says 3; scaleDown policies allow 6)")


def test_scale_up_steps_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run([*data(EKS), *NODES, "--current-replicas", "1", "-o", "json"], capsys)
    assert code == 0
    doc = json.loads(out)
    assert (doc["desired"], doc["replicas"]) == (3, 2)
    assert doc["behavior"]["current_replicas"] == 1
    assert "no history" in doc["behavior"]["history"]
    assert [s["key"] for s in doc["behavior"]["steps"]] == [
        "behavior.window.up", "behavior.policy.up", "behavior.result"]
    assert doc["params"]["behavior"]["scaleUp"]["policies"][0]["type"] == "Pods"


def test_behavior_without_current_replicas_says_what_is_missing(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run([*data(EKS), *NODES], capsys)
    assert code == 0
    assert "give --current-replicas N" in out
    assert out.rstrip().endswith("=> 3 replicas")
    code, out, _ = run([*data(EKS), *NODES, "-o", "json"], capsys)
    doc = json.loads(out)
    assert doc["replicas"] == doc["desired"] == 3
    assert doc["behavior"]["current_replicas"] is None


def test_without_behavior_the_output_is_as_before(capsys: pytest.CaptureFixture[str]) -> None:
    plain = data('{"nodesPerReplica":1}')
    _, before, _ = run([*plain, *NODES, "-o", "json"], capsys)
    _, after, _ = run([*plain, *NODES, "-o", "json", "--current-replicas", "7"], capsys)
    assert before == after
    assert "desired" not in json.loads(before) and "behavior" not in json.loads(before)
    _, text, _ = run([*plain, *NODES, "--current-replicas", "7"], capsys)
    assert "Behavior" not in text and text.rstrip().endswith("=> 3 replicas")


@pytest.mark.parametrize(("extra", "fragment"), [
    (["--current-replicas", "-1"], "--current-replicas is -1; it cannot be negative"),
    (["--current-replicas", "2147483648"], "more than 2147483647; give at most 2147483647"),
    (["--target", "deployment/coredns"], "--target reads the scale from the cluster"),
])
def test_bad_current_replicas_flags(extra: list[str], fragment: str,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run([*data(EKS), *NODES, *extra], capsys)
    assert code == 1 and fragment in err and "Traceback" not in err


def test_invalid_behavior_is_one_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run([*data('{"nodesPerReplica":1,"behavior":{"scaleUp":'
                              '{"selectPolicy":"Fastest"}}}'), *NODES], capsys)
    assert code == 1
    assert err.startswith("cpa explain: invalid parameters from --data: ")
    assert 'behavior.scaleUp.selectPolicy is "Fastest"' in err
