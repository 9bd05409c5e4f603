"""``python -m bench.run [--quick]``: ours (and upstream, when a binary exists) at N nodes.

One real control plane per run (kube-apiserver + etcd on 127.0.0.1). For each N (ascending)
the harness creates only the nodes still missing, computes the expected replicas itself,
then for each implementation: starts the process (as the kube-dns-autoscaler ServiceAccount
identity), measures the time to the first correct scale write, RSS (VmHWM; median VmRSS
over a steady window), CPU per poll and API requests per poll over that window, and the
reaction time to a batch of node changes (5% added + 5% cordoned, then reverted), and, at
the churn sizes (15,000 and up), 60 s of node churn (``bench/churn.py``): its CPU %, RSS and
whether the counts are right at the end. Every process started is stopped by its PID.

Results: ``bench/results/latest.json`` (rows), ``latest.md`` (table), ``latest.png`` (chart).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import yaml

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench import churn, measure, nodes  # noqa: E402
from cpa.horizontal.decide.decision import decide  # noqa: E402
from cpa.horizontal.decide.defaults import default_params_to_data  # noqa: E402
from cpa.horizontal.decide.modes.registry import parse_configmap_data  # noqa: E402
from cpa.nodes.counts import ClusterCounts  # noqa: E402
from tests.controlplane import (  # noqa: E402
    UPSTREAM_CPA_VERSION,
    UPSTREAM_HOWTO,
    AdminClient,
    ControlPlane,
    ensure_binaries,
    inpod,
    upstream_autoscaler_binary,
)
from tests.integration.support import free_port, log_events, port_is_free  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
MANIFEST = REPO / "manifests" / "kube-dns-autoscaler.yaml"
NS, CM, TARGET = "kube-system", "kube-dns-autoscaler", "coredns"
KUBE_DNS_DEFAULTS = ('{"linear":{"coresPerReplica":256,"nodesPerReplica":16,'
                     '"preventSinglePointFailure":true,"includeUnschedulableNodes":true}}')
FULL_SIZES = (1_000, 15_000, 65_000, 130_000)
QUICK_SIZES = (1_000, 5_000)
RSS_BUDGET_MIB = 64.0
CHURN_MIN_NODES = 15_000  # churn windows at these sizes and up (full runs)
REACT_FLAG = "--react-to-node-changes"
UPSTREAM_HEALTH_PORT = 8080


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --- the cluster as the harness knows it ---------------------------------------------
@dataclass
class Cluster:
    """The nodes the harness created, and what each should count as."""

    base: int = 0                      # nodes 0..base-1 of nodes.NAME_PREFIX exist
    extra: int = 0                     # the next index of nodes.EXTRA_PREFIX (batches)
    states: dict[str, nodes.NodeState] = field(default_factory=dict)

    def counts(self) -> ClusterCounts:
        return nodes.counts(self.states.values())


def expected_replicas(counts: ClusterCounts) -> int:
    params = parse_configmap_data(default_params_to_data(KUBE_DNS_DEFAULTS))
    return decide(params, counts).replicas


# --- implementations -----------------------------------------------------------------
class Launch(NamedTuple):
    """How an implementation is started: ``prefix`` (the in-Pod wrapper, or nothing), the
    ``program`` (executable and flags) and its environment."""

    prefix: list[str]
    program: list[str]
    env: dict[str, str]


@dataclass
class Impl:
    name: str                     # "ours" | "upstream" (or a variant of ours)
    launch: Callable[[], Launch]
    polls: Callable[[measure.Process], int]
    counts: Callable[[measure.Process], ClusterCounts | None]  # the last poll's, as logged

    def start(self, log_path: Path, wrap: Sequence[str] = (),
              executable: Sequence[str] | None = None) -> measure.Process:
        """Start the process; ``wrap`` runs the program under another (valgrind),
        ``executable`` replaces the program's first word (an interpreter and a script)."""
        prefix, program, env = self.launch()
        if executable is not None:
            program = [*executable, *program[1:]]
        return measure.Process([*prefix, *wrap, *program], log_path, env)


def _replicas(admin: AdminClient) -> int:
    return int(admin.get(f"/apis/apps/v1/namespaces/{NS}/deployments/{TARGET}")["spec"]
               .get("replicas", 0))


def _set_replicas(admin: AdminClient, value: int) -> None:
    admin.put(f"/apis/apps/v1/namespaces/{NS}/deployments/{TARGET}/scale",
              {"apiVersion": "autoscaling/v1", "kind": "Scale",
               "metadata": {"name": TARGET, "namespace": NS}, "spec": {"replicas": value}})


def ours(plane: ControlPlane, period: int, workdir: Path | None = None, *,
         command: Sequence[str] | None = None, extra: Sequence[str] = (),
         name: str = "ours") -> Impl:
    """Our daemon. With a ``workdir`` (and root, for the private mount) it runs in-cluster
    exactly as upstream does here, as in a Pod: ServiceAccount files and
    KUBERNETES_SERVICE_HOST/PORT, no kubeconfig (whose YAML parser a Pod never imports);
    else with ``--kubeconfig``. ``command`` runs another install (``bench.pollcost``'s
    variants; default :func:`measure.our_command`), ``extra`` adds flags (an opt-in
    feature), ``name`` labels the rows."""
    in_pod = workdir is not None and shutil.which("unshare") is not None and os.geteuid() == 0
    token = workdir / "ours-token" if workdir is not None else None
    if in_pod and token is not None:
        token.write_text(plane.autoscaler_token)
        token.chmod(0o600)

    def launch() -> Launch:
        flags = [f"--health-port={free_port()}", f"--namespace={NS}", f"--configmap={CM}",
                 f"--target=Deployment/{TARGET}", f"--default-params={KUBE_DNS_DEFAULTS}",
                 f"--poll-period-seconds={period}", "--logtostderr=true", "--v=4",
                 "--log-format=json", *extra]
        run = list(command) if command is not None else measure.our_command()
        env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "MY_POD_NAMESPACE")}
        if in_pod and token is not None:
            env.update(KUBERNETES_SERVICE_HOST="127.0.0.1",
                       KUBERNETES_SERVICE_PORT=plane.server.rsplit(":", 1)[1])
            return Launch(inpod.in_pod(token, plane.ca_file), [*run, *flags], env)
        return Launch([], [*run, f"--kubeconfig={plane.autoscaler_kubeconfig}", *flags], env)

    def polls(proc: measure.Process) -> int:
        return proc.logs().count('"event": "poll.counts"')

    def counts(proc: measure.Process) -> ClusterCounts | None:
        events = log_events(proc.logs(), "poll.counts")
        if not events:
            return None
        e = events[-1]
        return ClusterCounts(total_nodes=e["nodes"], total_cores=e["cores"],
                             schedulable_nodes=e["schedulable_nodes"],
                             schedulable_cores=e["schedulable_cores"])

    return Impl(name, launch, polls, counts)


