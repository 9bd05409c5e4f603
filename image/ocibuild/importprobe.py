"""Every module a program can import, found by importing it: run by the image's own
interpreter (standard library only; ocibuild runs it as a file, never imports it).

``python3 importprobe.py closure ROOT...``: starting from the ROOT modules, imports each
module, reads its code object (source or bytecode alike), and follows every ``import``
statement anywhere in it: at module level, inside functions, under ``try``/``if``, relative
or absolute, and ``from X import Y`` where Y is a submodule. Prints JSON: the modules that
imported (``importable``) and those that did not (``absent``: name -> the error), and
every module loaded as a side effect (C extensions import modules no bytecode shows).

``python3 importprobe.py import NAME...``: imports each NAME in this one process; prints
JSON ``{"imported": [...], "failed": {name: error}}``.

ocibuild runs ``closure`` with the build machine's Debian interpreter over the FULL
standard library and the image's site-packages: the result is what the program can import.
Nothing in it may be dropped from the image; ``make image-test`` runs ``import`` with that
list in the built image of every platform, on its CPU.
"""

from __future__ import annotations

import ast
import codecs
import contextlib
import dis
import importlib
import importlib.util
import json
import sys
import types
from collections.abc import Iterator
from typing import Any

# Functions of the standard library that the program never calls, by module, with why:
# their imports would bring in test suites and the interactive debugger.
NEVER_CALLED = {
    "multiprocessing.util": {"_cleanup_tests": "called by CPython's own test suite only"},
}


# Looked up by name from C: socket.getaddrinfo() and the ssl module encode host names with
# "idna"; text I/O, the file system and the environment use UTF-8 (PYTHONUTF8=1), ASCII and
# Latin-1 (HTTP headers).
INTERPRETER_CODECS = {"idna", "utf-8", "ascii", "latin-1"}
CODECS: set[str] = set()   # filled while scanning
# Names in sys.modules that are not modules of their own: this script, and multiprocessing's
# alias of it.
ALIASES = {"__main__", "__mp_main__"}


def code_objects(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from code_objects(const)


def imports_in(code: types.CodeType) -> Iterator[tuple[str, int, tuple[str, ...]]]:
    """(name, level, fromlist) of every IMPORT_NAME in ``code`` and its nested code."""
    for co in code_objects(code):
        ops = list(dis.get_instructions(co))
        for i, op in enumerate(ops):
            if op.opname != "IMPORT_NAME" or i < 2:
                continue
            level, fromlist = ops[i - 2].argval, ops[i - 1].argval
            if not isinstance(level, int):
                level = 0
            if not isinstance(fromlist, tuple):
                fromlist = ()
            yield str(op.argval), level, tuple(str(f) for f in fromlist)


def is_main_block(node: ast.AST) -> bool:
    """``if __name__ == "__main__":``: code that runs only when the module is a script."""
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    test = node.test
    sides = [test.left, *test.comparators]
    return (len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)
            and any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides)
            and any(isinstance(s, ast.Constant) and s.value == "__main__" for s in sides))


def script_only(tree: ast.Module) -> set[ast.AST]:
    """The ``__main__`` blocks of a module and its private top-level functions that only
    they call (``def _test(): import doctest ...``): code that runs when the module is
    run as a script, which the program never does to a library module."""
    blocks = [node for node in tree.body if is_main_block(node)]
    skip: set[ast.AST] = set(blocks)
    inside = {n.id for b in blocks for n in ast.walk(b) if isinstance(n, ast.Name)}
    for node in tree.body:
        if (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                and node.name.startswith("_") and node.name in inside):
            used = [n for other in tree.body if other not in skip and other is not node
                    for n in ast.walk(other)
                    if (isinstance(n, ast.Name) and n.id == node.name)
                    or (isinstance(n, ast.Constant) and n.value == node.name)]
            if not used:
                skip.add(node)
    return skip


CODEC_CALLS = {"encode", "decode", "lookup", "getencoder", "getdecoder", "getreader",
               "getwriter", "getincrementalencoder", "getincrementaldecoder", "iterencode",
               "iterdecode"}


