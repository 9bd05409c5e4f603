"""A strict JSON reader and writer that behaves like Go's ``encoding/json``.

Why not :mod:`json`?  Upstream decodes the ConfigMap values with Go's ``json.Unmarshal``
into typed structs, and "drop-in" means the same text must be accepted or rejected the
same way.  Python's :mod:`json` differs in ways that matter here: it accepts ``NaN`` and
``Infinity``, it turns ``2.0`` into a float that an int field could not tell from ``2``,
and it knows nothing of Go's case-insensitive field matching.  So this module keeps the
parse tree close to the text (numbers stay literals) and leaves the typing to small
helpers that apply Go's rules one value at a time.

Go behaviours reproduced here (all checked against Go 1.26's ``encoding/json``):

* strict RFC 8259 syntax; syntax errors win over type errors (Go validates first);
* ``\\u`` escapes of lone surrogates, and raw lone surrogates, become U+FFFD;
* object keys match struct fields exactly first, then by Go's rune folding
  (``foldName``): ASCII upper-casing, plus U+017F LONG S -> ``S`` and U+212A KELVIN
  SIGN -> ``K``; U+0131 DOTLESS I does *not* match ``i``;
* int fields take only integer literals in the int64 range, float fields any number
  that fits a float64 (``1e400`` is an error, ``1e-400`` is 0), however long the literal;
* nesting up to 10000 levels;
* ``json.Marshal`` of decoded values: sorted keys, HTML-safe escapes, ES6-style floats.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final, NamedTuple, TypeAlias, TypeVar, final

T = TypeVar("T")

__all__ = [
    "MISSING",
    "Field",
    "GoJsonError",
    "JsonArray",
    "JsonObject",
    "JsonValue",
    "Missing",
    "Number",
    "as_object",
    "decode_fields",
    "decode_struct",
    "describe",
    "field_lookup",
    "format_go_float",
    "go_bool",
    "go_float",
    "go_int",
    "go_marshal",
    "go_string",
    "match_field",
    "members_by_field",
    "parse",
]


class GoJsonError(ValueError):
    """A JSON document that Go's ``encoding/json`` would refuse to decode."""


@dataclass(frozen=True, slots=True)
class Number:
    """A JSON number kept as its literal text, so int fields can reject ``2.0``. (Not a
    tuple: a JSON array is the one tuple among JSON values.)"""

    literal: str


class JsonObject:
    """A JSON object with its members in document order, duplicates included.

    Go decodes every member in order (a later duplicate overwrites an earlier one, but a
    type error in the earlier one still fails the decode), so a dict would lose facts.
    A plain class for the reasons :class:`Number` is one.
    """

    __slots__ = ("members",)

    def __init__(self, members: tuple[tuple[str, JsonValue], ...]) -> None:
        self.members: Final[tuple[tuple[str, JsonValue], ...]] = members

    def __eq__(self, other: object) -> bool:
        if other.__class__ is JsonObject:
            return self.members == other.members
        return NotImplemented

    def __hash__(self) -> int:
        return hash((JsonObject, self.members))

    def __repr__(self) -> str:
        return f"JsonObject(members={self.members!r})"


JsonArray: TypeAlias = tuple["JsonValue", ...]
JsonValue: TypeAlias = bool | str | Number | JsonArray | JsonObject | None


@final
class Missing:
    """Marker type for "no member matched this field" (distinct from JSON ``null``)."""

    _instance: Missing | None = None

    def __new__(cls) -> Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = Missing()

# Go's scanner refuses a document nested more than 10000 levels deep ("exceeded max
# depth"); the parser and the encoder below use explicit stacks so that we accept exactly
# what Go accepts without touching Python's recursion limit.
MAX_DEPTH: Final = 10000

INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1

_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_INT_LITERAL = re.compile(r"-?(?:0|[1-9][0-9]*)")
_STRING_CHUNK = re.compile(r'[^"\\\x00-\x1f]*')
_SIMPLE_ESCAPES: Final = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
}


_HEX4 = re.compile(r"[0-9a-fA-F]{4}")


_SURROGATES = re.compile("[\ud800-\udfff]")


@final
class _Opened:
    """What the parser's step returns when it opened a container rather than read a value."""


_OPENED: Final = _Opened()


