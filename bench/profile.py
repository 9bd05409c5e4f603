"""``python -m bench.profile [--nodes 65000]``: where our daemon's sync time and memory go.

Starts its own control plane with N benchmark nodes, then runs our daemon several ways and
prints what it finds (and writes ``bench/results/profile.json``):

* plain, with the CPU of the daemon, kube-apiserver and etcd sampled during the initial
  sync: who the sync is waiting for;
* under ``py-spy record`` (if installed) for the sync: the hottest Python functions;
* under ``tracemalloc`` (snapshot once synced): what the resident Python objects are;
* with the streaming list disabled (paginated list, ``limit`` as shipped and 500): the
  fallback's cost.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import measure, nodes
from bench.run import (
    CM,
    KUBE_DNS_DEFAULTS,
    NS,
    RESULTS,
    TARGET,
    Cluster,
    grow,
    log,
    setup,
)
from tests.controlplane import ControlPlane, ensure_binaries
from tests.integration.support import free_port

_TRACEMALLOC = r"""
import os, sys, threading, time, tracemalloc
tracemalloc.start(8)
out = os.environ["BENCH_TM_OUT"]
def dump():
    time.sleep(1.0)
    snap = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(False, tracemalloc.__file__)])
    cur, peak = tracemalloc.get_traced_memory()
    with open(out + ".tmp", "w") as fh:
        fh.write(f"traced current {cur/2**20:.1f} MiB, peak {peak/2**20:.1f} MiB\n")
        for kind in ("lineno", "traceback"):
            fh.write(f"--- top by {kind}\n")
            for stat in snap.statistics(kind)[:12]:
                fh.write(f"{stat.size/2**20:7.2f} MiB {stat.count:8d} blocks  ")
                frames = list(stat.traceback)[::-1][:5]  # most recent first
                fh.write(" <- ".join(str(f) for f in frames) + "\n")
    os.rename(out + ".tmp", out)
import cpa.nodewatch as nw
_mark = nw.NodeReflector._mark_synced
def mark(self, method):
    first = not self._synced.is_set()
    _mark(self, method)
    if first:  # snapshot 1 s after the initial sync
        threading.Thread(target=dump, daemon=True).start()
nw.NodeReflector._mark_synced = mark
from cpa.cli import run_daemon
sys.exit(run_daemon(sys.argv[1:]))
"""

_PAGINATED = r"""
import os, sys
import cpa.nodewatch as nw
_init = nw.NodeReflector.__init__
def init(self, api, store, selector="", **kw):
    kw["use_streaming_list"] = False  # what a server without streaming list gets
    if os.environ.get("BENCH_PAGE_SIZE"):
        kw["page_size"] = int(os.environ["BENCH_PAGE_SIZE"])
    _init(self, api, store, selector, **kw)
nw.NodeReflector.__init__ = init
from cpa.cli import run_daemon
sys.exit(run_daemon(sys.argv[1:]))
"""


def _daemon_args(plane: ControlPlane) -> list[str]:
    return [f"--kubeconfig={plane.autoscaler_kubeconfig}", f"--health-port={free_port()}",
            f"--namespace={NS}", f"--configmap={CM}", f"--target=Deployment/{TARGET}",
            f"--default-params={KUBE_DNS_DEFAULTS}", "--poll-period-seconds=2", "--v=4",
            "--log-format=json"]


def _synced(proc: measure.Process) -> dict[str, Any] | None:
    for line in proc.logs().splitlines():
        if '"nodes.synced"' in line:
            doc: dict[str, Any] = json.loads(line)
            return doc
    return None


def _run(plane: ControlPlane, argv: list[str], log_path: Path, env: dict[str, str] | None,
         hold: float = 3.0, wait_file: Path | None = None) -> dict[str, Any]:
    others = {"kube-apiserver": plane.apiserver_pid, "etcd": plane.etcd_pid}
    before = {k: measure.cpu_seconds(p) for k, p in others.items() if p}
    proc = measure.Process(argv, log_path, {**os.environ, **(env or {})})
    sampler = measure.RssSampler(proc.pid, 0.1)
    try:
        measure.wait_for("nodes.synced", lambda: _synced(proc) is not None, 600, 0.05,
                         proc.alive)
        t_sync = time.monotonic() - proc.started
        cpu = {"daemon": measure.cpu_seconds(proc.pid)}
        cpu.update({k: round(measure.cpu_seconds(p) - before[k], 2)
                    for k, p in others.items() if p})
        if wait_file is not None:  # e.g. a tracemalloc report written after the sync
            measure.wait_for(str(wait_file), wait_file.exists, 180, 0.2, proc.alive)
        time.sleep(hold)
        status = measure.proc_status(proc.pid)
    finally:
        sampler.stop()
        proc.stop()
    doc = _synced(proc) or {}
    return {"sync_method": doc.get("method"), "cache_sync_seconds": doc.get("seconds"),
            "wall_to_synced_seconds": round(t_sync, 2),
            "cpu_seconds_until_synced": {k: round(v, 2) for k, v in cpu.items()},
            "peak_rss_mib": round(status["VmHWM"] / 1024, 1),
            "rss_mib": round(status["VmRSS"] / 1024, 1)}


def _pyspy_summary(raw: Path, top: int = 15) -> list[str]:
    """Self and total sample counts per function from py-spy's collapsed (raw) output."""
    self_c: collections.Counter[str] = collections.Counter()
    total_c: collections.Counter[str] = collections.Counter()
    samples = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        samples += n
        frames = [f.split(" (")[0] + " " + f.split(" (")[-1].split(":")[0].rsplit("/", 1)[-1]
                  for f in stack.split(";")]
        self_c[frames[-1]] += n
        for f in set(frames):
            total_c[f] += n
    out = [f"{samples} samples"]
    out += [f"self  {100 * c / samples:5.1f}%  {f}" for f, c in self_c.most_common(top)]
    out += [f"total {100 * c / samples:5.1f}%  {f}" for f, c in total_c.most_common(top)]
    return out


