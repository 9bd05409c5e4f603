"""Each daemon's ``--help`` (and ``-h``), byte for byte: the flags' names, spellings, help and
order are what manifests and operators read, so a change to them is a deliberate change to
these files (tests/unit/help/), never a side effect of how the flags are declared."""

from __future__ import annotations

from pathlib import Path

import pytest

from cpa.cli import run_daemon
from cpa.vertical.daemon.cpvpa_main import run_vertical

HELP = Path(__file__).parent / "help"


@pytest.mark.parametrize("argv", [["--help"], ["-h"]])
def test_the_autoscalers_help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert run_daemon(argv, "cluster-proportional-autoscaler") == 0
    out, err = capsys.readouterr()
    assert (out, err) == ((HELP / "cluster-proportional-autoscaler.txt").read_text(), "")


@pytest.mark.parametrize("argv", [["--help"], ["-h"]])
def test_cpvpas_help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert run_vertical(argv, "cpvpa") == 0
    out, err = capsys.readouterr()
    assert (out, err) == ((HELP / "cpvpa.txt").read_text(), "")
