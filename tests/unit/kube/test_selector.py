"""--nodelabels validation follows apimachinery's label-selector grammar."""

from __future__ import annotations

import pytest

from cpa.kube.selector import Requirement, SelectorError, parse_selector


@pytest.mark.parametrize("text,expected", [
    ("", ()),
    ("a=b", (Requirement("a", "=", ("b",)),)),
    ("a==b,c!=d", (Requirement("a", "=", ("b",)), Requirement("c", "!=", ("d",)))),
    ("env in (prod, staging)", (Requirement("env", "in", ("prod", "staging")),)),
    ("tier notin (x)", (Requirement("tier", "notin", ("x",)),)),
    ("!gpu", (Requirement("gpu", "!", ()),)),
    ("gpu", (Requirement("gpu", "exists", ()),)),
    ("node-role.kubernetes.io/worker=true",
     (Requirement("node-role.kubernetes.io/worker", "=", ("true",)),)),
    ("cpus>4", (Requirement("cpus", ">", ("4",)),)),
    ("a-b.c9.io/k", (Requirement("a-b.c9.io/k", "exists", ()),)),
    ("x" * 63 + "." + "y" * 189 + "/k=v",
     (Requirement("x" * 63 + "." + "y" * 189 + "/k", "=", ("v",)),)),
    ("a=", (Requirement("a", "=", ("",)),)),
    (" a = b , c ", (Requirement("a", "=", ("b",)), Requirement("c", "exists", ()))),
])
def test_valid(text: str, expected: tuple[Requirement, ...]) -> None:
    assert parse_selector(text) == expected


@pytest.mark.parametrize("text", [
    "a==b==c", "a=b,", ",a", "a b", "a in b", "a in (b", "-a=b", "a=-b", "a>b",
    "Bad_Prefix.com/x=y", "/x=y", "a..b/x=y", ".a/x=y", "a./x=y", "-a.io/x=y",
    "a-.io/x=y", "a.-b/x=y", "A.io/x=y", "a_b/x=y", "x" * 63 + "." + "y" * 190 + "/k=v",
    "a=" + "v" * 64, "k" * 64, "a=b c", "(a)", "a<>b",
])
def test_invalid(text: str) -> None:
    with pytest.raises(SelectorError):
        parse_selector(text)