# upstream at --v=4, per poll (autoscaler_server.go): "Total nodes %5d, schedulable nodes:
# %5d" and "Total cores %5d, schedulable cores: %5d".
_UP_NODES = re.compile(r"Total nodes\s+(\d+), schedulable nodes:\s+(\d+)")
_UP_CORES = re.compile(r"Total cores\s+(\d+), schedulable cores:\s+(\d+)")


def upstream_counts(text: str) -> ClusterCounts | None:
    """The last counts upstream logged (``--v=4``), or None."""
    n = _UP_NODES.findall(text)
    c = _UP_CORES.findall(text)
    if not n or not c:
        return None
    return ClusterCounts(total_nodes=int(n[-1][0]), total_cores=int(c[-1][0]),
                         schedulable_nodes=int(n[-1][1]), schedulable_cores=int(c[-1][1]))


def upstream_problem() -> tuple[Path | None, str]:
    """The upstream binary and "" when it can run here, else None and the reason."""
    binary = upstream_autoscaler_binary()
    if binary is None:
        return None, UPSTREAM_HOWTO
    if shutil.which("unshare") is None or os.geteuid() != 0:
        return None, (f"binary {binary} found but not runnable here: it reads its token from "
                      f"{inpod.SA_DIR}, which needs root and `unshare -m` for a private mount")
    if not port_is_free(UPSTREAM_HEALTH_PORT):
        return None, (f"binary {binary} found but port {UPSTREAM_HEALTH_PORT} (its fixed "
                      "health port) is in use")
    return binary, ""


def upstream(plane: ControlPlane, binary: Path, period: int, workdir: Path) -> Impl:
    token = workdir / "upstream-token"
    token.write_text(plane.autoscaler_token)
    token.chmod(0o600)
    port = plane.server.rsplit(":", 1)[1]

    def launch() -> Launch:
        program = [str(binary), f"--namespace={NS}",
                   f"--configmap={CM}", f"--target=Deployment/{TARGET}",
                   f"--default-params={KUBE_DNS_DEFAULTS}", f"--poll-period-seconds={period}",
                   "--logtostderr=true", "--v=4"]  # v=4: the counts of each poll, as ours
        env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "MY_POD_NAMESPACE")}
        env.update(KUBERNETES_SERVICE_HOST="127.0.0.1", KUBERNETES_SERVICE_PORT=port)
        return Launch(inpod.in_pod(token, plane.ca_file), program, env)

    def polls(_proc: measure.Process) -> int:
        # One ConfigMap GET per poll (counted the same way whatever it logs).
        totals = measure.request_totals(plane.metrics())
        return int(totals.get(("GET", "configmaps", ""), 0))

    def counts(proc: measure.Process) -> ClusterCounts | None:
        return upstream_counts(proc.logs())

    return Impl("upstream", launch, polls, counts)


# --- one measurement -----------------------------------------------------------------
def _wait_next_poll(impl: Impl, proc: measure.Process, after: int, timeout: float) -> int:
    got = after
    def more() -> bool:
        nonlocal got
        got = impl.polls(proc)
        return got > after
    measure.wait_for("the next poll", more, timeout, 0.05, proc.alive)
    return got


def _wait_quiet(plane: ControlPlane, below_percent: float = 5.0, timeout: float = 120.0
                ) -> float:
    """Wait until kube-apiserver uses less than ``below_percent`` of a core over 2 s (after
    creating tens of thousands of Nodes it works on for a while: compaction, the watch
    cache); returns the last figure. Both implementations start from the same quiet."""
    pid = plane.apiserver_pid
    assert pid is not None
    deadline = time.monotonic() + timeout
    while True:
        c0 = measure.cpu_seconds(pid)
        time.sleep(2.0)
        percent = (measure.cpu_seconds(pid) - c0) * 50.0
        if percent < below_percent or time.monotonic() > deadline:
            return round(percent, 1)


def first_write_once(impl: Impl, plane: ControlPlane, admin: Any, expected: int,
                      log_path: Path, timeout: float) -> tuple[float, float]:
    """Start the implementation once on a quiet API server; seconds to the first correct
    write and the API server's CPU seconds until then; then stop it."""
    _set_replicas(admin, 1)
    writes = measure.ReplicaWatch(plane.server, plane.ca_file, plane.admin_token, NS, TARGET)
    _wait_quiet(plane)
    pid = plane.apiserver_pid
    assert pid is not None
    cpu0 = measure.cpu_seconds(pid)
    proc = impl.start(log_path.with_suffix(".log"))
    try:
        t_ok = writes.wait(expected, proc.started, timeout, proc.alive)
        return round(t_ok - proc.started, 3), round(measure.cpu_seconds(pid) - cpu0, 2)
    finally:
        writes.close()
        proc.stop()


def measure_reaction(impl: Impl, plane: ControlPlane, writer: nodes.NodeWriter,
                     cluster: Cluster, args: argparse.Namespace, workdir: Path,
                     rng: random.Random) -> dict[str, Any]:
    """The reaction only (``ours`` with ``--react-to-node-changes``): start, wait for the
    first correct write, run the batches, stop."""
    admin = plane.admin()
    n = cluster.base
    expected = expected_replicas(cluster.counts())
    _set_replicas(admin, 1)
    writes = measure.ReplicaWatch(plane.server, plane.ca_file, plane.admin_token, NS, TARGET)
    _wait_quiet(plane)
    log(f"{impl.name} @ {n} nodes: reaction only")
    proc = impl.start(workdir / f"{impl.name}-{n}.log")
    try:
        writes.wait(expected, proc.started, args.sync_timeout, proc.alive)
        out = _reaction(impl, proc, admin, writer, cluster, args, writes, rng)
        early = log_events(proc.logs(), "poll.early")
        out["early_polls"] = len(early)
    finally:
        writes.close()
        proc.stop()
    log(f"  reaction median {out['reaction_median_seconds']}s, p90 "
        f"{out['reaction_p90_seconds']}s, {out['early_polls']} early polls")
    return out


