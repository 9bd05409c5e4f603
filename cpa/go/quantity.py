"""Kubernetes resource quantities, exactly as apimachinery's ``resource.Quantity`` (v0.32)
parses, converts and prints them.

Why a port of Go's internals rather than a number: the vertical autoscaler's results *are*
quantity strings, and CPVA computes them through ``Quantity``'s own code paths, quirks
included. A value's printed form depends on its format (``memory`` 15Mi prints
``15728640`` in DecimalSI, ``cpu`` 2048 prints ``2Ki`` in BinarySI); a parsed quantity may
print its original text (``+1Ki``, ``1.500``) because Go caches it; ``MilliValue`` rounds
away from zero on one internal path and truncates-then-adds-one on another; an
int64-represented ``100E`` has a ``Value()`` of 0 because the overflow is swallowed; and a
summed CPU capacity is only an "integer" if every addend was written without a fraction or
a milli suffix. So a :class:`Quantity` keeps Go's representation (an ``int64Amount`` or an
``inf.Dec``, its scale, and the cached text) and every method follows the Go function it
names, with int64 wrap-around where Go wraps. All arithmetic is exact integer arithmetic.

Both programs read quantities here. The horizontal autoscaler needs only the exact sum
of its Nodes' allocatable CPU (:func:`cpu_millicores`, :func:`cores_rounded_up`), which
upstream adds with ``Quantity.Add`` at arbitrary precision: exact millicores, no int64
representation to keep. This module is pure: no I/O, no logging.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction
from typing import Final

__all__ = [
    "INT64_MAX",
    "INT64_MIN",
    "MAX_MILLI_VALUE",
    "CpuQuantityError",
    "Format",
    "Quantity",
    "QuantityError",
    "cores_rounded_up",
    "cpu_millicores",
    "go_trim_space",
    "wrap_int64",
]

INT64_MIN: Final = -(1 << 63)
INT64_MAX: Final = (1 << 63) - 1
MAX_MILLI_VALUE: Final = INT64_MAX // 1000
"""``resource.MaxMilliValue``: the largest ``Value()`` whose milli-units fit an int64."""

_MASK64: Final = (1 << 64) - 1
_MASK32: Final = (1 << 32) - 1

# Go allocates 10**k big integers for exponents this large (it would stall or run out of
# memory); we refuse such a quantity instead. Far beyond any resource amount.
_MAX_DECIMAL_SHIFT: Final = 4000


def wrap_int64(value: int) -> int:
    """The int64 a Go expression of this exact value yields (two's-complement wrap)."""
    value &= _MASK64
    return value - (1 << 64) if value >> 63 else value


def _int32(value: int) -> int:
    """Go's ``int32(...)`` conversion, and int32 (``Scale``) arithmetic, wrap alike."""
    value &= _MASK32
    return value - (1 << 32) if value >> 31 else value


def _big_int64(value: int) -> int:
    """``big.Int.Int64()``: the low 64 bits of the magnitude as an int64, then negated."""
    low = wrap_int64(abs(value) & _MASK64)
    return wrap_int64(-low) if value < 0 else low


def _pow10(k: int) -> int:
    """``10**k`` for k >= 0, typed as the int it is."""
    result: int = 10**k
    return result


def _trunc_div(a: int, b: int) -> int:
    """Go's integer division: the quotient truncated toward zero."""
    quotient = abs(a) // abs(b)
    return quotient if (a >= 0) == (b > 0) else -quotient


class Format(StrEnum):
    """``resource.Format``: how a quantity is printed."""

    DECIMAL_EXPONENT = "DecimalExponent"  # 12e6
    BINARY_SI = "BinarySI"  # 12Mi
    DECIMAL_SI = "DecimalSI"  # 12M


# Go's three parse errors, word for word (they end up in CPVA's log lines).
_SPLIT_RE: Final = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
ERR_FORMAT_WRONG: Final = f"quantities must match the regular expression '{_SPLIT_RE}'"
ERR_NUMERIC: Final = "unable to parse numeric part of quantity"
ERR_SUFFIX: Final = "unable to parse quantity's suffix"


class QuantityError(ValueError):
    """Text that ``resource.ParseQuantity`` refuses.

    ``go_error`` is Go's message (what CPVA would log); ``str()`` adds the text and a hint.
    """

    def __init__(self, text: str, go_error: str, hint: str = "") -> None:
        self.text = text
        self.go_error = go_error
        shown = text if len(text) <= 60 else text[:57] + "..."
        super().__init__(
            f"{shown!r} is not a Kubernetes quantity ({go_error}); "
            + (hint or "write e.g. '250m', '1.5', '64Mi' or '2G'")
        )


_DIGITS: Final = frozenset("0123456789")
_SUFFIX_CHARS: Final = frozenset("eEinumkKMGTP")

_DECIMAL_SUFFIXES: Final = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9,
                            "T": 12, "P": 15, "E": 18}
