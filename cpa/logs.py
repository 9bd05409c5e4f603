"""Structured logging with glog-style verbosity.

Manifests pass ``--v=N``; operators expect the same N to mean the same amount of output:
0 scale decisions and errors, 1 mode changes, 2 parameters, 4 every poll's counts. Event
names are stable dotted words (``scale.changed``, ``poll.failed``) so they can be grepped
and alerted on; details go in key=value fields, never in the event string.
"""

from __future__ import annotations

import logging
import sys
import threading
from typing import Any

import structlog

_verbosity = 0


def configure(verbosity: int = 0, fmt: str = "text") -> None:
    """Set verbosity and renderer once at start-up; logs go to stderr like upstream's."""
    global _verbosity
    _verbosity = verbosity
    renderer: Any
    if fmt == "json":
        renderer = structlog.processors.JSONRenderer(sort_keys=False)
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=False, pad_event_to=0,
                                                 exception_formatter=structlog.dev.plain_traceback)
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info if fmt == "json" else _identity,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
        logger_factory=_stderr_logger,
        cache_logger_on_first_use=True,
    )


def _identity(_logger: Any, _name: str, event: Any) -> Any:
    return event


class _StderrLogger:
    """Writes each rendered event as one line to the *current* ``sys.stderr``.

    Looked up per write rather than bound at configure time, so a replaced stderr (test
    capture, a closed stream) never leaves loggers holding a dead file object.
    """

    _lock = threading.Lock()

    def msg(self, message: str) -> None:
        with self._lock:
            print(message, file=sys.stderr, flush=True)

    debug = info = warning = warn = error = critical = exception = fatal = log = msg


def _stderr_logger(*_args: Any) -> _StderrLogger:
    return _StderrLogger()


def v(level: int) -> bool:
    """True when ``--v`` is at least ``level`` (glog's ``V(level)``)."""
    return _verbosity >= level


def verbosity() -> int:
    return _verbosity


def get_logger(component: str) -> Any:
    """A logger whose every event carries ``component`` for filtering."""
    return structlog.get_logger().bind(component=component)
