"""Structured logging with glog-style verbosity.

Manifests pass ``--v=N``; operators expect the same N to mean the same amount of output:
0 scale decisions and errors, 1 mode changes, 2 parameters, 4 every poll's counts. Event
names are stable dotted words (``scale.changed``, ``poll.failed``) so they can be grepped
and alerted on; details go in key=value fields, never in the event string.

structlog is imported when the first event is written, not at start-up; the daemon holds
its events until its first poll is done (:func:`hold`): each is kept with the time it
happened and written right after that poll's writes (or after at most ``HOLD_SECONDS``),
so the library, with the asyncio it imports, loads after the first write instead of on
its way (docs/architecture.md, "Measured exceptions").

Logging never blocks the daemons' loops (:func:`buffer_stderr`): a log pipe that nobody
reads (a container runtime's, backing up) would otherwise stop the poll loop at its next
log line, as glog's does. A line is written at once only when stderr can take it
without waiting; otherwise it goes to a bounded buffer written to stderr by a thread of its
own; when the buffer is full new lines are dropped and counted (``<prefix>_log_lines_
dropped_total``), and once stderr takes lines again one ``logs.dropped`` event says how
many were lost.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import json
import os
import select
import sys
import threading
import time
from collections.abc import Mapping, MutableMapping
from datetime import UTC, datetime, timedelta
from typing import Any

from cpa import redact

_verbosity = 0
_format = "text"
_ready = False  # structlog imported and configured for _format
_ready_lock = threading.Lock()
_held: list[tuple[str, str, str, dict[str, Any]]] | None = None  # see hold()
_HELD_AT = "_cpa_held_at"  # the event's own time (ns since the epoch), carried to _time()
HOLD_SECONDS = 1.0
_PLAIN = frozenset({"debug", "info", "warning", "warn", "error", "critical", "msg"})
BUFFER_LINES = 5000
"""Lines kept for a stderr that does not take them: about 1.5 MB of JSON lines, minutes
of ``--v=4`` output. ``CPA_LOG_BUFFER_LINES`` (both daemons) sets another number; 0
writes in the caller, which then waits for stderr, as glog."""
BUFFER_ENV = "CPA_LOG_BUFFER_LINES"
FLUSH_SECONDS = 2.0  # at exit: the buffer is written out for at most this long


def configure(verbosity: int = 0, fmt: str = "text") -> None:
    """Set verbosity and renderer once at start-up; logs go to stderr like upstream's."""
    global _verbosity, _format, _ready
    _verbosity = verbosity
    with _ready_lock:
        _format = fmt
        _ready = False
        if "structlog" in sys.modules:  # already in use: apply now, as before
            _setup()


def hold() -> None:
    """Keep events from now until :func:`release` (called after the first poll, at exit,
    at an exception, and by a timer after ``HOLD_SECONDS``). Each keeps the time it was
    logged: the output is what it would have been, written a moment later."""
    global _held
    with _ready_lock:
        if _ready or _held is not None:
            return  # structlog is in use already, or events are held already
        _held = []
    timer = threading.Timer(HOLD_SECONDS, release)
    timer.daemon = True
    timer.start()


