"""The one-way import rule of docs/architecture.md, held against every module under cpa/.

The rule is read from the document itself (the block between the ``import-rule`` markers),
so the document and the code cannot drift apart; the imports are read with ``ast``, lazy
(inside a function) and type-only ones included: an import that runs the wrong way is one,
whenever it runs.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "cpa"
DOC = REPO / "docs" / "architecture.md"
# What the pure core may use of the standard library: computing, no I/O, no clock.
DECIDE_STDLIB = frozenset({"__future__", "array", "bisect", "collections", "dataclasses", "decimal",
                           "enum", "fractions", "json", "math", "re", "typing"})
GO_STDLIB = DECIDE_STDLIB


def rule() -> dict[str, frozenset[str]]:
    """part -> the parts it may import besides its own ("*": any)."""
    text = DOC.read_text()
    match = re.search(r"<!-- import-rule: begin -->\s*```text\n(.*?)```\s*"
                      r"<!-- import-rule: end -->", text, re.S)
    assert match, f"{DOC} has no import-rule block"
    parts: dict[str, frozenset[str]] = {}
    for line in match.group(1).splitlines():
        if line.strip():
            part, *allowed = line.split()
            parts[part] = frozenset(a for a in allowed if a != "-")
    return parts


def module_name(path: Path) -> str:
    name = ".".join(path.relative_to(REPO).with_suffix("").parts)
    return name.removesuffix(".__init__")


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def within(name: str, part: str) -> bool:
    """Whether ``name`` is ``part`` or inside it (the package face ``cpa`` contains only
    itself: the version)."""
    return name == part or (part != "cpa" and name.startswith(part + "."))


def part_of(name: str, parts: dict[str, frozenset[str]]) -> str | None:
    """The longest part of the rule that contains module ``name``."""
    found = [part for part in parts if within(name, part)]
    return max(found, key=len) if found else None


def may_import(own: str, theirs: str, parts: dict[str, frozenset[str]]) -> bool:
    """Whether a module of the part ``own`` may import one of the part ``theirs``: its own
    part, or a part its line names. A sub-part with a line of its own is another part: a
    core does not reach its shell, nor a tool a daemon, by being their parent."""
    allowed = parts[own]
    return "*" in allowed or theirs == own or theirs in allowed


def imports(path: Path, known: set[str]) -> Iterator[tuple[int, str]]:
    """(line, module) of every import of a ``cpa`` module in ``path``, wherever it stands."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "cpa":
                    yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}:{node.lineno}: use absolute imports"
            if node.module is None or node.module.split(".")[0] != "cpa":
                continue
            for alias in node.names:  # ``from cpa.nodes import json`` imports cpa.nodes.jsondecode
                sub = f"{node.module}.{alias.name}"
                yield node.lineno, sub if sub in known else node.module


def stdlib_imports(path: Path) -> Iterator[tuple[int, str]]:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            yield node.lineno, node.module.split(".")[0]


def graph() -> dict[str, set[str]]:
    known = set(modules())
    return {name: {target for _, target in imports(path, known) if target != name}
            for name, path in modules().items()}


# --- the tests ----------------------------------------------------------------------------


def test_every_module_belongs_to_a_part_of_the_rule() -> None:
    parts = rule()
    lost = [name for name in modules() if part_of(name, parts) is None]
    assert lost == [], f"add a line for these to the import rule in {DOC.name}: {lost}"


@pytest.mark.parametrize("name", sorted(modules()))
def test_imports_run_one_way(name: str) -> None:
    parts = rule()
    own = part_of(name, parts)
    assert own is not None
    allowed = parts[own]
    known = set(modules())
    wrong = []
    for line, target in imports(modules()[name], known):
        theirs = part_of(target, parts)
        assert theirs is not None, f"{name}:{line} imports {target}, in no part of the rule"
        if may_import(own, theirs, parts):
            continue
        wrong.append(f"line {line}: {target} ({theirs})")
    assert wrong == [], (f"{name} ({own}) may import only {sorted(allowed) or 'nothing'} "
                         f"besides its own part, per {DOC.name}; it imports {wrong}")


