"""Imports stand at the top of the modules under cpa/: an import inside a function is
allowed only in a module that docs/architecture.md's "Measured exceptions" names (the
block between the ``lazy-imports`` markers), and every module named there has one, so
the list can neither grow nor go stale unseen."""

from __future__ import annotations

import ast
import json
import re
import statistics
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "architecture.md"
GUARDRAILS = REPO / "bench" / "results" / "startup-guardrails.json"
RULE_PERCENT = 5  # docs/architecture.md: a trick stays only if removing it costs this much


def _block(text: str) -> str:
    match = re.search(r"<!-- lazy-imports: begin -->\n(.*?)<!-- lazy-imports: end -->",
                      text, re.S)
    assert match, f"{DOC} has no lazy-imports block"
    return match.group(1)


def allowed() -> set[str]:
    """The modules the document's table names (their paths, first column)."""
    return set(re.findall(r"^\| `(cpa/[\w/]+\.py)` \|", _block(DOC.read_text()), re.M))


def measured_gains(text: str) -> dict[str, int]:
    """The table's "measured gain" column: module -> the percent its removal adds to the
    first write (rows kept for another reason say so, without a figure)."""
    return {module: int(percent) for module, percent in re.findall(
        r"^\| `(cpa/[\w/]+\.py)` \|.*\| first write at 1k Nodes \+(\d+)% without it \|$",
        _block(text), re.M)}


def kept_in_results(report: dict[str, dict[str, dict[str, object]]]) -> dict[str, int]:
    """module -> the percent its removal adds (the median over interleaved rounds of the
    first write without it over the first write with it), for each trick the file keeps."""
    return {str(e["module"]): round(float(str(e["paired_change_without_percent"])))
            for e in report["exceptions"].values() if e["decision"] == "kept"}


def imports_inside_functions(path: Path, root: Path = REPO) -> list[str]:
    """``path:line: import`` for each import statement inside a function of ``path``
    (``path`` relative to ``root``)."""
    found: dict[int, str] = {}
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Import | ast.ImportFrom):
                    found[inner.lineno] = ast.unparse(inner)
    rel = path.relative_to(root)
    return [f"{rel}:{line}: {text}" for line, text in sorted(found.items())]


def lazy() -> dict[str, list[str]]:
    """Every module of cpa/ with an import inside a function, and those imports."""
    out = {}
    for path in sorted((REPO / "cpa").rglob("*.py")):
        found = imports_inside_functions(path)
        if found:
            out[str(path.relative_to(REPO))] = found
    return out


def test_imports_inside_functions_only_where_the_document_says() -> None:
    listed = allowed()
    unlisted = [line for module, lines in lazy().items() if module not in listed
                for line in lines]
    assert unlisted == [], ("imports inside functions: put them at the top of the module, "
                            "or measure and list the module in docs/architecture.md's "
                            "Measured exceptions")


def test_every_module_the_document_lists_still_imports_inside_a_function() -> None:
    assert sorted(allowed() - set(lazy())) == []


def test_the_check_sees_an_import_inside_a_function(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("import os\n\n\ndef f() -> None:\n    import json\n    json.dumps(os)\n")
    assert imports_inside_functions(module, tmp_path) == ["m.py:5: import json"]


def test_each_measured_gain_is_the_results_files_figure() -> None:
    """The figures in the table are bench/results/startup-guardrails.json's, and each kept
    trick meets the rule."""
    documented = measured_gains(DOC.read_text())
    measured = kept_in_results(json.loads(GUARDRAILS.read_text()))
    assert documented == measured
    assert all(percent >= RULE_PERCENT for percent in measured.values())


def test_the_gain_check_reads_the_figures() -> None:
    row = ("| `cpa/m.py` | `x` | why | first write at 1k Nodes +7% without it |\n"
           "| `cpa/n.py` | `y` | why | - (not for speed) |\n")
    text = f"<!-- lazy-imports: begin -->\n{row}<!-- lazy-imports: end -->"
    assert measured_gains(text) == {"cpa/m.py": 7}
    report = {"exceptions": {
        "a": {"module": "cpa/m.py", "decision": "kept", "paired_change_without_percent": 7.2},
        "b": {"module": "cpa/o.py", "decision": "removed",
              "paired_change_without_percent": 1.0}}}
    assert kept_in_results(report) == {"cpa/m.py": 7}


def test_the_memory_figure_is_the_results_files() -> None:
    """The peak RSS the clientconfig and Node-watch rows quote is the medians of
    bench/results/2026-12-07/peak-rss-15k.json: without them (the first run's after) and
    with them (the second run's)."""
    runs = json.loads((REPO / "bench" / "results" / "2026-12-07" / "peak-rss-15k.json")
                      .read_text())["runs"]
    without, with_ = (statistics.median(run["peak_rss_mib"]["after"]) for run in runs)
    figure = re.search(r"peak RSS at 15k Nodes ([\d.]+) → ([\d.]+) MiB", _block(DOC.read_text()))
    assert figure, "the clientconfig row lost its peak RSS figure"
    assert (float(figure.group(1)), float(figure.group(2))) == (round(without, 1),
                                                                 round(with_, 1))
