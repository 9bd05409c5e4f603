"""pflag's command-line syntax, as upstream's Go binaries parse their flags.

Manifests written for the Go binaries must keep working unchanged, so this is a small
re-implementation of pflag's syntax (``--f=v``, ``--f v``, bare booleans, ``-`` and ``_``
interchangeable, one-letter glog flags usable as ``-v``) rather than argparse, whose
abbreviation matching and option syntax differ in ways a Go user would trip over. Each
program has its own :class:`FlagTable`; the rows both programs share are in
:mod:`cpa.runtime.common_flags`.

Two failure classes, with upstream's exit codes:
* :class:`UsageError` (:data:`EXIT_USAGE`, 2): unknown flag (naming the nearest ones, as
  cobra suggests commands), missing value, unparsable value;
* a program's own validation reports every problem at once (:data:`EXIT_INVALID`, 1), so an
  operator fixes a manifest in one round trip.

A program declares each flag once, as a field of its options dataclass made by :func:`flag`:
``poll_period_seconds: int = flag(10, parse_go_int, "Seconds between polls.", metavar="int")``.
The field's name is the flag's (``log_dir`` is ``--log-dir``: pflag reads ``_`` as ``-``
anyway), its annotation and default are the option's type and default, and the row adds the
parser (whose ValueError is a usage error) and the flag's line of ``--help``. :func:`table_of`
derives the program's :class:`FlagTable` from the class, in the order its body declares the
fields, which is the order of ``--help``. The option groups both programs take are
dataclasses the program inherits; an :class:`Include` marker in the body says where their
flags go, as each upstream puts them in its own place.

Why a dataclass: the standard library writes the constructor from the same fields, and
``mypy --strict`` checks every option's name and type, and each row's parser against its
field's type, so there is no second list to keep in step. Checks that read several flags, or
that keep the order and words of upstream's messages, stay in each program's ``validate``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from cpa.namedtuple import NamedTuple

__all__ = ["EXIT_INVALID", "EXIT_USAGE", "Flag", "FlagTable", "Include", "UsageError", "flag",
           "parse_flags", "parse_str", "suggest", "table_of", "usage"]

EXIT_USAGE = 2
EXIT_INVALID = 1


class UsageError(Exception):
    """A flag the command line cannot be parsed with; upstream exits 2 for these."""


class Flag(NamedTuple):
    """One flag of a table: its name (``-`` spelling), the attribute it sets, its parser."""

    name: str
    attr: str
    parse: Callable[[str], Any]
    help: str
    is_bool: bool = False
    metavar: str = ""


def parse_str(text: str) -> str:
    return text


class FlagTable:
    """A program's flags, parsed by :func:`parse_flags` with pflag's rules."""

    def __init__(self, flags: Sequence[Flag]) -> None:
        self.flags = tuple(flags)
        self.by_name: dict[str, Flag] = {f.name: f for f in self.flags}
        # pflag.PFlagFromGoFlag gives one-letter Go flags a shorthand: "-v=2" works; and
        # pflag answers -h with the usage, as --help.
        self.shorthands: dict[str, Flag] = {f.name: f for f in self.flags if len(f.name) == 1}
        if "help" in self.by_name and "h" not in self.shorthands:
            self.shorthands["h"] = self.by_name["help"]


# --- the rows, declared as the fields of an options dataclass -----------------------------

_T = TypeVar("_T")
_ROW = "pflag"
"""The key of a field's metadata that holds its flag row."""


def flag(default: _T, parse: Callable[[str], _T], help: str, *, metavar: str = "") -> _T:
    """A field of an options dataclass that is a flag (``poll_period_seconds: int =
    flag(10, parse_go_int, "Seconds between polls.", metavar="int")``): ``parse`` reads a
    command-line value (its ValueError is a usage error), ``help`` and ``metavar`` make its
    line of ``--help``. A bool field is a bare flag (``--dry-run`` means true). Typed as the
    default, so the class body type-checks; it is a :func:`dataclasses.field` at run time."""
    row = {"parse": parse, "help": help, "metavar": metavar}
    return dataclasses.field(default=default, metadata={_ROW: row})


class Include(NamedTuple):
    """In an options class's body, ``name: ClassVar[Include] = Include(Group)``: the flags of
    ``Group`` (a dataclass the class inherits) go here in ``--help``, in the group's order. A
    field of the group the class declares again (to give it its own help or default) keeps
    the group's place."""

    group: type


def table_of(options: type) -> FlagTable:
    """The flag table of an options dataclass: a row per :func:`flag` field, its own fields
    in the order its body declares them, each :class:`Include`'d group's at its marker."""
    rows = {f.name: f for f in dataclasses.fields(options) if _ROW in f.metadata}
    order = [name for name in _body_order(options) if name in rows]
    if sorted(order) != sorted(rows):
        raise TypeError(f"{options.__name__}: every flag field must be placed once (its own, "
                        "or its group's through an Include in the class body); placed "
                        f"{order}, fields {sorted(rows)}")
    return FlagTable([Flag(name=_normalize(name), attr=name,
                           is_bool=isinstance(rows[name].default, bool),
                           **rows[name].metadata[_ROW]) for name in order])