class _Parser:
    """A parser over a ``str`` with an explicit stack; positions are reported 1-based."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, expected: str, at: int | None = None) -> GoJsonError:
        at = self.pos if at is None else at
        line = self.text.count("\n", 0, at) + 1
        column = at - (self.text.rfind("\n", 0, at) + 1) + 1
        found = "the end of the input" if at >= len(self.text) else repr(self.text[at : at + 12])
        return GoJsonError(
            f"invalid JSON at line {line} column {column}: expected {expected}, found {found}"
        )

    def skip_ws(self) -> None:
        match = _WS.match(self.text, self.pos)
        assert match is not None  # the pattern matches the empty string
        self.pos = match.end()

    def document(self) -> JsonValue:
        """Parse one value with an explicit stack of open containers, so nesting as deep
        as Go allows never meets Python's recursion limit.

        Each open container is ``[items, key]``: an object collects ``(key, value)``
        pairs (``key`` is the member being read), an array collects values (``key`` is
        None).
        """
        stack: list[tuple[list[Any], list[str | None]]] = []
        while True:
            step = self._value_or_open(stack)
            if isinstance(step, _Opened):
                continue
            value: JsonValue = step
            # A value is complete: hand it to the enclosing containers, closing each one
            # that ends here.
            while True:
                if not stack:
                    return value
                items, key = stack[-1]
                items.append(value if key[0] is None else (key[0], value))
                self.skip_ws()
                char = self.text[self.pos : self.pos + 1]
                is_object = key[0] is not None
                if char == ",":
                    self.pos += 1
                    if is_object:
                        key[0] = self._key()
                    break
                if char == ("}" if is_object else "]"):
                    self.pos += 1
                    stack.pop()
                    value = JsonObject(tuple(items)) if is_object else tuple(items)
                    continue
                raise self.fail("',' or '}' after an object member" if is_object
                                else "',' or ']' after an array element")

    def _value_or_open(self, stack: list[tuple[list[Any], list[str | None]]]
                       ) -> JsonValue | _Opened:
        """Read a scalar or an empty container and return it; or open a container, push
        it and return ``_OPENED``."""
        self.skip_ws()
        text, pos = self.text, self.pos
        char = text[pos] if pos < len(text) else ""
        if char in ("{", "["):
            if len(stack) >= MAX_DEPTH:
                raise self.fail(f"at most {MAX_DEPTH} levels of nested arrays and objects")
            self.pos += 1
            self.skip_ws()
            if char == "{":
                if self.text.startswith("}", self.pos):
                    self.pos += 1
                    return JsonObject(())
                stack.append(([], [self._key()]))
            else:
                if self.text.startswith("]", self.pos):
                    self.pos += 1
                    return ()
                stack.append(([], [None]))
            return _OPENED
        if char == '"':
            return self.string()
        for word, result in (("true", True), ("false", False), ("null", None)):
            if text.startswith(word, pos):
                self.pos = pos + len(word)
                return result
        match = _NUMBER.match(text, pos)
        if match is not None:
            self.pos = match.end()
            return Number(match.group())
        raise self.fail("a JSON value (object, array, string, number, true, false or null)")

    def _key(self) -> str:
        """An object key and its colon."""
        self.skip_ws()
        if not self.text.startswith('"', self.pos):
            raise self.fail("a string key in double quotes")
        key = self.string()
        self.skip_ws()
        if not self.text.startswith(":", self.pos):
            raise self.fail("':' after an object key")
        self.pos += 1
        return key

    def string(self) -> str:
        text = self.text
        self.pos += 1  # opening quote
        parts: list[str] = []
        while True:
            match = _STRING_CHUNK.match(text, self.pos)
            assert match is not None
            parts.append(match.group())
            self.pos = match.end()
            if self.pos >= len(text):
                raise self.fail("a closing '\"'")
            char = text[self.pos]
            if char == '"':
                self.pos += 1
                # Go reads bytes; a lone surrogate cannot be valid UTF-8 there.
                value = "".join(parts)
                return value if value.isascii() else _SURROGATES.sub("\ufffd", value)
            if char != "\\":
                raise self.fail("no raw control characters inside a string (use an escape)")
            parts.append(self.escape())

    def escape(self) -> str:
        text = self.text
        code = text[self.pos + 1 : self.pos + 2]
        if code in _SIMPLE_ESCAPES:
            self.pos += 2
            return _SIMPLE_ESCAPES[code]
        if code != "u":
            raise self.fail('a valid escape (\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)')
        first = self._hex4(self.pos + 2)
        self.pos += 6
        if 0xD800 <= first <= 0xDBFF and text.startswith("\\u", self.pos):
            second = self._hex4(self.pos + 2)
            if 0xDC00 <= second <= 0xDFFF:
                self.pos += 6
                return chr(0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00))
        if 0xD800 <= first <= 0xDFFF:
            return "\ufffd"  # lone surrogate: Go substitutes the replacement character
        return chr(first)

    def _hex4(self, at: int) -> int:
        match = _HEX4.match(self.text, at)
        if match is None:
            raise self.fail("four hex digits after \\u", at)
        return int(match.group(), 16)


def parse(text: str) -> JsonValue:
    """Parse one JSON document strictly (no comments, trailing commas, NaN, extra data).

    Raises :class:`GoJsonError` with the line and column of the first problem.
    """
    parser = _Parser(text)
    parser.skip_ws()
    if parser.pos >= len(text):
        raise GoJsonError("invalid JSON: the input is empty (or only whitespace)")
    result = parser.document()
    parser.skip_ws()
    if parser.pos < len(text):
        raise parser.fail("the end of the input after the JSON value")
    return result


def describe(value: JsonValue) -> str:
    """Render a value for an error message: short, and recognisable to the operator."""
    literal = _literal(value)
    if literal is not None:
        return literal
    if isinstance(value, Number):
        return value.literal if len(value.literal) <= 40 else value.literal[:37] + "..."
    if isinstance(value, str):
        shown = _encode_string(value if len(value) <= 40 else value[:37] + "...")
        return f"the string {shown}"
    if isinstance(value, JsonObject):
        return "an object"
    return "an array"


def as_object(value: JsonValue, where: str) -> JsonObject | None:
    """Return the object, or ``None`` for JSON ``null`` (Go then leaves every field zero).

    Anything else (array, string, number, bool) is a type error, as in Go.
    """
    if value is None or isinstance(value, JsonObject):
        return value
    raise GoJsonError(f"{where}: expected a JSON object {{...}}, got {describe(value)}")


def go_int(value: JsonValue, where: str) -> int:
    """Decode a Go ``int`` (int64): an integer literal only, so ``1.5``, ``2.0``, ``1e2``
    and ``"2"`` are all errors, exactly as ``strconv.ParseInt`` would see them.

    ``null`` is the caller's business (Go leaves the field untouched), so it is an error
    here rather than a silent zero.
    """
    if isinstance(value, Number) and _INT_LITERAL.fullmatch(value.literal):
        # Compare lengths first: int() of a literal over 4300 digits raises ValueError
        # (CPython's conversion limit), and anything over 19 digits is out of range anyway.
        digits = value.literal.lstrip("-")
        number = int(value.literal) if len(digits) <= 19 else INT64_MAX + 1
        if INT64_MIN <= number <= INT64_MAX:
            return number
        raise GoJsonError(
            f"{where}: {describe(value)} is out of range for an integer "
            f"(it must lie between {INT64_MIN} and {INT64_MAX})"
        )
    raise GoJsonError(f"{where}: expected an integer, got {describe(value)}")


def go_float(value: JsonValue, where: str) -> float:
    """Decode a Go ``float64``: any JSON number that does not overflow to infinity."""
    if isinstance(value, Number):
        number = float(value.literal)  # correctly rounded, like strconv.ParseFloat
        if math.isinf(number):
            raise GoJsonError(
                f"{where}: {describe(value)} is out of range for a 64-bit float"
            )
        return number
    raise GoJsonError(f"{where}: expected a number, got {describe(value)}")


def go_string(value: JsonValue, where: str) -> str:
    """Decode a Go ``string``: only a JSON string (not a number, not ``true``)."""
    if isinstance(value, str):
        return value
    raise GoJsonError(f"{where}: expected a string, got {describe(value)}")


def go_bool(value: JsonValue, where: str) -> bool:
    """Decode a Go ``bool``: only the literals ``true`` and ``false`` (not ``"true"``)."""
    if isinstance(value, bool):
        return value
    raise GoJsonError(f"{where}: expected true or false, got {describe(value)}")


def _fold(name: str) -> str:
    """Go's ``foldName`` restricted to what can ever equal an ASCII field name.

    Go maps each rune to the smallest rune of its Unicode simple-fold orbit, and upper-
    cases ASCII.  The only non-ASCII runes whose orbit bottoms out in ASCII are U+017F
    (LONG S -> ``S``) and U+212A (KELVIN SIGN -> ``K``), found by enumerating every rune
    with Go's own ``unicode.SimpleFold``.  Every other non-ASCII rune is kept as is; that
    cannot equal any folded ASCII field name, which is all we ever compare against.
    """
    return name.upper() if name.isascii() else "".join(map(_fold_rune, name))


def _fold_rune(char: str) -> str:
    return char.upper() if char.isascii() else _NON_ASCII_FOLDS.get(char, char)


_NON_ASCII_FOLDS: Final = {"\u017f": "S", "\u212a": "K"}


def match_field(key: str, field_names: tuple[str, ...]) -> str | None:
    """The struct field a JSON object key decodes into, by Go's rules, or ``None``.

    An exact match on a field name wins; otherwise the first field whose folded name
    equals the folded key.  Field names must be ASCII (all of ours are).
    """
    if key in field_names:
        return key
    folded = _fold(key)
    for name in field_names:
        if _fold(name) == folded:
            return name
    return None


def field_lookup(obj: JsonObject, field_name: str, field_names: tuple[str, ...] = ()) -> (
    JsonValue | Missing
):
    """The value Go would end up with for ``field_name``: the last matching member.

    ``field_names`` is the whole struct (it decides exact-versus-folded ties); when not
    given, only ``field_name`` itself is considered.  Returns :data:`MISSING` if no
    member matches.  Note that Go also type-checks the earlier duplicates; use
    :func:`members_by_field` when that matters.
    """
    names = field_names or (field_name,)
    found: JsonValue | Missing = MISSING
    for key, value in obj.members:
        if match_field(key, names) == field_name:
            found = value
    return found


def members_by_field(
    obj: JsonObject, field_names: tuple[str, ...]
) -> list[tuple[str, JsonValue]]:
    """Members that decode into a struct field, in document order, as (field, value).

    This is the order in which Go assigns them, so a decoder that applies them in turn
    reproduces "last one wins" and still sees every earlier duplicate's type error.
    """
    pairs: list[tuple[str, JsonValue]] = []
    for key, value in obj.members:
        name = match_field(key, field_names)
        if name is not None:
            pairs.append((name, value))
    return pairs


class Field(NamedTuple):
    """How one struct field decodes: the attribute it sets, its decoder (``go_int``, ...)
    and whether it is a pointer (JSON null sets it to None; for a plain field null leaves
    it as it was). A ``nested`` struct's decoder is also given the field's value so far
    (Go decodes a second member into the same struct) and handles null itself."""

    attr: str
    decode: Callable[..., Any]
    pointer: bool = False
    nested: bool = False


def decode_fields(obj: JsonObject, fields: Mapping[str, Field], into: object,
                  where: str) -> None:
    """``json.Unmarshal`` of ``obj`` into the struct ``into`` whose fields ``fields`` names
    (JSON key -> :class:`Field`), member by member in document order: the last duplicate
    wins, and every earlier one's type error is still raised."""
    for name, member in members_by_field(obj, tuple(fields)):
        field = fields[name]
        if field.nested:
            at = f"{where}.{name}"
            setattr(into, field.attr, field.decode(member, at, getattr(into, field.attr)))
        elif member is not None:
            setattr(into, field.attr, field.decode(member, f"{where}.{name}"))
        elif field.pointer:
            setattr(into, field.attr, None)