def _pyspy(plane: ControlPlane, spy: str, argv: list[str], work: Path) -> list[str]:
    raw = work / "pyspy.txt"
    proc = measure.Process(argv, work / "pyspy-daemon.log")
    rec = measure.Process([spy, "record", "--pid", str(proc.pid), "--format", "raw",
                           "--rate", "250", "--duration", "20", "--nonblocking",
                           "-o", str(raw)], work / "pyspy.log")
    try:
        measure.wait_for("nodes.synced", lambda: _synced(proc) is not None, 600, 0.05,
                         proc.alive)
        rec.proc.wait(60)
    finally:
        rec.stop()
        proc.stop()
    if not raw.exists():
        return ["py-spy wrote nothing: " + rec.logs()[-500:]]
    return [f"synced: {_synced(proc)}", *_pyspy_summary(raw)]


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.profile")
    ap.add_argument("--nodes", type=int, default=65_000)
    ap.add_argument("--threads", type=int, default=12)
    args = ap.parse_args()
    report: dict[str, Any] = {"nodes": args.nodes}
    exe = measure.our_command()
    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="cpa-profile-") as tmp, \
            ControlPlane(bin_dir=ensure_binaries()) as plane:
        work = Path(tmp)
        setup(plane)
        writer = nodes.NodeWriter(plane.server, plane.ca_file, plane.admin_token, args.threads)
        try:
            report["create"] = grow(plane, writer, Cluster(), args.nodes)
        finally:
            writer.close()
        daemon = _daemon_args(plane)

        log("plain run (CPU split during the sync)")
        report["plain"] = _run(plane, [*exe, *daemon], work / "plain.log", None)
        log(f"  {report['plain']}")

        for key, env in (("paginated", {}), ("paginated_page500", {"BENCH_PAGE_SIZE": "500"})):
            log(f"{key} (streaming disabled)")
            report[key] = _run(plane, [py, "-c", _PAGINATED, *daemon], work / f"{key}.log", env)
            log(f"  {report[key]}")

        log("tracemalloc (snapshot 1 s after the sync)")
        tm_out = work / "tracemalloc.txt"
        report["tracemalloc_run"] = _run(
            plane, [py, "-c", _TRACEMALLOC, *daemon], work / "tm.log",
            {"BENCH_TM_OUT": str(tm_out)}, hold=0.5, wait_file=tm_out)
        report["tracemalloc"] = tm_out.read_text().splitlines() if tm_out.exists() else []
        print("\n".join(report["tracemalloc"]), flush=True)

        spy = shutil.which("py-spy")
        if spy:
            log("py-spy record (attached by PID) during the sync")
            report["pyspy"] = _pyspy(plane, spy, [*exe, *daemon], work)
            print("\n".join(report["pyspy"]), flush=True)
        else:
            report["pyspy"] = ["py-spy not installed (pip install py-spy)"]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "profile.json").write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
