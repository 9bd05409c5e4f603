"""What both daemons (the autoscaler and ``/cpvpa``) do as processes, apart from polling.

Kept in one place so the two cannot drift: the modules they will need, a container
runtime's open-files limit, and a SIGTERM that is honoured within a moment even in the middle
of a hung API request.
"""

from __future__ import annotations

import importlib.util
import resource
import signal
import threading
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Protocol

from cpa import logs

__all__ = ["DAEMON_MODULES", "Abortable", "Stopper", "raise_open_files_limit",
           "report_thread_failures", "require_modules"]

DAEMON_MODULES = ("yaml", "structlog", "msgspec", "prometheus_client")
"""The third-party modules the daemons need, looked for on the main thread before any
thread starts: one missing in a thread would not stop the process, which would run on,
silent."""


def require_modules(names: Sequence[str] = DAEMON_MODULES) -> None:
    """Raise :class:`ModuleNotFoundError` (the console script's guard turns it into one
    line naming the package and how to install it) for the first of ``names`` that is not
    installed; found, nothing is imported."""
    for name in names:
        if importlib.util.find_spec(name) is None:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


def report_thread_failures(failed: Callable[[str, str], None]) -> None:
    """Every thread of the process that ends with an exception is logged
    (``thread.failed``) and told to ``failed`` (the health state: ``/last-poll`` says it):
    the threads catch what they expect, and one that dies of anything else must not leave
    the process running on, silent."""
    def hook(args: threading.ExceptHookArgs) -> None:
        if args.exc_type is SystemExit:
            return
        name = args.thread.name if args.thread is not None else "unnamed"
        error = f"{args.exc_type.__name__}: {args.exc_value}"[:300]
        logs.get_logger("process").error("thread.failed", thread=name, error=error)
        failed(name, error)

    threading.excepthook = hook


class Abortable(Protocol):
    """An API client whose requests in flight can be cut (:class:`cpa.kube.client.KubeApi`)."""

    def abort(self) -> None: ...


def raise_open_files_limit() -> None:
    """Raise the soft limit of open files to the hard one, as Go programs do at start
    (since Go 1.19; upstream is one). containerd 2.x gives a container a soft limit of
    1,024 under a hard one of ~500,000; CPython leaves it at 1,024."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ImportError, ValueError, OSError):
        pass  # not permitted or not POSIX: keep the limit we were given


class Stopper:
    """SIGTERM and SIGINT set :attr:`event`; the poll loops wait on it.

    The handler only records and sets: logging there could deadlock on the log lock that
    the interrupted main thread may hold."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.received: list[str] = []
        self._interrupts: list[Callable[[], None]] = []
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self.received.append(signal.Signals(signum).name)
        self.event.set()
        for interrupt in self._interrupts:
            interrupt()

    def also_interrupt(self, interrupt: Callable[[], None]) -> None:
        """Call ``interrupt`` too when told to stop: for a waiter that does not wait on
        :attr:`event` itself (the poll loop with ``--react-to-node-changes``). It runs in
        the signal handler, so it may only set events or flags."""
        self._interrupts.append(interrupt)

    @property
    def signal_name(self) -> str | None:
        """The first signal received, for the ``stopped`` log event."""
        return self.received[0] if self.received else None

    def abort_on_stop(self, api: Abortable) -> None:
        """Cut ``api``'s requests in flight when told to stop: a hung request must not hold
        the exit (SIGTERM is honoured within a moment, not after the request deadline)."""
        def wait_then_abort() -> None:
            self.event.wait()
            api.abort()

        threading.Thread(target=wait_then_abort, name="stop", daemon=True).start()