_BINARY_SUFFIXES: Final = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_BY_EXPONENT: Final = {e: s for s, e in _DECIMAL_SUFFIXES.items()}
_BINARY_BY_EXPONENT: Final = {e: s for s, e in _BINARY_SUFFIXES.items()}

# strings.TrimSpace's set (unicode.IsSpace); str.strip() would also drop U+001C..U+001F.
_GO_SPACE: Final = "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006" \
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"


def go_trim_space(text: str) -> str:
    """``strings.TrimSpace``: what ``Quantity.UnmarshalJSON`` applies before parsing."""
    return text.strip(_GO_SPACE)


# --- int64 helpers, one per Go function in apimachinery's math.go ----------------------


def _fits(value: int) -> bool:
    return INT64_MIN <= value <= INT64_MAX


def _int64_add(a: int, b: int) -> tuple[int, bool]:
    c = a + b
    return wrap_int64(c), _fits(c)


def _int64_multiply(a: int, b: int) -> tuple[int, bool]:
    if a in (0, 1) or b in (0, 1):
        return a * b, True
    if INT64_MIN in (a, b):
        return 0, False
    return wrap_int64(a * b), _fits(a * b)


def _int64_multiply_scale(a: int, b: int) -> tuple[int, bool]:
    """int64MultiplyScale / ...Scale10 / 100 / 1000: ``b`` > 1; a wrapped result on overflow."""
    if a in (0, 1):
        return a * b, True
    if a == INT64_MIN:
        return 0, False
    return wrap_int64(a * b), _fits(a * b)


def _positive_scale_int64(base: int, scale: int) -> tuple[int, bool]:
    """``base * 10**scale``. Scales 1, 2, 3, 6 and 9 return the wrapped product on
    overflow, any other scale returns 0; a negative scale returns ``base`` unchanged."""
    if scale == 0:
        return base, True
    if scale in (1, 2, 3, 6, 9):
        return _int64_multiply_scale(base, 10**scale)
    if base == 0:
        return 0, True  # Go loops `scale` times multiplying 0 by 10
    value = base
    for _ in range(max(scale, 0)):
        value, ok = _int64_multiply_scale(value, 10)
        if not ok:
            return 0, False
    return value, True


def _negative_scale_int64(base: int, scale: int) -> tuple[int, bool]:
    """``base / 10**scale`` rounded away from zero; ``exact`` is False if it rounded."""
    if scale == 0:
        return base, True
    value = base
    fraction = False
    for _ in range(max(scale, 0)):
        if not fraction and value % 10 != 0:  # Python's % is 0 exactly when Go's is
            fraction = True
        value = _trunc_div(value, 10)
        if value == 0:
            if fraction:
                return (1 if base > 0 else -1), False
            return 0, True
    if fraction:
        value = value + 1 if base > 0 else value - 1
    return value, not fraction


def _pow10_int64_of_float(k: int) -> int:
    """``int64(math.Pow10(k))`` on amd64: exact up to 10**18, then the indefinite value."""
    return 10**k if k <= 18 else INT64_MIN


