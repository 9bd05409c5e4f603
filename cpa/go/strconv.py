"""Go's ``strconv`` number and boolean parsing, as pflag's and glog's flags use it.

Why not :func:`int`: Go reads ``0x1f``, ``0o17``, ``017`` and ``1_000`` in flag values
(``ParseInt(s, 0, bits)``), rejects ``1.0`` and spaces, and has fixed widths; a manifest
written for the Go binary must be read to the same number or refused the same way.
"""

from __future__ import annotations

import re

__all__ = ["parse_bool", "parse_decimal_int", "parse_go_int"]


def parse_go_int(text: str, bits: int = 64) -> int:
    """``strconv.ParseInt(s, 0, bits)``: base prefixes and underscores, as pflag's int does."""
    s = text
    sign = 1
    if s[:1] in ("+", "-"):
        sign = -1 if s[0] == "-" else 1
        s = s[1:]
    base, prefixed = 10, False
    if s[:2].lower() in ("0x", "0b", "0o"):
        base, prefixed = {"x": 16, "b": 2, "o": 8}[s[1].lower()], True
        s = s[2:]
    elif len(s) > 1 and s[0] == "0":
        base, prefixed = 8, True
        s = s[1:]
    # Go allows "_" only between digits, or between a base prefix and a digit.
    if "_" in s and (s.endswith("_") or "__" in s or (s.startswith("_") and not prefixed)):
        raise ValueError(text)
    digits = s.replace("_", "")
    if not digits or not digits.isascii() or not digits.isalnum():
        raise ValueError(text)
    value = sign * int(digits, base)
    if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
        raise ValueError(text)
    return value


def parse_decimal_int(text: str, bits: int = 64) -> int:
    """``strconv.Atoi`` / ``ParseInt(s, 10, bits)``: what glog's flags use."""
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        raise ValueError(text)
    value = int(text, 10)
    if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
        raise ValueError(text)
    return value


_BOOL_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
_BOOL_FALSE = {"0", "f", "F", "FALSE", "false", "False"}


def parse_bool(text: str) -> bool:
    """``strconv.ParseBool``."""
    if text in _BOOL_TRUE:
        return True
    if text in _BOOL_FALSE:
        return False
    raise ValueError(text)
