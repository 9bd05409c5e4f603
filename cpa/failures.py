"""What a user is told when the program itself cannot go on: a package that is not
installed, or a bug of ours. One line each, never a traceback (the daemons' guard in
:mod:`cpa.cli`, the one-shot commands' in :mod:`cpa.tools.inputs`); this module needs
nothing that might be missing."""

from __future__ import annotations

import sys

from cpa.go.pflag import EXIT_USAGE

__all__ = ["internal_error", "missing_module", "usage_exit"]

# Our dependencies whose module is not named as their package (pyproject.toml).
_DISTRIBUTIONS = {"yaml": "pyyaml"}


def missing_module(exc: ModuleNotFoundError) -> str:
    """One line for a module that is not there: an installation's problem, not a bug of
    the program. It names the package, the interpreter that lacks it and the fix: the
    program with its dependencies in a venv (a distribution's own Python refuses a plain
    ``pip install``; ``make`` in a checkout makes and fills ``.venv``)."""
    top = (exc.name or "").partition(".")[0][:100] or "?"
    python = sys.executable or "this Python"
    if top == "cpa":
        return (f"the installation is incomplete: {python} finds no module {exc.name!r} of "
                "this program; reinstall it (from a checkout: make install)")
    dist = _DISTRIBUTIONS.get(top, top)
    named = f"{dist!r} (module {top!r})" if dist != top else repr(dist)
    return (f"the Python package {named}, which this program needs, is not installed for "
            f"{python}: install the program with its dependencies into a venv and run it "
            "from there (from a checkout: make install, which makes .venv; else python3 -m "
            "venv VENV && VENV/bin/pip install cluster-proportional-autoscaler-py), or add "
            f"the package to that environment (pip install {dist})")


def internal_error(exc: BaseException) -> str:
    """One line for an exception nobody expected: where it happened and what it says,
    asking for a report (no traceback, no bare exception type as the message)."""
    tb = exc.__traceback__
    where = ""
    while tb is not None:
        if "/cpa/" in tb.tb_frame.f_code.co_filename:
            name = tb.tb_frame.f_code.co_filename.rsplit("/cpa/", 1)[1]
            where = f" at cpa/{name}:{tb.tb_lineno}"
        tb = tb.tb_next
    detail = " ".join(str(exc).split())[:500] or "no detail"
    return (f"internal error{where} ({detail}); this is a bug: please report it with the "
            "command line")


def usage_exit(prog: str, message: str) -> int:
    """A command line that cannot be parsed: one line, exit 2 (pflag's)."""
    print(f"{prog}: {message} (see --help)", file=sys.stderr)
    return EXIT_USAGE
