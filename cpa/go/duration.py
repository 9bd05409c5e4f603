"""Go's ``time.ParseDuration``, as pflag's duration flags read their values.

Why our own: a manifest says ``--leader-elect-lease-duration=1m30s`` or ``500ms`` for the
Go binary; the same text must mean the same seconds here.
"""

from __future__ import annotations

import re

__all__ = ["parse_duration"]

_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "\u00b5s": 1e-6, "\u03bcs": 1e-6, "ms": 1e-3,
                   "s": 1.0, "m": 60.0, "h": 3600.0}


_DURATION_PART = re.compile(r"([0-9]*\.?[0-9]*)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)")


def parse_duration(text: str) -> float:
    """Go's ``time.ParseDuration`` (pflag's duration flags): "15s", "1m30s", "500ms"; a
    bare "0" is zero. Returns seconds."""
    s = text
    sign = -1.0 if s.startswith("-") else 1.0
    s = s.lstrip("+-")
    if s == "0":
        return 0.0
    if not s:
        raise ValueError("invalid duration")
    total, pos = 0.0, 0
    part = _DURATION_PART
    while pos < len(s):
        match = part.match(s, pos)
        if match is None or match.group(1) in ("", "."):
            raise ValueError(f"invalid duration {text!r} (write e.g. 15s, 1m30s, 500ms)")
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        pos = match.end()
    return sign * total
