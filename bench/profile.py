"""``python -m bench.profile [--nodes 65000]``: where our daemon's sync time and memory go.

Starts its own control plane with N benchmark nodes, then runs our daemon several ways and
prints what it finds (and writes ``bench/results/profile.json``):

* plain, with the CPU of the daemon, kube-apiserver and etcd sampled during the initial
  sync: who the sync is waiting for;
* under ``py-spy record`` (if installed) for the sync: the hottest Python functions;
* under ``tracemalloc`` (snapshot once synced): what the resident Python objects are;
* with the streaming list disabled (paginated list, ``limit`` as shipped and 500): the
  fallback's cost.

``python -m bench.profile --startup [--nodes 1000 --runs 5] [--variant NAME=TREE ...]``
instead times the start to the first correct write of each variant of ours (this tree by
default; ``bench/variants.py``) and of upstream, run in-cluster as ``bench.run`` does, in
interleaved rounds, and the first variant's import path piece by piece. Writes
``bench/results/profile-startup.json``.

``python -m bench.profile --churn [--nodes 5000 --rate 150 --seconds 30]`` instead profiles
our daemon under node churn (``bench/churn.py``): its CPU % and, with py-spy, where the
time goes (``--gil``: only samples holding the GIL, i.e. Python code on the CPU, not a
thread blocked in a read). Writes ``bench/results/profile-churn.json``. With
``--variant NAME=TREE ...`` (and ``--runs N``) it compares versions of ours instead: the
CPU % of each under the same churn, in interleaved rounds
(``bench/results/profile-churn-variants.json``).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import churn, measure, nodes
from bench.run import (
    CM,
    KUBE_DNS_DEFAULTS,
    NS,
    RESULTS,
    TARGET,
    Cluster,
    expected_replicas,
    first_write_once,
    grow,
    log,
    setup,
)
from bench.variants import HELP as VARIANT_HELP
from bench.variants import variants
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
import cpa.nodes.watch as nw
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
import cpa.nodes.watch as nw
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


@dataclass
class _Bench:
    """A control plane set up as ``bench.run`` sets it up, with its benchmark Nodes."""

    plane: ControlPlane
    writer: nodes.NodeWriter  # still open: churn writes through it
    cluster: Cluster
    work: Path  # a temporary directory for logs and reports
    created: dict[str, Any]  # what creating the Nodes took (bench.run.grow's report)


@contextlib.contextmanager
def _control_plane(node_count: int, threads: int) -> Iterator[_Bench]:
    with tempfile.TemporaryDirectory(prefix="cpa-profile-") as tmp, \
            ControlPlane(bin_dir=ensure_binaries()) as plane:
        setup(plane)
        writer = nodes.NodeWriter(plane.server, plane.ca_file, plane.admin_token, threads)
        try:
            cluster = Cluster()
            created = grow(plane, writer, cluster, node_count)
            yield _Bench(plane, writer, cluster, Path(tmp), created)
        finally:
            writer.close()


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


# Our daemon's start-up path up to the Node list going out, timed in one fresh interpreter.
_PHASES = r"""
import json, sys, time
t0 = time.perf_counter()
marks = {}
def mark(name):
    marks[name] = round((time.perf_counter() - t0) * 1000, 1)
