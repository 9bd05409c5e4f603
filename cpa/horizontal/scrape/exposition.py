"""The Prometheus text exposition format (version 0.0.4), read for one metric.

Why our own reader: a scrape every two seconds of every Pod needs one metric out of a page
of a few hundred lines (CoreDNS's), and a full parser into objects would cost
more than the rest of the scrape. This reads line by line, keeps only the samples of the
one metric asked for (and ``process_start_time_seconds``, which tells a counter reset from
a counter going backwards), and checks what it keeps: label syntax with escapes, values as
Prometheus writes them (``NaN``, ``+Inf``, ``-Inf`` included), an optional timestamp.

A series is known by its label set, not by how the page wrote it: the labels sorted by
name, each value unescaped and written again the one way (``\\``, ``\"``, ``\n``), a label
with an empty value left out (Prometheus' label set has no empty values). The same series
with its labels in another order, or with other spacing, is the same series: taking it for
a new one would count its whole counter as an increase.

A metric is named as its samples are named; the ``# TYPE`` line gives its type (a counter
may be typed under its name without ``_total``, as OpenMetrics does). With no ``# TYPE``
line a name ending in ``_total`` is a counter and anything else a gauge.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field
from typing import Final

__all__ = ["START_TIME", "ExpositionError", "Family", "parse_family", "series_key"]

START_TIME: Final = "process_start_time_seconds"
_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
# name, then optional {labels} (a quoted value may hold any of } , = and escapes), value,
# optional timestamp.
_SAMPLE = re.compile(
    rf'({_NAME})(?:\{{((?:[^"}}]|"(?:[^"\\]|\\.)*")*)\}})?[ \t]+(\S+)(?:[ \t]+(-?\d+))?[ \t]*')
_LABEL = re.compile(r'[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*"((?:[^"\\\n]|\\.)*)"[ \t]*(,|$)')
_VALUES: Final = {"NaN": math.nan, "+Inf": math.inf, "-Inf": -math.inf, "Inf": math.inf}
_TYPES: Final = ("counter", "gauge", "untyped", "summary", "histogram")


class ExpositionError(ValueError):
    """A page that is not the text format (an HTML error page, a truncated answer)."""


@dataclass(slots=True)
class Family:
    """The samples of one metric on one page."""

    name: str
    type: str | None = None
    """The ``# TYPE`` line's type; None when the page has none for the metric."""
    series: dict[str, float] = field(default_factory=dict)
    """Each series's value, by its label set (:func:`series_key`: the same set written in
    another order is the same series; a series without labels is ``""``). A series twice
    on a page: the later value (Prometheus refuses such a page; a daemon keeps going)."""
    start_time: float | None = None
    """The page's ``process_start_time_seconds``, when it has one."""

    @property
    def counter(self) -> bool:
        if self.type is not None:
            return self.type == "counter"
        return self.name.endswith("_total")


_ESCAPES: Final = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}
_ESCAPE = re.compile(r"\\.")


def _unescape(value: str) -> str:
    """A label value as it is (an unknown escape is kept as it was written)."""
    if "\\" not in value:
        return value
    return _ESCAPE.sub(lambda m: _ESCAPES.get(m.group(0), m.group(0)), value)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def series_key(text: str, where: int = 0) -> str:
    """The series' identity from the text between the braces: its label set, sorted by
    name, values escaped the one way, empty values left out (``""`` without labels)."""
    try:
        return _series_key(text)
    except ExpositionError as exc:
        raise ExpositionError(f"line {where}: {exc}") from None


@functools.lru_cache(maxsize=2048)
def _series_key(text: str) -> str:
    """:func:`series_key`, kept for the label texts seen last: a page writes its series'
    labels the same way at every scrape, and every Pod of a target has the same series,
    so the work is done once per series, not once per line read."""
    pairs: dict[str, str] = {}
    pos = 0
    while pos < len(text):
        match = _LABEL.match(text, pos)
        if match is None:
            raise ExpositionError(f"a label set that is not name=\"value\" pairs: "
                                  f"{{{text[:80]}}}")
        pos = match.end()
        if match.group(3) == "" and pos < len(text):
            raise ExpositionError("labels not separated by commas")
        name = match.group(1)
        if name in pairs:
            raise ExpositionError(f"the label {name} twice in one series")
        pairs[name] = _unescape(match.group(2))
    return ",".join(f'{name}="{_escape(value)}"' for name, value in sorted(pairs.items())
                    if value)


def _value(text: str, where: int) -> float:
    special = _VALUES.get(text)
    if special is not None:
        return special
    try:
        return float(text)
    except ValueError:
        raise ExpositionError(f"line {where}: {text[:40]!r} is not a sample value") from None


def _type_line(line: str, name: str) -> str | None:
    """The type a ``# TYPE`` line gives ``name`` (or its ``_total``-less base), else None."""
    parts = line.split(None, 3)
    if len(parts) < 4 or parts[1] != "TYPE":
        return None
    typed, kind = parts[2], parts[3].strip()
    if typed != name and not (name.endswith("_total") and typed == name[:-6]):
        return None
    if kind not in _TYPES:
        raise ExpositionError(f"# TYPE {typed} {kind[:20]}: not a metric type")
    return kind


def parse_family(text: str, name: str) -> Family:
    """The samples of metric ``name`` on one page (no sample: an empty ``series``)."""
    family = Family(name)
    prefix_len = min(len(name), len(START_TIME))
    wanted = (name[:prefix_len], START_TIME[:prefix_len])
    for number, line in enumerate(text.split("\n"), 1):
        if not line or line.isspace():
            continue
        if line[0] == "#":
            if family.type is None and line.startswith("# TYPE "):
                family.type = _type_line(line, name)
            continue
        if not line.startswith(wanted):  # most lines: another metric
            continue
        match = _SAMPLE.fullmatch(line.rstrip("\r"))
        if match is None:
            raise ExpositionError(f"line {number}: not a sample line: {line[:80]!r}")
        sample_name, labels, value = match.group(1), match.group(2) or "", match.group(3)
        if sample_name == name:
            family.series[series_key(labels, number) if labels else ""] = _value(value, number)
        elif sample_name == START_TIME:
            family.start_time = _value(value, number)
    return family