def release() -> None:
    """Write the kept events in order and log directly from now on (nothing when no
    events are held)."""
    global _held
    if _held is None:
        return
    import structlog

    with _ready_lock:
        held, _held = _held, None
        if not _ready:
            _setup()
        for component, method, event, fields in held or ():
            getattr(structlog.get_logger().bind(component=component), method)(event, **fields)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def utc_stamp(ns: int) -> str:
    """An instant (ns since the epoch) as ISO 8601 in UTC with a ``Z``, microseconds only
    when not zero: structlog's ``TimeStamper(fmt="iso", utc=True)``, for a given time."""
    return (_EPOCH + timedelta(microseconds=ns // 1000)).isoformat().replace("+00:00", "Z")


def _time(_logger: Any, _name: str, event: MutableMapping[str, Any]
          ) -> MutableMapping[str, Any]:
    """The event's time: when it was logged, also for one held and written later."""
    at = event.pop(_HELD_AT, None)
    event["timestamp"] = utc_stamp(time.time_ns() if at is None else at)
    return event


def _json_fallback(obj: Any) -> Any:
    """structlog's JSONRenderer's: an object's ``__structlog__()``, else its repr."""
    try:
        return obj.__structlog__()
    except AttributeError:
        return repr(obj)


def _setup() -> None:
    """Configure structlog for ``_format`` (under ``_ready_lock``)."""
    global _ready
    import logging

    import structlog

    json_line = structlog.processors.JSONRenderer(default=_json_fallback)

    def render(logger: Any, name: str, event: MutableMapping[str, Any]) -> str:
        if _format == "json":
            return str(json_line(logger, name, _ordered(logger, name, event)))
        return logfmt(logger, name, event)

    def scrubbed(logger: Any, name: str, event: MutableMapping[str, Any]) -> str:
        return redact.scrub(render(logger, name, event))

    structlog.configure(
        processors=[structlog.processors.add_log_level, _time,
                    structlog.processors.StackInfoRenderer(),
                    structlog.processors.format_exc_info, scrubbed],
        wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
        logger_factory=_stderr_logger,
        cache_logger_on_first_use=True,
    )
    _ready = True


_FIRST = ("timestamp", "level", "event", "component")
_BARE = frozenset(range(0x21, 0x7F)) - {ord('"'), ord("="), ord("\\")}


def _ordered(_logger: Any, _name: str, event: MutableMapping[str, Any]
             ) -> MutableMapping[str, Any]:
    """The documented key order for both formats (docs/observability.md): ``timestamp
    level event component``, then the event's fields as logged. structlog adds the first
    three last, so without this a JSON line would start with ``component`` and end with
    ``timestamp``; parsers do not care, people reading ``kubectl logs`` do."""
    return {k: event[k] for k in (*[k for k in _FIRST if k in event],
                                  *[k for k in event if k not in _FIRST])}


def logfmt(_logger: Any, _name: str, event: MutableMapping[str, Any]) -> str:
    """One event as one logfmt line (``--log-format=text``): ``timestamp=... level=info
    event=scale.changed component=autoscaler target=deployment/coredns old=2 new=3``.

    The same keys as the JSON format, in the same order (the four above first, then the
    event's fields as logged), so a logfmt parser (Loki's ``| logfmt``, ``hl``, ``lnav``)
    gets what a JSON parser gets. Values are written as values, never as Python reprs: a
    list of plain values comma-joined (``targets=deployment/a,deployment/b``), nested data
    as compact JSON, None as an empty value (``nodelabels=``), booleans ``true``/``false``;
    a value with a space, ``=``, a quote or a control character is quoted and escaped as
    a JSON string, so every event stays on one line."""
    keys = [k for k in _FIRST if k in event] + [k for k in event if k not in _FIRST]
    return " ".join(f"{_logfmt_key(k)}={_logfmt_value(event[k])}" for k in keys)


def _logfmt_key(key: object) -> str:
    text = str(key)
    return "".join(c if ord(c) in _BARE else "_" for c in text) or "_"


def _logfmt_value(value: object) -> str:
    return _quoted(_plain(value))


def _plain(value: object) -> str:
    """A value's text before quoting."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, list | tuple | set | frozenset):
        items = sorted(value, key=str) if isinstance(value, set | frozenset) else list(value)
        if all(v is None or isinstance(v, str | int | float) for v in items):
            return ",".join(_plain(v) for v in items)
    if isinstance(value, dict | list | tuple | set | frozenset):
        return json.dumps(value, separators=(",", ":"), default=str, ensure_ascii=False)
    return str(value)


def _quoted(text: str) -> str:
    if all(ord(c) in _BARE or (ord(c) > 0x7F and c.isprintable()) for c in text):
        return text
    return json.dumps(text, ensure_ascii=False)


class _BufferedStderr:
    """Lines for stderr's descriptor that never make a caller wait for stderr.

    A line is written by its caller when nothing is queued or being written and stderr
    says it can take it at once (``poll``: a pipe with room takes a write of up to
    ``PIPE_BUF`` bytes whole, without blocking); else it goes to a buffer of at most
    ``limit`` lines that a thread of its own writes, and is dropped (and counted) when the
    buffer is full. Once the buffer has drained after drops, a ``logs.dropped`` event says
    how many (see the module doc). Why not always the thread: waking it for each line costs
    a wake-up and a hand-over of the GIL, a large share of a steady poll's CPU at
    ``--v=4``; one ``poll`` with no wait costs a system call. One writer at a time
    (``_writing``), so lines are never interleaved and a thread's lines stay in order."""

    def __init__(self, fd: int, limit: int) -> None:
        self._fd = fd
        self._limit = limit
        self._lines: collections.deque[str] = collections.deque()
        self._cond = threading.Condition()
        self._writing = False
        self._flushing = 0  # callers waiting in flush()
        self._unreported = 0  # dropped since the last logs.dropped event
        self.dropped = 0
        self._room = select.poll()
        self._room.register(fd, select.POLLOUT)
        self._thread = threading.Thread(target=self._run, name="log-writer", daemon=True)
        self._thread.start()

    def put(self, line: str) -> None:
        with self._cond:
            direct = not self._lines and not self._writing
            if direct:
                self._writing = True
            elif len(self._lines) >= self._limit and \
                    threading.current_thread() is not self._thread:
                # The writer's own logs.dropped line is never dropped: it says what was.
                self.dropped += 1
                self._unreported += 1
                return
            else:
                self._lines.append(line)
                self._cond.notify()
                return
        data = (line + "\n").encode("utf-8", "replace")
        written = len(data) <= select.PIPE_BUF and self._has_room()
        if written:
            self._write(data)
        with self._cond:
            self._writing = False
            if not written:  # the thread waits for stderr instead
                self._lines.appendleft(line)
            if self._lines or self._flushing:  # else no one waits: the thread sleeps on
                self._cond.notify_all()

    def _has_room(self) -> bool:
        try:
            return any(events & select.POLLOUT for _, events in self._room.poll(0))
        except OSError:
            return False

    def flush(self, timeout: float) -> bool:
        """Wait until every buffered line is written (False after ``timeout``)."""
        end = time.monotonic() + timeout
        with self._cond:
            self._flushing += 1
            try:
                while self._lines or self._writing:
                    left = end - time.monotonic()
                    if left <= 0:
                        return False
                    self._cond.wait(min(left, 0.05))
            finally:
                self._flushing -= 1
        return True

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._lines or self._writing:
                    self._cond.wait()
                batch = list(self._lines)
                self._lines.clear()
                self._writing = True
            self._write(("\n".join(batch) + "\n").encode("utf-8", "replace"))
            with self._cond:
                self._writing = False
                drained, lost = not self._lines, self._unreported
                if drained and lost:
                    self._unreported = 0
                self._cond.notify_all()
            if drained and lost:  # stderr takes lines again: say how many were lost
                get_logger("logs").warning(
                    "logs.dropped", dropped=lost, dropped_total=self.dropped,
                    hint="stderr did not take the log lines (a log pipe nobody read) for "
                         f"long enough to fill the buffer ({self._limit} lines, "
                         f"{BUFFER_ENV}); the daemon went on polling")

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self._fd, view):]
            except InterruptedError:
                continue
            except OSError:  # stderr closed, or a broken pipe: the lines are lost
                return


