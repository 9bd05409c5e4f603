"""The Go-flavoured JSON reader/writer.  Expectations were checked against Go 1.26."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cpa.go.json import (
    MAX_DEPTH,
    MISSING,
    GoJsonError,
    JsonObject,
    JsonValue,
    Number,
    as_object,
    field_lookup,
    format_go_float,
    go_bool,
    go_float,
    go_int,
    go_marshal,
    match_field,
    members_by_field,
    parse,
)

# ------------------------------------------------------------------------------- syntax


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("null", None),
        ("true", True),
        (" false ", False),
        ("0", Number("0")),
        ("-0", Number("-0")),
        ("1.5e-3", Number("1.5e-3")),
        ("2.0", Number("2.0")),
        ("1E+2", Number("1E+2")),
        ('"a"', "a"),
        ("[]", ()),
        ("[1, [2]]", (Number("1"), (Number("2"),))),
        ("{}", JsonObject(())),
        ('{"a":1,"a":2}', JsonObject((("a", Number("1")), ("a", Number("2"))))),
        ("\t\n\r {\"k\" : null } \n", JsonObject((("k", None),))),
    ],
)
def test_parse_valid(text: str, expected: JsonValue) -> None:
    assert parse(text) == expected


def test_numbers_and_objects_compare_by_value_and_are_no_tuples() -> None:
    """A JSON array is the one tuple among JSON values (``isinstance(v, tuple)`` tells it):
    an object, even an empty one, is never equal to an array."""
    assert Number("1") == Number("1") and hash(Number("1")) == hash(Number("1"))
    text: object = "1"
    assert Number("1") != Number("1.0") and Number("1") != text
    members = (("a", Number("1")), ("b", (Number("2"), None)))
    assert JsonObject(members) == JsonObject(tuple(members))
    assert hash(JsonObject(members)) == hash(JsonObject(tuple(members)))
    assert JsonObject(members) != JsonObject(members[:1])
    assert JsonObject(()) != () and parse("{}") != parse("[]")
    assert not isinstance(Number("1"), tuple) and not isinstance(JsonObject(()), tuple)
    assert {Number("1"): 1}[Number("1")] == 1
    assert repr(parse('{"a":[1]}')) == "JsonObject(members=(('a', (Number(literal='1'),)),))"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "{",
        "[1,]",
        '{"a":1,}',
        '{"a":1 // comment\n}',
        "/* c */ {}",
        "# c\n{}",
        "NaN",
        "Infinity",
        "-Infinity",
        "01",
        "-01",
        "1.",
        ".5",
        "+1",
        "1e",
        "0x10",
        "{} {}",
        "{}x",
        "[] ,",
        "{'a':1}",
        "{a:1}",
        '{"a" 1}',
        '"tab\there"',
        '"new\nline"',
        '"bad \\x escape"',
        '"\\u12"',
        '"unterminated',
        "True",
        "nul",
        "\ufeff{}",  # Go does not skip a byte-order mark
        "\u00a0{}",  # only space, tab, CR and LF are whitespace
        "[" * 10001 + "]" * 10001,
    ],
)
def test_parse_rejects(text: str) -> None:
    with pytest.raises(GoJsonError):
        parse(text)


def test_nesting_limit_is_gos() -> None:
    """Go's scanner allows 10000 levels and refuses the 10001st ("exceeded max depth"); no
    RecursionError at any depth."""
    assert MAX_DEPTH == 10000
    deep = parse("[" * MAX_DEPTH + "]" * MAX_DEPTH)
    assert isinstance(deep, tuple)
    assert parse('{"a":' * MAX_DEPTH + "1" + "}" * MAX_DEPTH) is not None
    for text in ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1),
                 '{"a":' * (MAX_DEPTH + 1) + "1" + "}" * (MAX_DEPTH + 1),
                 "[" * 50_000):
        with pytest.raises(GoJsonError, match="nested"):
            parse(text)


def test_deep_documents_round_trip_through_go_marshal() -> None:
    text = '{"a":' + "[" * 9_000 + '{"b":1.0}' + "]" * 9_000 + "}"
    assert go_marshal(parse(text)) == '{"a":' + "[" * 9_000 + '{"b":1}' + "]" * 9_000 + "}"
    with pytest.raises(GoJsonError, match=r"value\.a\[0\]\[0\]\.b: 1e400 is out of range"):
        go_marshal(parse('{"a":[[{"b":1e400}]]}'))


@pytest.mark.parametrize("digits", [20, 4_300, 4_301, 100_000])
def test_huge_integer_literals_are_out_of_range_not_a_crash(digits: int) -> None:
    """CPython refuses int() of more than 4300 digits with ValueError; Go just says the
    number does not fit. Floats of any length overflow to an error too."""
    for literal in ("9" * digits, "-" + "9" * digits):
        with pytest.raises(GoJsonError, match="out of range"):
            go_int(Number(literal), "min")
        if digits > 308:
            with pytest.raises(GoJsonError, match="out of range"):
                go_float(Number(literal), "coresPerReplica")


def test_syntax_error_position_is_reported() -> None:
    with pytest.raises(GoJsonError, match=r"line 2 column 9"):
        parse('{"a": 1,\n "b": 2,}')


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r'"\" \\ \/ \b \f \n \r \t"', '" \\ / \b \f \n \r \t'),
        (r'"\u00e9\u00E9"', "éé"),
        (r'"\ud83d\ude00"', "\U0001f600"),
        (r'"\ud83d"', "\ufffd"),  # lone high surrogate
        (r'"\ude00x"', "\ufffdx"),  # lone low surrogate
        (r'"\ud83d\u0041"', "\ufffdA"),  # high surrogate followed by a non-surrogate
        ('"raw \ud800 surrogate"', "raw \ufffd surrogate"),
        ('"ünïcödé ✓"', "ünïcödé ✓"),
    ],
)
def test_string_escapes(text: str, expected: str) -> None:
    assert parse(text) == expected


# ------------------------------------------------------------------------- typed values


@pytest.mark.parametrize(
    ("literal", "expected"),
    [("0", 0), ("-0", 0), ("7", 7), ("-3", -3), ("9223372036854775807", 2**63 - 1),
     ("-9223372036854775808", -(2**63))],
)
def test_go_int_accepts(literal: str, expected: int) -> None:
    assert go_int(parse(literal), "x") == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1.5", r"^linear\.min: expected an integer, got 1\.5$"),
        ("2.0", "expected an integer, got 2.0"),
        ("1e2", "expected an integer, got 1e2"),
        ('"2"', 'expected an integer, got the string "2"'),
        ("true", "expected an integer, got true"),
        ("null", "expected an integer, got null"),
        ("[1]", "expected an integer, got an array"),
        ("{}", "expected an integer, got an object"),
        ("9223372036854775808", "out of range"),
        ("-9223372036854775809", "out of range"),
    ],
)
def test_go_int_rejects(text: str, message: str) -> None:
    with pytest.raises(GoJsonError, match=message):
        go_int(parse(text), "linear.min")


@pytest.mark.parametrize(
    ("literal", "expected"),
    [("16", 16.0), ("0.5", 0.5), ("1e2", 100.0), ("-0", -0.0), ("1e-400", 0.0),
     ("1.7976931348623157e308", 1.7976931348623157e308)],
)
def test_go_float_accepts(literal: str, expected: float) -> None:
    assert go_float(parse(literal), "x") == expected


@pytest.mark.parametrize("text", ["1e400", "-1e400", '"1"', "true", "[]", "{}", "null"])
def test_go_float_rejects(text: str) -> None:
    with pytest.raises(GoJsonError, match=r"linear\.coresPerReplica"):
        go_float(parse(text), "linear.coresPerReplica")


def test_go_bool() -> None:
    assert go_bool(parse("true"), "x") is True
    assert go_bool(parse("false"), "x") is False
    for text in ['"true"', "1", "0", "null", "[]"]:
        with pytest.raises(GoJsonError, match="expected true or false"):
            go_bool(parse(text), "x")


def test_as_object() -> None:
    assert as_object(parse("null"), "linear") is None
    assert as_object(parse("{}"), "linear") == JsonObject(())
    for text in ["[]", '"{}"', "1", "true"]:
        with pytest.raises(GoJsonError, match=r"^linear: expected a JSON object"):
            as_object(parse(text), "linear")


# ------------------------------------------------------------------------ field matching

FIELDS = ("coresPerReplica", "nodesPerReplica", "min", "max", "preventSinglePointFailure")


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("min", "min"),
        ("MIN", "min"),
        ("Min", "min"),
        ("CoresPerReplica", "coresPerReplica"),
        ("CORESPERREPLICA", "coresPerReplica"),
        ("nodesperreplica", "nodesPerReplica"),
        ("coresPerReplica ", None),
        ("cores_per_replica", None),
        ("mins", None),
        ("", None),
        # Go folds U+017F LONG S to S and U+212A KELVIN SIGN to K ...
        ("\u017fingle", None),
        ("coresPerReplica".replace("s", "\u017f"), "coresPerReplica"),
        ("preventSinglePointFailure".replace("S", "\u017f"), "preventSinglePointFailure"),
        # ... but not U+0131 DOTLESS I or U+0130 CAPITAL I WITH DOT to i.
        ("m\u0131n", None),
        ("m\u0130n", None),
    ],
)
def test_match_field(key: str, expected: str | None) -> None:
    assert match_field(key, FIELDS) == expected


def test_kelvin_sign_matches_k() -> None:
    assert match_field("\u212aey", ("key",)) == "key"
    assert match_field("\u212aEY", ("Key", "other")) == "Key"


def test_exact_match_wins_over_folded() -> None:
    # Two fields that fold alike: the exact spelling decides, else the first one.
    assert match_field("Foo", ("FOO", "Foo")) == "Foo"
    assert match_field("FOO", ("FOO", "Foo")) == "FOO"
    assert match_field("foo", ("FOO", "Foo")) == "FOO"


def test_field_lookup_last_matching_member_wins() -> None:
    obj = as_object(parse('{"min": 1, "MIN": 2, "other": 3}'), "x")
    assert obj is not None
    assert field_lookup(obj, "min") == Number("2")
    assert field_lookup(obj, "max") is MISSING
    obj = as_object(parse('{"MIN": 2, "min": null}'), "x")
    assert obj is not None
    assert field_lookup(obj, "min") is None


def test_members_by_field_keeps_document_order_and_duplicates() -> None:
    obj = as_object(parse('{"max":1,"junk":0,"Min":2,"min":3}'), "x")
    assert obj is not None
    assert members_by_field(obj, FIELDS) == [
        ("max", Number("1")), ("min", Number("2")), ("min", Number("3"))
    ]


# ------------------------------------------------------------------------------ output


@pytest.mark.parametrize(
    ("number", "text"),
    [
        (0.0, "0"),
        (-0.0, "-0"),
        (16.0, "16"),
        (256.0, "256"),
        (1.5, "1.5"),
        (0.1, "0.1"),
        (-2.5, "-2.5"),
        (100.0, "100"),
        (1e20, "100000000000000000000"),
        (1e21, "1e+21"),
        (1.5e21, "1.5e+21"),
        (1e-6, "0.000001"),
        (1.25e-6, "0.00000125"),
        (1e-7, "1e-7"),
        (1.5e-7, "1.5e-7"),
        (1e-10, "1e-10"),
        (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (123456789012345678901.0, "123456789012345680000"),
        (2.0**53 + 2, "9007199254740994"),
        (0.000123, "0.000123"),
    ],
)
def test_format_go_float(number: float, text: str) -> None:
    assert format_go_float(number) == text


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_format_go_float_writes_exactly_the_shortest_round_trip_value(number: float) -> None:
    """The digits and power of ten read off repr() by hand are repr()'s value, exactly (the
    layout is the table's above); and they read back as the same float."""
    text = format_go_float(number)
    assert Decimal(text) == Decimal(repr(number))
    assert float(text) == number


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"b":1,"a":[true,null,"x"]}', '{"a":[true,null,"x"],"b":1}'),
        ('{"a":1,"a":2}', '{"a":2}'),
        ('{"a":1.0,"b":1e2,"c":-0}', '{"a":1,"b":100,"c":-0}'),
        ('"<&>"', r'"\u003c\u0026\u003e"'),
        (r'"\b\f\n\r\t\u0001\u001f\"\\/"', r'"\b\f\n\r\t\u0001\u001f\"\\/"'),
        (r'"\u2028\u2029\u007f é"', '"\\u2028\\u2029\x7f é"'),
        (r'"\ud800"', '"\ufffd"'),
        ('{"é":1,"z":2,"A":3}', '{"A":3,"z":2,"é":1}'),
        ("[]", "[]"),
        ("{}", "{}"),
    ],
)
def test_go_marshal(text: str, expected: str) -> None:
    assert go_marshal(parse(text)) == expected


def test_go_marshal_rejects_float_overflow() -> None:
    with pytest.raises(GoJsonError, match="out of range"):
        go_marshal(parse('{"a":[1e400]}'))


@given(st.text() | st.text(alphabet='ab"\\<>&\x7f\x1f\u2028\ud800 '))
def test_a_string_needing_no_escape_is_quoted_as_the_pattern_quotes_it(text: str) -> None:
    """Printable ASCII skips the escaping pattern; every string is quoted as through it."""
    from cpa.go import json as go_json

    through = '"' + go_json._NEEDS_ESCAPE.sub(go_json._escape_char, text) + '"'
    assert go_json._encode_string(text) == through
