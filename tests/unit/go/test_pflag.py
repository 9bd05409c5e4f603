"""cpa.go.pflag's suggestions for a mistyped flag, and a table derived from an options
dataclass (the programs' own errors are tested with each program's options:
tests/unit/horizontal/test_cpa_flags.py, tests/unit/vertical/test_options.py)."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import pytest

from cpa.go.pflag import (
    FlagTable,
    Include,
    UsageError,
    flag,
    parse_flags,
    parse_str,
    suggest,
    table_of,
    usage,
)
from cpa.go.strconv import parse_bool, parse_go_int
from cpa.horizontal.cpa_flags import CPA_FLAGS, Options
from cpa.runtime.common_flags import GlogOptions
from cpa.vertical import cpvpa_flags as vertical_flags


@pytest.mark.parametrize("typed,names,expected", [
    ("nodelabel", ["nodelabels", "namespace"], ["nodelabels"]),
    ("nodelabelsx", ["nodelabels"], ["nodelabels"]),
    ("ab", ["abc", "xyz", "b"], ["abc", "b"]),  # a prefix; one substitution away
    ("v", ["v", "version"], ["v", "version"]),
    ("zzzz", ["v", "version"], []),
    ("", ["v"], []),
    ("-v", ["v"], []),
    ("x" * 300, ["x"], []),
])
def test_suggest(typed: str, names: list[str], expected: list[str]) -> None:
    assert suggest(typed, names) == expected


# --- a table from the fields of an options dataclass ---------------------------------------


@dataclasses.dataclass(kw_only=True)
class _Group:
    first: int = flag(1, parse_go_int, "The group's first.", metavar="int")
    second_flag: str = flag("a", parse_str, "The group's second.", metavar="string")


@dataclasses.dataclass(kw_only=True)
class _Other:
    other: bool = flag(False, parse_bool, "Another group's.")


@dataclasses.dataclass(kw_only=True)
class _Options(_Group, _Other):
    own: str = flag("", parse_str, "Ours, first.", metavar="path")
    _group: ClassVar[Include] = Include(_Group)
    second_flag: str = flag("b", parse_str, "Declared again: our help, our default.",
                            metavar="string")
    dry_run: bool = flag(False, parse_bool, "Ours, after the group.")
    _other: ClassVar[Include] = Include(_Other)
    not_a_flag: tuple[str, ...] = ()


def test_a_table_comes_from_the_fields_in_the_order_of_the_class_body() -> None:
    table = table_of(_Options)
    assert [(f.name, f.attr, f.is_bool, f.metavar, f.help) for f in table.flags] == [
        ("own", "own", False, "path", "Ours, first."),
        ("first", "first", False, "int", "The group's first."),
        # declared again: the group's place, the program's row
        ("second-flag", "second_flag", False, "string",
         "Declared again: our help, our default."),
        ("dry-run", "dry_run", True, "", "Ours, after the group."),
        ("other", "other", True, "", "Another group's."),
    ]
    assert usage("p", table).splitlines()[1:3] == [
        f"      {'--own path':<34} Ours, first.",
        f"      {'--first int':<34} The group's first.",
    ]


def test_the_options_object_and_the_parser_share_the_rows() -> None:
    opts = _Options()
    assert (opts.own, opts.first, opts.second_flag, opts.dry_run, opts.other,
            opts.not_a_flag) == ("", 1, "b", False, False, ())
    parsed = parse_flags(["--second_flag=x", "--first", "0x10", "--dry-run", "--other=false"],
                         table_of(_Options), _Options())
    assert (parsed.second_flag, parsed.first, parsed.dry_run, parsed.other) == (
        "x", 16, True, False)
    with pytest.raises(UsageError, match="invalid argument 'x' for --first"):
        parse_flags(["--first=x"], table_of(_Options), _Options())


def test_a_group_inherited_but_not_placed_is_refused() -> None:
    """Its flags would be fields nobody can set: the table says so when the module loads."""

    @dataclasses.dataclass(kw_only=True)
    class Forgot(_Group):
        own: str = flag("", parse_str, "Ours.")

    with pytest.raises(TypeError, match="every flag field must be placed once"):
        table_of(Forgot)


@pytest.mark.parametrize("table", [CPA_FLAGS, vertical_flags.TABLE],
                         ids=["autoscaler", "cpvpa"])
def test_each_programs_table_is_its_options_flag_fields(table: FlagTable) -> None:
    options = Options if table is CPA_FLAGS else vertical_flags.VerticalOptions
    fields = {f.name: f for f in dataclasses.fields(options)}
    for row in table.flags:
        assert row.name == row.attr.replace("_", "-")
        assert row.is_bool is isinstance(fields[row.attr].default, bool)
    glog = [f.name for f in dataclasses.fields(GlogOptions)]
    attrs = [row.attr for row in table.flags]
    start = attrs.index("v")
    assert attrs[start:start + len(glog)] == glog  # the group together, in glog's order
