"""Label-selector validation, following apimachinery's ``labels.Parse`` grammar.

``--nodelabels`` goes to the API server unchanged; the server filters. We parse it only to
fail at start-up with a clear message: upstream hangs forever waiting for a cache that an
invalid selector can never fill.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_SPECIAL = set(" \t\r\n,=!()<>")


class SelectorError(ValueError):
    """The selector is not valid Kubernetes label-selector syntax."""


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str  # "exists", "!", "=", "!=", "in", "notin", ">", "<"
    values: tuple[str, ...]


def _check_key(key: str) -> None:
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _SUBDOMAIN.fullmatch(prefix)):
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
    toks = _tokens(text)
    pos = 0
    reqs: list[Requirement] = []

    def peek() -> str | None:
        return toks[pos] if pos < len(toks) else None

    def take() -> str | None:
        nonlocal pos
        tok = peek()
        pos += 1
        return tok

    if not toks:
        return ()
    while True:
        tok = take()
        if tok == "!":
            key = take()
            if not _is_ident(key):
                raise SelectorError(f"expected a label key after '!' in {text!r}")
            assert key is not None
            _check_key(key)
            reqs.append(Requirement(key, "!", ()))
        elif _is_ident(tok):
            assert tok is not None
            key = tok
            _check_key(key)
            op = peek()
            if op is None or op == ",":
                reqs.append(Requirement(key, "exists", ()))
            else:
                take()
                if op in ("=", "==", "!="):
                    value = peek()
                    if _is_ident(value):
                        take()
                    else:
                        value = ""
                    assert value is not None
                    _check_value(value)
                    reqs.append(Requirement(key, "!=" if op == "!=" else "=", (value,)))
                elif op in (">", "<"):
                    value = take()
                    if not _is_ident(value) or not re.fullmatch(r"-?[0-9]+", value or ""):
                        raise SelectorError(
                            f"{key}{op}: the value must be an integer in {text!r}")
                    assert value is not None
                    reqs.append(Requirement(key, op, (value,)))
                elif op in ("in", "notin"):
                    if take() != "(":
                        raise SelectorError(f"expected '(' after {key} {op} in {text!r}")
                    values: list[str] = []
                    while True:
                        nxt = take()
                        if nxt == ")" and not values:
                            values.append("")
                            break
                        if _is_ident(nxt):
                            assert nxt is not None
                            _check_value(nxt)
                            values.append(nxt)
                            nxt = take()
                        elif nxt == ",":
                            values.append("")
                            continue
                        if nxt == ")":
                            break
                        if nxt != ",":
                            raise SelectorError(
                                f"expected ',' or ')' in the value set of {key} in {text!r}")
                    reqs.append(Requirement(key, op, tuple(values)))
                else:
                    raise SelectorError(
                        f"unexpected {op!r} after label key {key!r} in {text!r}: use =, ==, "
                        "!=, in, notin, > or <")
        else:
            raise SelectorError(f"expected a label key, found {tok!r} in {text!r}")
        sep = take()
        if sep is None:
            break
        if sep != ",":
            raise SelectorError(f"expected ',' between requirements, found {sep!r} in {text!r}")
        if peek() is None:
            raise SelectorError(f"trailing ',' in {text!r}")
    return tuple(reqs)