def _scaled_value_dec(unscaled: int, scale: int, new_scale: int) -> int:
    """apimachinery's ``scaledValue`` (math.go) for an ``inf.Dec`` value."""
    dif = scale - new_scale
    if dif == 0:
        return _big_int64(unscaled)
    if dif < 0:
        return wrap_int64(_big_int64(unscaled) * _pow10_int64_of_float(-dif))
    if unscaled < INT64_MAX and dif < 19:
        small = _big_int64(unscaled)
        divide = 10**dif
        result = _trunc_div(small, divide)
        return result + 1 if small - result * divide != 0 else result
    quotient, remainder = divmod(unscaled, 10**dif)  # Euclidean, as big.Int.DivMod
    return wrap_int64(_big_int64(quotient) + (1 if remainder else 0))


# --- exact values -----------------------------------------------------------------------


def _normalize(mantissa: int, exponent: int) -> tuple[int, int]:
    """The value as (m, e) with no factor of 10 left in m (and (0, 0) for zero)."""
    if mantissa == 0:
        return 0, 0
    while mantissa % 10 == 0:
        mantissa //= 10
        exponent += 1
    return mantissa, exponent


def _integer_digits(mantissa: int, exponent: int) -> int:
    """How many digits the integer part of |m * 10**e| has (<= 0 when below 1)."""
    return len(str(abs(mantissa))) + exponent


def _cmp_int(mantissa: int, exponent: int, n: int) -> int:
    """Compare m * 10**e with the small integer n (|n| < 10**20) without building 10**e."""
    if mantissa == 0:
        return (n < 0) - (n > 0)
    digits = _integer_digits(mantissa, exponent)
    if digits > 21:
        return 1 if mantissa > 0 else -1
    if digits < -1:  # |value| < 0.1
        if n == 0:
            return 1 if mantissa > 0 else -1
        return 1 if n < 0 else -1
    if exponent >= 0:
        value = mantissa * _pow10(exponent)
        return (value > n) - (value < n)
    scaled_n = n * _pow10(-exponent)
    return (mantissa > scaled_n) - (mantissa < scaled_n)


