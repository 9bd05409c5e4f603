"""Label selectors as apimachinery reads and matches them: one :class:`Requirement` type
for both the selector syntax (``labels.Parse``) and a node affinity's expressions
(``NodeSelectorRequirementAsSelector``), and one :func:`matches`.

``--nodelabels`` goes to the API server unchanged; the server filters. We parse it only to
fail at start-up with a clear message: upstream hangs forever waiting for a cache that an
invalid selector can never fill. ``targetPlacement`` matches a Pod template's required
node affinity against the Nodes' labels here, as kube-scheduler does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from cpa.go.strconv import parse_decimal_int
from cpa.kube.targets import is_dns1123_subdomain

_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_SPECIAL = set(" \t\r\n,=!()<>")


class SelectorError(ValueError):
    """The selector is not valid Kubernetes label-selector syntax."""


class Requirement(NamedTuple):
    """One requirement of a selector: ``operator`` is apimachinery's ``selection.Operator``
    (``exists``, ``!``, ``=``, ``!=``, ``in``, ``notin``, ``>``, ``<``)."""

    key: str
    operator: str
    values: tuple[str, ...] = ()


def matches(requirement: Requirement, labels: Mapping[str, str]) -> bool:
    """apimachinery's ``Requirement.Matches``: a missing label matches ``!=``, ``notin`` and
    ``!``; ``>`` and ``<`` compare int64 values, and a value that is not one matches
    nothing."""
    key, op, values = requirement
    if op in ("=", "in"):
        return key in labels and labels[key] in values
    if op in ("!=", "notin"):
        return key not in labels or labels[key] not in values
    if op == "exists":
        return key in labels
    if op == "!":
        return key not in labels
    if op in (">", "<") and key in labels and len(values) == 1:
        try:
            have, bound = parse_decimal_int(labels[key]), parse_decimal_int(values[0])
        except ValueError:
            return False
        return have > bound if op == ">" else have < bound
    return False


_NODE_OPERATORS = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!",
                   "Gt": ">", "Lt": "<"}


def node_requirement(key: str, operator: str, values: Sequence[str]) -> Requirement | None:
    """A node affinity's ``matchExpressions`` entry as a selector requirement, as the
    scheduler converts it; None when it is not a valid one (then its term matches no
    Node): ``In``/``NotIn`` need values, ``Exists``/``DoesNotExist`` none, ``Gt``/``Lt``
    exactly one integer."""
    op = _NODE_OPERATORS.get(operator)
    if op is None:
        return None
    if op in ("in", "notin"):
        valid = bool(values)
    elif op in ("exists", "!"):
        valid = not values
    else:
        valid = len(values) == 1 and _is_int64(values[0])
    return Requirement(key, op, tuple(values)) if valid else None


def _is_int64(text: str) -> bool:
    try:
        parse_decimal_int(text)
    except ValueError:
        return False
    return True


def _check_key(key: str) -> None:
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not is_dns1123_subdomain(prefix)):
        raise SelectorError(f"invalid label key {key!r}: the prefix must be a DNS subdomain")
    if not name or len(name) > 63 or not _NAME.fullmatch(name):
        raise SelectorError(
            f"invalid label key {key!r}: the name part must be 1-63 characters of letters, "
            "digits, '-', '_' or '.', starting and ending with a letter or digit")


def _check_value(value: str) -> None:
    if value and (len(value) > 63 or not _NAME.fullmatch(value)):
        raise SelectorError(
            f"invalid label value {value!r}: at most 63 characters of letters, digits, "
            "'-', '_' or '.', starting and ending with a letter or digit")


def _tokens(text: str) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c in " \t\r\n":
            i += 1
        elif text.startswith(("==", "!="), i):
            out.append(text[i:i + 2])
            i += 2
        elif c in _SPECIAL:
            out.append(c)
            i += 1
        else:
            j = i
            while j < len(text) and text[j] not in _SPECIAL:
                j += 1
            out.append(text[i:j])
            i = j
    return out


def _is_ident(tok: str | None) -> bool:
    return tok is not None and tok[0] not in _SPECIAL and tok not in ("==", "!=")


def parse_selector(text: str) -> tuple[Requirement, ...]:
    """Parse ``text``; raise :class:`SelectorError` naming the first problem."""
    parser = _Parser(text)
    if not parser.toks:
        return ()
    reqs: list[Requirement] = []
    while True:
        reqs.append(parser.requirement())
        sep = parser.take()
        if sep is None:
            break
        if sep != ",":
            raise SelectorError(f"expected ',' between requirements, found {sep!r} in {text!r}")
        if parser.peek() is None:
            raise SelectorError(f"trailing ',' in {text!r}")
    return tuple(reqs)


class _Parser:
    """apimachinery's selector parser over the tokens of ``text``, one requirement at a
    time."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokens(text)
        self.pos = 0

    def peek(self) -> str | None:
        return self.toks[self.pos] if self.pos < len(self.toks) else None

    def take(self) -> str | None:
        tok = self.peek()
        self.pos += 1
        return tok

    def requirement(self) -> Requirement:
        text = self.text
        tok = self.take()
        if tok == "!":
            key = self.take()
            if not _is_ident(key):
                raise SelectorError(f"expected a label key after '!' in {text!r}")
            assert key is not None
            _check_key(key)
            return Requirement(key, "!", ())
        if not _is_ident(tok):
            raise SelectorError(f"expected a label key, found {tok!r} in {text!r}")
        assert tok is not None
        _check_key(tok)
        op = self.peek()
        if op is None or op == ",":
            return Requirement(tok, "exists", ())
        self.take()
        return self._operation(tok, op)

    def _operation(self, key: str, op: str) -> Requirement:
        text = self.text
        if op in ("=", "==", "!="):
            value = self.peek()
            if _is_ident(value):
                self.take()
            else:
                value = ""
            assert value is not None
            _check_value(value)
            return Requirement(key, "!=" if op == "!=" else "=", (value,))
        if op in (">", "<"):
            value = self.take()
            if not _is_ident(value) or not re.fullmatch(r"-?[0-9]+", value or ""):
                raise SelectorError(f"{key}{op}: the value must be an integer in {text!r}")
            assert value is not None
            return Requirement(key, op, (value,))
        if op in ("in", "notin"):
            return Requirement(key, op, self._value_set(key, op))
        raise SelectorError(
            f"unexpected {op!r} after label key {key!r} in {text!r}: use =, ==, "
            "!=, in, notin, > or <")

    def _value_set(self, key: str, op: str) -> tuple[str, ...]:
        """``(a, b, ...)`` after ``in``/``notin``; an empty member is the empty value."""
        text = self.text
        if self.take() != "(":
            raise SelectorError(f"expected '(' after {key} {op} in {text!r}")
        values: list[str] = []
        while True:
            nxt = self.take()
            if nxt == ")" and not values:
                values.append("")
                break
            if _is_ident(nxt):
                assert nxt is not None
                _check_value(nxt)
                values.append(nxt)
                nxt = self.take()
            elif nxt == ",":
                values.append("")
                continue
            if nxt == ")":
                break
            if nxt != ",":
                raise SelectorError(
                    f"expected ',' or ')' in the value set of {key} in {text!r}")
        return tuple(values)
