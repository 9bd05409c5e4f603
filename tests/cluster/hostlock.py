"""One test cluster per host, and what a killed one left behind cleared before the next.

Why: a cluster run that is killed (SIGKILL, a CI timeout, a session that ends) never reaches
:meth:`Cluster.stop`; its bridge, veths, network namespaces and mounts stay, and the next
run refuses to start because the bridge's routes overlap its own. Every run therefore holds
an exclusive lock on :data:`LOCK_PATH` for its whole life, with its PID and temp dir written
in it. A run that gets the lock knows no other cluster of these tests is up, so whatever of
ours it still finds on the host (the bridge, its veths, mounts under a cluster temp dir,
processes with such a dir in their arguments) is a dead run's and is removed, each by name
or PID; a run that does not get the lock is told who holds it.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import select
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

from tests.cluster.configs import BRIDGE
from tests.cluster.host import (
    CGROUP_ROOT,
    CGROUP_ROOTS,
    SYSCTLS,
    HostSnapshot,
    pids_with_arg,
    read_sysctl,
    run,
    unmount_under,
)
from tests.controlplane.processes import pid_alive

LOCK_PATH = Path("/run/cpa-test-cluster.lock")
WORKDIR_PREFIX = "cpa-cluster-"
KEPT_MARKER = "KEPT"
"""A file :meth:`Cluster.stop` writes in a temp dir it keeps on request: such a dir is left."""


class HostBusy(RuntimeError):
    """Another cluster of these tests is running on this host."""


def claim(workdir: Path, bridge: str, lock_path: Path = LOCK_PATH,
          pid: int | None = None) -> tuple[IO[str], list[str]]:
    """Take the host for a cluster with ``workdir``; returns the open lock file (keep it
    open for the cluster's life, :func:`release` it at stop) and what a dead run left and
    was removed. ``pid`` names the holder to a second run (default: this process)."""
    handle = lock_path.open("a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "unknown"
        handle.close()
        raise HostBusy(f"another test cluster holds {lock_path} ({holder}); wait for it to "
                       "stop, or stop that process") from None
    handle.seek(0)
    removed = reap(bridge, keep=workdir) + restore_sysctls(_record(handle.read()))
    handle.seek(0)
    handle.truncate()
    # The sysctls as they are before this run, for the next run to restore should this
    # one be killed before it restores them itself.
    handle.write(json.dumps({"pid": os.getpid() if pid is None else pid,
                             "workdir": str(workdir),
                             "sysctls": {name: read_sysctl(name) for name in SYSCTLS}}))
    handle.flush()
    return handle, removed


def _record(text: str) -> dict[str, Any]:
    """A dead holder's record (a holder that stopped cleanly left none); {} if unreadable."""
    try:
        record = json.loads(text) if text.strip() else {}
    except ValueError:
        return {}
    return record if isinstance(record, dict) else {}


def restore_sysctls(record: dict[str, Any]) -> list[str]:
    """Write back the sysctls a dead holder recorded before its run changed them."""
    saved = record.get("sysctls")
    if not isinstance(saved, dict):
        return []
    restored = []
    for name in SYSCTLS:
        value, now = saved.get(name), read_sysctl(name)
        if isinstance(value, str) and now is not None and now != value:
            Path("/proc/sys", name).write_text(value + "\n")
            restored.append(f"restored sysctl {name}: {now} -> {value} (a dead run's)")
    return restored


def release(handle: IO[str]) -> None:
    """Give the host back (the lock goes with the file's close)."""
    with contextlib.suppress(OSError):
        handle.seek(0)
        handle.truncate()
    handle.close()


def dead_workdirs(keep: Path) -> list[Path]:
    """Cluster temp dirs other than ``keep`` and not kept on request: with the lock held,
    all of them are dead runs'."""
    root = Path(tempfile.gettempdir())
    return sorted(p for p in root.glob(f"{WORKDIR_PREFIX}*")
                  if p.is_dir() and p != keep and not (p / KEPT_MARKER).exists())


def reap(bridge: str, keep: Path) -> list[str]:
    """Remove what dead cluster runs left: their processes (by PID), mounts, temp dirs,
    and, when the bridge is still there, its veths, the CNI network namespaces, the bridge,
    kube-proxy's and CNI's iptables chains and the Pods' cgroups. Only call with the lock."""
    removed: list[str] = []
    for workdir in dead_workdirs(keep):
        for pid in pids_with_arg(str(workdir)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
                removed.append(f"killed pid {pid} of a dead run ({workdir})")
        removed += [f"unmounted {m}" for m in unmount_under(workdir)]
        shutil.rmtree(workdir, ignore_errors=True)
        removed.append(f"removed {workdir}")
    for link in _dangling_container_logs():
        link.unlink(missing_ok=True)
        removed.append(f"removed {link}, a log link into a dead run's dir")
    if run("ip", "link", "show", bridge, check=False).returncode != 0:
        return removed
    killed = _pod_processes()
    for pid in killed:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, 9)
            removed.append(f"killed pid {pid} of a dead run's Pod")
    _wait_gone(killed)
    for line in run("ip", "-o", "link", "show", "master", bridge).stdout.splitlines():
        veth = line.split(":")[1].strip().split("@")[0]
        run("ip", "link", "del", veth, check=False)
        removed.append(f"deleted veth {veth} of a dead run")
    for netns in _empty_cni_netns():
        run("ip", "netns", "delete", netns, check=False)
        removed.append(f"deleted network namespace {netns} of a dead run")
    run("ip", "link", "del", bridge, check=False)
    removed.append(f"deleted bridge {bridge} of a dead run")
    # Measured against an empty host, every KUBE-/CNI- chain and kubepods cgroup is new:
    # the dead run's kube-proxy rules and Pod cgroups.
    nothing = HostSnapshot()
    removed += nothing.remove_iptables_additions()
    removed += [f"removed cgroup {c} of a dead run" for c in nothing.remove_new_cgroups()]
    return removed


def _pod_processes() -> list[int]:
    """The processes in the kubelet's and containerd's cgroups: a dead run's containers
    outlive its shims (they are reparented, and their command lines name no temp dir)."""
    pids: set[int] = set()
    for root in CGROUP_ROOTS:
        for procs in CGROUP_ROOT.glob(f"*/{root}/**/cgroup.procs"):
            with contextlib.suppress(OSError):
                pids.update(int(p) for p in procs.read_text().split())
        for procs in CGROUP_ROOT.glob(f"{root}/**/cgroup.procs"):  # the unified hierarchy
            with contextlib.suppress(OSError):
                pids.update(int(p) for p in procs.read_text().split())
    return sorted(pids)


def _dangling_container_logs() -> list[Path]:
    """The kubelet's links in /var/log/containers whose Pod log is gone with its run's dir."""
    logs = Path("/var/log/containers")
    if not logs.is_dir():
        return []
    return sorted(p for p in logs.iterdir() if p.is_symlink() and not p.exists())


def _wait_gone(pids: list[int], timeout: float = 10.0) -> None:
    """Until the killed processes have left (a network namespace with one still in it is
    not empty yet)."""
    deadline = time.monotonic() + timeout
    while any(Path(f"/proc/{pid}").exists() for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)


def _empty_cni_netns() -> list[str]:
    """CNI network namespaces (``cni-*``, as containerd names them) without a process: with
    our bridge stale, these are the dead run's Pod sandboxes."""
    names = [line.split()[0] for line in run("ip", "netns", "list").stdout.splitlines()
             if line.startswith("cni-")]
    return [n for n in names if not run("ip", "netns", "pids", n, check=False).stdout.strip()]


def wait_for_exit(pid: int) -> None:
    """Return once process ``pid`` is gone (a pidfd; on a kernel without pidfds, asked
    every second)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    except OSError:
        while pid_alive(pid):
            time.sleep(1)
        return
    try:
        select.select([fd], [], [])
    finally:
        os.close(fd)


def hold(pid: int, what: str, bridge: str, lock_path: Path = LOCK_PATH) -> int:
    """Hold the host for a shell script (``make e2e``) until its process ``pid`` is gone.

    Why a process of its own: a lock a shell holds on one of its descriptors is inherited
    by everything it starts, and podman's conmon and aardvark-dns live on with the lock
    after the script; this process's descriptors are not inherited. Prints ``held`` once
    the host is taken; exits 1 naming the holder when another run has it."""
    try:
        handle, removed = claim(Path(what), bridge, lock_path=lock_path, pid=pid)
    except HostBusy as busy:
        print(busy, file=sys.stderr)
        return 1
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        for line in removed:
            print(f"host lock: {line}", file=sys.stderr)
        print("held", flush=True)
        wait_for_exit(pid)
    finally:
        release(handle)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.cluster.hostlock")
    parser.add_argument("action", choices=("hold",))
    parser.add_argument("pid", type=int, help="hold the host until this process is gone")
    parser.add_argument("what", help="what holds it, as a second run is told")
    parser.add_argument("--lock", type=Path, default=LOCK_PATH)
    parser.add_argument("--bridge", default=BRIDGE, help="the test cluster's bridge")
    args = parser.parse_args(argv)
    return hold(args.pid, args.what, args.bridge, lock_path=args.lock)


if __name__ == "__main__":
    sys.exit(main())
