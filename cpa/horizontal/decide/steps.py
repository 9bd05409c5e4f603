"""One step of an explanation, and how every step writes its numbers.

Its own module because every stage of a decision explains itself: the counts, each mode's
formula, the counting keys and the behavior all append :class:`Step` s, and all of them
write counts and numbers the same way (:func:`show`, :func:`plural`).
"""

from __future__ import annotations

import math
from typing import Final, NamedTuple

from cpa.go.json import format_go_float

__all__ = ["INFINITE", "Step", "plural", "show"]

INFINITE: Final = 2**1100
"""Stands for a float64 ``ceil`` that overflowed to +Inf (e.g. coresPerReplica 1e-320):
larger than any finite result, so every comparison still orders it correctly."""


class Step(NamedTuple):
    """One step of the reasoning: a stable greppable ``key`` and a full sentence."""

    key: str
    text: str


def show(number: float | int) -> str:
    """A number as an operator would write it: 16, 0.5, 1e+300, infinity.

    A whole number is written exactly, digit for digit (9223372036854775808, never Go's
    float rendering 9223372036854776000, which names another number) up to 21 digits;
    beyond that, as Go writes such floats (1e+23): a count that large is only ever the
    float64 result of a formula, and its exponent form says so."""
    if number == INFINITE or (isinstance(number, float) and math.isinf(number)):
        return "infinity"
    if isinstance(number, int) and abs(number) < 10**21:
        return str(number)
    return format_go_float(float(number))


def plural(count: int, noun: str) -> str:
    """``1 Node``, ``3 Nodes``."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
