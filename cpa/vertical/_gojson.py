"""The one place this package imports the Go ``encoding/json`` reader and writer from.

Why one place: the vertical autoscaler's pure core borrows the CPA's Go-json reader; if
that ever moves, only the import below changes, and nothing else in ``cpa.vertical`` names
the module.
"""

from cpa.decide.gojson import (
    GoJsonError,
    JsonObject,
    JsonValue,
    Number,
    describe,
    go_int,
    go_marshal,
    match_field,
    parse,
)

__all__ = [
    "GoJsonError",
    "JsonObject",
    "JsonValue",
    "Number",
    "describe",
    "go_int",
    "go_marshal",
    "match_field",
    "parse",
]
