"""The modules on the daemon's path to its first Node list make no dataclass: importing
``dataclasses`` costs ~10 ms (it pulls in inspect, ast, dis, tokenize) and each dataclass
~1 ms to create, and start-up time is part of the time to the first correct write. Their
value classes are NamedTuples or plain classes with ``__slots__`` instead."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NO_DATACLASSES = (
    "cpa/flags.py",
    "cpa/go/json.py",
    "cpa/go/pflag.py",
    "cpa/go/quantity.py",
    "cpa/kube/config.py",
    "cpa/kube/selector.py",
    "cpa/kube/targets.py",
    "cpa/nodes/watch.py",
    "cpa/runtime/options.py",
    "cpa/vertical/options.py",
)


@pytest.mark.parametrize("path", NO_DATACLASSES)
def test_no_dataclasses_nor_inspect_anywhere_in_the_module(path: str) -> None:
    """Not even inside a function: a lazy import on the daemon's path still runs."""
    found = []
    for node in ast.walk(ast.parse((REPO / path).read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        else:
            continue
        found += [f"{path}:{node.lineno}: {name}" for name in names
                  if name.split(".")[0] in ("dataclasses", "inspect")]
    assert found == []
