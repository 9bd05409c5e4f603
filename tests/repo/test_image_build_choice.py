"""docs/container-image.md says why image/ocibuild builds the image rather than buildah or
podman, with figures: every figure there is one of the measurement's results file, so the
page cannot drift from what was measured (a new measurement rewrites both)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "container-image.md"
RESULTS = REPO / "bench" / "results" / "image-build.json"
HEADING = "## Why image/ocibuild, not buildah or podman"
# A figure: a number with its unit (seconds, minutes, MiB), or two sharing one: a range
# ("6-14 s") or uncompressed / gzip ("26.9 / 10.5 MiB").
FIGURE = re.compile(r"(\d+(?:\.\d+)?)(?: ?[-/] ?(\d+(?:\.\d+)?))? ?(?:s|min|MiB)\b")


def figures(text: str) -> list[str]:
    return [n for pair in FIGURE.findall(section(text, HEADING)) for n in pair if n]


def section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start:] if end < 0 else text[start:end]


def numbers(doc: Any) -> set[str]:
    """Every number in a JSON document, as written in it."""
    if isinstance(doc, dict):
        return {n for v in doc.values() for n in numbers(v)}
    if isinstance(doc, list):
        return {n for v in doc for n in numbers(v)}
    if isinstance(doc, bool) or not isinstance(doc, int | float):
        return set()
    return {str(doc)}


def test_the_page_has_the_section_and_its_figures() -> None:
    found = figures(PAGE.read_text())
    assert len(found) >= 10, found


def test_every_figure_is_in_the_results_file() -> None:
    measured = numbers(json.loads(RESULTS.read_text()))
    assert [n for n in figures(PAGE.read_text()) if n not in measured] == []


def test_a_figure_not_measured_is_found() -> None:
    text = (f"{HEADING}\n\n| cold | 271 s, 6-14 s |\n| size | 26.9 / 99.9 MiB |\n\n"
            "## Next\n\n| 5 s |\n")
    found = figures(text)
    assert found == ["271", "6", "14", "26.9", "99.9"]
    measured = numbers({"cold": [271, 6, 14], "size": {"x": 26.9}})
    assert [n for n in found if n not in measured] == ["99.9"]
