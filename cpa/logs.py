"""Structured logging with glog-style verbosity.

Manifests pass ``--v=N``; operators expect the same N to mean the same amount of output:
0 scale decisions and errors, 1 mode changes, 2 parameters, 4 every poll's counts. Event
names are stable dotted words (``scale.changed``, ``poll.failed``) so they can be grepped
and alerted on; details go in key=value fields, never in the event string.

structlog (~30 ms to import, asyncio included) is imported at the first event, not at
start-up: the daemon starts its Node list first and logs while the API server answers.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

_verbosity = 0
_format = "text"
_ready = False  # structlog imported and configured for _format
_ready_lock = threading.Lock()


def configure(verbosity: int = 0, fmt: str = "text") -> None:
    """Set verbosity and renderer once at start-up; logs go to stderr like upstream's."""
    global _verbosity, _format, _ready
    _verbosity = verbosity
    with _ready_lock:
        _format = fmt
        _ready = False
        if "structlog" in sys.modules:  # already in use: apply now, as before
            _setup()


def _setup() -> None:
    """Configure structlog for ``_format`` (under ``_ready_lock``)."""
    global _ready
    import logging

    import structlog

    fmt = _format
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
    _ready = True


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
    return _Logger(component)


class _Logger:
    """A component's logger: structlog's, made at its first use (see the module doc)."""

    __slots__ = ("_component", "_real")

    def __init__(self, component: str) -> None:
        self._component = component
        self._real: Any = None

    def __getattr__(self, name: str) -> Any:  # info, warning, error, bind, ...
        real = self._real
        if real is None:
            with _ready_lock:
                if not _ready:
                    _setup()
            import structlog
            real = self._real = structlog.get_logger().bind(component=self._component)
        return getattr(real, name)