@dataclass(frozen=True, slots=True, eq=False)  # equal by value: __eq__ below
class Quantity:
    """A ``resource.Quantity``: value ``unscaled * 10**exponent`` in Go's representation.

    ``dec`` False is Go's ``int64Amount{value: unscaled, scale: exponent}`` (``unscaled``
    fits an int64, ``exponent`` an int32); True is ``inf.Dec`` with scale ``-exponent``.
    ``text`` is Go's cached string (``q.s``): set by the parser for some inputs, printed
    instead of the canonical form. Equality is by value and format, as two quantities that
    print alike after a fresh canonicalisation are interchangeable; ``text`` and the
    representation do not take part.
    """

    unscaled: int
    exponent: int
    format: Format
    dec: bool = False
    text: str | None = None

    # --- construction ---------------------------------------------------------------
    @classmethod
    def from_milli(cls, milli: int, fmt: Format) -> Quantity:
        """``q := resource.NewQuantity(0, fmt); q.SetMilli(milli)``, as CPVA builds results."""
        if not _fits(milli):
            raise OverflowError(f"{milli} does not fit an int64")
        return cls(milli, -3, fmt)

    @classmethod
    def parse(cls, text: str) -> Quantity:
        """``resource.ParseQuantity``: raises :class:`QuantityError` with Go's error."""
        return _parse(text)

    # --- Go's accessors ---------------------------------------------------------------
    def is_zero(self) -> bool:
        return self.unscaled == 0

    def sign(self) -> int:
        return (self.unscaled > 0) - (self.unscaled < 0)

    def scaled_value(self, scale: int) -> int:
        """``ScaledValue(scale)``: ceil(q / 10**scale) "rounded away from zero", with Go's
        overflow behaviour (wrapped or 0), which CPVA relies on unknowingly."""
        if not self.dec:
            result, _ = self._as_scaled_int64(scale)
            return result
        return _scaled_value_dec(self.unscaled, -self.exponent, -scale)

    def value(self) -> int:
        """``Value()``: the value rounded up to an integer, as an int64 (may be wrong on
        overflow exactly as Go's is)."""
        return self.scaled_value(0)

    def milli_value(self) -> int:
        """``MilliValue()``: milli-units rounded up, as an int64 (may overflow like Go's)."""
        return self.scaled_value(-3)

    def as_int64(self) -> tuple[int, bool]:
        """``AsInt64()``: the value if it is held as an int64 at scale >= 0 and fits; a
        fraction, a milli scale (even ``4000m``) or an ``inf.Dec`` all give False."""
        if self.dec:
            return 0, False
        if self.exponent == 0:
            return self.unscaled, True
        if self.exponent < 0:
            return 0, False
        return _positive_scale_int64(self.unscaled, self.exponent)

    def _as_scaled_int64(self, scale: int) -> tuple[int, bool]:
        if self.exponent < scale:
            result, _ = _negative_scale_int64(self.unscaled, _int32(scale - self.exponent))
            return result, True
        return _positive_scale_int64(self.unscaled, _int32(self.exponent - scale))

    def add(self, other: Quantity) -> Quantity:
        """``q.Add(y)`` (returns the sum): int64 arithmetic while it is exact and fits,
        else ``inf.Dec``; a zero ``q`` takes ``y``'s format."""
        fmt = self.format
        if not self.dec and not other.dec:
            if self.unscaled == 0:
                fmt = other.format
            added = _add_int64_amounts(self.unscaled, self.exponent, other.unscaled,
                                       other.exponent)
            if added is not None:
                return Quantity(added[0], added[1], fmt)
        elif self.is_zero():
            fmt = other.format
        exponent = min(self.exponent, other.exponent)  # inf.Dec.Add keeps the larger scale
        total = (self.unscaled * 10 ** (self.exponent - exponent)
                 + other.unscaled * 10 ** (other.exponent - exponent))
        return Quantity(total, exponent, fmt, dec=True)

    # --- exact value ------------------------------------------------------------------
    def normalized(self) -> tuple[int, int]:
        """(m, e) with value m * 10**e and no factor 10 in m: one form per value."""
        return _normalize(self.unscaled, self.exponent)

    def cmp_int(self, n: int) -> int:
        """Compare the value with a (small) integer: -1, 0 or 1."""
        return _cmp_int(self.unscaled, self.exponent, n)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self.format == other.format and self.normalized() == other.normalized()

    def __hash__(self) -> int:
        return hash((self.format, self.normalized()))

    # --- printing ---------------------------------------------------------------------
    def canonical(self) -> str:
        """``CanonicalizeBytes``: the canonical string, ignoring any cached text."""
        return _canonical(self)

    def __str__(self) -> str:
        """``String()``: the cached text when the parser kept one, else canonical."""
        return self.text if self.text is not None else _canonical(self)

    def to_json(self) -> str:
        """``MarshalJSON``: the string form in double quotes (it never needs escaping)."""
        return f'"{self}"'


def _add_int64_amounts(a_value: int, a_scale: int, b_value: int, b_scale: int
                       ) -> tuple[int, int] | None:
    """``int64Amount.Add``: the sum as (value, scale), or None where Go falls back to Dec."""
    if b_value == 0:
        return a_value, a_scale
    if a_value == 0:
        return b_value, b_scale
    if a_scale == b_scale:
        total, ok = _int64_add(a_value, b_value)
        return (total, a_scale) if ok else None
    if a_scale > b_scale:
        scaled, ok = _positive_scale_int64(a_value, _int32(a_scale - b_scale))
        if not ok:
            return None
        total, ok = _int64_add(scaled, b_value)
        return (total, b_scale) if ok else None
    scaled, ok = _positive_scale_int64(b_value, _int32(b_scale - a_scale))
    if not ok:
        return None
    total, ok = _int64_add(a_value, scaled)
    return (total, a_scale) if ok else None


# --- parsing (quantity.go: parseQuantityString, ParseQuantity) ------------------------------


