"""How both daemons start: read the command line as upstream's binaries do (exit 2, 0 or
1), then become a process that honours SIGTERM, knows its API server and serves health.

Why shared: the two daemons are drop-ins for two Go programs with the same conventions
(pflag's usage errors, ``--help`` and ``--version``, every validation problem printed
before exit 1).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from cpa import logs
from cpa.failures import usage_exit
from cpa.go.pflag import EXIT_INVALID, UsageError
from cpa.kube.client import KubeApi
from cpa.kube.clientconfig import ConfigError, Connection, load
from cpa.runtime.health import HealthServer, HealthState, serve
from cpa.runtime.process import (
    Stopper,
    raise_open_files_limit,
    report_thread_failures,
    require_modules,
)

__all__ = ["CommandLine", "StartupError", "connect", "read_command_line", "serve_health"]


class CommandLine(Protocol):
    """What the start-up needs of a daemon's parsed options."""

    help: bool
    version: bool
    v: int
    log_format: str


_O = TypeVar("_O", bound=CommandLine)


class StartupError(Exception):
    """The daemon cannot start as told; the message says why and what to change (the
    daemon prints it after its name and exits 1)."""


def read_command_line(argv: Sequence[str], prog: str, parse: Callable[[Sequence[str]], _O],
                      usage: Callable[[str], str], version_text: str,
                      validate: Callable[[_O], list[str]], failed: str) -> _O | int:
    """The options, or the exit code: 2 for a usage error, 0 after ``--help`` or
    ``--version``, 1 after printing every validation problem and then ``failed`` (each
    upstream's last line). Logging is configured once the flags that set it are read."""
    try:
        opts = parse(argv)
    except UsageError as exc:
        return usage_exit(prog, str(exc))
    if opts.help:
        print(usage(prog))
        return 0
    if opts.version:
        print(version_text)
        return 0
    logs.configure(opts.v, opts.log_format)
    problems = validate(opts)
    lines = logs.buffer_lines()
    if isinstance(lines, str):
        problems.append(lines)
    else:
        logs.buffer_stderr(lines)  # a full log pipe never stops the loop
    if problems:
        for problem in problems:
            print(f"{prog}: {problem}", file=sys.stderr)
        print(f"{prog}: {failed}", file=sys.stderr)
        return EXIT_INVALID
    return opts


def connect(kubeconfig: str) -> tuple[Stopper, Connection, KubeApi]:
    """Become the process (every module the daemon will import found, the open-files
    limit raised, SIGTERM and SIGINT caught), then find the API server: ``kubeconfig``,
    else in-cluster. Nothing is requested yet.

    A missing module raises :class:`ModuleNotFoundError` here, on the main thread, rather
    than later in a thread where the process would run on, silent: the console script's
    guard (:func:`cpa.cli.guarded`) names the package and how to install it."""
    require_modules()
    raise_open_files_limit()
    stopper = Stopper()
    try:
        conn = load(kubeconfig)
    except ConfigError as exc:
        raise StartupError(str(exc)) from None
    return stopper, conn, KubeApi(conn)


def serve_health(health: HealthState, port: int,
                 metrics: Callable[[], bytes] | None) -> HealthServer:
    """``/healthz``, ``/last-poll`` and ``/metrics`` on ``port``, from this moment."""
    report_thread_failures(health.thread_failed)
    try:
        return serve(health, port, metrics=metrics)
    except OSError as exc:
        raise StartupError(f"cannot serve health on port {port}: {exc} (choose another "
                           "with --health-port)") from None
