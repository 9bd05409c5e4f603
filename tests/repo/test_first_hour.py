"""What a newcomer meets first, run as they would meet it: `make help`, the README's
command blocks (every make target and cpa flag they name exists, every path is in the
checkout), and the README's `cpa simulate` example, whose default output shows only the
polls where something changed. tests/integration/test_quick_path.py runs the whole quick
path in a throwaway venv."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cpa.tools import advise, explain, simulate
from cpa.tools.inputs import UsageError

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
_DURATION = re.compile(r"\b\d+(?:[-.]\d+)?\s?(?:min|s)\b")


def make_help() -> str:
    return subprocess.run(["make", "--no-print-directory", "help"], cwd=REPO,
                          capture_output=True, text=True, check=True, timeout=60).stdout


def test_make_help_leads_with_the_two_commands_and_lists_every_target() -> None:
    text = make_help()
    targets = re.findall(r"^ +make ([a-z-]+)", text, re.M)
    assert targets[:4] == ["demo", "test", "unit", "lint"], targets[:6]
    phony = re.search(r"^\.PHONY:((?:.*\\\n)*.*)$", (REPO / "Makefile").read_text(), re.M)
    assert phony
    internal = {"help", "test-plan"}  # help itself; make test's first step
    listed = set(re.findall(r"[a-z][a-z0-9-]+", text))
    missing = set(phony.group(1).replace("\\\n", " ").split()) - internal - listed
    assert not missing, f"make help does not list {sorted(missing)}"
    for variable in ("TEST_WORKERS=", "PYTEST_ARGS=", "DEMO_ARGS=--steps=N", "PYTHON=",
                     "BASE_PYTHON="):
        assert variable in text, variable
    assert "README.md" in text.splitlines()[0], "times: the README, named on the first line"
    assert not _DURATION.search(text), _DURATION.findall(text)


def _sh_blocks() -> list[str]:
    """The README's sh blocks, each command on one line (continuations joined)."""
    blocks = re.findall(r"^ *```sh\n(.*?)^ *```", README.read_text(), re.S | re.M)
    lines = []
    for block in blocks:
        joined = re.sub(r"\\\n\s*", "", block)
        lines += [re.sub(r"\s+#.*$", "", line).strip() for line in joined.splitlines()]
    return [line for line in lines if line]


_TOOLS = {"explain": explain, "simulate": simulate, "advise": advise}


def test_the_readme_commands_name_what_exists() -> None:
    """Every make target and cpa flag a README command names exists, and every path it
    reads is in the checkout: a copied command fails only for the reader's own values."""
    makefile = (REPO / "Makefile").read_text()
    seen = set()
    for line in _sh_blocks():
        for command in re.split(r"\s*&&\s*", line):
            words = shlex.split(command)
            if words[0] == "make":
                target = words[1]
                assert re.search(rf"^{re.escape(target)}:", makefile, re.M), command
                seen.add("make")
            elif words[0] == "cpa":
                parser = _TOOLS[words[1]]._parser()
                try:
                    args, _ = parser.parse_flags(words[2:])
                except UsageError as exc:
                    pytest.fail(f"{command}: {exc}")
                for value in vars(args).values():
                    if isinstance(value, str) and value.startswith("examples/"):
                        assert (REPO / value).is_file(), value
                seen.add(words[1])
    assert seen >= {"make", "explain", "simulate"}


def _cpa() -> list[str]:
    exe = shutil.which("cpa")
    return [exe] if exe else [sys.executable, "-m", "cpa"]


def _rows(out: str) -> list[list[str]]:
    rows = [line.split(None, 5) for line in out.splitlines()[1:]]
    return [row for row in rows if len(row) > 1 and row[1].isdigit()]


def test_the_readme_simulate_example_shows_only_what_changed(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    line = next(line for line in _sh_blocks() if line.startswith("cpa simulate "))
    words = shlex.split(line)[2:]
    # In a directory of its own (the picture lands there), with the example's paths made
    # absolute as they are from the clone's top directory.
    words = [str(REPO / w) if w.startswith("examples/") else w for w in words]
    run = [*_cpa(), "simulate", *words]
    default = subprocess.run(run, cwd=tmp_path, capture_output=True, text=True, timeout=120,
                             check=False)
    assert default.returncode == 0, default.stderr
    every = subprocess.run([*run, "--all-rows"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=120, check=False)
    assert every.returncode == 0, every.stderr
    all_rows = _rows(every.stdout)
    shown = _rows(default.stdout)
    decided = [(row[3], row[4]) for row in all_rows]
    changed = [row for i, row in enumerate(all_rows) if i == 0 or decided[i] != decided[i - 1]]
    assert shown == changed
    assert len(shown) < len(all_rows) / 10, "the example's table is mostly unchanged polls"
    assert f"{len(shown)} of {len(all_rows)} rows shown" in default.stdout
    plot = re.search(r"--plot (\S+)", line)
    assert plot and (tmp_path / plot.group(1)).stat().st_size > 0
