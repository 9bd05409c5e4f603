"""The test cluster's host lock: one cluster per host, a dead run's temp dirs cleared, a
kept one left, the holder named to a second run."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.cluster import hostlock

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