def _body_order(cls: type) -> list[str]:
    """The field names of ``cls``'s body in order, a group's in its place (recursively)."""
    body = vars(cls)
    groups = [value.group for value in body.values() if isinstance(value, Include)]
    grouped = {f.name for group in groups for f in dataclasses.fields(group)}
    order: list[str] = []
    for name in body.get("__annotations__", {}):  # the class's own, in body order
        marker = body.get(name)
        if isinstance(marker, Include):
            order.extend(_body_order(marker.group))
        elif name not in grouped:
            order.append(name)
    return order


_OptionsT = TypeVar("_OptionsT")


def _normalize(name: str) -> str:
    """Upstream's WordSepNormalizeFunc: ``_`` and ``-`` are the same in flag names."""
    return name.replace("_", "-")


def parse_flags(argv: Sequence[str], table: FlagTable, opts: _OptionsT) -> _OptionsT:
    """Set ``opts``' attributes from ``argv`` as ``table`` says, with pflag rules; raise
    :class:`UsageError`. Positional arguments are ignored, as upstream's ``pflag.Parse``
    leaves them unused."""
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            break
        if not arg.startswith("-") or arg == "-":
            continue
        flag, shown, has_value, value = _flag_of(arg, table)
        if not has_value:
            if flag.is_bool:
                value = "true"
            elif i < len(args):
                value = args[i]
                i += 1
            else:
                raise UsageError(f"flag needs an argument: {shown}")
        try:
            setattr(opts, flag.attr, flag.parse(value))
        except ValueError as exc:
            detail = str(exc)
            reason = f": {detail}" if detail and detail != value else ""
            raise UsageError(
                f"invalid argument {_cut(value)!r} for {shown} flag{_cut(reason, 300)}"
            ) from None
    return opts


def _flag_of(arg: str, table: FlagTable) -> tuple[Flag, str, bool, str]:
    """(the flag, its spelling for messages, whether ``arg`` carries the value, the value)
    of one ``--name[=value]`` or ``-x[=value]`` argument."""
    if arg.startswith("--"):
        name, equals, value = arg[2:].partition("=")
        flag = table.by_name.get(_normalize(name))
        if flag is None or name.startswith("-") or not name:
            raise UsageError(f"unknown flag: --{_cut(name)}{_did_you_mean(name, table)}"
                             .replace("\n", " "))
        return flag, f"--{name}", bool(equals), value
    body = arg[1:]
    letter, rest = body[:1], body[1:]
    short = table.shorthands.get(letter)
    if short is None:
        # "-configmap=x" (Go's flag syntax, which pflag refuses) is a long flag with one
        # dash: name the long one.
        typed = body.partition("=")[0]
        hint = _did_you_mean(typed, table) if len(typed) > 1 else ""
        raise UsageError(f"unknown shorthand flag: {letter!r} in {_cut(arg)}{hint}"
                         .replace("\n", " "))
    return short, f"-{letter}", bool(rest), rest[1:] if rest.startswith("=") else rest


SUGGESTION_DISTANCE = 2
"""cobra's default ``SuggestionsMinimumDistance`` (command.go, ``findSuggestions``)."""
MAX_SUGGESTIONS = 3
"""A typo's message stays one line: a short prefix (``--l``) matches half the table."""


def suggest(typed: str, names: Sequence[str]) -> list[str]:
    """The names a mistyped one was probably meant to be, as cobra suggests commands
    (``Command.SuggestionsFor``): within Levenshtein distance 2, ignoring case, or starting
    with what was typed; in the table's order. ``_`` and ``-`` are the same, as in
    parsing. pflag itself suggests nothing; cobra does it for commands, we for flags."""
    word = _normalize(typed).lower()
    if not word or word.startswith("-"):
        return []
    return [name for name in names
            if name.startswith(word) or (abs(len(word) - len(name)) <= SUGGESTION_DISTANCE
                                         and _levenshtein(word, name) <= SUGGESTION_DISTANCE)]


def _did_you_mean(typed: str, table: FlagTable) -> str:
    found = suggest(typed, [f.name for f in table.flags])[:MAX_SUGGESTIONS]
    return f" (did you mean {' or '.join('--' + n for n in found)}?)" if found else ""


def _levenshtein(a: str, b: str) -> int:
    """Edit distance (insert, delete, substitute one character), as cobra's ``ld``."""
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1,
                               previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def _cut(text: str, limit: int = 100) -> str:
    """A value quoted back in a message, shortened: a one-line error stays one line."""
    return text if len(text) <= limit else f"{text[:limit]}...({len(text)} characters)"


def usage(prog: str, table: FlagTable) -> str:
    """The ``--help`` text: every flag with its spelling as manifests use it."""
    lines = [f"Usage of {prog}:"]
    for flag in table.flags:
        spelled = f"--{flag.name}" + (f" {flag.metavar}" if flag.metavar else "")
        lines.append(f"      {spelled:<34} {flag.help}")
    lines.append("Names may use '_' or '-' interchangeably (--log_dir == --log-dir).")
    return "\n".join(lines)
