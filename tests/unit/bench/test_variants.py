"""The benchmarks' variants of ours: how a ``--variant`` reads, and the start-up table."""

from __future__ import annotations

import pytest

from bench.profile import startup_summary
from bench.variants import parse_spec


def test_a_variant_names_a_tree_and_optionally_an_interpreter() -> None:
    assert parse_spec("before=git:main") == ("before", "git:main", "")
    assert parse_spec("after=.,python=/usr/bin/python3.12") == (
        "after", ".", "/usr/bin/python3.12")
    assert parse_spec("ours") == ("ours", ".", "")


def test_a_variant_without_a_name_is_refused() -> None:
    with pytest.raises(SystemExit, match="NAME=TREE"):
        parse_spec("=git:main")


def test_the_startup_table_gives_each_variant_its_median_and_ratio() -> None:
    report = {"nodes": 1000, "runs": 3, "load_average_at_start": [0.1],
              "load_average_at_end": [0.2], "variants": {
                  "ours": {"first_correct_write_s": [0.12, 0.10, 0.14],
                           "median_first_correct_write_s": 0.12, "ratio_to_upstream": 0.5},
                  "upstream": {"first_correct_write_s": [0.24, 0.25, 0.23],
                               "median_first_correct_write_s": 0.24,
                               "ratio_to_upstream": 1.0}}}
    table = startup_summary(report)
    assert "| ours | 0.120 | 0.100 | 0.140 | 0.5 |" in table
    assert "| upstream | 0.240 | 0.230 | 0.250 | 1.0 |" in table