def decode_struct(value: JsonValue, where: str, into: T | None, fields: Mapping[str, Field],
                  new: Callable[[], T]) -> T | None:
    """A pointer to a struct: JSON null makes it nil (None), an object decodes into the
    struct it points to (``into``, from an earlier member of the same name) or a ``new`` one;
    anything else is a type error."""
    obj = as_object(value, where)
    if obj is None:
        return None
    doc = into if into is not None else new()
    decode_fields(obj, fields, doc, where)
    return doc


# ----------------------------------------------------------------------------- output


def format_go_float(number: float) -> str:
    """Format a float64 the way ``json.Marshal`` does (ES6 number-to-string style).

    Shortest round-tripping digits; plain notation for 1e-6 <= |x| < 1e21, otherwise
    exponent notation with a signed exponent whose ``e-07`` is cleaned up to ``e-7``.
    """
    if math.isinf(number) or math.isnan(number):
        raise GoJsonError(f"json: unsupported value: {number!r}")
    sign = "-" if math.copysign(1.0, number) < 0 else ""
    magnitude = abs(number)
    if magnitude == 0:
        return sign + "0"
    # repr() gives the shortest digits that round-trip, the same digits Go's 'f'/-1 uses;
    # as a Decimal without trailing zeros: value == int(digits) * 10**exponent.
    _, digit_tuple, exponent = Decimal(repr(magnitude)).normalize().as_tuple()
    digits = "".join(map(str, digit_tuple))
    assert isinstance(exponent, int)  # a finite number
    if 1e-6 <= magnitude < 1e21:
        if exponent >= 0:
            return sign + digits + "0" * exponent
        point = len(digits) + exponent
        if point > 0:
            return sign + digits[:point] + "." + digits[point:]
        return sign + "0." + "0" * -point + digits
    scientific = exponent + len(digits) - 1
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    exponent_text = f"+{scientific:02d}" if scientific >= 0 else f"-{-scientific}"
    return f"{sign}{mantissa}e{exponent_text}"


