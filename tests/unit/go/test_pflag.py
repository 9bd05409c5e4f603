"""cpa.go.pflag's suggestions for a mistyped flag (the tables' own errors are tested with
each program's options: tests/unit/test_flags.py, tests/unit/vertical/test_options.py)."""

from __future__ import annotations

import pytest

from cpa.go.pflag import suggest


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