def test_no_circle_between_modules() -> None:
    edges = graph()
    state: dict[str, int] = {}  # 1 on the path, 2 done
    path: list[str] = []

    def visit(name: str) -> None:
        state[name] = 1
        path.append(name)
        for target in sorted(edges.get(name, ())):
            if state.get(target) == 1:
                circle = [*path[path.index(target):], target]
                raise AssertionError("import circle: " + " -> ".join(circle))
            if target not in state:
                visit(target)
        path.pop()
        state[name] = 2

    for name in sorted(edges):
        if name not in state:
            visit(name)


def test_package_faces_are_empty() -> None:
    """Importing a module must load that module only: start-up time is a measured goal."""
    faces = [path for path in PACKAGE.rglob("__init__.py") if path.parent != PACKAGE]
    assert faces, "no sub-packages found"
    full = [str(path.relative_to(REPO)) for path in faces if path.read_text().strip()]
    assert full == []


def test_the_pure_core_uses_no_io() -> None:
    found = sorted({f"{module_name(path)}:{line} {top}"
                    for core in ("horizontal/decide", "vertical/decide")
                    for path in (PACKAGE / core).rglob("*.py")
                    for line, top in stdlib_imports(path)
                    if top not in DECIDE_STDLIB and top != "cpa"})
    assert found == [], f"decide computes only ({sorted(DECIDE_STDLIB)}): {found}"


def test_go_compatibility_uses_no_io() -> None:
    """cpa.go is what Go programs compute (their JSON, flags, numbers, quantities): pure, as
    decide is, so both programs and decide may use it anywhere."""
    found = sorted({f"{module_name(path)}:{line} {top}"
                    for path in (PACKAGE / "go").rglob("*.py")
                    for line, top in stdlib_imports(path)
                    if top not in GO_STDLIB and top != "cpa"})  # cpa's: the rule above
    assert found == [], f"go computes only ({sorted(GO_STDLIB)}): {found}"


def test_the_rule_catches_a_wrong_import(tmp_path: Path) -> None:
    """The checks above can fail: an import of the node store from decide is found."""
    source = tmp_path / "bad.py"
    source.write_text("def f() -> None:\n    from cpa.nodes import store\n")
    targets = [target for _, target in imports(source, set(modules()))]
    assert targets == ["cpa.nodes.store"]
    parts = rule()
    assert not may_import("cpa.horizontal.decide", part_of("cpa.nodes.store", parts) or "",
                          parts)


@pytest.mark.parametrize(("importer", "target"), [
    ("cpa.vertical.decide.formula", "cpa.vertical.daemon.cpvpa_loop"),  # core -> its shell
    ("cpa.horizontal.decide.params", "cpa.horizontal.daemon.cpa_loop"),
    ("cpa.tools.explain", "cpa.vertical.daemon.cpvpa_main"),  # a tool -> a daemon
    ("cpa.tools.explain", "cpa.horizontal.daemon.cpa_main"),
    ("cpa.horizontal.scrape.rates", "cpa.horizontal.daemon.loadstage"),  # up to its user
])
def test_a_parent_is_no_way_into_its_sub_parts(importer: str, target: str) -> None:
    """The hole the rule had: a module could import anything below its own part, or below
    a part its line names, so the pure core could import its own daemon."""
    parts = rule()
    own, theirs = part_of(importer, parts), part_of(target, parts)
    assert own is not None and theirs is not None
    assert not may_import(own, theirs, parts)


def documented_tree() -> set[str]:
    """The files the drawing under "The packages" in docs/architecture.md names."""
    text = DOC.read_text().split("## The packages", 1)[1]
    block = text.split("```text\n", 1)[1].split("```", 1)[0]
    lines = block.splitlines()
    assert lines[0].strip() == "cpa/"
    stack = ["cpa"]
    files = set()
    for line in lines[1:]:
        match = re.search(r"[|`]-- (\S+)", line)
        if match is None:
            continue
        depth = match.start() // 4 + 1
        del stack[depth:]
        name = match.group(1)
        if name.endswith("/"):
            stack.append(name.rstrip("/"))
        else:
            files.add("/".join([*stack, name]))
    return files


def test_the_document_draws_the_tree_as_it_is() -> None:
    actual = {str(path.relative_to(REPO)) for path in PACKAGE.rglob("*.py")
              if path.name != "__init__.py" or path.parent == PACKAGE}
    drawn = documented_tree()
    assert sorted(actual - drawn) == [], f"not drawn in {DOC.name}"
    assert sorted(drawn - actual) == [], f"drawn in {DOC.name}, but not in the tree"