def _scan(text: str) -> tuple[bool, str, str, str, str]:
    """``parseQuantityString``: (positive, value, num, denom, suffix)."""
    positive = True
    pos = 0
    end = len(text)
    if text[0] == "-":
        positive = False
        pos = 1
    elif text[0] == "+":
        pos = 1
    while True:  # strip leading zeros
        if pos >= end:
            return positive, "0", "0", "", ""
        if text[pos] != "0":
            break
        pos += 1
    i = pos
    while True:  # the numerator
        if i >= end:
            return positive, text, text[pos:], "", ""
        if text[i] not in _DIGITS:
            break
        i += 1
    num = text[pos:i] or "0"
    pos = i
    denom = ""
    if text[pos] == ".":
        pos += 1
        i = pos
        while True:
            if i >= end:
                return positive, text, num, text[pos:], ""
            if text[i] not in _DIGITS:
                break
            i += 1
        denom = text[pos:i]
        pos = i
    value = text[:pos]
    suffix_start = pos
    i = pos
    while True:
        if i >= end:
            return positive, value, num, denom, text[suffix_start:]
        if text[i] not in _SUFFIX_CHARS:
            break
        i += 1
    pos = i
    if text[pos] in "+-":
        pos += 1
    i = pos
    while True:
        if i >= end:
            return positive, value, num, denom, text[suffix_start:]
        if text[i] not in _DIGITS:
            raise QuantityError(text, ERR_FORMAT_WRONG)
        i += 1


def _interpret(text: str, suffix: str) -> tuple[int, int, Format]:
    """The suffix as (base, exponent, format); ``e<int>`` wraps to an int32 as Go's does."""
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], Format.DECIMAL_SI
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], Format.BINARY_SI
    if len(suffix) > 1 and suffix[0] in "eE":
        digits = suffix[1:]
        body = digits[1:] if digits[:1] in ("+", "-") else digits
        if body and all(c in _DIGITS for c in body):
            parsed = int(digits)
            if _fits(parsed):  # strconv.ParseInt(s, 10, 64)
                return 10, _int32(parsed), Format.DECIMAL_EXPONENT
    raise QuantityError(text, ERR_SUFFIX,
                        "the suffix must be one of n u m k M G T P E Ki Mi Gi Ti Pi Ei, or "
                        "an exponent such as e3")


def _inf_dec(text: str, value: str) -> tuple[int, int]:
    """``inf.Dec.SetString``: (unscaled, scale); at least one digit, one sign, one point."""
    body = value[1:] if value[:1] in ("+", "-") else value
    whole, point, fraction = body.partition(".")
    digits = whole + fraction
    if not digits:
        raise QuantityError(text, ERR_NUMERIC)
    unscaled = int(digits)
    return (-unscaled if value.startswith("-") else unscaled), len(fraction) if point else 0


def _parse(text: str) -> Quantity:
    if not text:
        raise QuantityError(text, ERR_FORMAT_WRONG, "an empty string is not a quantity")
    if text == "0":
        return Quantity(0, 0, Format.DECIMAL_SI, text="0")
    positive, value, num, denom, suffix = _scan(text)
    base, exponent, fmt = _interpret(text, suffix)
    quantity = _as_int64(text, positive, num, denom, exponent, fmt)
    if quantity is not None:
        return quantity
    # The inf.Dec path: many digits, a fine fraction, or an int64 overflow.
    return _as_dec(text, value, base, exponent, fmt)