def measure_impl(impl: Impl, plane: ControlPlane, writer: nodes.NodeWriter, cluster: Cluster,
                 args: argparse.Namespace, workdir: Path, rng: random.Random
                 ) -> dict[str, Any]:
    admin = plane.admin()
    n = cluster.base
    expected = expected_replicas(cluster.counts())
    # A start of ~0.25 s is at the mercy of one scheduling hiccup on a 2-core machine, and
    # the API server's CPU for a large sync depends on when its Go GC runs: the first correct
    # write and the API server's CPU for it are medians of several starts (the other figures
    # come from the last, which keeps running).
    starts = args.starts if n <= args.starts_max_nodes else args.large_starts
    earlier = [first_write_once(impl, plane, admin, expected, workdir / f"{impl.name}-{n}-{i}",
                                 args.sync_timeout) for i in range(max(0, starts - 1))]
    _set_replicas(admin, 1)
    writes = measure.ReplicaWatch(plane.server, plane.ca_file, plane.admin_token, NS, TARGET)
    log(f"{impl.name} @ {n} nodes: expecting {expected} replicas; starting the process")
    idle = _wait_quiet(plane)  # the API server's own work (after a node creation) is not ours
    watches_before = measure.open_node_watches(plane.metrics())  # the apiserver's own
    plane_pids = {"apiserver": plane.apiserver_pid, "etcd": plane.etcd_pid}
    plane_cpu0 = {k: measure.cpu_seconds(p) for k, p in plane_pids.items() if p}
    plane_memory = (measure.PlaneMemory(plane.apiserver_pid, plane.metrics)
                    if plane.apiserver_pid else None)
    time.sleep(1.5)  # a heap sample before the start
    proc = impl.start(workdir / f"{impl.name}-{n}.log")
    sampler = measure.RssSampler(proc.pid, 0.2)
    row: dict[str, Any] = {"impl": impl.name, "nodes": n, "expected_replicas": expected,
                           "poll_period_seconds": args.poll_period,
                           "apiserver_idle_cpu_percent_before": idle}
    try:
        # 1. time to the first correct scale write
        t_ok = writes.wait(expected, proc.started, args.sync_timeout, proc.alive)
        row["sync_seconds"] = round(t_ok - proc.started, 3)
        if earlier:
            row["sync_seconds_starts"] = [*(e[0] for e in earlier), row["sync_seconds"]]
            row["sync_seconds"] = round(statistics.median(row["sync_seconds_starts"]), 3)
        # Who the sync waited for: CPU seconds spent from the process start to that write.
        row["sync_cpu_seconds"] = {"autoscaler": round(measure.cpu_seconds(proc.pid), 2), **{
            k: round(measure.cpu_seconds(p) - plane_cpu0[k], 2)
            for k, p in plane_pids.items() if p}}
        # The load our sync puts on the API server: its CPU from our start to that write.
        row["sync_apiserver_cpu_seconds"] = row["sync_cpu_seconds"].get("apiserver")
        if earlier:
            row["sync_apiserver_cpu_seconds_starts"] = [
                *(e[1] for e in earlier), row["sync_apiserver_cpu_seconds"]]
            row["sync_apiserver_cpu_seconds"] = round(
                statistics.median(row["sync_apiserver_cpu_seconds_starts"]), 2)
        synced = []
        if impl.name != "upstream":
            measure.wait_logged(proc, "nodes.synced")
            synced = log_events(proc.logs(), "nodes.synced")
        if synced:
            row["sync_method"] = synced[0].get("method")
            row["cache_sync_seconds"] = synced[0].get("seconds")
        elif impl.name == "upstream":
            row["sync_method"] = "informer list+watch"
        if plane_memory is not None:  # the API server's memory over the (last) start
            row["sync_apiserver_memory"] = plane_memory.window(proc.started, t_ok)
            log(f"  API server memory during the sync: {row['sync_apiserver_memory']}")
        log(f"  correct replicas after {row['sync_seconds']}s, CPU s {row['sync_cpu_seconds']}"
            + (f" (cache: {row.get('sync_method')} in {row.get('cache_sync_seconds')}s)"
               if synced else ""))

        # 2. steady window: K whole polls, bounded by poll boundaries
        period = args.poll_period
        p = _wait_next_poll(impl, proc, impl.polls(proc), period * 3 + 10)
        time.sleep(min(0.5, period / 4))
        m0, c0, ns0, t0 = (measure.request_totals(plane.metrics()),
                           measure.cpu_seconds(proc.pid), measure.cpu_ns(proc.pid),
                           time.monotonic())
        watches0 = measure.open_node_watches(plane.metrics())
        p0 = impl.polls(proc)
        target = p0 + args.window_polls
        p = p0
        while p < target:
            p = _wait_next_poll(impl, proc, p, period * 3 + 10)
        time.sleep(min(0.5, period / 4))
        c1, ns1, t1 = measure.cpu_seconds(proc.pid), measure.cpu_ns(proc.pid), time.monotonic()
        m1 = measure.request_totals(plane.metrics())
        p1 = impl.polls(proc)
        polls = max(1, p1 - p0)
        d = measure.delta(m0, m1)
        cats = measure.categorize(d)
        renewals = sum(v for k, v in d.items() if k[1] == "nodes" and k[0] == "WATCH")
        cats["node_requests"] -= renewals
        row["steady_window_seconds"] = round(t1 - t0, 2)
        row["steady_polls"] = polls
        # schedstat (ns) is the figure; utime+stime (10 ms ticks) is kept as a cross-check.
        row["poll_cpu_ms"] = round((ns1 - ns0) / 1e6 / polls, 3)
        row["poll_cpu_ms_ticks"] = round((c1 - c0) * 1000 / polls, 2)
        row["steady_rss_mib"] = round(sampler.median_mib(t0, t1) or 0.0, 1)
        # What a poll costs the API server, apart from the node watch's renewals (ours end
        # each watch after 40-50 s by design; upstream's informer renews every 5-10 min).
        row["requests_per_poll"] = round(sum(cats.values()) / polls, 2)
        row["requests_breakdown_per_poll"] = {k: round(v / polls, 2) for k, v in cats.items()}
        row["watch_renewals"] = int(renewals)
        row["watch_renewals_per_minute"] = round(renewals / (t1 - t0) * 60, 2)
        # Node watches the autoscaler holds open (the apiserver's own, counted before the
        # process started, subtracted): 1 for a list+watch cache.
        row["node_watches_open"] = watches0 - watches_before
        log(f"  steady: {polls} polls in {row['steady_window_seconds']}s, "
            f"{row['poll_cpu_ms']} CPU ms/poll, {row['requests_per_poll']} requests/poll "
            f"{row['requests_breakdown_per_poll']}, RSS {row['steady_rss_mib']} MiB")

        # 3. reaction to batches of new and removed Nodes, at random phases of the poll
        if args.reaction_batches:
            row.update(_reaction(impl, proc, admin, writer, cluster, args, writes, rng))

        status = measure.proc_status(proc.pid)
        row["peak_rss_mib"] = round(status["VmHWM"] / 1024, 1)
        row["final_rss_mib"] = round(status["VmRSS"] / 1024, 1)
        row["peak_rss_within_64mib"] = row["peak_rss_mib"] <= RSS_BUDGET_MIB
        row["cpu_seconds_total"] = round(measure.cpu_seconds(proc.pid), 2)
        reacted = (f", reaction median {row['reaction_median_seconds']}s, p90 "
                   f"{row['reaction_p90_seconds']}s (batches of {row['reaction_batch']} Nodes)"
                   if "reaction_median_seconds" in row else "")
        log(f"  peak RSS {row['peak_rss_mib']} MiB{reacted}")

        # 4. churn: status updates at N/300 per second and a few flips, for 60 s
        if n in args.churn_at:
            row.update(_churn(impl, proc, plane, writer, cluster, args, sampler,
                              plane_memory))
            row["peak_rss_after_churn_mib"] = round(
                measure.proc_status(proc.pid)["VmHWM"] / 1024, 1)
    finally:
        writes.close()
        sampler.stop()
        if plane_memory is not None:
            plane_memory.stop()
        code = proc.stop()
        row["exit_code"] = code
    failed = log_events(proc.log_path.read_text(errors="replace"), "poll.failed")
    row["poll_failures"] = len(failed)
    return row


