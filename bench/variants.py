"""Versions of ours (and upstream) measured side by side: ``--variant NAME=TREE``.

A TREE is a directory (this tree: ``.``) or ``git:REF`` (exported with ``git archive``
into ``.cache/bench-trees/NAME``); each is installed as the image installs it, in a venv of
its own (``.cache/bench-venv-NAME``), so two versions differ only by their code. Used by
``bench.pollcost`` (CPU per poll) and ``bench.profile --startup`` (start to the first
correct write).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench import measure
from bench.run import Impl, log, ours, upstream, upstream_problem
from tests.controlplane import ControlPlane

REPO = Path(__file__).resolve().parents[1]
TREES = REPO / ".cache" / "bench-trees"
HELP = ("NAME=TREE[,python=PATH]: ours from a directory or git:REF, installed on the image's "
        "interpreter or on PATH (repeatable; default: ours=.)")


@dataclass
class Variant:
    """One implementation to measure: ours from some tree, or upstream."""

    name: str
    impl: Impl
    python: str | None  # ours: the venv's interpreter (for --cprofile); upstream: None


def parse_spec(spec: str) -> tuple[str, str, str]:
    """``NAME=TREE[,python=PATH]`` as (name, tree, interpreter); the tree defaults to
    ``.``, the interpreter to "" (the image's)."""
    name, _, tree_spec = spec.partition("=")
    tree_spec, _, interpreter = tree_spec.partition(",python=")
    if not name:
        raise SystemExit(f"--variant {spec!r}: give NAME=TREE")
    return name, tree_spec or ".", interpreter


def prepare_tree(name: str, spec: str) -> Path:
    """The directory a ``--variant`` names: a path, or ``git:REF`` exported."""
    if not spec.startswith("git:"):
        return Path(spec).resolve()
    ref = spec[4:]
    dest = TREES / name
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", ref], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def variants(plane: ControlPlane, specs: Sequence[str] | None, period: int, work: Path, *,
             flags: Sequence[str] = (), with_upstream: bool = False) -> list[Variant]:
    """Each ``--variant`` installed and ready to start (``ours=.`` when none is given),
    then upstream v1.10.3 if asked for and built."""
    out = []
    for spec in specs or ["ours=."]:
        name, tree_spec, interpreter = parse_spec(spec)
        tree = prepare_tree(name, tree_spec)
        venv = REPO / ".cache" / f"bench-venv-{name}"
        problem = measure.install_tree(tree, venv, interpreter or None)
        if problem:
            raise SystemExit(f"cannot install variant {name} from {tree}: {problem}")
        log(f"variant {name}: {tree_spec} installed in {venv.relative_to(REPO)} on "
            f"{interpreter or measure.shipped_interpreter()[1]}")
        command = [str(venv / "bin" / "cluster-proportional-autoscaler")]
        out.append(Variant(name, ours(plane, period, work, command=command, extra=flags,
                                      name=name),
                           str(venv / "bin" / "python")))
    if with_upstream:
        binary, problem = upstream_problem()
        if binary is None:
            log(f"upstream: not measured: {problem}")
        else:
            out.append(Variant("upstream", upstream(plane, binary, period, work), None))
    return out
