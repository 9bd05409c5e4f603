"""A log pipe nobody reads never stops the polls (issue 27, #7), for both daemons.

The real daemon runs with ``--v=4`` (a line every poll) and its stderr a pipe this test
does not read, shrunk to one page (4 KiB) so that it fills within seconds as a container
runtime's backed-up log pipe would after a while; ``CPA_LOG_BUFFER_LINES=4`` makes the
daemon's own buffer overflow as quickly. Then a Node change must still be written within
a couple of polls, ``/metrics`` must count the dropped lines, and once the test drains the
pipe one ``logs.dropped`` line must say how many were lost. Before the fix the poll loop
waited on the pipe: the change was never written.
"""

from __future__ import annotations

import array
import fcntl
import termios
import threading
import time
from pathlib import Path
from typing import IO, Any

import pytest

from tests.controlplane import ControlPlane
from tests.integration.support import (
    AutoscalerProcess,
    coredns_and_nodes,
    cpvpa_command,
    create_nodes,
    log_events,
    replicas,
    wait_until,
)
from tests.integration.test_observability import args
from tests.integration.test_vertical import (
    EXPECTED,
    cpu_request,
    sizing,
    targets_on_three_nodes,
    template_resources,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

PIPE_BYTES = 4096
F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)
SMALL_BUFFER = {"CPA_LOG_BUFFER_LINES": "4"}


def shrink(pipe: IO[bytes]) -> None:
    fcntl.fcntl(pipe.fileno(), F_SETPIPE_SZ, PIPE_BYTES)


def queued(pipe: IO[bytes]) -> int:
    """Bytes written to the pipe and not read yet."""
    buf = array.array("i", [0])
    fcntl.ioctl(pipe.fileno(), termios.FIONREAD, buf)
    return int(buf[0])


def wait_pipe_full(proc: AutoscalerProcess) -> int:
    """Until the daemon's writes to the pipe have stopped (nothing more queued for 3 s
    while it logs every poll): it is full."""
    assert proc.proc.stderr is not None
    seen = [queued(proc.proc.stderr), time.monotonic()]

    def full() -> int | None:
        assert proc.proc.stderr is not None
        now = queued(proc.proc.stderr)
        if now != seen[0]:
            seen[:] = [now, time.monotonic()]
            return None
        return now if now > PIPE_BYTES // 2 and time.monotonic() - seen[1] >= 3 else None

    return wait_until("the log pipe to be full", full, 60)


class Drain:
    """Reads the daemon's stderr from now on, line by line, in a thread."""

    def __init__(self, pipe: IO[bytes]) -> None:
        self.lines: list[str] = []
        self._pipe = pipe
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        for raw in iter(self._pipe.readline, b""):
            self.lines.append(raw.decode(errors="replace").rstrip("\n"))

    def events(self, name: str) -> list[dict[str, Any]]:
        return log_events("\n".join(self.lines), name)


def check_blocked_pipe(proc: AutoscalerProcess, change: Any, changed: Any) -> None:
    """The scenario above, for either daemon: ``change()`` makes a Node change, ``changed()``
    is True once the daemon has written it."""
    assert proc.proc.stderr is not None
    shrink(proc.proc.stderr)
    full = wait_pipe_full(proc)
    dropped = f"{proc.prefix}_log_lines_dropped_total"
    # A burst bigger than the 4-line buffer (the start-up events, written at once after
    # the first poll) may have dropped some already: those were said while the pipe
    # still took lines.
    before = proc.metrics()[dropped]
    change()
    began = time.monotonic()
    try:
        wait_until("the Node change written while the log pipe is full", changed, 20)
    finally:
        print(f"\n{proc.prefix}: pipe full at {full} bytes; the change written after "
              f"{time.monotonic() - began:.1f}s; /healthz {proc.health('/healthz')[0]}, "
              f"/last-poll {proc.last_poll()[0]}")
    assert proc.health("/healthz")[0] == 200
    lost = wait_until("dropped lines counted",
                      lambda: proc.metrics()[dropped] - before, 20)
    assert queued(proc.proc.stderr) == full, "the pipe is still full: nobody read it"

    drain = Drain(proc.proc.stderr)

    def said() -> list[dict[str, Any]]:
        return [e for e in drain.events("logs.dropped") if e["dropped_total"] > before]

    [line] = wait_until("the one logs.dropped line", said, 20)
    assert line["level"] == "warning" and line["dropped"] >= lost
    assert "CPA_LOG_BUFFER_LINES" in line["hint"] and "4 lines" in line["hint"]
    time.sleep(2)  # a few more polls' lines, read as they come: no more drops
    assert len(said()) == 1, "one line for the whole episode"
    assert proc.metrics()[dropped] == line["dropped_total"]
    print(f"{proc.prefix}: {line['dropped']} lines dropped while the pipe was full, said "
          f"in one line after the drain ({before:g} in the start-up burst before); "
          f"{len(drain.lines)} lines read")


def test_the_autoscaler_polls_on_while_nobody_reads_its_logs(
        controlplane: ControlPlane, namespace: str, no_nodes: None, start: Any) -> None:
    admin = controlplane.admin()
    coredns_and_nodes(admin, namespace, "pipe", 2, cpu="4")  # 2 nodes, 8 cores: 2
    proc = start(*args(namespace, "--v=4"), stderr_pipe=True, env=SMALL_BUFFER)
    wait_until("the first write", lambda: replicas(
        admin, namespace, "deployment", "coredns") == 2, 60)
    check_blocked_pipe(
        proc, lambda: create_nodes(admin, "pipe", 4, cpu="4", start=2),  # 6 nodes: 6
        lambda: replicas(admin, namespace, "deployment", "coredns") == 6)


def test_cpvpa_polls_on_while_nobody_reads_its_logs(
        controlplane: ControlPlane, namespace: str, no_nodes: None, tmp_path: Path) -> None:
    admin = targets_on_three_nodes(controlplane, namespace, "v-pipe", "deployment/addon")
    proc = AutoscalerProcess(
        controlplane.admin_kubeconfig,
        [*sizing(namespace, "deployment/addon"), "--v=4"],
        tmp_path / "cpvpa.log", 1, command=cpvpa_command(), prefix="cpvpa", stderr_pipe=True,
        extra_env=SMALL_BUFFER)
    try:
        wait_until("the first write", lambda: template_resources(
            admin, namespace, "deployment", "addon") == EXPECTED, 60)
        check_blocked_pipe(
            proc, lambda: create_nodes(admin, "v-pipe", 1, cpu="8", start=3),
            lambda: cpu_request(admin, namespace, "deployment", "addon") == "42m")
    finally:
        proc.stop()
