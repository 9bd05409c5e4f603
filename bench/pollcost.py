"""``python -m bench.pollcost``: what one steady poll costs, ours against upstream (and
against other versions of ours), measured so that a busy machine does not decide.

A poll of ours does the same work at 1,000 Nodes as at 65,000 (the counts are running
totals), so its cost is the fixed cost of two HTTPS requests, two JSON decodes, the
decision and the observers; upstream's lists its informer cache every poll and grows with
N. On a shared 2-core machine a wall-clock or CPU-time figure moves by tens of percent with
the neighbours' load, so this tool measures three ways:

* **schedstat CPU, interleaved**: every variant (``--variant NAME=TREE``, upstream with
  ``--upstream``) is started in turn, ``--rounds`` times in a shuffled order, and the CPU
  its threads spent over ``--polls`` steady polls (``/proc/PID/task/*/schedstat``) is
  divided by the polls; the median of the rounds is the figure, and a variant's rounds run
  under the same load as the others'. Ours is split into the main thread (the poll loop)
  and the other threads (the node watch, the health server);
* **instructions** (``--callgrind``): each variant once under ``valgrind
  --tool=callgrind``; the counters are zeroed after the warm-up polls and dumped after
  ``--polls`` more, so Ir / polls is the instructions per poll, whatever else the machine
  does (``perf stat -e instructions`` is not supported in this VM);
* **where the time goes** (``--cprofile``, ours only): cProfile around ``--polls`` calls
  of ``Autoscaler.poll_once`` (the whole poll: requests, decoding, decision, observers,
  logs), grouped by what the code does. cProfile's own overhead inflates call-heavy code,
  so the split is read as shares, and the totals come from the two figures above;
* **polls back to back** (``--sample N``, ours only): N calls of ``Autoscaler.poll_once``
  in a row (``--gap`` seconds apart), their CPU a poll and a sampled profile. Back to
  back a poll runs in warm caches: 0.53 ms against 1.17 with 0.1 s between polls and
  1.14 with 1 s (2026-12-06), so most of a steady poll's CPU is its caches filling again,
  and a wake-up saved saves more than its own instructions.

Requests per poll come from the API server's ``apiserver_request_total`` deltas over the
window, the poll's own (ConfigMap GET, scale GET/PUT) apart from the node watch's renewals
(our watches end after 40-50 s by design; upstream's informer renews every 5-10 min).

A variant TREE is a directory (this tree: ``.``) or ``git:REF`` (exported with ``git
archive`` into ``.cache/bench-trees/NAME``); each is installed as the image installs it, in
a venv of its own (``.cache/bench-venv-NAME``). Writes ``bench/results/pollcost.json`` (or
``--out``). Example, the decision behind a change::

    flock /work/locks/bench.lock python -m bench.pollcost --nodes 1000 \\
        --variant before=git:main --variant after=. --upstream --rounds 5 --callgrind
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import measure
from bench.profile import _control_plane
from bench.run import RESULTS, log
from bench.variants import HELP as VARIANT_HELP
from bench.variants import Variant, variants
from tests.controlplane import ControlPlane

# Run by the variant's interpreter instead of its console script: cProfile around
# poll_once for BENCH_CPROFILE_POLLS polls after BENCH_CPROFILE_WARM, then a dump.
_CPROFILE = r"""
import cProfile, os, sys, time
import cpa.horizontal.daemon.cpa_loop as loop
warm, polls = int(os.environ["BENCH_CPROFILE_WARM"]), int(os.environ["BENCH_CPROFILE_POLLS"])
out = os.environ["BENCH_CPROFILE_OUT"]
prof = cProfile.Profile(time.thread_time)  # CPU, not the wait for the server's answer
orig = loop.Autoscaler.poll_once
seen = [0]
def poll_once(self):
    seen[0] += 1
    k = seen[0]
    if not warm < k <= warm + polls:
        return orig(self)
    prof.enable()
    try:
        return orig(self)
    finally:
        prof.disable()
        if k == warm + polls:
            prof.dump_stats(out + ".tmp")
            os.rename(out + ".tmp", out)