def _churn(impl: Impl, proc: measure.Process, plane: ControlPlane, writer: nodes.NodeWriter,
           cluster: Cluster, args: argparse.Namespace, sampler: measure.RssSampler,
           plane_memory: measure.PlaneMemory | None = None) -> dict[str, Any]:
    n = cluster.base
    rate = churn.default_rate(n) * args.churn_rate_scale
    window = churn.Churn(writer, cluster.states, n, rate, args.churn_seconds)
    log(f"  churn: {window.total} updates at {rate:.0f}/s for {args.churn_seconds:.0f}s "
        f"({len(window.flips)} flips)")
    plane_pids = {"apiserver": plane.apiserver_pid, "etcd": plane.etcd_pid}
    plane_ns0 = {k: measure.cpu_ns(p) for k, p in plane_pids.items() if p}
    ns0, t0 = measure.cpu_ns(proc.pid), time.monotonic()
    result = window.run()
    ns1, t1 = measure.cpu_ns(proc.pid), time.monotonic()
    wall = t1 - t0
    out = result.summary(rate, args.churn_seconds)
    out["churn_cpu_percent"] = round((ns1 - ns0) / 1e9 / wall * 100, 2)
    out["churn_rss_mib"] = round(sampler.max_mib(t0, t1) or 0.0, 1)
    out["churn_rss_median_mib"] = round(sampler.median_mib(t0, t1) or 0.0, 1)
    out["churn_plane_cpu_percent"] = {k: round((measure.cpu_ns(p) - plane_ns0[k]) / 1e9 / wall
                                               * 100, 1)
                                      for k, p in plane_pids.items() if p}
    if plane_memory is not None:
        out["churn_apiserver_memory"] = plane_memory.window(t0, t1)
    # Correct at the end: the counts of a poll after the last update equal the harness's.
    expected = cluster.counts()
    settled: list[ClusterCounts | None] = [None]
    polls0 = impl.polls(proc)

    def right() -> bool:
        settled[0] = impl.counts(proc)
        return impl.polls(proc) > polls0 and settled[0] == expected
    try:
        t_ok = measure.wait_for("the counts after the churn", right, 60, 0.1, proc.alive)
        out["churn_counts_correct"] = True
        out["churn_settle_seconds"] = round(max(0.0, t_ok - t1), 2)
    except TimeoutError:
        out["churn_counts_correct"] = False
        out["churn_counts_logged"] = settled[0]._asdict() if settled[0] else None
    out["churn_counts_expected"] = expected._asdict()
    log(f"  churn: {out['churn_updates_per_second']}/s achieved (target {rate:.0f}/s, lag p99 "
        f"{out['churn_lag_p99_seconds']}s, kept up: {out['churn_generator_kept_up']}), CPU "
        f"{out['churn_cpu_percent']}%, RSS max {out['churn_rss_mib']} MiB, counts right: "
        f"{out['churn_counts_correct']} (after {out.get('churn_settle_seconds')}s); "
        f"API server {out['churn_plane_cpu_percent']}%, its memory "
        f"{out.get('churn_apiserver_memory')}")
    window.revert(log)
    return out


def _crossing(count: int, want: int, up: bool, per_replica: int = 16) -> int:
    """The batch size nearest ``want`` after which the Node count sits just past a
    nodesPerReplica boundary, so the new replica count is reached only by the batch's last
    write: adding, the count ends at 16k+1; removing, at 16k."""
    rest = 1 if up else 0
    fits = [m for m in range(max(1, want - per_replica), want + per_replica + 1)
            if (count + m if up else count - m) % per_replica == rest]
    return min(fits, key=lambda m: abs(m - want))


