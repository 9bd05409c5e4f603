"""README.md and docs/*.md: every link goes somewhere, the README stays a README.

Links are checked as GitHub renders them: a relative path must exist (from the file that
links it), and a ``#fragment`` must be the anchor of a heading in the target (GitHub's
slugs: lower case, punctuation dropped, spaces to hyphens, ``-1``, ``-2`` for repeats).
Links inside code blocks and to other sites are not followed.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cpa.horizontal.cpa_flags import flag_names
from tests.repo import test_image_build_choice as image_build_choice

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
DOCS = sorted((REPO / "docs").glob("*.md"))
PAGES = [README, *DOCS]

_LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def _prose(text: str) -> str:
    """The text outside fenced code blocks and inline code."""
    text = re.sub(r"^(```|~~~).*?^\1\s*$", "", text, flags=re.MULTILINE | re.DOTALL)
    return re.sub(r"`[^`\n]*`", "", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"`([^`]*)`", r"\1", heading.strip()).lower()
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link shows its text
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"^(```|~~~).*?^\1\s*$", "", path.read_text(), flags=re.MULTILINE | re.DOTALL)
    seen: dict[str, int] = {}
    found = set()
    for match in re.finditer(r"^#{1,6}\s+(.+?)\s*#*\s*$", text, flags=re.MULTILINE):
        base = slug(match.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(path: Path) -> list[str]:
    return _LINK.findall(_prose(path.read_text()))


def test_slugs_are_githubs() -> None:
    assert slug("Events (`--events`, opt-in)") == "events---events-opt-in"
    assert slug("A real node: `make cluster-e2e`") == "a-real-node-make-cluster-e2e"
    assert slug("Upstream's log messages, and ours") == "upstreams-log-messages-and-ours"
    assert slug("`behavior`: stabilization windows and rate policies (ours, opt-in)") == \
        "behavior-stabilization-windows-and-rate-policies-ours-opt-in"


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in links(page):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
            continue
        path_part, _, fragment = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page
        if not dest.exists():
            broken.append(f"{target}: {dest} does not exist")
        elif fragment and dest.suffix != ".md":
            broken.append(f"{target}: an anchor into a file that is not Markdown")
        elif fragment and fragment not in anchors(dest):
            broken.append(f"{target}: no heading with the anchor #{fragment} in {dest.name}")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_link_resolves(page: Path) -> None:
    broken = broken_links(page)
    assert not broken, "\n".join(broken)


def test_the_checker_finds_broken_links(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Other\n\n## A `code` heading\n")
    page.write_text("# Page\n\n[ok](other.md#a-code-heading) [self](#page) "
                    "[gone](missing.md) [bad anchor](other.md#nope) [web](https://x.y/z)\n"
                    "```\n[in code](nowhere.md)\n```\n")
    assert len(links(page)) == 5
    assert [b.split(":")[0] for b in broken_links(page)] == ["missing.md", "other.md#nope"]
    assert len(links(README)) >= 15


def test_the_readme_is_short_and_keeps_its_sections() -> None:
    size = len(README.read_bytes())
    assert size < 15_000, f"README.md is {size} bytes; move detail into docs/"
    headings = {slug(h) for h in re.findall(r"^## (.+)$", README.read_text(), re.MULTILINE)}
    for section in ("try-it-first-no-cluster-needed", "the-two-commands", "quickstart", "flags",
                    "configmap-formats",
                    "health-and-metrics", "differences-from-upstream", "documentation"):
        assert section in headings, section


def test_the_readme_indexes_every_doc() -> None:
    linked = {(README.parent / t.partition("#")[0]).resolve() for t in links(README)}
    missing = [d.name for d in DOCS if d.resolve() not in linked]
    assert not missing, f"not in the README's index: {missing}"


def test_the_readme_flag_table_names_every_flag() -> None:
    table = README.read_text()
    missing = [name for name in flag_names()
               if f"`--{name}`" not in table and f"`--{name.replace('-', '_')}`" not in table]
    assert not missing, missing


def _section(text: str, heading: str) -> str:
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## )", text, re.S | re.M)
    assert match, f"README.md has no section {heading!r}"
    return match.group(1)


def test_the_readme_leads_with_the_quick_path_then_the_two_commands_ci_runs() -> None:
    """A newcomer's first screen: the quick path (no cluster), then the two commands,
    exactly as CI runs them (on its clean clone, nothing activated), with what they need
    as the project says it and how long they took, measured."""
    text = README.read_text()
    first_screen = text.splitlines()[:60]
    assert "## Try it first: no cluster needed" in first_screen
    assert "## The two commands" in first_screen
    assert text.index("## Try it first") < text.index("## The two commands") \
        < text.index("## Quickstart")
    section = _section(text, "The two commands")
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block
    commands = [line.split("#")[0].strip() for line in block.group(1).splitlines()]
    assert commands == ["make demo", "make test"]
    makefile = (REPO / "Makefile").read_text()
    ci = (REPO / ".ci" / "run").read_text()
    for command in commands:
        assert re.search(rf"^{command.split()[1]}:", makefile, re.M), command
        assert re.search(rf"^{re.escape(command)}$", ci, re.M), f".ci/run lacks {command!r}"
    assert ci.index("\nmake test\n") < ci.index("\nmake demo\n")
    assert "bin/activate" not in ci, "CI runs make as the README says: no venv activated"
    # The prerequisites, as pyproject.toml and the control plane's go.mod have them.
    python = re.search(r'requires-python = ">=(\d+\.\d+)"',
                       (REPO / "pyproject.toml").read_text())
    go = re.search(r"^go (\d+\.\d+)", (REPO / "tests/controlplane/go/go.mod").read_text(),
                   re.M)
    assert python and go
    assert f"Python >= {python.group(1)}" in section
    assert f"Go >= {go.group(1)}" in section
    assert "GB of disk" in section and "Measured on a fresh clone" in section
    for command in commands:  # | `make demo` | cold | warm |, both with a figure
        row = re.search(rf"^\| `{command}` \|([^|]+)\|([^|]+)\|$", section, re.M)
        assert row, f"no measured row for {command}"
        assert all(_DURATION.search(cell) for cell in row.groups()), row.group(0)


def quick_path() -> list[str]:
    """The quick path's commands, one per line (continuations joined, comments cut)."""
    section = _section(README.read_text(), "Try it first: no cluster needed")
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "the quick path is a sh block"
    joined = re.sub(r"\\\n\s*", "", block.group(1))
    return [re.sub(r"\s+#.*$", "", line).strip() for line in joined.splitlines()
            if line.strip()]


