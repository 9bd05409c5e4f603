"""The garbage collector is off from the daemon's start until its first poll is done, and
on again whatever keeps that poll from coming soon (cpa/horizontal/daemon/cpa_main.py: a slow first
list,
a leader-elect candidate, an exit). Off while the list is read is checked in a real start by
test_startup_order.py."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from cpa.horizontal.daemon import cpa_main as main


@pytest.fixture(autouse=True)
def gc_back_on() -> Iterator[None]:
    yield
    gc.enable()


class SlowList:
    """A reflector whose list is whole after ``waits`` waits."""

    def __init__(self, waits: int) -> None:
        self.waits = waits
        self.gc_during: list[bool] = []

    def wait_synced(self, _timeout: float) -> bool:
        self.gc_during.append(gc.isenabled())
        self.waits -= 1
        return self.waits < 0

    def status(self) -> Any:
        return type("Status", (), {"error": None})()


class Recorder:
    def record(self, _text: str | None) -> None:
        pass

    def failed_before_sync(self) -> None:
        pass


def test_the_first_poll_turns_collection_back_on_once() -> None:
    gc.disable()
    done = main._FirstPollDone()
    done(None)  # type: ignore[arg-type]  # the poll's result is not read
    assert gc.isenabled()
    gc.disable()
    done(None)  # type: ignore[arg-type]
    assert not gc.isenabled()  # only the first poll


def test_a_list_done_at_once_keeps_collection_off() -> None:
    gc.disable()
    reflector = SlowList(0)
    assert main._wait_for_the_first_list(reflector, threading.Event(), Recorder(),  # type: ignore[arg-type]
                                         Recorder(), 10.0)  # type: ignore[arg-type]
    assert not gc.isenabled()


def test_a_slow_list_turns_collection_back_on() -> None:
    gc.disable()
    reflector = SlowList(2)
    assert main._wait_for_the_first_list(reflector, threading.Event(), Recorder(),  # type: ignore[arg-type]
                                         Recorder(), 10.0)  # type: ignore[arg-type]
    assert reflector.gc_during == [False, True, True]
    assert gc.isenabled()


def test_run_turns_collection_off_and_back_on_when_it_returns(
        monkeypatch: pytest.MonkeyPatch) -> None:
    during: list[bool] = []

    def run(argv: Any, prog: str) -> int:
        during.append(gc.isenabled())
        raise RuntimeError("an early end")

    monkeypatch.setattr(main, "_run", run)
    with pytest.raises(RuntimeError):
        main.run([])
    assert during == [False]
    assert gc.isenabled()


def test_a_cpva_command_line_handed_over_collects_as_usual(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The image's autoscaler script starts with collection off; a CPVA command line goes
    on to the vertical daemon, which has no first poll to turn it back on."""
    from cpa import cli
    from cpa.vertical.daemon import cpvpa_main as vertical
    during: list[bool] = []

    def run_vertical(argv: Any, prog: str) -> int:
        during.append(gc.isenabled())
        return 0

    monkeypatch.setattr(vertical, "run_vertical", run_vertical)
    monkeypatch.setattr("sys.argv", ["cluster-proportional-autoscaler", "--default-config={}"])
    gc.disable()
    with pytest.raises(SystemExit):
        cli.daemon_main()
    assert during == [True]
