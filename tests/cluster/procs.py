"""Long-running cluster processes, each started with its own log and stopped by its PID.

Why not ``tests.integration.support.LoggedProcess``: the node components must also die with
the test process if it is killed (PR_SET_PDEATHSIG, as the control plane's processes do),
and some need a longer grace period (the kubelet and containerd tear pods down on SIGTERM).
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from tests.controlplane import Started, die_with_parent, tail, terminate


class Proc(Started):
    """One started process: ``name`` for messages, output appended to ``log``."""

    def __init__(self, name: str, argv: list[str], log: Path, cwd: Path) -> None:
        self.name = name
        self.log = log
        with log.open("ab") as out:
            out.write(f"==== {time.strftime('%H:%M:%S')} {' '.join(argv)}\n".encode())
            out.flush()
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=subprocess.STDOUT, cwd=cwd,
                                         preexec_fn=die_with_parent)

    def check_alive(self) -> None:
        """Raise with the log's tail if the process has exited."""
        if not self.alive():
            raise RuntimeError(f"{self.name} exited with code {self.proc.returncode}; "
                               f"last lines of {self.log}:\n{tail(self.log)}")

    def stop(self, grace: float = 20.0) -> int | None:
        """SIGTERM to this PID only, SIGKILL after ``grace`` seconds; returns the exit code."""
        return terminate(self.proc, grace)
