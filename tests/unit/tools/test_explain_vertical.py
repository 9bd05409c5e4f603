"""``cpa explain --vertical`` with given counts: CPVA's steps, the value as CPVA prints it,
the PATCH body; one-line errors, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cpa.cli import main
from cpa.tools.explain_vertical import explain_vertical_main

CONFIG = json.dumps({"c": {"requests": {
    "cpu": {"base": "10m", "step": "1m", "coresPerStep": 1, "max": "30m"},
    "memory": {"base": "64Mi", "step": "1Mi", "nodesPerStep": 2}}}})


def test_text_shows_each_side_the_cap_and_the_format(capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    assert main(["explain", "--vertical", "--nodes=3", "--cores=24",
                 f"--default-config={CONFIG}", "--target=daemonset/agent"]) == 0
    out = capsys.readouterr().out
    assert "cluster: 3 nodes, 24 cores (given)" in out
    assert "c requests[cpu] = 30m" in out
    assert "by cores: 24 steps (ceil of cores / 1) -> base + 24 x step = 34m, capped at max " \
           "30m" in out
    assert "c requests[memory] = 69206016" in out  # 64Mi + ceil(3/2) x 1Mi, in bytes
    assert "by nodes: 2 steps (ceil of nodes / 2)" in out
    assert '"kind":"DaemonSet","metadata":{"name":"agent"}' in out


def test_json_has_every_step(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "--vertical", "-o", "json", "--nodes=1", "--cores=2",
                 f"--default-config={CONFIG}"]) == 0
    doc = json.loads(capsys.readouterr().out)
    cpu = next(v for v in doc["values"] if v["resource"] == "cpu")
    assert cpu["value"] == "12m" and cpu["format"] == "BinarySI"
    assert cpu["steps"]["cores_increments"] == 2 and cpu["steps"]["want"] == 12
    assert doc["patch"]["spec"]["template"]["spec"]["containers"][0]["name"] == "c"


def test_the_config_file_is_decoded_over_the_default(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    path = tmp_path / "config"
    path.write_text('{"other": {"limits": {"memory": {"base": "1Gi"}}}}')
    assert main(["explain", "--vertical", "--nodes=1", "--cores=1",
                 f"--default-config={CONFIG}", f"--config-file={path}"]) == 0
    out = capsys.readouterr().out
    assert "c requests[cpu]" in out and "other limits[memory] = 1073741824" in out


@pytest.mark.parametrize(("argv", "fragment"), [
    (["--nodes=1"], "give --nodes and --cores"),
    (["--nodes=1", "--cores=1"], "give the config"),
    (["--nodes=1", "--cores=1", '--default-config={"c": {"requests": 1}}'],
     "invalid config"),
    (["--nodes=1", "--cores=1", '--default-config={"c": {"requests": {"cpu": '
      '{"base": "9E"}}}}'], "milli-units"),
    (["--nodes=1", "--cores=1", "--default-config={}", "--target=statefulset/x"],
     "Unknown target format"),
    (["--nodes=1", "--cores=-1", "--default-config={}"], "--cores is -1; it cannot be"),
    (["--nodes=x", "--cores=1", "--default-config={}"], "--nodes is 'x', not a number"),
])
def test_errors_are_one_line(argv: list[str], fragment: str,
                             capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "--vertical", *argv]) == 1
    err = capsys.readouterr().err
    assert fragment in err and len(err.strip().splitlines()) == 1


def test_several_targets_show_the_first_ones_block(capsys: pytest.CaptureFixture[str]) -> None:
    blocks = {"deployment/a": {"c": {"requests": {"cpu": {"base": "1m"}}}},
              "daemonset/b": {"d": {"requests": {"cpu": {"base": "2m"}}}}}
    for order, container, cpu in ((("deployment/a", "daemonset/b"), "c", "1m"),
                                  (("daemonset/b", "deployment/a"), "d", "2m")):
        assert main(["explain", "--vertical", "--nodes=1", "--cores=1", "-o", "json",
                     f"--target={','.join(order)}",
                     f"--default-config={json.dumps(blocks)}"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["target"] == order[0]
        assert doc["patch"]["spec"]["template"]["spec"]["containers"] == [
            {"name": container, "resources": {"requests": {"cpu": cpu}}}]


def test_explain_vertical_shows_the_step_each_count_gave(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Ours: podsPerStep and servicesPerStep, given by --pods and --services."""
    config = ('{"coredns": {"requests": {"memory": {"base": "54M", "step": "2M", '
              '"podsPerStep": 1000, "servicesPerStep": 1000}}}}')
    code = explain_vertical_main([f"--default-config={config}", "--nodes", "10", "--cores",
                                  "40", "--pods", "150000", "--services", "20000"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "by pods: 150 steps (ceil of 150000 pods / 1000)" in out
    assert "by services: 20 steps" in out and "the largest: 354M" in out
    code = explain_vertical_main([f"--default-config={config}", "--nodes", "10", "--cores",
                                  "40"])
    _, err = capsys.readouterr()
    assert code == 1 and "give --pods N" in err
