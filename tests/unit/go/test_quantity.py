"""cpa.go.quantity: apimachinery's Quantity, quirks included.

The recorded vectors cover thousands of strings; these cases name the behaviours a reader
should know about, each with the reason it matters to the vertical autoscaler.
"""

from __future__ import annotations

import pytest

from cpa.go.quantity import (
    INT64_MAX,
    INT64_MIN,
    Format,
    Quantity,
    QuantityError,
    go_trim_space,
    wrap_int64,
)
from cpa.vertical.decide.formula import CoresError, MilliRangeError, cluster_cores, milli_units

D, B, X = Format.DECIMAL_SI, Format.BINARY_SI, Format.DECIMAL_EXPONENT


@pytest.mark.parametrize(
    ("milli", "fmt", "printed"),
    [
        (17, B, "17m"),  # a CPU request
        (15 * 2**20 * 1000, D, "15728640"),  # memory 15Mi: DecimalSI prints bytes
        (256 * 2**20 * 1000, D, "268435456"),
        (100 * 10**6 * 1000, D, "100M"),
        (1500, D, "1500m"),
        (1000, B, "1"),  # BinarySI below 1024 prints as DecimalSI
        (500, B, "500m"),
        (1024 * 1000, B, "1Ki"),  # 1024 cores of CPU print as 1Ki
        (2048 * 1000, B, "2Ki"),
        (1025 * 1000, B, "1025"),  # not a multiple of 1024: no suffix
        (1024500, B, "1024500m"),  # a fraction: "don't lose precision", DecimalSI
        (1536 * 2**20 * 1000, B, "1536Mi"),
        (0, B, "0"),
        (-1500, D, "-1500m"),
        (-2048 * 1000, B, "-2Ki"),
        (1000, X, "1"),
        (1500, X, "1500e-3"),
        (12 * 10**6 * 1000, X, "12e6"),
        (INT64_MAX, D, "9223372036854775807m"),
        (INT64_MIN, B, "-9223372036854775808m"),
    ],
)
def test_results_print_like_set_milli(milli: int, fmt: Format, printed: str) -> None:
    q = Quantity.from_milli(milli, fmt)
    assert str(q) == printed
    assert q.to_json() == f'"{printed}"'


def test_from_milli_refuses_what_an_int64_cannot_hold() -> None:
    with pytest.raises(OverflowError):
        Quantity.from_milli(INT64_MAX + 1, D)


@pytest.mark.parametrize(
    ("text", "printed", "canonical"),
    [
        ("1.5", "1500m", "1500m"),
        ("1.5Gi", "1536Mi", "1536Mi"),
        ("1000", "1k", "1k"),
        ("0.5Ki", "512", "512"),
        # Go caches the text it parsed when the fast path thinks it canonical: String()
        # then returns it verbatim, sign and trailing zeros included.
        ("+1Ki", "+1Ki", "1Ki"),
        ("1.500", "1.500", "1500m"),
        ("0001Ki", "0001Ki", "1Ki"),
        ("100m", "100m", "100m"),
        ("0", "0", "0"),
        # DecimalSI beyond E has no suffix, and Go prints the bare mantissa.
        ("1000E", "1", "1"),
        # The exponent is truncated to an int32: e4294967296 is e0.
        ("1e4294967296", "1e4294967296", "1"),
        ("5e4", "50e3", "50e3"),
        ("20Ei", "9223372036854775807", "9223372036854775807"),  # BinarySI is capped
        ("0.0001Ki", "102400u", "102400u"),  # below 1 it turns DecimalSI
        ("0.1n", "1n", "1n"),  # rounded up to whole nanos
    ],
)
def test_parsed_quantities_print_like_apimachinery(text: str, printed: str,
                                                    canonical: str) -> None:
    q = Quantity.parse(text)
    assert str(q) == printed
    assert q.canonical() == canonical


@pytest.mark.parametrize(
    ("text", "value", "milli"),
    [
        ("1.5", 2, 1500),  # Value() rounds up
        ("-1.5m", -1, -2),  # int64 path: away from zero
        ("1n", 1, 1),
        ("9E", 9 * 10**18, 0),  # milli-units overflow to 0 (scale 21 loop)
        ("100E", 0, 0),  # even Value() overflows to 0, so CPVA's range check passes
        ("20Ei", INT64_MAX, -1000),  # inf.Dec path: the product wraps
        ("1e2147483647", 0, 1),  # Value() overflows to 0; for milli the int32 scale
        # difference wraps negative and the unscaled 1 comes back as is
    ],
)
def test_value_and_milli_value_follow_go_including_overflow(text: str, value: int,
                                                            milli: int) -> None:
    q = Quantity.parse(text)
    assert q.value() == value
    assert q.milli_value() == milli


def test_cpva_range_check_panics_only_where_value_shows_the_size() -> None:
    """asInt64 panics above MaxInt64/1000 units -- unless Value() itself overflowed."""
    with pytest.raises(MilliRangeError, match="9E"):
        milli_units(Quantity.parse("9E"))
    assert milli_units(Quantity.parse("100E")) == 0
    assert milli_units(Quantity.parse("9223372036854775")) == 9223372036854775000
    with pytest.raises(MilliRangeError):
        milli_units(Quantity.parse("9223372036854776"))


