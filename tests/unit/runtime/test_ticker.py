"""The poll period's ticker (cpa.runtime.ticker): Go's time.Ticker boundaries, and the
prompt wait that a wake() from another thread ends at once."""

from __future__ import annotations

import threading
import time

import pytest

from cpa.runtime.ticker import Ticker, next_boundary


@pytest.mark.parametrize(("previous", "now", "expected"), [
    (0.0, 0.5, 10.0),  # on time: the next boundary
    (0.0, 10.0, 20.0),  # the boundary itself has passed: the one after
    (0.0, 35.0, 40.0),  # an overrun skips the boundaries it missed
])
def test_next_boundary(previous: float, now: float, expected: float) -> None:
    assert next_boundary(previous, 10.0, now) == expected


def test_sleep_prompt_takes_a_wake_from_another_thread() -> None:
    ticker = Ticker(3600.0, time.monotonic, float("inf"))
    stop = threading.Event()
    waker = threading.Timer(0.05, ticker.wake)
    waker.start()
    assert ticker.sleep_prompt(stop, time.monotonic() + 3600) is False  # woken, not stopped
    assert ticker.woken is False  # the wake was taken
    waker.join()


def test_sleep_prompt_sees_a_stop_after_interrupt() -> None:
    ticker = Ticker(3600.0, time.monotonic, float("inf"))
    stop = threading.Event()

    def signal() -> None:
        stop.set()
        ticker.interrupt()

    stopper = threading.Timer(0.05, signal)
    stopper.start()
    assert ticker.sleep_prompt(stop, time.monotonic() + 3600) is True
    stopper.join()


def test_sleep_prompt_returns_at_the_boundary() -> None:
    clock = [100.0]
    ticker = Ticker(10.0, lambda: clock[0], float("inf"))
    assert ticker.sleep_prompt(threading.Event(), 100.0) is False
    clock[0] = 105.0
    assert ticker.sleep_prompt(threading.Event(), 104.0) is False