def reaction_batch(n: int) -> int:
    """The reaction batch at N Nodes: 1% of them, at least 16 (one replica's worth) and at
    most 256 - the burst of a node pool scaling up, not a whole cluster arriving."""
    return max(16, min(256, n // 100))


def _reaction(impl: Impl, proc: measure.Process, admin: AdminClient,
              writer: nodes.NodeWriter, cluster: Cluster, args: argparse.Namespace,
              writes: measure.ReplicaWatch, rng: random.Random) -> dict[str, Any]:
    """``--reaction-batches`` batches of new Nodes, each followed by a batch that removes
    about as many. Before each, the harness waits for a poll of the process and then a
    random part of the period, so the batches land at every phase of the poll. A sample is
    the time from the batch's last write (its last POST or DELETE answered) to the first
    arrival of the right replica count on a watch of the Deployment; the batch is sized so
    that only its last write makes that count right (:func:`_crossing`)."""
    want = reaction_batch(cluster.base)
    period = args.poll_period
    ups: list[float] = []
    downs: list[float] = []
    added: list[tuple[int, str]] = []
    write_seconds: list[float] = []

    def phase() -> None:
        _wait_next_poll(impl, proc, impl.polls(proc), period * 3 + 10)
        time.sleep(rng.uniform(0, period))

    def sample(into: list[float], t_start: float, t_end: float) -> None:
        expected = expected_replicas(cluster.counts())
        t_ok = writes.wait(expected, t_start, args.sync_timeout, proc.alive)
        into.append(round(max(0.0, t_ok - t_end), 3))
        write_seconds.append(round(t_end - t_start, 3))

    for _ in range(args.reaction_batches):
        count = len(cluster.states)
        m = _crossing(count, want, up=True)
        batch = [(i, nodes.node_name(i, nodes.EXTRA_PREFIX))
                 for i in range(cluster.extra, cluster.extra + m)]
        cluster.extra += m
        phase()
        t_start = time.monotonic()
        writer.create([i for i, _ in batch], nodes.EXTRA_PREFIX, progress=False)
        t_end = time.monotonic()
        for i, name in batch:
            cluster.states[name] = nodes.node_state(i, cordoned=nodes.is_cordoned(i))
        added += batch
        sample(ups, t_start, t_end)

        count = len(cluster.states)
        m = min(_crossing(count, want, up=False), len(added))
        gone, added = added[-m:], added[:-m]
        phase()
        t_start = time.monotonic()
        writer.delete([name for _, name in gone], progress=False)
        t_end = time.monotonic()
        for _, name in gone:
            del cluster.states[name]
        sample(downs, t_start, t_end)
    if added:  # back to the size's own Nodes, and their replica count
        writer.delete([name for _, name in added], progress=False)
        for _, name in added:
            del cluster.states[name]
        t = time.monotonic()
        writes.wait(expected_replicas(cluster.counts()), t, args.sync_timeout, proc.alive)
    both = ups + downs
    return {"reaction_batch": want, "reaction_samples_up": ups,
            "reaction_samples_down": downs,
            "reaction_write_seconds_median": round(statistics.median(write_seconds), 3),
            "reaction_median_seconds": round(statistics.median(both), 3),
            "reaction_p90_seconds": round(percentile(both, 90), 3),
            "reaction_max_seconds": round(max(both), 3)}


def percentile(values: Sequence[float], p: float) -> float:
    """The p-th percentile, linear between the closest ranks (numpy's default)."""
    ordered = sorted(values)
    k = (len(ordered) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


# --- setup ---------------------------------------------------------------------------
def setup(plane: ControlPlane) -> None:
    admin = plane.admin()
    for doc in yaml.safe_load_all(MANIFEST.read_text()):
        if doc and doc["kind"] != "Deployment":
            admin.apply(doc)
    labels = {"k8s-app": "kube-dns"}
    admin.post(f"/apis/apps/v1/namespaces/{NS}/deployments", {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": TARGET, "namespace": NS, "labels": labels},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels},
                              "spec": {"containers": [{"name": "coredns",
                                                       "image": "registry.k8s.io/pause:3.10"}]}}}})
    # Pre-created so both implementations read the same object from the first poll.
    admin.post(f"/api/v1/namespaces/{NS}/configmaps", {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": CM, "namespace": NS},
        "data": default_params_to_data(KUBE_DNS_DEFAULTS)})


def grow(plane: ControlPlane, writer: nodes.NodeWriter, cluster: Cluster, n: int
         ) -> dict[str, Any]:
    """Create nodes cluster.base..n-1 (only the missing ones)."""
    missing = list(range(cluster.base, n))
    info: dict[str, Any] = {"nodes_created": len(missing)}
    if missing:
        log(f"creating {len(missing)} nodes ({cluster.base} -> {n}) with "
            f"{writer.threads} threads")
        t = time.monotonic()
        rate = writer.create(missing)
        info["node_create_seconds"] = round(time.monotonic() - t, 1)
        info["node_create_rate"] = round(rate, 1)
        log(f"  created {len(missing)} nodes in {info['node_create_seconds']}s "
            f"= {rate:.0f} nodes/s")
    for i in missing:
        cluster.states[nodes.node_name(i)] = nodes.node_state(i)
    cluster.base = n
    status, body = plane.admin().raw("GET", f"/api/v1/nodes/{nodes.node_name(0)}")
    if status == 200:
        info["node_json_bytes"] = len(body)
        info["node_post_bytes"] = len(json.dumps(nodes.node_object(0), separators=(",", ":")))
    return info


# --- output --------------------------------------------------------------------------
_COLUMNS = (("impl", "impl", "{}"), ("nodes", "nodes", "{:,}"),
            ("peak_rss_mib", "peak RSS MiB", "{:.1f}"),
            ("steady_rss_mib", "steady RSS MiB", "{:.1f}"),
            ("sync_seconds", "sync s", "{:.2f}"), ("sync_method", "sync method", "{}"),
            ("poll_cpu_ms", "CPU ms/poll", "{:.3f}"),
            ("requests_per_poll", "requests/poll", "{:.2f}"),
            ("watch_renewals_per_minute", "watch renewals/min", "{:.2f}"),
            ("reaction_median_seconds", "reaction s (median)", "{:.2f}"),
            ("reaction_p90_seconds", "reaction s (p90)", "{:.2f}"),
            ("sync_apiserver_cpu_seconds", "API server CPU s (sync)", "{:.2f}"),
            ("churn_updates_per_second", "churn updates/s", "{:.0f}"),
            ("churn_cpu_percent", "churn CPU %", "{:.2f}"),
            ("churn_rss_mib", "churn RSS MiB", "{:.1f}"),
            ("churn_counts_correct", "churn counts right", "{}"),
            ("expected_replicas", "replicas", "{:,}"))
_RATIO_KEYS = ("peak_rss_mib", "steady_rss_mib", "sync_seconds", "poll_cpu_ms",
               "requests_per_poll", "reaction_median_seconds", "sync_apiserver_cpu_seconds",
               "churn_cpu_percent", "churn_rss_mib")


def markdown(rows: Sequence[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = ["# Benchmark: cluster-proportional-autoscaler at scale", "",
             f"- mode: {meta['mode']}, run {meta['started']} on {meta['machine']}",
             f"- control plane: kube-apiserver {meta['k8s_version']} + etcd (local, 127.0.0.1)",
             f"- nodes: GKE-style, {meta.get('node_post_bytes', '?')} bytes of JSON each as "
             f"posted, {meta.get('node_json_bytes', '?')} as served (with managedFields); "
             "5% cordoned, 3% NotReady",
             f"- node creation rate: {meta.get('node_create_rate_overall', '?')} nodes/s "
             f"({meta.get('writer_threads')} client threads, POST with status)",
             f"- params: `{KUBE_DNS_DEFAULTS}`, poll period {meta['poll_period']} s, steady "
             f"window {meta['window_polls']} polls",
             f"- upstream {UPSTREAM_CPA_VERSION}: {meta['upstream']}",
             f"- ours: {meta.get('ours_install', 'development install')}",
             f"- machine load average (1/5/15 min) at the start: "
             f"{meta.get('load_average_at_start', '?')}, at the end: "
             f"{meta.get('load_average_at_end', '?')}", ""]
    head = "| " + " | ".join(c[1] for c in _COLUMNS) + " |"
    lines += [head, "|" + "---|" * len(_COLUMNS)]
    stopped = []
    for row in rows:
        if row.get("not_run"):
            stopped.append(row)
            continue
        cells = []
        for key, _, fmt in _COLUMNS:
            value = row.get(key)
            cells.append("-" if value is None else fmt.format(value))
        lines.append("| " + " | ".join(cells) + " |")
    for row in stopped:
        lines += ["", f"Not run: {row['impl']} at {row['nodes']:,} Nodes: {row['not_run']}."]
    ratios = meta.get("ratios") or []
    if ratios:
        lines += ["", "Ratios ours / upstream (lower is better for ours):", "",
                  "| nodes | peak RSS | steady RSS | first correct write | CPU/poll | "
                  "requests/poll | reaction (median) | API server CPU (sync) | churn CPU % | "
                  "churn RSS |", "|---|---|---|---|---|---|---|---|---|---|"]
        for r in ratios:
            cells = ["-" if r.get(k) is None else f"{r[k]:.2f}" for k in _RATIO_KEYS]
            lines.append(f"| {r['nodes']:,} | " + " | ".join(cells) + " |")
    lines += reaction_table(rows)
    lines += runs_table(rows, meta)
    churned = [r for r in rows if "churn_updates" in r]
    if churned:
        lines += ["", "Churn windows (generator and API server):", "",
                  "| impl | nodes | target/s | achieved/s | kept up | lag p99 s | "
                  "latency p50/p99 ms | flips | API server CPU % | counts right after s |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for r in churned:
            lines.append(
                f"| {r['impl']} | {r['nodes']:,} | {r['churn_target_updates_per_second']:.0f} | "
                f"{r['churn_updates_per_second']:.0f} | {r['churn_generator_kept_up']} | "
                f"{r['churn_lag_p99_seconds']} | {r['churn_latency_p50_ms']}/"
                f"{r['churn_latency_p99_ms']} | {sum(r['churn_flips'].values())} | "
                f"{r['churn_plane_cpu_percent'].get('apiserver', '-')} | "
                f"{r.get('churn_settle_seconds', '-')} |")
    lines += ["", "Definitions: *peak RSS* VmHWM at the end of the run; *steady RSS* median "
              "VmRSS (sampled every 0.2 s) over the steady window; *sync* process start to the "
              "first correct scale write (seen by a watch on the Deployment; the median of 5 "
              "starts up to 5,000 nodes, of 3 above, each on a quiet API server); *CPU ms/poll* "
              "on-CPU time of the process's threads (/proc/PID/task/*/schedstat, ns) over the "
              "window / polls in it; *requests/poll* "
              "`apiserver_request_total` deltas (GET/POST configmaps, GET/PUT scale, any "
              "nodes request except the node watch's renewals, counted apart as *watch "
              "renewals/min*) / polls (ours: polls counted from its `poll.counts` log events; "
              "upstream: from ConfigMap GETs, one per poll); "
              "*reaction* from the last write of a batch of new Nodes (about 1% of N, 16 to "
              "256), or of a batch removing as many, to the first arrival of the right replica "
              "count on a watch of the Deployment, each batch after a random part of the poll "
              "period; median and p90 over all the batches' samples; "
              "*API server CPU s (sync)* kube-apiserver's utime+stime from the process start "
              "to the first correct write (median of the same starts); *churn* "
              "(`bench/churn.py`) 60 s of Node updates at "
              "N/300 per second (kubelet status heartbeats, 1 in 5 with a new image list; 1 in "
              "50 a label, taint, cordon or Ready flip): *churn CPU %* the process's on-CPU "
              "time over the window / its wall time (100% = one core), *churn RSS* max VmRSS "
              "in the window, *counts right* the counts the process logged for a poll after "
              "the window equal the harness's (both run at --v=4, which logs them).", ""]
    return "\n".join(lines)


def reaction_table(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The reaction distributions: ours, ours with --react-to-node-changes, upstream."""
    entries = []
    for r in rows:
        if "reaction_median_seconds" in r:
            entries.append((r["nodes"], r["impl"], r))
        if isinstance(r.get("react"), dict):
            entries.append((r["nodes"], f"ours {REACT_FLAG}", r["react"]))
    if not entries:
        return []
    out = ["", "Reaction (seconds from a batch's last write to the right replica count on a "
               "watch of the Deployment; batches of new Nodes and of removals, each at a "
               "random phase of the poll):", "",
           "| nodes | impl | batch | samples | median | p90 | max | all, sorted |",
           "|---|---|---|---|---|---|---|---|"]
    for n, name, e in sorted(entries, key=lambda x: (x[0], x[1])):
        samples = sorted([*e["reaction_samples_up"], *e["reaction_samples_down"]])
        out.append(f"| {n:,} | {name} | {e['reaction_batch']} | {len(samples)} | "
                   f"{e['reaction_median_seconds']:.2f} | {e['reaction_p90_seconds']:.2f} | "
                   f"{e['reaction_max_seconds']:.2f} | "
                   f"{' '.join(f'{x:.2f}' for x in samples)} |")
    return out


def runs_table(rows: Sequence[dict[str, Any]], meta: dict[str, Any]) -> list[str]:
    """How long each size took (creating its Nodes, each implementation) and what the
    control plane held: what it takes to reproduce a row."""
    sizes = meta.get("sizes_run") or []
    if not sizes:
        return []
    out = ["", "Each size's run (wall seconds) and the control plane's memory (RSS MiB, "
               "peak in brackets) after creating its Nodes:", "",
           "| nodes | Nodes created in s | rate/s | ours s | upstream s | size total s | "
           "kube-apiserver MiB | etcd MiB |", "|---|---|---|---|---|---|---|---|"]
    for size in sizes:
        n = size["nodes"]
        by = {r["impl"]: r for r in rows if r["nodes"] == n}
        first = next(iter(by.values()), {})
        plane = first.get("control_plane_after_create") or {}

        def took(impl: str, by: dict[str, dict[str, Any]] = by) -> str:
            r = by.get(impl)
            if r is None:
                return "-"
            return "not run" if r.get("not_run") else f"{r.get('run_seconds', 0):.0f}"
        out.append(
            f"| {n:,} | {size.get('node_create_seconds', 0):.0f} | "
            f"{first.get('node_create_rate', '-')} | {took('ours')} | {took('upstream')} | "
            f"{size['seconds']:.0f} | {plane.get('apiserver_rss_mib', '-')} "
            f"({plane.get('apiserver_peak_rss_mib', '-')}) | {plane.get('etcd_rss_mib', '-')} "
            f"({plane.get('etcd_peak_rss_mib', '-')}) |")
    return out


def chart(rows: Sequence[dict[str, Any]], path: Path, meta: dict[str, Any]) -> str | None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (pip install '.[bench]'); no chart"
    rows = [r for r in rows if not r.get("not_run")]
    fig, grid = plt.subplots(2, 4, figsize=(19, 8.6))
    axes = list(grid.flat)
    styles = {"ours": ("tab:blue", "o"), "upstream": ("tab:orange", "s")}
    # (axis, key, label format, title)
    panels = ((1, "sync_seconds", "{:.1f}s", "start to first correct scale write (s)"),
              (2, "poll_cpu_ms", "{:.2f}", "CPU per poll (ms)"),
              (3, "sync_apiserver_cpu_seconds", "{:.1f}",
               "kube-apiserver CPU s, start to first correct write"),
              (4, "churn_cpu_percent", "{:.1f}%", "CPU % under churn (N/300 updates/s)"),
              (5, "churn_rss_mib", "{:.0f}", "max RSS under churn (MiB)"),
              (6, "reaction_median_seconds", "{:.2f}",
               "reaction to a Node batch, median (s)"))
    for impl in ("ours", "upstream"):
        rs = sorted((r for r in rows if r["impl"] == impl), key=lambda r: r["nodes"])
        if not rs:
            continue
        color, marker = styles[impl]
        xs = [r["nodes"] for r in rs]
        axes[0].plot(xs, [r["peak_rss_mib"] for r in rs], color=color, marker=marker,
                     label=f"{impl}: peak (VmHWM)")
        axes[0].plot(xs, [r["steady_rss_mib"] for r in rs], color=color, marker=marker,
                     linestyle="--", label=f"{impl}: steady (median VmRSS)")
        for x, r in zip(xs, rs, strict=True):
            axes[0].annotate(f"{r['peak_rss_mib']:.0f}", (x, r["peak_rss_mib"]),
                             textcoords="offset points", xytext=(0, 6), ha="center", fontsize=8)
        for ax_i, key, fmt, _ in panels:
            pts = [(r["nodes"], r[key]) for r in rs if isinstance(r.get(key), (int, float))]
            if not pts:
                continue
            axes[ax_i].plot([p[0] for p in pts], [p[1] for p in pts], color=color,
                            marker=marker, label=impl)
            for x, y in pts:
                axes[ax_i].annotate(fmt.format(y), (x, y), textcoords="offset points",
                                    xytext=(0, 6), ha="center", fontsize=8)
    react = sorted((r["nodes"], r["react"]["reaction_median_seconds"]) for r in rows
                   if isinstance(r.get("react"), dict))
    if react:
        axes[6].plot([p[0] for p in react], [p[1] for p in react], color="tab:green",
                     marker="^", label=f"ours {REACT_FLAG}")
        for x, y in react:
            axes[6].annotate(f"{y:.2f}", (x, y), textcoords="offset points", xytext=(0, -12),
                             ha="center", fontsize=8)
    axes[7].axis("off")
    axes[0].axhline(RSS_BUDGET_MIB, color="tab:red", linestyle=":", label="64 MiB budget")
    axes[5].axhline(RSS_BUDGET_MIB, color="tab:red", linestyle=":", label="64 MiB budget")
    titles = ["RSS (MiB)", *(p[3] for p in panels)]
    sizes = sorted({r["nodes"] for r in rows})
    for ax, title in zip(axes, titles, strict=False):
        ax.set_xscale("log")
        ax.set_xlabel("nodes (log scale)")
        ax.set_xticks(sizes, [f"{n / 1000:g}k" for n in sizes])
        ax.minorticks_off()
        ax.set_xlim(sizes[0] / 1.6, sizes[-1] * 1.6)
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="major", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8, loc="upper left")
        ax.set_ylim(bottom=0)
    axes[0].legend(fontsize=8, loc="lower right")
    axes[0].set_ylim(0, max([RSS_BUDGET_MIB * 1.25] + [r["peak_rss_mib"] * 1.2 for r in rows]))
    for ax_i, key, _, _ in panels:
        values = [r[key] for r in rows if isinstance(r.get(key), (int, float))]
        if values:
            axes[ax_i].set_ylim(0, max(values) * 1.3 or 1)
    axes[5].set_ylim(0, max([RSS_BUDGET_MIB * 1.25] + [r.get("churn_rss_mib") or 0
                                                       for r in rows]) * 1.1)
    upstream_note = "" if any(r["impl"] == "upstream" for r in rows) else \
        f"  (upstream {UPSTREAM_CPA_VERSION}: not measured, see latest.md)"
    fig.suptitle(f"cluster-proportional-autoscaler vs node count, kube-apiserver "
                 f"{meta['k8s_version']}{upstream_note}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def ratios(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    by = {(r["impl"], r["nodes"]): r for r in rows}
    for (impl, n), r in sorted(by.items()):
        u = by.get(("upstream", n))
        if impl != "ours" or u is None or u.get("not_run") or r.get("not_run"):
            continue
        ratio: dict[str, Any] = {"nodes": n}
        for key in _RATIO_KEYS:
            a, b = r.get(key), u.get(key)
            ratio[key] = round(a / b, 3) if isinstance(a, (int, float)) and b else None
        out.append(ratio)
    return out


# --- main ----------------------------------------------------------------------------
def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="N = 1,000 and 5,000")
    ap.add_argument("--sizes", help="comma list of node counts (overrides --quick)")
    ap.add_argument("--poll-period", type=int, default=2, help="seconds (default 2)")
    ap.add_argument("--window-polls", type=int, default=None,
                    help="polls in the steady window (default 8 quick, 12 full)")
    ap.add_argument("--threads", type=int, default=12, help="node-writer threads")
    ap.add_argument("--sync-timeout", type=float, default=600.0)
    ap.add_argument("--starts", type=int, default=5,
                    help="starts whose median is the first correct write, at N up to "
                         "--starts-max-nodes (default 5)")
    ap.add_argument("--starts-max-nodes", type=int, default=5000)
    ap.add_argument("--large-starts", type=int, default=3,
                    help="the same above --starts-max-nodes (default 3)")
    ap.add_argument("--churn-sizes", default=None,
                    help=f"comma list of node counts with a churn window (default: the sizes "
                         f">= {CHURN_MIN_NODES:,}; 'none' for none)")
    ap.add_argument("--churn-seconds", type=float, default=60.0)
    ap.add_argument("--churn-rate-scale", type=float, default=1.0,
                    help="updates per second = nodes / 300 x this")
    ap.add_argument("--impl", choices=("all", "ours", "upstream"), default="all")
    ap.add_argument("--reaction-batches", type=int, default=10,
                    help="batches of new (then removed) Nodes per size whose reaction is "
                         "timed (default 10; 0: none)")
    ap.add_argument("--no-react", dest="react", action="store_false",
                    help=f"do not also time ours' reaction with {REACT_FLAG}")
    ap.add_argument("--seed", type=int, default=None, help="the poll phases' random seed")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--replot", action="store_true",
                    help="only rebuild latest.md/.png from latest.json (no control plane)")
    ap.add_argument("--keep-logs", type=Path, default=None,
                    help="copy the process logs here (default: discarded with the temp dir)")
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    if args.replot:
        saved_rows = json.loads((args.out / "latest.json").read_text())
        saved_meta = json.loads((args.out / "latest-meta.json").read_text())
        _write(args.out, saved_rows, saved_meta)
        print(markdown(saved_rows, saved_meta))
        return 0
    sizes = tuple(int(s) for s in args.sizes.split(",")) if args.sizes else (
        QUICK_SIZES if args.quick else FULL_SIZES)
    sizes = tuple(sorted(sizes))
    if args.window_polls is None:
        args.window_polls = 8 if args.quick else 12
    if args.churn_sizes is None:
        args.churn_at = {n for n in sizes if n >= CHURN_MIN_NODES}
    elif args.churn_sizes == "none":
        args.churn_at = set()
    else:
        args.churn_at = {int(x) for x in args.churn_sizes.split(",")}
    mode = "quick" if args.quick else ("custom" if args.sizes else "full")
    binary, problem = upstream_problem()
    upstream_note = f"available ({binary})" if binary else problem
    log(f"upstream {UPSTREAM_CPA_VERSION}: {upstream_note}")
    ours_install = measure.install_as_shipped()
    log(f"ours: {ours_install}")
    if binary is None and args.impl != "ours":
        print(f"upstream: {problem}", flush=True)

    meta: dict[str, Any] = {
        "mode": mode, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": f"{os.cpu_count()} cores, "
                   f"{os.sysconf('SC_PHYS_PAGES') * os.sysconf('SC_PAGE_SIZE') / 2**30:.0f} GiB",
        "sizes": list(sizes), "poll_period": args.poll_period,
        "window_polls": args.window_polls, "writer_threads": args.threads,
        "churn_sizes": sorted(args.churn_at), "churn_seconds": args.churn_seconds,
        "churn_rate_scale": args.churn_rate_scale,
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "upstream": upstream_note, "ours_install": ours_install,
        "python": sys.version.split()[0],
    }
    rows: list[dict[str, Any]] = []
    created = create_seconds = 0.0
    bin_dir = ensure_binaries()
    with tempfile.TemporaryDirectory(prefix="cpa-bench-") as tmp, \
            ControlPlane(bin_dir=bin_dir) as plane:
        workdir = Path(tmp)
        from tests.controlplane import K8S_VERSION
        meta["k8s_version"] = K8S_VERSION
        log(f"control plane up: {plane.server} (apiserver pid {plane.apiserver_pid}, "
            f"etcd pid {plane.etcd_pid})")
        setup(plane)
        writer = nodes.NodeWriter(plane.server, plane.ca_file, plane.admin_token, args.threads)
        cluster = Cluster()
        impls: list[Impl] = []
        if args.impl in ("all", "ours"):
            impls.append(ours(plane, args.poll_period, workdir))
        if binary is not None and args.impl in ("all", "upstream"):
            impls.append(upstream(plane, binary, args.poll_period, workdir))
        react = ours(plane, args.poll_period, workdir, extra=[REACT_FLAG], name="ours+react") \
            if args.react and args.impl in ("all", "ours") and args.reaction_batches else None
        rng = random.Random(args.seed)
        meta["sizes_run"] = []
        try:
            for n in sizes:
                size_started = time.monotonic()
                info = grow(plane, writer, cluster, n)
                created += info["nodes_created"]
                create_seconds += info.get("node_create_seconds", 0.0)
                for key in ("node_json_bytes", "node_post_bytes"):
                    if key in info:
                        meta[key] = info[key]
                info["control_plane_after_create"] = plane_memory(plane)
                for impl in impls:
                    impl_started = time.monotonic()
                    stop_reason = memory_problem(impl.name, n, rows)
                    if stop_reason:
                        log(f"{impl.name} @ {n}: not run: {stop_reason}")
                        rows.append({"impl": impl.name, "nodes": n, "not_run": stop_reason})
                        _write(args.out, rows, meta)
                        continue
                    row = measure_impl(impl, plane, writer, cluster, args, workdir, rng)
                    if impl.name == "ours" and react is not None:
                        row["react"] = measure_reaction(react, plane, writer, cluster, args,
                                                        workdir, rng)
                    row.update({k: v for k, v in info.items()
                                if k not in ("node_json_bytes", "node_post_bytes")})
                    row["control_plane_after_run"] = plane_memory(plane)
                    row["run_seconds"] = round(time.monotonic() - impl_started, 1)
                    rows.append(row)
                    _write(args.out, rows, meta)  # partial results survive a later failure
                meta["sizes_run"].append({"nodes": n, "seconds": round(
                    time.monotonic() - size_started, 1),
                    "node_create_seconds": info.get("node_create_seconds", 0.0)})
        finally:
            writer.close()
            if args.keep_logs:
                args.keep_logs.mkdir(parents=True, exist_ok=True)
                for f in workdir.glob("*.log"):
                    shutil.copy(f, args.keep_logs / f.name)
                shutil.copy(plane.apiserver_log, args.keep_logs / "kube-apiserver.log")
    meta["node_create_rate_overall"] = (round(created / create_seconds, 1)
                                        if create_seconds else None)
    meta["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    _write(args.out, rows, meta)
    print(markdown(rows, meta))
    return 0


def plane_memory(plane: ControlPlane) -> dict[str, float]:
    """kube-apiserver's and etcd's RSS now and at their peak (MiB), for the report: what the
    control plane of a row needs, so that the row can be reproduced."""
    out: dict[str, float] = {}
    for name, pid in (("apiserver", plane.apiserver_pid), ("etcd", plane.etcd_pid)):
        if pid:
            status = measure.proc_status(pid)
            out[f"{name}_rss_mib"] = round(status.get("VmRSS", 0) / 1024, 1)
            out[f"{name}_peak_rss_mib"] = round(status.get("VmHWM", 0) / 1024, 1)
    return out


def memory_problem(name: str, n: int, rows: Sequence[dict[str, Any]]) -> str:
    """Why implementation ``name`` must not run at ``n`` Nodes on this machine ("" when it may): its
    peak RSS grows with N (upstream: a decoded copy of every Node), so the largest earlier
    row, scaled to ``n`` with a 25% margin, must fit in what the machine has available now
    with 2 GiB to spare for the control plane's growth."""
    earlier = [r for r in rows if r["impl"] == name and r.get("peak_rss_mib")]
    if not earlier:
        return ""
    last = max(earlier, key=lambda r: int(r["nodes"]))
    need = float(last["peak_rss_mib"]) * n / int(last["nodes"]) * 1.25
    available = measure.mem_available_mib()
    if need + 2048 > available:
        return (f"needs ~{need:,.0f} MiB (its {last['peak_rss_mib']:,.0f} MiB peak at "
                f"{int(last['nodes']):,} Nodes, scaled, +25%) and the machine has "
                f"{available:,.0f} MiB available, 2,048 of them kept for the control plane")
    return ""


def _write(out: Path, rows: list[dict[str, Any]], meta: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    meta["ratios"] = ratios(rows)
    (out / "latest.json").write_text(json.dumps(rows, indent=2) + "\n")
    (out / "latest-meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    (out / "latest.md").write_text(markdown(rows, meta))
    problem = chart(rows, out / "latest.png", meta) if rows else None
    if problem:
        log(problem)


if __name__ == "__main__":
    sys.exit(main())