loop.Autoscaler.poll_once = poll_once
from cpa.cli import run_daemon
sys.exit(run_daemon(sys.argv[1:]))
"""

# Run the same way for --sample: after BENCH_SAMPLE_WARM polls, the next poll is
# BENCH_SAMPLE_POLLS calls of poll_once (BENCH_SAMPLE_GAP seconds apart) under a CPU-time
# sampler (SIGPROF, at most every 0.5 ms of the process's CPU; the kernel's tick makes it
# 4 ms here): each sample counts the Python function the main thread runs and every function
# on its stack; no hook runs between samples, so call-heavy code is not inflated as in
# cProfile. CPython runs the handler at the next function entry or loop: time in a C call
# (a TLS read) is counted to the function entered after it, so the split is read by
# subtrees ("under"), not by the functions themselves ("own").
_SAMPLE = r"""
import collections, gc, json, os, signal, sys, time
import cpa.horizontal.daemon.cpa_loop as loop
warm, polls = int(os.environ["BENCH_SAMPLE_WARM"]), int(os.environ["BENCH_SAMPLE_POLLS"])
out = os.environ["BENCH_SAMPLE_OUT"]
orig = loop.Autoscaler.poll_once
seen = [0]
own, under, pairs = collections.Counter(), collections.Counter(), collections.Counter()
def where(code):
    return f"{code.co_filename}:{code.co_firstlineno}:{code.co_name}"
def sample(_signum, frame):
    own[where(frame.f_code)] += 1
    if frame.f_back is not None:
        pairs[where(frame.f_back.f_code) + " > " + where(frame.f_code)] += 1
    names = set()
    while frame is not None:
        names.add(where(frame.f_code))
        frame = frame.f_back
    under.update(names)
