"""Kubernetes CPU quantities ("3920m", "4", "1.5", "2k", "1Ki") as exact millicores.

Why exact arithmetic: upstream adds the nodes' ``status.allocatable.cpu`` quantities
with ``resource.Quantity.Add`` (arbitrary precision) and rounds the sum up to whole
cores once.  Three nodes of "3920m" make 11760m, which is 12 cores; rounding each node
first, or summing floats, can give a different replica count.  So every value here is an
``int`` (or, for sub-millicore quantities, a :class:`~fractions.Fraction`).

Like ``resource.ParseQuantity``, a non-zero value is rounded up (away from zero) to a
whole nanocore, the finest precision a Quantity keeps; the API server only ever emits
canonical forms, where this changes nothing.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Final

__all__ = ["QuantityError", "cores_rounded_up", "cpu_millicores"]


class QuantityError(ValueError):
    """Text that is not a Kubernetes resource quantity."""


_QUANTITY = re.compile(
    r"(?P<sign>[+-]?)"
    r"(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?[0-9]+|[numkMGTPE]?)"
)

_DECIMAL_SI: Final = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12,
                      "P": 15, "E": 18}
_BINARY_SI: Final = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}

# Far beyond any real CPU count; keeps a hostile "1e999999999" from building a huge int.
_MAX_EXPONENT: Final = 1000
_MAX_LENGTH: Final = 1000

_NANOS_PER_CORE: Final = 10**9
_NANOS_PER_MILLICORE: Final = 10**6


def cpu_millicores(text: str) -> int | Fraction:
    """Parse a quantity and return its value in millicores.

    An ``int`` in the usual case ("3920m" -> 3920, "4" -> 4000, "1Ki" -> 1024000); a
    ``Fraction`` below millicore precision ("1n" -> 1/1000000).  Raises
    :class:`QuantityError` for anything outside the Kubernetes quantity grammar.
    """
    if len(text) > _MAX_LENGTH:
        raise QuantityError(
            f"CPU quantity is {len(text)} characters long; a Kubernetes quantity such as "
            f"'3920m' or '4' is expected"
        )
    match = _QUANTITY.fullmatch(text)
    if match is None:
        raise QuantityError(
            f"{text!r} is not a Kubernetes quantity: expected an optional sign, digits with "
            "an optional fraction, and an optional suffix (m, k, M, G, T, P, E, n, u, "
            "Ki, Mi, Gi, Ti, Pi, Ei, or an exponent like e3), for example '3920m' or '4'"
        )
    whole, _, fraction = match["number"].partition(".")
    cores = Fraction(int((whole or "0") + fraction), 10 ** len(fraction))
    suffix = match["suffix"]
    if suffix in _BINARY_SI:
        cores *= 2 ** _BINARY_SI[suffix]
    else:
        exponent = _DECIMAL_SI[suffix] if suffix in _DECIMAL_SI else int(suffix[1:])
        if abs(exponent) > _MAX_EXPONENT:
            raise QuantityError(
                f"{text!r}: the exponent {exponent} is out of range for a CPU quantity"
            )
        cores *= Fraction(10) ** exponent
    # resource.ParseQuantity keeps nanocores at most and rounds the magnitude up.
    nanos = -((-cores * _NANOS_PER_CORE) // 1)
    millicores = Fraction(nanos, _NANOS_PER_MILLICORE)
    if match["sign"] == "-":
        millicores = -millicores
    return millicores.numerator if millicores.denominator == 1 else millicores


def cores_rounded_up(total_millicores: int | Fraction) -> int:
    """Whole cores from a millicore total, rounded up (11760 -> 12), as Quantity.Value()."""
    return -((-total_millicores) // 1000)
