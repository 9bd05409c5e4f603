"""Kubernetes CPU quantity grammar, as exact millicores."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cpa.go.quantity import QuantityError, cores_rounded_up, cpu_millicores


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("3920m", 3920),
        ("4", 4000),
        ("0", 0),
        ("1.5", 1500),
        ("2k", 2_000_000),
        ("1Ki", 1_024_000),
        ("1Mi", 1024**2 * 1000),
        ("1Gi", 1024**3 * 1000),
        ("1Ti", 1024**4 * 1000),
        ("1Pi", 1024**5 * 1000),
        ("1Ei", 1024**6 * 1000),
        ("0.5Ki", 512_000),
        ("1M", 10**9),
        ("1G", 10**12),
        ("1T", 10**15),
        ("1P", 10**18),
        ("1E", 10**21),
        ("1000000u", 1000),
        ("1u", Fraction(1, 1000)),
        ("1n", Fraction(1, 1_000_000)),
        ("1500000n", Fraction(3, 2)),
        ("1000000n", 1),
        ("1e3", 1_000_000),
        ("1E3", 1_000_000),
        ("12E-1", 1200),
        ("1e+3", 1_000_000),
        ("1e-3", 1),
        ("1.5e0", 1500),
        ("+4", 4000),
        ("-4", -4000),
        ("-100m", -100),
        ("007", 7000),
        ("5.", 5000),
        (".5", 500),
        ("+.5", 500),
        ("0.001", 1),
        ("0.0001", Fraction(1, 10)),
        ("1.000m", 1),
        ("250m", 250),
    ],
)
def test_valid_quantities(text: str, expected: int | Fraction) -> None:
    value = cpu_millicores(text)
    assert value == expected
    # Integral values come back as plain ints, the common fast case.
    assert isinstance(value, int) == (Fraction(expected).denominator == 1)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "1.2.3",
        "m",
        "1 m",
        " 1",
        "1 ",
        "abc",
        ".",
        "-",
        "+",
        "1K",
        "1ki",
        "1e",
        "1e+",
        "1e1.5",
        "1Kib",
        "1mm",
        "--1",
        "1,5",
        "0x10",
        "1_000",
        "\u0661",  # Arabic-Indic digit one: Python would call it a digit, Kubernetes does not
        "1e100000",
    ],
)
def test_invalid_quantities(text: str) -> None:
    with pytest.raises(QuantityError):
        cpu_millicores(text)


def test_error_message_says_what_is_expected() -> None:
    with pytest.raises(QuantityError, match=r"'abc' is not a Kubernetes quantity.*3920m"):
        cpu_millicores("abc")


def exact_millicores(sign: str, whole: str, frac: str, suffix: str) -> Fraction:
    """The quantity's exact value in cores, its magnitude rounded up to a nanocore (as
    resource.ParseQuantity keeps it), in millicores: the plain reading with Fractions."""
    binary = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
    decimal = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15,
               "E": 18}
    cores = Fraction(int((whole or "0") + frac), 10 ** len(frac))
    if suffix in binary:
        cores *= 2 ** binary[suffix]
    else:
        cores *= Fraction(10) ** (decimal[suffix] if suffix in decimal else int(suffix[1:]))
    nanos = -((-cores * 10**9) // 1)
    return Fraction(-nanos if sign == "-" else nanos, 10**6)


@given(st.sampled_from(["", "+", "-"]), st.text("0123456789", max_size=6),
       st.text("0123456789", max_size=12),
       st.sampled_from(["n", "u", "m", "", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi",
                        "Ti", "Pi", "Ei", "e-12", "e-9", "E-4", "e0", "e3", "E+7", "e21"]))
def test_every_quantity_is_its_exact_value_rounded_up_to_a_nanocore(
        sign: str, whole: str, frac: str, suffix: str) -> None:
    if not whole and not frac:
        whole = "0"
    value = cpu_millicores(f"{sign}{whole}.{frac}{suffix}" if frac else
                           f"{sign}{whole}{suffix}")
    expected = exact_millicores(sign, whole, frac, suffix)
    assert value == expected
    assert isinstance(value, int) == (expected.denominator == 1)


def test_sub_nanocore_rounds_up_like_kubernetes() -> None:
    # resource.ParseQuantity keeps nanocores at most and rounds the magnitude up.
    assert cpu_millicores("1e-10") == Fraction(1, 1_000_000)
    assert cpu_millicores("-1e-10") == Fraction(-1, 1_000_000)
    assert cpu_millicores("0e-20") == 0


@pytest.mark.parametrize(
    ("total", "cores"),
    [
        (0, 0),
        (1, 1),
        (999, 1),
        (1000, 1),
        (1001, 2),
        (11760, 12),
        (Fraction(1, 1_000_000), 1),
        (Fraction(2_000_001, 1000), 3),
        (128_000, 128),
    ],
)
def test_cores_rounded_up(total: int | Fraction, cores: int) -> None:
    assert cores_rounded_up(total) == cores
    assert isinstance(cores_rounded_up(total), int)


def test_sum_then_round_once() -> None:
    """3 x 3920m = 11760m -> 12 cores; rounding per node first would give 12 too, but
    3 x 1500m must give 5 (not 6)."""
    assert cores_rounded_up(sum(cpu_millicores(q) for q in ["3920m"] * 3)) == 12
    assert cores_rounded_up(sum(cpu_millicores(q) for q in ["1500m"] * 3)) == 5
    assert cores_rounded_up(sum(cpu_millicores(q) for q in ["4", "1.5", "500m", "1n"])) == 7