import cpa.cli; mark("import cpa.cli (flags, logs)")
from cpa.horizontal import cpa_flags as flags
opts = flags.parse_args(sys.argv[1:]); mark("parse flags (parameters)")
from cpa.kube.client import KubeApi; mark("import kubeapi (http.client, nodeproto)")
from cpa.kube.clientconfig import load; mark("import kubeconfig (ssl)")
from cpa.nodes.store import NodeStore; mark("import nodestore")
from cpa.nodes.watch import NodeReflector; mark("import nodewatch")
from cpa.runtime.health import HealthState, serve; mark("import health")
server = serve(HealthState("waiting"), 0, "127.0.0.1")
mark("health serving: the Node list can go out")
import structlog; mark("import structlog (the daemon: after its first poll)")
from cpa.horizontal.daemon.cpa_loop import Autoscaler
mark("import autoscaler (after the list went out)")
server.shutdown()
print(json.dumps(marks))
"""


def startup_profile(args: argparse.Namespace) -> int:
    """Start to the first correct write of each ``--variant`` of ours and of upstream,
    interleaved: every round starts each of them once, in a shuffled order, each on a
    quiet API server, so that a busy spell of the machine falls on all of them alike;
    the figure is the median of the rounds. Then the first variant's import path, timed
    piece by piece."""
    rng = random.Random(args.seed)
    report: dict[str, Any] = {
        "nodes": args.nodes, "runs": args.runs,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()], "variants": {}}
    with _control_plane(args.nodes, args.threads) as bench:
        plane, work, cluster = bench.plane, bench.work, bench.cluster
        expected = expected_replicas(cluster.counts())
        admin = plane.admin()
        vs = variants(plane, args.variant, 2, work, with_upstream=True)
        runs: dict[str, list[tuple[float, float]]] = {v.name: [] for v in vs}
        for r in range(args.runs):
            order = vs[:]
            rng.shuffle(order)
            for v in order:
                got = first_write_once(v.impl, plane, admin, expected,
                                        work / f"{v.name}-{r}", 60.0)
                runs[v.name].append(got)
                log(f"round {r + 1}/{args.runs} {v.name}: first correct write {got[0]} s")
        upstream_s = (statistics.median(s for s, _ in runs["upstream"])
                      if runs.get("upstream") else None)
        for name, starts in runs.items():
            seconds = statistics.median(s for s, _ in starts)
            report["variants"][name] = {
                "first_correct_write_s": [s for s, _ in starts],
                "median_first_correct_write_s": seconds,
                "apiserver_cpu_s": [c for _, c in starts],
                "ratio_to_upstream": (round(seconds / upstream_s, 3) if upstream_s else None)}
    report["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    report["import_phases_ms_median"], report["interpreter_start_ms_median"] = \
        _import_phases(vs[0].python, args.runs)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "profile-startup.json").write_text(json.dumps(report, indent=2) + "\n")
    print(startup_summary(report))
    return 0


def _import_phases(python: str | None, runs: int) -> tuple[dict[str, float], float]:
    """Our import path up to the Node list going out, timed piece by piece in ``runs``
    fresh interpreters (medians), and a bare interpreter's start."""
    if python is None:
        return {}, 0.0
    phases = []
    for _ in range(runs):
        t = time.monotonic()
        done = subprocess.run([python, "-c", _PHASES, f"--namespace={NS}", f"--configmap={CM}",
                               f"--target=Deployment/{TARGET}",
                               f"--default-params={KUBE_DNS_DEFAULTS}"],
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:  # a tree laid out otherwise: the timings stand without it
            log(f"import phases not timed: {done.stderr.strip()[-300:]}")
            return {}, 0.0
        phase = json.loads(done.stdout)
        phase["process wall ms"] = round((time.monotonic() - t) * 1000, 1)
        phases.append(phase)
    bare = []
    for _ in range(runs):
        t = time.monotonic()
        subprocess.run([python, "-c", "pass"], check=True)
        bare.append((time.monotonic() - t) * 1000)
    return ({k: statistics.median(p[k] for p in phases) for k in phases[0]},
            round(statistics.median(bare), 1))


def startup_summary(report: dict[str, Any]) -> str:
    """The variants' medians as a table."""
    lines = [f"# Start to the first correct write at {report['nodes']:,} nodes "
             f"({report['runs']} interleaved rounds; load {report['load_average_at_start']} "
             f"-> {report['load_average_at_end']})", "",
             "| variant | median s | min s | max s | / upstream |", "|---|---|---|---|---|"]
    for name, e in report["variants"].items():
        got = e["first_correct_write_s"]
        lines.append(f"| {name} | {e['median_first_correct_write_s']:.3f} | {min(got):.3f} | "
                     f"{max(got):.3f} | {e['ratio_to_upstream'] or '-'} |")
    return "\n".join(lines)


def churn_profile(args: argparse.Namespace) -> int:
    report: dict[str, Any] = {"nodes": args.nodes, "rate": args.rate, "seconds": args.seconds}
    with _control_plane(args.nodes, args.threads) as bench:
        plane, work = bench.plane, bench.work
        proc = measure.Process([*measure.our_command(), *_daemon_args(plane)],
                               work / "daemon.log")
        try:
            measure.wait_for("nodes.synced", lambda: _synced(proc) is not None, 600, 0.05,
                             proc.alive)
            time.sleep(3)
            ns0, t0 = measure.cpu_ns(proc.pid), time.monotonic()
            time.sleep(10)
            report["idle_cpu_percent"] = round(
                (measure.cpu_ns(proc.pid) - ns0) / 1e9 / (time.monotonic() - t0) * 100, 2)
            spy = shutil.which("py-spy")
            raw = work / "pyspy.txt"
            rec = None
            if spy:
                rec = measure.Process(
                    [spy, "record", "--pid", str(proc.pid), "--format", "raw", "--gil",
                     "--rate", "200", "--duration", str(int(args.seconds)),
                     "--nonblocking", "-o", str(raw)], work / "pyspy.log")
            window = churn.Churn(bench.writer, bench.cluster.states, args.nodes, args.rate,
                                 args.seconds)
            ns0, t0 = measure.cpu_ns(proc.pid), time.monotonic()
            result = window.run()
            wall = time.monotonic() - t0
            report["churn_cpu_percent"] = round(
                (measure.cpu_ns(proc.pid) - ns0) / 1e9 / wall * 100, 2)
            report.update(result.summary(args.rate, args.seconds))
            report["cpu_us_per_update"] = round(
                (report["churn_cpu_percent"] - report["idle_cpu_percent"]) / 100
                / max(1e-9, report["churn_updates_per_second"]) * 1e6, 1)
            if rec is not None:
                rec.proc.wait(60)
                rec.stop()
                report["pyspy_gil"] = (_pyspy_summary(raw, 25) if raw.exists()
                                       else ["py-spy wrote nothing: " + rec.logs()[-300:]])
            else:
                report["pyspy_gil"] = ["py-spy not installed (pip install py-spy)"]
        finally:
            proc.stop()
    log(json.dumps({k: v for k, v in report.items() if k != "pyspy_gil"}))
    print("\n".join(report["pyspy_gil"]), flush=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "profile-churn.json").write_text(json.dumps(report, indent=2) + "\n")
    return 0


def churn_variants(args: argparse.Namespace) -> int:
    """``--churn --variant ...``: each variant's CPU under the same Node churn, in
    interleaved rounds (each round runs every variant once, in a shuffled order, through
    its own churn window of ``--seconds`` at ``--rate``, the flips reverted after it); the
    CPU % of the window less the same process's idle CPU % just before it, per update."""
    rng = random.Random(args.seed)
    report: dict[str, Any] = {"nodes": args.nodes, "rate": args.rate, "seconds": args.seconds,
                              "runs": args.runs, "variants": {}}
    with _control_plane(args.nodes, args.threads) as bench:
        vs = variants(bench.plane, args.variant, 2, bench.work)
        rounds: dict[str, list[dict[str, float]]] = {v.name: [] for v in vs}
        for r in range(args.runs):
            order = vs[:]
            rng.shuffle(order)
            for v in order:
                got = _churn_round(v.impl.start(bench.work / f"{v.name}-churn-{r}.log"), bench,
                                   args)
                rounds[v.name].append(got)
                log(f"round {r + 1}/{args.runs} {v.name}: {got}")
        for name, done in rounds.items():
            entry: dict[str, Any] = {"rounds": done}
            for key in ("churn_cpu_percent", "cpu_us_per_update"):
                entry[f"{key}_median"] = round(statistics.median(d[key] for d in done), 2)
            report["variants"][name] = entry
    log(json.dumps(report["variants"]))
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "profile-churn-variants.json").write_text(json.dumps(report, indent=2) + "\n")
    return 0


