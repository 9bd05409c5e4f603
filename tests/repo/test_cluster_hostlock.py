"""The test cluster's host lock: one cluster per host, a dead run's temp dirs cleared, a
kept one left, the holder named to a second run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from tests.cluster import hostlock

REPO = Path(__file__).resolve().parents[2]
SHELL_LOCK = REPO / "tests" / "cluster" / "hostlock.sh"
NO_BRIDGE = "cpanobridge0"  # a link that does not exist: the bridge part is skipped


@pytest.fixture
def tmp_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def test_a_second_run_is_told_who_holds_the_host(tmp_root: Path) -> None:
    lock = tmp_root / "lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, sys, time\n"
         f"f = open({str(lock)!r}, 'a+'); fcntl.flock(f, fcntl.LOCK_EX)\n"
         "f.write('{\"pid\": 4242}'); f.flush(); print('held', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(hostlock.HostBusy, match="4242"):
            hostlock.claim(tmp_root / "mine", NO_BRIDGE, lock_path=lock)
    finally:
        holder.kill()
        holder.wait()
    handle, _ = hostlock.claim(tmp_root / "mine", NO_BRIDGE, lock_path=lock)
    hostlock.release(handle)


def test_dead_runs_dirs_go_kept_and_own_stay(tmp_root: Path) -> None:
    dead = tmp_root / f"{hostlock.WORKDIR_PREFIX}dead"
    kept = tmp_root / f"{hostlock.WORKDIR_PREFIX}kept"
    mine = tmp_root / f"{hostlock.WORKDIR_PREFIX}mine"
    other = tmp_root / "someone-elses"
    for d in (dead, kept, mine, other):
        (d / "sub").mkdir(parents=True)
    (kept / hostlock.KEPT_MARKER).write_text("kept\n")
    handle, removed = hostlock.claim(mine, NO_BRIDGE, lock_path=tmp_root / "lock")
    try:
        assert removed == [f"removed {dead}"]
        assert not dead.exists() and kept.exists() and mine.exists() and other.exists()
        assert str(mine) in (tmp_root / "lock").read_text()
    finally:
        hostlock.release(handle)
    assert (tmp_root / "lock").read_text() == ""


def _shell(script: str) -> list[str]:
    return ["bash", "-c", f"source {SHELL_LOCK}; {script}"]


def _shell_env(tmp_root: Path) -> dict[str, str]:
    """The lock in tmp_root, no bridge, and tmp_root as the temp dir a claim clears."""
    return {**os.environ, "HOST_LOCK": str(tmp_root / "lock"), "HOST_LOCK_BRIDGE": NO_BRIDGE,
            "TMPDIR": str(tmp_root)}


def test_the_shell_lock_and_the_python_lock_exclude_each_other(tmp_root: Path) -> None:
    """make e2e (shell) and make cluster-e2e (Python) never hold the host at once, and each
    names the other to the one refused; what the shell started and left running (podman's
    conmon, say) does not keep the host after the shell is gone."""
    lock = tmp_root / "lock"
    env = _shell_env(tmp_root)
    holder = subprocess.Popen(
        _shell('host_lock_claim "make e2e (kind)" && { sleep 60 & echo "$host_lock_pid $!"; } '
               "&& read -r _"),
        env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdin is not None
    keeper, child = (int(p) for p in holder.stdout.readline().split())
    try:
        with pytest.raises(hostlock.HostBusy, match=r"make e2e \(kind\)"):
            hostlock.claim(tmp_root / "mine", NO_BRIDGE, lock_path=lock)
    finally:
        holder.stdin.close()
        holder.wait()
    hostlock.wait_for_exit(keeper)  # it follows the shell, not the shell's children
    try:
        handle, _ = hostlock.claim(tmp_root / "mine", NO_BRIDGE, lock_path=lock)
    finally:
        os.kill(child, 9)
    try:
        refused = subprocess.run(_shell("host_lock_claim other"), env=env,
                                 capture_output=True, text=True, check=False)
        assert refused.returncode == 1 and str(tmp_root / "mine") in refused.stderr
    finally:
        hostlock.release(handle)
    taken = subprocess.run(_shell("host_lock_claim other && host_lock_release"), env=env,
                           capture_output=True, text=True, check=False)
    assert taken.returncode == 0, taken.stderr
    assert lock.read_text() == ""


def test_make_e2e_takes_the_host_lock() -> None:
    script = (REPO / "scripts" / "e2e-kind.sh").read_text()
    assert "hostlock.sh" in script and "host_lock_claim" in script


def test_the_holder_follows_its_script_without_pidfds(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a kernel without pidfd_open the holder still lets go once the script is gone."""
    def no_pidfd(pid: int) -> int:
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(os, "pidfd_open", no_pidfd)
    script = subprocess.Popen(["sleep", "1"])
    reaper = threading.Thread(target=script.wait)  # as make reaps the script
    reaper.start()
    hostlock.wait_for_exit(script.pid)
    reaper.join()
    assert script.returncode == 0


def test_a_dead_holders_sysctls_are_restored(tmp_root: Path) -> None:
    """A run killed before its cleanup leaves the kubelet's sysctls changed; the next claim
    writes back the values the dead run recorded when it took the host."""
    name = "kernel/keys/root_maxkeys"  # one of the watched ones, harmless to change
    path = Path("/proc/sys", name)
    if os.geteuid() != 0 or not path.exists():
        pytest.skip("needs root and /proc/sys/" + name)
    before = path.read_text().strip()
    lock = tmp_root / "lock"
    lock.write_text(json.dumps({"pid": 1, "workdir": "/nonexistent",
                                "sysctls": {name: before}}))
    path.write_text(str(int(before) + 1) + "\n")  # what the dead run changed
    try:
        handle, removed = hostlock.claim(tmp_root / "mine", NO_BRIDGE, lock_path=lock)
        hostlock.release(handle)
        assert path.read_text().strip() == before
        assert any(name in line and "dead run" in line for line in removed)
    finally:
        path.write_text(before + "\n")


@pytest.mark.parametrize("text", ["", "not json", "[1, 2]", '{"sysctls": "x"}',
                                  '{"sysctls": {"kernel/panic": 5}}'])
def test_an_unreadable_record_restores_nothing(text: str) -> None:
    assert hostlock.restore_sysctls(hostlock._record(text)) == []
