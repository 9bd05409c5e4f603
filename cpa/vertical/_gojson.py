"""The one place this package imports the Go ``encoding/json`` reader and writer from.

Why one place: issue 17 moves ``cpa.gojson`` to ``cpa.decide.gojson``; then only the import
below changes, and nothing else in ``cpa.vertical`` names the module.
"""

from cpa.gojson import (
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