def codec_names(tree: ast.AST) -> Iterator[str]:
    """Codec names written in the code: ``x.encode("idna")``, ``codecs.lookup("latin-1")``,
    ``open(..., encoding="ascii")``; each is a module of ``encodings`` looked up by name at
    run time, which no import statement shows."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        args = list(node.args[:1]) if called in CODEC_CALLS else []
        args += [k.value for k in node.keywords if k.arg == "encoding"]
        for arg in args:
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value:
                yield arg.value


def imports_in_source(tree: ast.Module, name: str
                      ) -> Iterator[tuple[str, int, tuple[str, ...]]]:
    """As imports_in, from the source, leaving out what only runs when the module is a
    script (script_only) and the functions in NEVER_CALLED."""
    skip = script_only(tree)
    never = NEVER_CALLED.get(name, {})
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if node in skip or (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                            and node.name in never):
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, 0, ()
        elif isinstance(node, ast.ImportFrom):
            yield node.module or "", node.level, tuple(a.name for a in node.names)
        elif isinstance(node, ast.Call):
            for codec in codec_names(node):
                CODECS.add(codec)
        stack.extend(ast.iter_child_nodes(node))


def package_of(name: str) -> str:
    module = sys.modules.get(name)
    if module is not None and hasattr(module, "__path__"):
        return name
    return name.rpartition(".")[0]


def targets(name: str, found: Iterator[tuple[str, int, tuple[str, ...]]]) -> Iterator[str]:
    """The absolute module names that the imports ``found`` in module ``name`` may load."""
    for target, level, fromlist in found:
        if level:
            try:
                base = importlib.util.resolve_name("." * level + target, package_of(name))
            except ImportError:
                continue
            base = base.rstrip(".")
        else:
            base = target
        parts = base.split(".")
        for i in range(1, len(parts) + 1):
            yield ".".join(parts[:i])
        for item in fromlist:
            if item != "*":
                yield f"{base}.{item}"  # a submodule, or an attribute (tried below)


def is_attribute(name: str) -> bool:
    """``from pkg import thing`` where thing is not a module of pkg."""
    parent, _, child = name.rpartition(".")
    module = sys.modules.get(parent)
    if not parent or module is None:
        return False
    if not hasattr(module, "__path__"):
        return True   # a plain module's attribute
    try:
        return importlib.util.find_spec(name) is None and hasattr(module, child)
    except (ImportError, ValueError):
        return hasattr(module, child)


def module_imports(name: str, module: types.ModuleType
                   ) -> Iterator[tuple[str, int, tuple[str, ...]]] | None:
    """The imports of a module: from its source where it has one, else its bytecode;
    None for a built-in or C extension module."""
    loader: Any = getattr(getattr(module, "__spec__", None), "loader", None)
    if loader is None:
        return None
    try:
        source = loader.get_source(name) if hasattr(loader, "get_source") else None
        if source is not None:
            return imports_in_source(ast.parse(source), name)
        code = loader.get_code(name) if hasattr(loader, "get_code") else None
    except (ImportError, SyntaxError, OSError):
        return None
    return imports_in(code) if code is not None else None


def closure(roots: list[str]) -> dict[str, object]:
    seen: set[str] = set()
    importable: set[str] = set()
    absent: dict[str, str] = {}
    via: dict[str, str] = {}          # module -> the first module found importing it
    queue = list(roots)
    while queue:
        name = queue.pop(0)
        if name in seen:
            continue
        seen.add(name)
        try:
            module = importlib.import_module(name)
        except BaseException as exc:  # ImportError mostly; a module may raise anything
            parents = [name.rsplit(".", i)[0] for i in range(1, name.count(".") + 1)]
            if name in roots or not (any(p in absent for p in parents) or is_attribute(name)):
                absent[name] = f"{type(exc).__name__}: {exc}"
            continue
        importable.add(name)
        found = module_imports(name, module)
        if found is not None:
            for target in targets(name, found):
                if target not in seen:
                    via.setdefault(target, name)
                    queue.append(target)
    # The codecs named in the code and those the interpreter looks up by name itself: each
    # lookup imports its module of `encodings`.
    for codec in sorted(CODECS | INTERPRETER_CODECS):
        with contextlib.suppress(LookupError):   # else a string for some other lookup()
            codecs.lookup(codec)
    # Loaded as a side effect (by the interpreter's start-up or a C extension): importable.
    importable |= {n for n, m in list(sys.modules.items()) if m is not None} - ALIASES
    absent = {n: e for n, e in absent.items() if n not in importable}
    return {"importable": sorted(importable), "absent": dict(sorted(absent.items())),
            "via": {n: via[n] for n in sorted(via) if n in importable or n in absent}}


def import_all(names: list[str]) -> dict[str, object]:
    imported, failed = [], {}
    for name in names:
        try:
            importlib.import_module(name)
            imported.append(name)
        except BaseException as exc:
            failed[name] = f"{type(exc).__name__}: {exc}"
    return {"imported": imported, "failed": failed}


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] not in ("closure", "import"):
        print("usage: importprobe.py closure|import NAME...", file=sys.stderr)
        return 2
    names = argv[1:]
    if names == ["-"]:
        names = sys.stdin.read().split()
    result = closure(names) if argv[0] == "closure" else import_all(names)
    sys.stdout.flush()
    print("\n" + "IMPORTPROBE " + json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
