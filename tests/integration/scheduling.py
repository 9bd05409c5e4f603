"""A real kube-scheduler and kube-controller-manager against the test control plane, for
scenarios that need Pods made and bound: a Deployment's ReplicaSet and its Pods (the
deployment and replicaset controllers only) and the scheduler's binding of each Pod to a
Node. API-only Nodes (Ready by status, no kubelet) are enough to schedule on: nothing here
runs a container, and the node lifecycle controller is not started, so no Node is ever
marked NotReady for missing heartbeats.

Both are stopped by PID when the scenario ends (and by the kernel if the test process dies:
PR_SET_PDEATHSIG)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.controlplane import ControlPlane
from tests.controlplane.processes import die_with_parent, tail

__all__ = ["Scheduling"]

_STOP_TIMEOUT = 15.0


class Scheduling:
    """kube-scheduler and kube-controller-manager, each a process of this test."""

    def __init__(self, plane: ControlPlane, workdir: Path) -> None:
        self._plane = plane
        self._workdir = workdir
        self._procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self) -> None:
        plane = self._plane
        common = [f"--kubeconfig={plane.admin_kubeconfig}", "--leader-elect=false",
                  "--secure-port=0", "--profiling=false", "--v=1"]
        self._spawn("kube-controller-manager", [
            "--controllers=deployment-controller,replicaset-controller", *common])
        self._spawn("kube-scheduler", common)

    def _spawn(self, name: str, args: list[str]) -> None:
        log = self._workdir / f"{name}.log"
        with log.open("ab") as out:
            self._procs[name] = subprocess.Popen(
                [str(self._plane.bin_dir / name), *args], stdin=subprocess.DEVNULL,
                stdout=out, stderr=subprocess.STDOUT, cwd=self._workdir,
                preexec_fn=die_with_parent)

    def check_alive(self) -> None:
        """Fail with the log's tail when either process has exited."""
        for name, proc in self._procs.items():
            if proc.poll() is not None:
                raise AssertionError(f"{name} exited with {proc.returncode}:\n"
                                     f"{tail(self._workdir / f'{name}.log')}")

    def stop(self) -> None:
        """Each process by its PID: SIGTERM, then SIGKILL if it lingers."""
        for proc in self._procs.values():
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=_STOP_TIMEOUT)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=_STOP_TIMEOUT)
        self._procs.clear()
