"""Entry points: the daemons (``cluster-proportional-autoscaler`` and ``cpa run``:
:mod:`cpa.horizontal.daemon.cpa_main`; ``cpvpa``: :mod:`cpa.vertical.daemon.cpvpa_main`) and
``cpa``.

Wiring only: which command runs, and that a user never meets a traceback (:func:`guarded`);
each daemon parses its own flags and maps outcomes to its upstream's exit codes.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
from collections.abc import Callable, Sequence

from cpa import VERSION_TEXT, redact
from cpa.go.pflag import EXIT_INVALID, EXIT_USAGE
from cpa.runtime.startup import usage_exit

__all__ = ["DAEMON_NAME", "daemon_main", "guarded", "main", "run_daemon", "vertical_main"]

DAEMON_NAME = "cluster-proportional-autoscaler"
"""Upstream's binary name: the console script's, and the daemon's name in messages."""


def run_daemon(argv: Sequence[str], prog: str = DAEMON_NAME) -> int:
    """The autoscaler daemon (:func:`cpa.horizontal.daemon.cpa_main.run`; imported here, so that
    ``/cpvpa`` and the one-shot commands load nothing of it)."""
    from cpa.horizontal.daemon.cpa_main import run

    return run(argv, prog)


def daemon_main() -> None:
    """Console script ``cluster-proportional-autoscaler``: upstream's binary name.

    A CPVA command line (``--default-config`` or ``--config-file``, no ``--configmap``)
    is handed to ``/cpvpa``: a CPVA manifest that gives only ``args:`` and relied on
    CPVA's image entrypoint starts this one. The autoscaler has neither flag (it would exit
    2), so no autoscaler command line changes meaning."""
    args = sys.argv[1:]
    if _is_cpva_command_line(args):
        print(f"{DAEMON_NAME}: a cluster-proportional-vertical-autoscaler command line; "
              "running /cpvpa", file=sys.stderr)
        vertical_main()
    prog = os.path.basename(sys.argv[0]) or DAEMON_NAME
    sys.exit(guarded(prog, lambda: run_daemon(args, prog)))


def _is_cpva_command_line(args: Sequence[str]) -> bool:
    names = set()
    for arg in args:
        if arg == "--":
            break
        if arg.startswith("--"):
            names.add(arg[2:].partition("=")[0].replace("_", "-"))
    return bool(names & {"default-config", "config-file"}) and "configmap" not in names


def vertical_main() -> None:
    """Console script ``cpvpa`` (the image's ``/cpvpa``): the vertical autoscaler,
    CPVA v0.8.9's drop-in (:mod:`cpa.vertical`)."""
    gc.enable()  # the image's autoscaler script turns it off (a CPVA command line ends here)
    from cpa.vertical.daemon.cpvpa_main import run_vertical

    prog = os.path.basename(sys.argv[0]) or "cpvpa"
    sys.exit(guarded(prog, lambda: run_vertical(sys.argv[1:], prog)))


def guarded(prog: str, command: Callable[[], int]) -> int:
    """Run a command as a user meets it: never a traceback.

    * A reader that goes away (``cpa explain ... | head -1``) is not an error: the rest of
      the output is dropped quietly and the exit code is 0 (the output was cut by request).
    * Ctrl-C ends a one-shot command with 130, as a shell expects.
    * A module that is not installed is the installation's problem: one line naming the
      package and how to install it, exit 1.
    * Anything unexpected is a bug of ours: one line saying where, asking for a report,
      exit 1 (never the raw exception).
    """
    try:
        code = command()
        sys.stdout.flush()  # a closed pipe shows here, not at exit where it would print
        return code
    except BrokenPipeError:
        _drop_output()
        return 0
    except KeyboardInterrupt:
        return 130
    except (RecursionError, MemoryError):
        _say(prog, "the input is too large or nested too deeply to handle")
        return EXIT_INVALID
    except ModuleNotFoundError as exc:  # an installation's problem: say how to fix it
        from cpa.tools.inputs import missing_module

        _say(prog, missing_module(exc))
        return EXIT_INVALID
    except Exception as exc:
        from cpa.tools.inputs import internal_error

        _say(prog, internal_error(exc))
        return EXIT_INVALID


def _drop_output() -> None:
    """Point stdout and stderr at /dev/null: the interpreter flushes them at exit, which
    would fail again on the closed pipe and print a warning."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # not a real file (a test's capture)
            os.dup2(devnull, stream.fileno())
    os.close(devnull)


def _say(prog: str, message: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        print(f"{prog}: {redact.scrub(message)}", file=sys.stderr)


_CPA_USAGE = """usage: cpa [--version] <command> [flags]

commands:
  run       run the autoscaler daemon (same flags as cluster-proportional-autoscaler)
  explain   show what the autoscaler would do, and why, without writing anything
            (--vertical: what /cpvpa, the vertical autoscaler, would write)
  simulate  replay a timeline of node/core counts (and load) through the formula and its behavior
  advise    the load axis's targetPerReplica and windows a recorded load would have needed

`cpa <command> --help` (or `cpa help <command>`) describes a command's flags."""

_COMMANDS = ("run", "explain", "simulate", "advise")


def main(argv: Sequence[str] | None = None) -> int:
    """Console script ``cpa`` (and ``python -m cpa``)."""
    args = list(sys.argv[1:] if argv is None else argv)
    return guarded("cpa", lambda: _main(args))


def _main(args: list[str]) -> int:
    if args[:1] == ["help"] and args[1:2] and args[1] in _COMMANDS:
        args = [args[1], "--help"]
    if not args or args[0] in ("-h", "--help", "help"):
        if args:
            print(_CPA_USAGE)
            return 0
        print(_CPA_USAGE, file=sys.stderr)
        return EXIT_USAGE
    if args[0] in ("--version", "-version", "version"):
        print(VERSION_TEXT)
        return 0
    command, rest = args[0], args[1:]
    if command == "run":
        return run_daemon(rest, "cpa run")
    if command == "explain":
        from cpa.tools.explain import explain_main

        return explain_main(rest)
    if command == "simulate":
        from cpa.tools.simulate import simulate_main

        return simulate_main(rest)
    if command == "advise":
        from cpa.tools.advise import advise_main

        return advise_main(rest)
    return usage_exit("cpa", f"unknown command {command[:40]!r}: use run, explain, "
                              "simulate or advise")