def _as_int64(text: str, positive: bool, num: str, denom: str, exponent: int,
              fmt: Format) -> Quantity | None:
    """ParseQuantity's fast path: an ``int64Amount`` when the digits fit (None when not)."""
    scale = 0
    mantissa = 1
    if fmt is Format.BINARY_SI:
        if exponent >= 0 and not denom:
            mantissa = 1 << exponent
            # int32(float32(exponent)*3/10) is exact for 10, 20, ... 60
            precision = 15 - len(num) - exponent * 3 // 10 - 1
        else:
            precision = -1
    else:
        scale = exponent
        precision = 18 - (len(num) + len(denom))
    if precision < 0:
        return None
    scale = _int32(scale - len(denom))
    if scale < -9:
        return None
    shifted = num + denom
    parsed = int(shifted)
    result, ok = _int64_multiply(parsed, mantissa)
    if not ok:
        return None
    if not positive:
        result = -result
    cached: str | None = None
    if fmt is Format.BINARY_SI:
        if exponent % 10 == 0 and parsed & 0x07 != 0:
            cached = text
    elif scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0":
        cached = text
    return Quantity(result, scale, fmt, text=cached)


def _as_dec(text: str, value: str, base: int, exponent: int, fmt: Format) -> Quantity:
    """ParseQuantity's ``inf.Dec`` path, rounded up to whole nanos."""
    unscaled, dec_scale = _inf_dec(text, value)
    if base == 10:
        dec_scale = _int32(dec_scale - exponent)
    else:
        unscaled <<= exponent
    negative = unscaled < 0
    unscaled = abs(unscaled)
    if unscaled != 0:  # round up to whole nanos: "if you want some, you get some"
        if dec_scale > 9:
            shift = dec_scale - 9
            # a shift past every digit leaves 0 < value < 1 nano: it rounds up to 1
            unscaled = 1 if shift >= len(str(unscaled)) else -(-unscaled // 10**shift)
        elif dec_scale < 9:
            if 9 - dec_scale > _MAX_DECIMAL_SHIFT:
                raise QuantityError(text, ERR_NUMERIC,
                                    "the value is too large for any resource")
            unscaled *= 10 ** (9 - dec_scale)
        dec_scale = 9
    if fmt is Format.BINARY_SI and _cmp_int(unscaled, -dec_scale, INT64_MAX) > 0:
        unscaled, dec_scale = INT64_MAX, 0  # "The max is just a simple cap."
    if (fmt is Format.BINARY_SI and _cmp_int(unscaled, -dec_scale, 1) < 0
            and _cmp_int(unscaled, -dec_scale, 0) > 0):
        fmt = Format.DECIMAL_SI
    if negative:
        unscaled = -unscaled
    return Quantity(unscaled, -dec_scale, fmt, dec=True)


# --- printing (quantity.go: CanonicalizeBytes; amount.go: AsCanonical*Bytes) ------------


def _canonical(q: Quantity) -> str:
    if q.is_zero():
        return "0"
    fmt = q.format
    mantissa, exponent = q.normalized()
    if fmt is Format.BINARY_SI:
        if q.cmp_int(-1024) > 0 and q.cmp_int(1024) < 0:
            fmt = Format.DECIMAL_SI  # "This avoids rounding and hopefully confusion, too."
        elif exponent < 0:
            fmt = Format.DECIMAL_SI  # AsScale(0) would round: "Don't lose precision"
    if fmt is Format.BINARY_SI:
        if exponent > _MAX_DECIMAL_SHIFT:
            raise OverflowError("quantity too large to print in BinarySI")
        value = mantissa * 10**exponent
        magnitude = abs(value)
        times = 0
        # removeInt64Factors negates a negative value first; -(-2**63) overflows and stays
        # negative, so Go's int64 path leaves -2**63 unfactored.
        while magnitude >= 1024 and magnitude % 1024 == 0 and (q.dec or value != INT64_MIN):
            magnitude //= 1024
            times += 1
        number = -magnitude if value < 0 else magnitude
        return f"{number}{_BINARY_BY_EXPONENT.get(times * 10, '')}"
    # Decimal: move the exponent down to a multiple of 3, the mantissa up.
    shift = exponent % 3
    mantissa *= 10**shift
    exponent -= shift
    if fmt is Format.DECIMAL_SI:
        # Outside n..E there is no suffix and Go prints the bare mantissa (a known bug:
        # 1000E prints "1").
        return f"{mantissa}{_DECIMAL_BY_EXPONENT.get(exponent, '')}"
    return f"{mantissa}" if exponent == 0 else f"{mantissa}e{exponent}"


# --- CPU as exact millicores (the horizontal autoscaler's sum) ------------------------------


# Why exact arithmetic: upstream adds the nodes' ``status.allocatable.cpu`` quantities with
# ``resource.Quantity.Add`` (arbitrary precision) and rounds the sum up to whole cores once.
# Three nodes of "3920m" make 11760m, which is 12 cores; rounding each node first, or
# summing floats, can give a different replica count. So every value here is an ``int``
# (or, for sub-millicore quantities, a :class:`~fractions.Fraction`). Like
# ``resource.ParseQuantity``, a non-zero value is rounded up (away from zero) to a whole
# nanocore, the finest precision a Quantity keeps; the API server only ever emits canonical
# forms, where this changes nothing.


class CpuQuantityError(QuantityError):
    """Text that :func:`cpu_millicores` refuses; its message is the whole message (no Go
    error to quote: upstream's sum never sees a text the API server did not accept)."""

    def __init__(self, message: str) -> None:
        ValueError.__init__(self, message)
        self.text = self.go_error = ""


_QUANTITY = re.compile(
    r"(?P<sign>[+-]?)"
    r"(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?[0-9]+|[numkMGTPE]?)"
)


# Far beyond any real CPU count; keeps a hostile "1e999999999" from building a huge int.
_MAX_EXPONENT: Final = 1000
_MAX_LENGTH: Final = 1000

_NANOS_PER_CORE: Final = 10**9
_NANOS_PER_MILLICORE: Final = 10**6


def cpu_millicores(text: str) -> int | Fraction:
    """Parse a quantity and return its value in millicores.

    An ``int`` in the usual case ("3920m" -> 3920, "4" -> 4000, "1Ki" -> 1024000); a
    ``Fraction`` below millicore precision ("1n" -> 1/1000000).  Raises
    :class:`CpuQuantityError` for anything outside the Kubernetes quantity grammar.
    """
    if len(text) > _MAX_LENGTH:
        raise CpuQuantityError(
            f"CPU quantity is {len(text)} characters long; a Kubernetes quantity such as "
            f"'3920m' or '4' is expected"
        )
    match = _QUANTITY.fullmatch(text)
    if match is None:
        raise CpuQuantityError(
            f"{text!r} is not a Kubernetes quantity: expected an optional sign, digits with "
            "an optional fraction, and an optional suffix (m, k, M, G, T, P, E, n, u, "
            "Ki, Mi, Gi, Ti, Pi, Ei, or an exponent like e3), for example '3920m' or '4'"
        )
    whole, _, fraction = match["number"].partition(".")
    # cores = top / bottom, exactly, in integers (a Fraction only for the rare
    # sub-millicore result).
    top: int = int((whole or "0") + fraction)
    bottom: int = 10 ** len(fraction)
    suffix = match["suffix"]
    if suffix in _BINARY_SUFFIXES:
        top <<= _BINARY_SUFFIXES[suffix]
    else:
        exponent = _DECIMAL_SUFFIXES[suffix] if suffix in _DECIMAL_SUFFIXES else int(suffix[1:])
        if abs(exponent) > _MAX_EXPONENT:
            raise CpuQuantityError(
                f"{text!r}: the exponent {exponent} is out of range for a CPU quantity"
            )
        if exponent >= 0:
            top *= 10 ** exponent
        else:
            bottom *= 10 ** -exponent
    # resource.ParseQuantity keeps nanocores at most and rounds the magnitude up.
    nanos: int = -((-top * _NANOS_PER_CORE) // bottom)
    if match["sign"] == "-":
        nanos = -nanos
    if nanos % _NANOS_PER_MILLICORE == 0:
        return nanos // _NANOS_PER_MILLICORE
    return Fraction(nanos, _NANOS_PER_MILLICORE)


def cores_rounded_up(total_millicores: int | Fraction) -> int:
    """Whole cores from a millicore total, rounded up (11760 -> 12), as Quantity.Value()."""
    return -((-total_millicores) // 1000)
