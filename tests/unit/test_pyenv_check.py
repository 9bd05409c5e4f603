"""scripts/pyenv_check.py, make's test of its venv: this checkout's package, editable."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


def _check() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pyenv_check", REPO / "scripts" /
                                                  "pyenv_check.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("direct_url", "verdict"), [
    ({"url": f"file://{REPO}", "dir_info": {"editable": True}}, None),
    ({"url": f"file://{REPO}", "dir_info": {}}, "copied from this checkout, not editable"),
    ({"url": "file:///elsewhere", "dir_info": {"editable": True}}, "not from this checkout"),
    ({}, "installed from an index, not from this checkout"),
])
def test_only_an_editable_install_of_this_checkout_is_ready(
        direct_url: dict[str, object], verdict: str | None, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    info = tmp_path / "cluster_proportional_autoscaler_py-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\n"
                                   "Name: cluster-proportional-autoscaler-py\nVersion: 0.1.0\n")
    if direct_url:
        (info / "direct_url.json").write_text(json.dumps(direct_url))
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    found = [m for m in _check().missing(REPO, []) if m.startswith("cluster-proportional")]
    if verdict is None:
        assert found == []
    else:
        assert len(found) == 1 and verdict in found[0], found