def poll_once(self):
    seen[0] += 1
    if seen[0] != warm + 1:
        return orig(self)
    for _ in range(polls // 10):  # warm the loop's caches first
        orig(self)
    signal.signal(signal.SIGPROF, sample)
    t0, c0 = time.thread_time(), time.process_time()
    signal.setitimer(signal.ITIMER_PROF, 0.0005, 0.0005)
    gap = float(os.environ["BENCH_SAMPLE_GAP"])
    g0 = gc.get_stats()
    for _ in range(polls):
        result = orig(self)
        if gap:
            time.sleep(gap)
    g1 = gc.get_stats()
    signal.setitimer(signal.ITIMER_PROF, 0, 0)
    t1, c1 = time.thread_time(), time.process_time()
    with open(out + ".tmp", "w") as fh:
        json.dump({"polls": polls, "main_thread_s": t1 - t0, "process_s": c1 - c0,
                   "gc": [g0, g1], "own": own, "under": under, "pairs": pairs}, fh)
    os.rename(out + ".tmp", out)
    return result
loop.Autoscaler.poll_once = poll_once
from cpa.cli import run_daemon
sys.exit(run_daemon(sys.argv[1:]))
"""

_DAEMON = "import sys; from cpa.cli import daemon_main; daemon_main()"

# What a function's file says about the work it does, for the cProfile split (first match).
_CATEGORIES = (
    ("http (http.client, email header parsing, sockets, TLS)",
     ("http/client.py", "email/", "socket.py", "ssl.py", "selectors.py", "cpa/http/",
      "~:0:<method 'read'", "~:0:<method 'write'", "~:0:<method 'recv", "~:0:<method 'send",
      "<method 'sendall'", "<method 'readinto'", "<built-in method select.select>")),
    ("kube client (requests, JSON encode/decode)",
     ("cpa/kube/client.py", "json/", "cpa/kube/wire.py", "urllib/parse.py")),
    ("ConfigMap and scale (objects to records)",
     ("cpa/kube/configmap.py", "cpa/kube/scale.py", "cpa/kube/hpafloor.py",
      "cpa/kube/targets.py", "cpa/kube/writers.py")),
    ("decision (formula and its steps)", ("cpa/horizontal/decide/",)),
    ("logging (structlog at --v=4)", ("structlog/", "cpa/logs.py", "datetime")),
    ("metrics (prometheus_client)", ("prometheus_client/", "cpa/horizontal/daemon/cpa_metrics.py",
                                      "cpa/runtime/metrics_registry.py")),
    ("health, watchdogs, behavior, leader", ("cpa/runtime/health.py",
                                             "cpa/horizontal/daemon/watchdogs.py",
                                             "cpa/runtime/leaderelection.py",
                                             "cpa/runtime/stalecounts.py")),
    ("node store counts", ("cpa/nodes/",)),
    ("poll loop", ("cpa/horizontal/daemon/cpa_loop.py", "cpa/horizontal/daemon/paramscache.py",
                   "cpa/horizontal/daemon/react.py",
                   "cpa/runtime/ticker.py", "cpa/runtime/polls.py", "cpa/cli.py")),
    ("threading (locks)", ("threading.py", "<method 'acquire'", "<method 'release'")),
)


def _wait_polls(variant: Variant, proc: measure.Process, count: int, period: float) -> int:
    """Wait until ``count`` more polls happened; return the poll counter then."""
    start = variant.impl.polls(proc)
    got = start
    def more() -> bool:
        nonlocal got
        got = variant.impl.polls(proc)
        return got >= start + count
    measure.wait_for(f"{count} polls", more, period * (count + 3) + 30, 0.02, proc.alive)
    return got


def _thread_ns(pid: int) -> dict[str, int]:
    """On-CPU ns of the main thread (the poll loop: its TID is the PID) and of the rest."""
    main = other = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as fh:
                ns = int(fh.read().split()[0])
        except OSError:
            continue
        if int(task) == pid:
            main += ns
        else:
            other += ns
    return {"main": main, "other": other}


def _requests(plane: ControlPlane) -> dict[measure.RequestKey, float]:
    return measure.request_totals(plane.metrics())


def split_requests(d: dict[measure.RequestKey, float]) -> dict[str, float]:
    """A window's requests: the poll's own apart from the node watch's renewals."""
    cats = measure.categorize(d)
    watches = sum(v for k, v in d.items() if k[1] == "nodes" and k[0] == "WATCH")
    other_nodes = cats["node_requests"] - watches
    return {"configmap_get": cats["get_configmaps"], "configmap_post": cats["create_configmaps"],
            "scale_get": cats["get_scale"], "scale_put": cats["put_scale"],
            "node_watch_renewals": watches, "node_other": other_nodes}


def schedstat_round(variant: Variant, plane: ControlPlane, args: argparse.Namespace,
                    work: Path, tag: str) -> dict[str, Any]:
    """Start the variant, wait ``--warm`` polls, measure ``--polls`` polls, stop it."""
    proc = variant.impl.start(work / f"{variant.name}-{tag}.log")
    try:
        _wait_polls(variant, proc, 1, args.period)  # the first poll: synced and written
        _wait_polls(variant, proc, args.warm, args.period)
        time.sleep(min(0.3, args.period / 4))  # between two polls
        t0, ns0, th0, rq0 = time.monotonic(), measure.cpu_ns(proc.pid), _thread_ns(proc.pid), \
            _requests(plane)
        p0 = variant.impl.polls(proc)
        _wait_polls(variant, proc, args.polls, args.period)
        time.sleep(min(0.3, args.period / 4))
        t1, ns1, th1, rq1 = time.monotonic(), measure.cpu_ns(proc.pid), _thread_ns(proc.pid), \
            _requests(plane)
        polls = variant.impl.polls(proc) - p0
        peak_kib = measure.proc_status(proc.pid).get("VmHWM", 0)
    finally:
        proc.stop()
    reqs = split_requests(measure.delta(rq0, rq1))
    out: dict[str, Any] = {
        "polls": polls, "seconds": round(t1 - t0, 2),
        "cpu_ms_per_poll": round((ns1 - ns0) / 1e6 / polls, 3),
        "peak_rss_mib": round(peak_kib / 1024, 1),
        "requests_per_poll": {k: round(v / polls, 3) for k, v in reqs.items()},
        "load_average": round(os.getloadavg()[0], 2)}
    if variant.python is not None:
        out["main_thread_ms_per_poll"] = round((th1["main"] - th0["main"]) / 1e6 / polls, 3)
        out["other_threads_ms_per_poll"] = round((th1["other"] - th0["other"]) / 1e6 / polls,
                                                 3)
    return out


def callgrind(variant: Variant, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Instructions per poll under callgrind: the counters are zeroed after the warm-up
    polls and dumped after ``--polls`` more, so that dump holds exactly the window."""
    out_file = work / f"callgrind-{variant.name}.out"
    wrap = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_file}",
            "--dump-line=no", "--compress-strings=no", "--compress-pos=no"]
    impl = variant.impl
    slow = args.period * 20  # valgrind runs the program 20-100x slower
    # Ours' console script is a #! script: valgrind is given the interpreter itself.
    executable = None if variant.python is None else [variant.python, "-P", "-c", _DAEMON]
    # Go's asynchronous preemption (signals) crashes valgrind 3.19 in upstream's binary;
    # without it the same work runs, preempted at function calls only.
    os.environ["GODEBUG"] = "asyncpreemptoff=1"
    try:
        proc = impl.start(work / f"{variant.name}-callgrind.log", wrap=wrap,
                          executable=executable)
    finally:
        os.environ.pop("GODEBUG", None)
    try:
        _wait_polls(variant, proc, 1, slow)
        _wait_polls(variant, proc, args.warm, slow)
        _callgrind_control("--zero", proc.pid)
        p0 = impl.polls(proc)
        _wait_polls(variant, proc, args.polls, slow)
        _callgrind_control("--dump=window", proc.pid)
        polls = impl.polls(proc) - p0
    finally:
        proc.stop()
    window = 0
    for dump in sorted(work.glob(f"callgrind-{variant.name}.out*")):
        text = dump.read_text(errors="replace")
        if "desc: Trigger: dump window" not in text:
            continue
        for line in text.splitlines():
            if line.startswith("summary:"):
                window = int(line.split()[1])
        if args.keep is not None:  # for callgrind_annotate: where the instructions go
            args.keep.mkdir(parents=True, exist_ok=True)
            shutil.copy(dump, args.keep / dump.name)
    return {"polls": polls, "instructions": window,
            "instructions_per_poll": round(window / polls) if polls and window else None}


def _callgrind_control(action: str, pid: int) -> None:
    done = subprocess.run(["callgrind_control", action, str(pid)], capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"callgrind_control {action} {pid}: {done.stderr or done.stdout}")


def _run_injected(variant: Variant, args: argparse.Namespace, work: Path, mode: str,
                  script: str, out: Path, params: dict[str, float], timeout: float) -> None:
    """Run ours through ``script`` (``--cprofile``'s, ``--sample``'s), given ``params`` as
    ``BENCH_<MODE>_<NAME>`` and its output file as ``BENCH_<MODE>_OUT``; wait for that
    file, stop the daemon, and copy the file to ``--keep`` (the raw data: pstats' call
    counts and callers, the sampler's caller pairs)."""
    assert variant.python is not None
    prefix = f"BENCH_{mode.upper()}_"
    env = {prefix + name: str(value) for name, value in params.items()}
    env[prefix + "OUT"] = str(out)
    os.environ.update(env)
    try:
        proc = variant.impl.start(work / f"{variant.name}-{mode}.log",
                                  executable=[variant.python, "-P", "-c", script])
    finally:
        for key in env:
            os.environ.pop(key, None)
    try:
        measure.wait_for(f"the {mode} output", out.exists, timeout, 0.1, proc.alive)
    finally:
        proc.stop()
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        shutil.copy(out, args.keep / out.name)


def cprofile(variant: Variant, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """cProfile around ``--polls`` polls of ours, grouped by what the code does."""
    import pstats
    out = work / f"cprofile-{variant.name}.prof"
    _run_injected(variant, args, work, "cprofile", _CPROFILE, out,
                  {"WARM": args.warm + 1, "POLLS": args.polls},
                  args.period * (args.warm + args.polls + 5) + 60)
    stats = pstats.Stats(str(out))
    raw: dict[tuple[str, int, str], tuple[int, int, float, float, Any]] = \
        stats.stats  # type: ignore[attr-defined]
    total = sum(tt for (_cc, _nc, tt, _ct, _callers) in raw.values())
    groups: dict[str, float] = collections.defaultdict(float)
    top: list[tuple[float, str]] = []
    for (file, line, func), (_cc, ncalls, tt, _ct, _callers) in raw.items():
        where = f"{file}:{line}:{func}"
        groups[_category(where)] += tt
        top.append((tt, f"{_short(file)}:{line} {func} ({ncalls / args.polls:g}/poll)"))
    top.sort(reverse=True)
    polls = args.polls
    return {
        "polls": polls,
        "profiled_ms_per_poll": round(total * 1000 / polls, 3),
        "by_category_percent": {k: round(100 * v / total, 1)
                                for k, v in sorted(groups.items(), key=lambda kv: -kv[1])},
        "top_functions_us_per_poll": [f"{tt * 1e6 / polls:8.1f}  {name}"
                                      for tt, name in top[:args.top]],
        "function_calls_per_poll": round(sum(v[1] for v in raw.values()) / polls),
    }


def sample(variant: Variant, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """``--sample`` back-to-back polls of ours: CPU per poll (the sampler's signals cost
    a little of it) and where it goes, by function."""
    out = work / f"sample-{variant.name}.json"
    _run_injected(variant, args, work, "sample", _SAMPLE, out,
                  {"WARM": args.warm + 1, "GAP": args.gap, "POLLS": args.sample},
                  args.period * (args.warm + 5) + args.sample * (args.gap + 0.05) + 60)
    got = json.loads(out.read_text())
    total = sum(got["own"].values()) or 1
    polls = got["polls"]
    def top(counter: dict[str, int]) -> list[str]:
        rows = sorted(counter.items(), key=lambda kv: -kv[1])[:args.top]
        return [f"{100 * n / total:5.1f}%  {_short(k)}" for k, n in rows]
    groups: dict[str, float] = collections.defaultdict(float)
    for k, n in got["own"].items():
        groups[_category(k)] += n
    return {
        "polls": polls, "samples": total,
        "main_thread_ms_per_poll": round(got["main_thread_s"] * 1000 / polls, 4),
        "process_ms_per_poll": round(got["process_s"] * 1000 / polls, 4),
        "gap_seconds": args.gap,
        "gc_collections": sum(g["collections"] for g in got["gc"][1])
        - sum(g["collections"] for g in got["gc"][0]),
        "by_category_percent": {k: round(100 * v / total, 1)
                                for k, v in sorted(groups.items(), key=lambda kv: -kv[1])},
        "own_percent": top(got["own"]), "under_percent": top(got["under"])}


def _category(where: str) -> str:
    for name, marks in _CATEGORIES:
        if any(m in where for m in marks):
            return name
    return "other"


def _short(file: str) -> str:
    for mark in ("/site-packages/", "/lib/python3"):
        if mark in file:
            return file.split(mark, 1)[1]
    return file


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m bench.pollcost",
                                 description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--variant", action="append", help=VARIANT_HELP)
    ap.add_argument("--upstream", action="store_true", help="measure upstream v1.10.3 too")
    ap.add_argument("--flag", action="append", help="an extra flag for every variant of ours")
    ap.add_argument("--rounds", type=int, default=5, help="schedstat rounds (0: none)")
    ap.add_argument("--polls", type=int, default=15, help="polls per measurement")
    ap.add_argument("--warm", type=int, default=2, help="polls before measuring")
    ap.add_argument("--period", type=int, default=2, help="poll period, seconds")
    ap.add_argument("--callgrind", action="store_true", help="instructions per poll too")
    ap.add_argument("--keep", type=Path, default=None,
                    help="copy --callgrind's window dumps and --cprofile's stats here")
    ap.add_argument("--cprofile", action="store_true", help="where ours' poll time goes")
    ap.add_argument("--sample", type=int, default=0, metavar="N",
                    help="ours: N back-to-back polls, CPU each and a sampled profile")
    ap.add_argument("--gap", type=float, default=0.0,
                    help="--sample: seconds between two polls (caches cool meanwhile)")
    ap.add_argument("--top", type=int, default=25,
                    help="--cprofile, --sample: functions listed")
    ap.add_argument("--threads", type=int, default=12, help="node-writer threads")
    ap.add_argument("--seed", type=int, default=None, help="the shuffle's seed")
    ap.add_argument("--out", type=Path, default=RESULTS / "pollcost.json")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    rng = random.Random(args.seed)
    report: dict[str, Any] = {
        "nodes": args.nodes, "rounds": args.rounds, "polls": args.polls,
        "period": args.period, "flags": args.flag or [],
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "variants": {}}
    with _control_plane(args.nodes, args.threads) as bench, \
            tempfile.TemporaryDirectory(prefix="cpa-pollcost-") as tmp:
        work = Path(tmp)
        plane = bench.plane
        vs = variants(plane, args.variant, args.period, work, flags=args.flag or (),
                      with_upstream=args.upstream)
        rounds: dict[str, list[dict[str, Any]]] = {v.name: [] for v in vs}
        for r in range(args.rounds):
            order = vs[:]
            rng.shuffle(order)
            for v in order:
                got = schedstat_round(v, plane, args, work, f"r{r}")
                rounds[v.name].append(got)
                log(f"round {r + 1}/{args.rounds} {v.name}: {got['cpu_ms_per_poll']} ms/poll, "
                    f"peak RSS {got['peak_rss_mib']} MiB "
                    f"(load {got['load_average']})"
                    + (f" main {got['main_thread_ms_per_poll']} other "
                       f"{got['other_threads_ms_per_poll']}" if "main_thread_ms_per_poll" in got
                       else ""))
        for v in vs:
            entry: dict[str, Any] = {"rounds": rounds[v.name]}
            if rounds[v.name]:
                for key in ("cpu_ms_per_poll", "peak_rss_mib", "main_thread_ms_per_poll",
                            "other_threads_ms_per_poll"):
                    values = [x[key] for x in rounds[v.name] if key in x]
                    if values:
                        entry[f"{key}_median"] = round(statistics.median(values), 3)
                        entry[f"{key}_min"] = round(min(values), 3)
                entry["requests_per_poll"] = rounds[v.name][-1]["requests_per_poll"]
            if args.callgrind:
                entry["callgrind"] = callgrind(v, args, work)
                log(f"callgrind {v.name}: {entry['callgrind']}")
            if args.cprofile and v.python is not None:
                entry["cprofile"] = cprofile(v, args, work)
                log(f"cprofile {v.name}: {json.dumps(entry['cprofile'], indent=1)}")
            if args.sample and v.python is not None:
                entry["sample"] = sample(v, args, work)
                log(f"sample {v.name}: {json.dumps(entry['sample'], indent=1)}")
            report["variants"][v.name] = entry
    report["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(summary(report))
    return 0


def summary(report: dict[str, Any]) -> str:
    lines = [f"# CPU per poll at {report['nodes']:,} nodes ({report['rounds']} interleaved "
             f"rounds of {report['polls']} polls; load {report['load_average_at_start']} -> "
             f"{report['load_average_at_end']})", "",
             "| variant | schedstat ms/poll (median, min) | main thread | other threads | "
             "instructions/poll | requests/poll |", "|---|---|---|---|---|---|"]
    for name, e in report["variants"].items():
        cg = (e.get("callgrind") or {}).get("instructions_per_poll")
        lines.append(
            f"| {name} | {e.get('cpu_ms_per_poll_median', '-')}, "
            f"{e.get('cpu_ms_per_poll_min', '-')} | {e.get('main_thread_ms_per_poll_median', '-')}"
            f" | {e.get('other_threads_ms_per_poll_median', '-')} | "
            f"{f'{cg:,}' if cg else '-'} | {e.get('requests_per_poll', '-')} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
