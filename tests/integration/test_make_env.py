"""`make demo` as a newcomer types it: the Makefile owns its Python environment.

On a copy of this checkout in a throwaway directory (what a fresh clone has: no .venv), with
a real interpreter first on PATH as the machine's ``python3`` (a wrapper that logs every
call and runs the interpreter this venv was made from) and ``pip``/``pip3`` that only log:

* ``make demo`` with no .venv makes it and fills it, then the autoscaler runs;
* a stale stamp (a dependency gone, an old pyproject.toml) is noticed and repaired;
* no target runs pip outside the project's venv: the system interpreter is only asked to
  make the venv, ``PYTHON=python3`` (an interpreter without the package) is refused, not
  pip-installed into, and every target that reaches Python goes through scripts/pyenv.sh.

The demo walks one step (``--steps=1``: the control plane, the manifest's RBAC, the real
daemon's first scale and ``cpa explain``), which proves the environment works; CI runs the
whole walk-through once, as the README says. A last test runs the demo with a daemon whose
environment lacks a dependency: the demo reports the daemon's exit code and its own line.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import urllib3
import yaml

from tests.controlplane import ensure_binaries

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
# The targets that run no Python: they build Go tools, deploy, or print. Their scripts, and
# the scripts those run, are checked to name neither python3 nor pip.
NO_PYTHON_ENV = {"help", "controlplane", "apiserver", "test-tools", "test-plan", "deploy",
                 "clean", "actionlint", "chart-publish"}
_PIP_CALL = re.compile(r"(^|[\s;&|(])(pip3?|\S*/pip3?)\s|-m\s+pip(\s|$)")
_PYTHON = re.compile(r"\bpython3?\b|\bpip3?\b")
_SCRIPT = re.compile(r"[\w./-]+\.sh\b")


@dataclass
class Checkout:
    root: Path
    env: dict[str, str]
    system_log: Path

    def make(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["make", "--no-print-directory", *args], cwd=self.root,
                              env=self.env, capture_output=True, text=True,
                              timeout=timeout, check=False)

    def system_calls(self) -> list[str]:
        if not self.system_log.exists():
            return []
        return self.system_log.read_text().splitlines()

    def pip_outside_the_venv(self) -> list[str]:
        return [c for c in self.system_calls()
                if c.startswith("pip:") or _PIP_CALL.search(c.partition(": ")[2])]


def _scripts(root: Path, text: str, seen: set[Path]) -> set[Path]:
    """The shell scripts ``text`` names (``bash image/build.sh``, ``"$repo/x/y.sh"``,
    ``"$here/z.sh"``), and those they name, found under ``root``."""
    for name in _SCRIPT.findall(text):
        parts = Path(name.lstrip("/")).parts
        found = next((base / Path(*parts[i:]) for i in range(len(parts))
                      for base in (root, *(s.parent for s in seen))
                      if (base / Path(*parts[i:])).is_file()), None)
        if found is not None and found not in seen:
            seen.add(found)
            _scripts(root, found.read_text(), seen)
    return seen


def _wrapper(path: Path, log: Path, body: str) -> None:
    path.write_text(f"#!/bin/sh\nprintf '%s\\n' \"{path.name}: $*\" >> '{log}'\n{body}\n")
    path.chmod(0o755)


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Checkout:
    root = tmp_path_factory.mktemp("fresh-clone")
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO,
                           capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        src = REPO / name
        if src.is_file():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, root / name)
    # The control plane is built once per machine (minutes); the copy shares it.
    bin_dir = ensure_binaries()
    (root / ".cache").mkdir()
    (root / ".cache" / "controlplane").symlink_to(bin_dir.parents[1].resolve())

    system = root.parent / f"{root.name}-system-bin"
    system.mkdir()
    log = root.parent / f"{root.name}-system-python.log"
    real = Path(getattr(sys, "_base_executable", sys.executable)).resolve()
    _wrapper(system / "python3", log, f"exec '{real}' \"$@\"")
    for name in ("pip", "pip3"):
        _wrapper(system / name, log, "exit 1")
    venv_bin = str(Path(sys.executable).parent)
    path = [p for p in os.environ["PATH"].split(os.pathsep) if p and p != venv_bin]
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "PYTHON", "VENV", "BASE_PYTHON", "MAKEFLAGS", "MFLAGS",
                        "MAKELEVEL", "MAKEOVERRIDES", "PYTHONPATH")}
    env["PATH"] = os.pathsep.join([str(system), *path])
    return Checkout(root, env, log)


def _demo_walked(out: subprocess.CompletedProcess[str]) -> None:
    text = out.stdout + out.stderr
    assert out.returncode == 0, text[-6000:]
    assert "the autoscaler wrote spec.replicas = 2 to deployment/coredns" in out.stdout
    assert "=> 2 replicas" in out.stdout and "done: everything started" in out.stdout


def test_make_demo_makes_the_venv_it_needs(checkout: Checkout) -> None:
    assert not (checkout.root / ".venv").exists()
    out = checkout.make("demo", "DEMO_ARGS=--steps=1")
    _demo_walked(out)
    assert "make: creating .venv with " in out.stderr
    assert "installing the package and its test tools into " in out.stderr
    # The machine's python3 made the venv and did nothing else of note.
    calls = checkout.system_calls()
    assert any(c.startswith("python3: -m venv ") for c in calls), calls
    assert not checkout.pip_outside_the_venv(), calls
    where = subprocess.run([str(checkout.root / ".venv/bin/python"), "-c",
                            "import cpa; print(cpa.__file__)"], capture_output=True, text=True,
                           check=True, cwd="/").stdout
    assert where.startswith(str(checkout.root)), where
    # Ready now: the next target does not install again.
    again = checkout.make("install")
    assert again.returncode == 0 and not again.stderr, again.stderr


def test_make_demo_recovers_from_a_stale_stamp(checkout: Checkout) -> None:
    venv_python = str(checkout.root / ".venv/bin/python")
    stamp = checkout.root / ".venv/.cpa-installed"
    assert stamp.exists()
    # The stamp says ready but a dependency is gone (and the old stamp of .cache is there).
    subprocess.run([venv_python, "-m", "pip", "uninstall", "--yes", "--quiet", "structlog"],
                   check=True, capture_output=True)
    (checkout.root / ".cache" / "installed.stamp").touch()
    out = checkout.make("demo", "DEMO_ARGS=--steps=1")
    _demo_walked(out)
    assert "(missing: structlog)" in out.stderr, out.stderr
    # A stamp of another pyproject.toml: installed again.
    stamp.write_text(stamp.read_text().replace("\n", "\n0", 1))
    out = checkout.make("install")
    assert out.returncode == 0, out.stderr
    assert "installing the package and its test tools" in out.stderr
    assert not checkout.pip_outside_the_venv(), checkout.system_calls()


def test_no_target_runs_pip_outside_the_venv(checkout: Checkout) -> None:
    assert (checkout.root / ".venv/bin/python").exists(), "runs after the demo tests"
    before = len(checkout.system_calls())
    # The machine's interpreter, without the package: refused, never pip-installed into.
    out = checkout.make("test", "PYTHON=python3")
    assert out.returncode == 2, out.stdout + out.stderr
    assert "PYTHON=python3 is not a virtual environment and lacks: " in out.stderr
    assert "make never runs pip on it" in out.stderr
    calls = checkout.system_calls()[before:]
    assert calls and not checkout.pip_outside_the_venv(), calls
    # Recipes and the scripts they start find the venv's interpreter and console scripts
    # first (`python3 -m ...` in image/, tests/cluster/run.sh, pytest's subprocesses).
    probe = checkout.make("--eval=probe: ; @command -v python3; command -v cpa", "probe")
    venv_bin = checkout.root / ".venv" / "bin"
    assert probe.stdout.split() == [str(venv_bin / "python3"), str(venv_bin / "cpa")], probe

    phony = re.search(r"^\.PHONY:((?:.*\\\n)*.*)$", (checkout.root / "Makefile").read_text(),
                      re.MULTILINE)
    assert phony is not None
    targets = phony.group(1).replace("\\\n", " ").split()
    assert set(targets) > NO_PYTHON_ENV
    for target in targets:
        dry = checkout.make("-n", target, "IMAGE=example.invalid/cpa:0")
        assert dry.returncode == 0, (target, dry.stderr)
        direct = [line for line in dry.stdout.splitlines() if _PIP_CALL.search(line)]
        assert not direct, (target, direct)
        if target in NO_PYTHON_ENV:
            assert "scripts/pyenv.sh" not in dry.stdout and not _PYTHON.search(dry.stdout)
            for script in _scripts(checkout.root, dry.stdout, set()):
                assert not _PYTHON.search(script.read_text()), (target, script)
        else:
            # make test first says what it will build (scripts/test-plan.sh, no Python).
            commands = dry.stdout.lstrip().removeprefix(
                'bash scripts/test-plan.sh "3"\n' if target == "test" else "")
            assert commands.startswith("bash scripts/pyenv.sh"), (target, dry.stdout)


def test_a_daemon_that_cannot_start_is_reported_by_the_demo(tmp_path: Path) -> None:
    """The demo's harness works (yaml, urllib3) but the daemon's environment lacks its
    dependencies, as when the daemon ran on the machine's python3: the demo says the
    daemon exited, with its code and its own last line, not a harness's time-out."""
    ensure_binaries()
    venv = tmp_path / "partial"
    real = Path(getattr(sys, "_base_executable", sys.executable)).resolve()
    subprocess.run([str(real), "-m", "venv", "--without-pip", str(venv)], check=True)
    deps = tmp_path / "deps"
    deps.mkdir()
    for module in (yaml, urllib3):
        package = Path(module.__file__ or "").parent
        (deps / package.name).symlink_to(package)
    site = next(venv.glob("lib/python3*/site-packages"))
    (site / "harness.pth").write_text(f"{REPO}\n{deps}\n")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = "/usr/bin:/bin"  # no console script of any environment
    out = subprocess.run([str(venv / "bin/python"), str(REPO / "scripts/demo.py"),
                          "--steps=1"], env=env, capture_output=True, text=True, timeout=300,
                         check=False)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "timed out" not in out.stderr and "Traceback" not in out.stderr, out.stderr
    report = out.stderr[out.stderr.index("make demo failed: the autoscaler exited with "
                                         "code 1"):]
    assert re.search(r"the autoscaler \(pid \d+\) exited with code 1; the last lines it "
                     r"wrote", report), report
    assert re.search(r"\n    cluster-proportional-autoscaler: the Python package '\w+', "
                     rf"which this program needs, is not installed for {re.escape(str(venv))}",
                     report), report
    assert "autoscaler had exited by itself (exit 1)" in out.stdout
    assert "done: everything started was stopped" in out.stdout