def _churn_round(proc: measure.Process, bench: _Bench, args: argparse.Namespace
                 ) -> dict[str, float]:
    """One variant through one churn window: its idle CPU %, its CPU % under churn, the CPU
    each update cost it."""
    try:
        measure.wait_for("the first poll", lambda: '"poll.counts"' in proc.logs(), 120, 0.05,
                         proc.alive)
        time.sleep(2)
        ns0, t0 = measure.cpu_ns(proc.pid), time.monotonic()
        time.sleep(5)
        idle = (measure.cpu_ns(proc.pid) - ns0) / 1e9 / (time.monotonic() - t0) * 100
        window = churn.Churn(bench.writer, bench.cluster.states, args.nodes, args.rate,
                             args.seconds)
        ns0, t0 = measure.cpu_ns(proc.pid), time.monotonic()
        result = window.run()
        busy = (measure.cpu_ns(proc.pid) - ns0) / 1e9 / (time.monotonic() - t0) * 100
        window.revert()
        rate = result.summary(args.rate, args.seconds)["churn_updates_per_second"]
    finally:
        proc.stop()
    return {"idle_cpu_percent": round(idle, 2), "churn_cpu_percent": round(busy, 2),
            "updates_per_second": rate,
            "cpu_us_per_update": round((busy - idle) / 100 / max(1e-9, rate) * 1e6, 1)}


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.profile")
    ap.add_argument("--nodes", type=int, default=None, help="65,000 (5,000 with --churn)")
    ap.add_argument("--threads", type=int, default=12)
    ap.add_argument("--churn", action="store_true", help="profile under node churn instead")
    ap.add_argument("--startup", action="store_true",
                    help="time the start to the first correct write instead")
    ap.add_argument("--runs", type=int, default=5,
                    help="--startup, --churn with --variant: rounds (a run of each)")
    ap.add_argument("--variant", action="append", help="--startup, --churn: " + VARIANT_HELP)
    ap.add_argument("--seed", type=int, default=None, help="the rounds' shuffle's seed")
    ap.add_argument("--rate", type=float, default=150.0, help="--churn: updates per second")
    ap.add_argument("--seconds", type=float, default=30.0, help="--churn: window length")
    args = ap.parse_args()
    if args.nodes is None:
        args.nodes = 5_000 if args.churn else 1_000 if args.startup else 65_000
    if args.churn and args.variant:
        return churn_variants(args)
    if args.churn:
        return churn_profile(args)
    if args.startup:
        return startup_profile(args)
    report: dict[str, Any] = {"nodes": args.nodes}
    exe = measure.our_command()
    py = sys.executable
    with _control_plane(args.nodes, args.threads) as bench:
        plane, work = bench.plane, bench.work
        report["create"] = bench.created
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