_HTML_UNSAFE_ESCAPES: Final = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}
_PLAIN_UNSAFE = ('"', "\\", "<", ">", "&")  # printable ASCII that Go escapes


_NEEDS_ESCAPE = re.compile('["\\\\\x00-\x1f<>&\u2028\u2029\ud800-\udfff]')


def _escape_char(match: re.Match[str]) -> str:
    char = match.group()
    if char in _HTML_UNSAFE_ESCAPES:
        return _HTML_UNSAFE_ESCAPES[char]
    if "\ud800" <= char <= "\udfff":
        return "\ufffd"
    return f"\\u{ord(char):04x}"


def _encode_string(text: str) -> str:
    """Quote a string like Go's encoder with HTML escaping on (``<`` -> ``\\u003c``).
    Printable ASCII without ``"``, ``\\``, ``<``, ``>`` or ``&`` (the parameters' keys and
    names) needs nothing escaped: checked without the pattern."""
    if text.isascii() and text.isprintable() and not any(c in text for c in _PLAIN_UNSAFE):
        return '"' + text + '"'
    return '"' + _NEEDS_ESCAPE.sub(_escape_char, text) + '"'


def _literal(value: JsonValue) -> str | None:
    """JSON's spelling of null, true and false; None for any other value."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    return None


def _marshal_scalar(value: JsonValue, where: Iterator[str]) -> str:
    literal = _literal(value)
    if literal is not None:
        return literal
    if isinstance(value, Number):
        try:
            return format_go_float(go_float(value, "value"))
        except GoJsonError:
            # Build the (possibly deep) path only now, for the message.
            return format_go_float(go_float(value, "".join(where)))
    assert isinstance(value, str)
    return _encode_string(value)


def go_marshal(value: JsonValue, where: str = "value") -> str:
    """Re-encode a parsed value the way Go round-trips it through ``interface{}``.

    Numbers become float64 first (so ``1.0`` prints as ``1`` and ``1e400`` is an error),
    objects become maps (duplicate keys: last wins; keys sorted), output is compact.
    Iterative, like the parser, so every document :func:`parse` accepts can be encoded.
    """
    out: list[str] = []
    # Open containers: (remaining (separator, child, path piece) triples, closer, piece).
    stack: list[tuple[Iterator[tuple[str, JsonValue, str]], str, str]] = []
    item: tuple[str, JsonValue, str] | None = ("", value, where)
    while True:
        if item is not None:
            prefix, current, piece = item
            out.append(prefix)
            if isinstance(current, JsonObject):
                latest: dict[str, JsonValue] = {}
                for key, member in current.members:
                    latest[key] = member
                out.append("{")
                members = [(("," if i else "") + _encode_string(key) + ":", latest[key], f".{key}")
                           for i, key in enumerate(sorted(latest))]
                stack.append((iter(members), "}", piece))
            elif isinstance(current, tuple):
                out.append("[")
                elements = [("," if i else "", child, f"[{i}]") for i, child in enumerate(current)]
                stack.append((iter(elements), "]", piece))
            else:
                path = (frame[2] for frame in stack)
                out.append(_marshal_scalar(current, _chain(path, piece)))
        if not stack:
            return "".join(out)
        item = next(stack[-1][0], None)
        if item is None:
            out.append(stack.pop()[1])
            if not stack:
                return "".join(out)


def _chain(pieces: Iterator[str], last: str) -> Iterator[str]:
    yield from pieces
    yield last