_buffer: _BufferedStderr | None = None


def buffer_lines(environ: Mapping[str, str] = os.environ) -> int | str:
    """The buffer's size from ``CPA_LOG_BUFFER_LINES`` (default :data:`BUFFER_LINES`),
    or the problem with its value."""
    text = environ.get(BUFFER_ENV, "").strip()
    if not text:
        return BUFFER_LINES
    if not text.isdigit():
        return f"{BUFFER_ENV}={text!r}: must be a whole number of lines, 0 or more"
    return int(text)


def buffer_stderr(limit: int = BUFFER_LINES) -> None:
    """From now on, write log lines to stderr's descriptor from a buffer of ``limit``
    lines, in a thread of their own (the daemons; 0 keeps writing in the caller, which
    then waits for a stderr that does not take them, as glog)."""
    global _buffer
    if _buffer is not None or limit <= 0:
        return
    try:
        fd = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return  # no descriptor (a test's capture): write in the caller, as before
    _buffer = _BufferedStderr(fd, limit)
    atexit.register(flush)


def flush(timeout: float = FLUSH_SECONDS) -> None:
    """Write out the buffered lines (at exit), for at most ``timeout``: a stderr that
    takes nothing does not hold the exit."""
    if _buffer is not None:
        _buffer.flush(timeout)


def dropped() -> int:
    """Log lines dropped so far because stderr did not take them."""
    return _buffer.dropped if _buffer is not None else 0


class _StderrLogger:
    """Writes each rendered event as one line to the *current* ``sys.stderr``, or to the
    buffer of :func:`buffer_stderr` when the daemon made one.

    Looked up per write rather than bound at configure time, so a replaced stderr (test
    capture, a closed stream) never leaves loggers holding a dead file object.
    """

    _lock = threading.Lock()

    def msg(self, message: str) -> None:
        buffered = _buffer
        if buffered is not None:
            buffered.put(message)
            return
        # stderr closed, or a broken pipe: a log line must never stop the daemon.
        with self._lock, contextlib.suppress(OSError, ValueError):
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
        if real is None and _held is not None:
            if name in _PLAIN:
                return _Holder(self._component, name)
            release()  # anything else (bind, exception) ends the holding, in order
        if real is None:
            with _ready_lock:
                if not _ready:
                    _setup()
            import structlog
            real = self._real = structlog.get_logger().bind(component=self._component)
        return getattr(real, name)


class _Holder:
    """One logging call made while events are held (see :func:`hold`)."""

    __slots__ = ("_component", "_method")

    def __init__(self, component: str, method: str) -> None:
        self._component = component
        self._method = method

    def __call__(self, event: str, **fields: Any) -> None:
        if "exc_info" not in fields:
            fields[_HELD_AT] = time.time_ns()
            with _ready_lock:
                held = _held
                if held is not None:
                    held.append((self._component, self._method, event, fields))
                    return
        else:  # an exception is rendered now, while it is the current one
            release()
        fields.pop(_HELD_AT, None)
        getattr(get_logger(self._component), self._method)(event, **fields)