@pytest.mark.parametrize(
    ("text", "go_error"),
    [
        ("", "quantities must match"),
        ("1 m", "quantities must match"),
        ("1e1.5", "quantities must match"),
        ("\u0661", "quantities must match"),  # only ASCII digits (ARABIC-INDIC ONE)
        ("1Kb", "quantities must match"),  # b is no suffix letter at all
        ("1K", "unable to parse quantity's suffix"),  # kilo is a lower-case k
        ("1mi", "unable to parse quantity's suffix"),
        ("1e", "unable to parse quantity's suffix"),
        (".e-10", "unable to parse numeric part"),  # no digit, on the inf.Dec path
    ],
)
def test_parse_errors_carry_gos_message(text: str, go_error: str) -> None:
    with pytest.raises(QuantityError) as caught:
        Quantity.parse(text)
    assert caught.value.go_error.startswith(go_error)
    assert "quantity" in str(caught.value)


def test_edge_spellings_that_parse() -> None:
    assert Quantity.parse(".").is_zero()
    assert Quantity.parse("+").is_zero()
    assert Quantity.parse(".Ki").is_zero()
    assert Quantity.parse(".e-9").is_zero()  # fast path: no digit needed
    assert Quantity.parse("5.").value() == 5


def test_absurd_exponents_are_refused_where_go_would_exhaust_memory() -> None:
    """Ours: Go's inf.Dec path builds 10**(2**31) for this and dies; we refuse it."""
    with pytest.raises(QuantityError):
        Quantity.parse("1e-2147483648")
    with pytest.raises(QuantityError):
        Quantity.parse("1234567890123456789e100000")


def test_equality_is_value_and_format() -> None:
    assert Quantity.parse("1.500") == Quantity.parse("1500m")
    assert hash(Quantity.parse("1.500")) == hash(Quantity.parse("1500m"))
    assert Quantity.from_milli(1000, D) != Quantity.from_milli(1000, B)
    assert Quantity.parse("1Ki") != Quantity.parse("1024")  # BinarySI vs DecimalSI
    assert Quantity.parse("1Ki").normalized() == Quantity.parse("1024").normalized()
    # neither the cached text nor the representation (int64Amount or inf.Dec) takes part
    cached, plain, dec = Quantity.parse("1.500"), Quantity(15, -1, D), Quantity(1500, -3, D,
                                                                                 dec=True)
    assert cached.text == "1.500" and plain.text is None
    assert cached == plain == dec and hash(cached) == hash(plain) == hash(dec)
    assert plain != (15, -1, D, False, None) and plain != "1500m"
    assert repr(cached) == ("Quantity(unscaled=1500, exponent=-3, format=<Format.DECIMAL_SI: "
                            "'DecimalSI'>, dec=False, text='1.500')")


def test_trim_space_is_gos_not_pythons() -> None:
    """UnmarshalJSON trims with strings.TrimSpace: U+00A0 yes, U+001C no."""
    assert go_trim_space("\u00a0 10m\t") == "10m"
    assert go_trim_space("\x1c10m") == "\x1c10m"
    assert "\x1c10m".strip() == "10m"


def test_as_int64_needs_an_int64_at_a_non_negative_scale() -> None:
    assert Quantity.parse("4").as_int64() == (4, True)
    assert Quantity.parse("4k").as_int64() == (4000, True)
    assert Quantity.parse("4000m").as_int64() == (0, False)  # whole, but scale -3
    assert Quantity.parse("4.0").as_int64() == (0, False)
    assert Quantity.parse("1n").as_int64() == (0, False)  # inf.Dec


def test_cluster_cores_sum_capacities_like_get_cluster_size() -> None:
    assert cluster_cores(["4", "8", None, "0m"]) == 12  # a zero of any scale is skipped
    assert cluster_cores(["1k", "24"]) == 1024
    assert cluster_cores([]) == 0
    # What CPA's allocatable sum rounds up (3 x 3920m = 12 cores) fails every CPVA poll.
    with pytest.raises(CoresError, match="unable to compute integer values of cores"):
        cluster_cores(["3920m", "3920m", "3920m"])
    with pytest.raises(CoresError):
        cluster_cores(["4", "2000m"])


def test_add_keeps_int64_while_it_can_and_takes_the_format_of_a_first_addend() -> None:
    total = Quantity(0, 0, D).add(Quantity.parse("1Ki"))
    assert (total.format, total.dec, total.unscaled, total.exponent) == (B, False, 1024, 0)
    total = total.add(Quantity.parse("1k"))
    assert (total.dec, total.unscaled, total.exponent) == (False, 2024, 0)
    # 9.3e18 does not fit an int64 at scale 0: Go falls back to inf.Dec.
    big = Quantity.parse("9300000000000000k").add(Quantity.parse("1"))
    assert (big.dec, big.unscaled, big.exponent) == (True, 9300000000000000001, 0)


def test_wrap_int64() -> None:
    assert wrap_int64(INT64_MAX + 1) == INT64_MIN
    assert wrap_int64(-1) == -1
    assert wrap_int64(2**64 + 5) == 5
