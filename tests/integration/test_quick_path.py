"""The README's quick path, run as a newcomer runs it: every command of its block, in a
copy of this checkout (what the clone gives: no .venv), with the machine's Python first on
PATH and nothing of this test environment's: the venv is made, the package and matplotlib
come from PyPI (or pip's cache), `cpa explain` answers 3 replicas and `cpa simulate`
prints the polls that changed and draws its picture. Then `make`'s check of its venv
accepts that venv as this checkout's (it only adds the test tools).

Not a kube-apiserver test, but an integration test all the same: it runs pip and needs
PyPI (or a warm pip cache), and takes a minute."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.repo.test_docs import quick_path

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def _copy_of_the_checkout(dest: Path) -> None:
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO,
                           capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        src = REPO / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)


def test_the_quick_path_works_in_a_throwaway_venv(tmp_path: Path) -> None:
    lines = quick_path()
    clone = re.fullmatch(r"git clone \S+/([\w.-]+)", lines[0])
    assert clone and lines[1] == f"cd {clone.group(1)}"
    root = tmp_path / clone.group(1)
    _copy_of_the_checkout(root)  # what `git clone` gives, with this checkout's changes
    system = tmp_path / "system-bin"
    system.mkdir()
    real = Path(getattr(sys, "_base_executable", sys.executable)).resolve()
    (system / "python3").symlink_to(real)
    test_env = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    env["PATH"] = os.pathsep.join([str(system), *(p for p in env["PATH"].split(os.pathsep)
                                                  if p and p != test_env)])
    script = "set -euo pipefail\n" + "\n".join(lines[2:]) + "\n"
    proc = subprocess.run(["bash", "-c", script], cwd=root, env=env, capture_output=True,
                          text=True, timeout=900, check=False)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    assert "=> 3 replicas" in proc.stdout
    assert re.search(r"^\d+ of \d+ rows shown", proc.stdout, re.M), proc.stdout[-2000:]
    assert re.search(r"^8 scale writes from 4 replicas \(without behavior: 27\)\.$",
                     proc.stdout, re.M)
    plot = re.search(r"--plot (\S+)", lines[5])
    assert plot and (root / plot.group(1)).read_bytes().startswith(b"\x89PNG")
    venv = root / ".venv"
    assert (venv / "bin" / "cpa").exists(), "the venv the block made is .venv"
    # make's own check of .venv (scripts/pyenv.sh): this checkout's package is there, so
    # make keeps the venv and only adds the test tools' packages.
    check = subprocess.run([str(venv / "bin" / "python"), "scripts/pyenv_check.py", str(root)],
                           cwd=root, env=env, capture_output=True, text=True, timeout=60,
                           check=False)
    assert check.returncode == 0, check.stdout + check.stderr