def test_the_quick_path_clones_and_makes_the_venv_make_uses() -> None:
    lines = quick_path()
    clone = re.fullmatch(r"git clone (https://github\.com/[\w.-]+/([\w.-]+))", lines[0])
    assert clone, lines[0]
    assert lines[1] == f"cd {clone.group(2)}", "cd into the clone: the paths are relative"
    makefile = (REPO / "Makefile").read_text()
    venv = re.search(r"^VENV \?= (\S+)$", makefile, re.M)
    assert venv
    assert lines[2] == f"python3 -m venv {venv.group(1)} && . {venv.group(1)}/bin/activate", \
        "the venv is the one make reuses"
    assert lines[3] == "pip install -e '.[plot]'", "editable: make's stamp accepts it"
    assert re.search(r"^plot = ", (REPO / "pyproject.toml").read_text(), re.M)
    assert lines[4].startswith("cpa explain ")
    assert lines[5].startswith("cpa simulate ") and " --compare" in lines[5]
    plot = re.search(r"--plot (\S+)", lines[5])
    assert plot and "/" not in plot.group(1), "the picture lands in the clone, not docs/"
    assert len(lines) == 6


def test_no_example_writes_into_the_docs() -> None:
    """A reader who copies an example must not overwrite a tracked file."""
    for page in PAGES:
        for block in re.findall(r"^```.*?\n(.*?)^```", page.read_text(), re.S | re.M):
            assert not re.search(r"(--plot|>)\s*docs/", block), (page.name, block)


_DURATION = re.compile(r"\b\d+(?:[-.]\d+)?\s?(?:min|s)\b")
_TEST_COUNT = re.compile(r"\b\d[\d,]*\s+(?:[a-z]+\s+)?tests\b")


def test_the_docs_stay_reference_sized() -> None:
    """Reference a user reads, not a lab notebook: the performance page at most 20 KB and
    all of docs/, pictures included, at most 200 KB (history goes to bench/results/)."""
    performance = len((REPO / "docs" / "performance.md").read_bytes())
    assert performance <= 20_000, f"docs/performance.md is {performance} bytes"
    total = sum(len(p.read_bytes()) for p in (REPO / "docs").iterdir() if p.is_file())
    assert total <= 200_000, f"docs/ is {total} bytes; say it once, link to it"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_page_counts_the_tests(page: Path) -> None:
    """A count of tests is stale with the next commit: leave it out."""
    assert not _TEST_COUNT.findall(_prose(page.read_text()))


def test_the_two_commands_times_are_written_once() -> None:
    """The README states how long `make demo` and `make test` take; docs/ and `make help`
    point there instead of repeating (and contradicting) the figures, and the scripts
    that say how long (make test's plan, the demo's banner) read them from the README."""
    figures = set(_DURATION.findall(_section(README.read_text(), "The two commands")))
    assert figures, "the README's two commands say how long they take"
    for page in DOCS:  # no time for a build, a venv or the two commands
        text = page.read_text()
        if page.name == "container-image.md":
            # The image build's measured comparison: each figure there is checked against
            # its results file (test_image_build_choice.py), so it cannot drift.
            text = text.replace(image_build_choice.section(text, image_build_choice.HEADING), "")
        for paragraph in re.split(r"\n\s*\n", text):
            if re.search(r"make demo|make test|\bcold\b|\bwarm\b|\bvenv\b", paragraph):
                assert not _DURATION.findall(paragraph), (page.name, paragraph)
    help_lines = [line for line in (REPO / "Makefile").read_text().splitlines()
                  if line.lstrip().startswith("@echo ")]
    assert len(help_lines) > 20
    assert not [line for line in help_lines if _DURATION.search(line)]
    for script in ("scripts/test-plan.sh", "scripts/demo.py", "scripts/pyenv.sh",
                   "scripts/install-helm.sh", "scripts/install-promtool.sh",
                   "tests/controlplane/binaries.py"):
        assert not _DURATION.findall((REPO / script).read_text()), script


def test_the_checks_find_counts_and_times() -> None:
    assert _TEST_COUNT.findall("9 min 59 s for 2,404 tests") == ["2,404 tests"]
    assert _TEST_COUNT.findall("2404 integration tests") == ["2404 integration tests"]
    assert _TEST_COUNT.findall("the tests in 3 processes") == []
    assert _DURATION.findall("Cold: ~8 min (venv 1 min); warm: 8-9 s; 0.5 s") == [
        "8 min", "1 min", "8-9 s", "0.5 s"]
