"""``python -m bench.run [--quick]``: ours (and upstream, when a binary exists) at N nodes.

One real control plane per run (kube-apiserver + etcd on 127.0.0.1). For each N (ascending)
the harness creates only the nodes still missing, computes the expected replicas itself,
then for each implementation: starts the process (as the kube-dns-autoscaler ServiceAccount
identity), measures the time to the first correct scale write, RSS (VmHWM; median VmRSS
over a steady window), CPU per poll and API requests per poll over that window, and the
reaction time to a batch of node changes (5% added + 5% cordoned, then reverted). Every
process started is stopped by its PID.

Results: ``bench/results/latest.json`` (rows), ``latest.md`` (table), ``latest.png`` (chart).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench import measure, nodes  # noqa: E402
from cpa.formulas import ClusterCounts  # noqa: E402
from cpa.modes import decide, parse_configmap_data  # noqa: E402
from cpa.params import default_params_to_data  # noqa: E402
from tests.controlplane import (  # noqa: E402
    UPSTREAM_CPA_VERSION,
    AdminClient,
    ControlPlane,
    ensure_binaries,
    upstream_autoscaler_binary,
)
from tests.integration.support import free_port, log_events  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
MANIFEST = REPO / "manifests" / "kube-dns-autoscaler.yaml"
NS, CM, TARGET = "kube-system", "kube-dns-autoscaler", "coredns"
KUBE_DNS_DEFAULTS = ('{"linear":{"coresPerReplica":256,"nodesPerReplica":16,'
                     '"preventSinglePointFailure":true,"includeUnschedulableNodes":true}}')
FULL_SIZES = (1_000, 15_000, 65_000)
QUICK_SIZES = (1_000, 5_000)
RSS_BUDGET_MIB = 64.0
UPSTREAM_REFUSED = ("not available (the Go module proxy refuses "
                    "github.com/kubernetes-sigs/cluster-proportional-autoscaler)")
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
UPSTREAM_HEALTH_PORT = 8080


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --- the cluster as the harness knows it ---------------------------------------------
@dataclass
class Cluster:
    """The nodes the harness created, and what each should count as."""

    base: int = 0                      # nodes 0..base-1 of nodes.NAME_PREFIX exist
    states: dict[str, nodes.NodeState] = field(default_factory=dict)

    def counts(self) -> ClusterCounts:
        return nodes.counts(self.states.values())


def expected_replicas(counts: ClusterCounts) -> int:
    params = parse_configmap_data(default_params_to_data(KUBE_DNS_DEFAULTS))
    return decide(params, counts).replicas


def _bump_to_boundary(n: int, want: int, per_replica: int = 16) -> int:
    """The batch size nearest ``want`` whose last node crosses a nodesPerReplica boundary,
    so the new replica count is reached only when the whole batch has landed."""
    fits = [m for m in range(max(1, want - per_replica), want + per_replica + 1)
            if (n + m) % per_replica == 1]
    return min(fits, key=lambda m: abs(m - want)) if fits else want


# --- implementations -----------------------------------------------------------------
@dataclass
class Impl:
    name: str                     # "ours" | "upstream"
    start: Callable[[Path], measure.Process]
    polls: Callable[[measure.Process], int]


def _replicas(admin: AdminClient) -> int:
    return int(admin.get(f"/apis/apps/v1/namespaces/{NS}/deployments/{TARGET}")["spec"]
               .get("replicas", 0))


def _set_replicas(admin: AdminClient, value: int) -> None:
    admin.put(f"/apis/apps/v1/namespaces/{NS}/deployments/{TARGET}/scale",
              {"apiVersion": "autoscaling/v1", "kind": "Scale",
               "metadata": {"name": TARGET, "namespace": NS}, "spec": {"replicas": value}})


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
        return True


def ours(plane: ControlPlane, period: int) -> Impl:
    def start(log_path: Path) -> measure.Process:
        argv = [*measure.our_command(), f"--kubeconfig={plane.autoscaler_kubeconfig}",
                f"--health-port={free_port()}", f"--namespace={NS}", f"--configmap={CM}",
                f"--target=Deployment/{TARGET}", f"--default-params={KUBE_DNS_DEFAULTS}",
                f"--poll-period-seconds={period}", "--logtostderr=true", "--v=4",
                "--log-format=json"]
        env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "MY_POD_NAMESPACE")}
        return measure.Process(argv, log_path, env)

    def polls(proc: measure.Process) -> int:
        return proc.logs().count('"event": "poll.counts"')

    return Impl("ours", start, polls)


def upstream_problem() -> tuple[Path | None, str]:
    """The upstream binary and "" when it can run here, else None and the reason."""
    binary = upstream_autoscaler_binary()
    if binary is None:
        return None, UPSTREAM_REFUSED
    if shutil.which("unshare") is None or os.geteuid() != 0:
        return None, (f"binary {binary} found but not runnable here: it reads its token from "
                      f"{SA_DIR}, which needs root and `unshare -m` for a private mount")
    if not _port_free(UPSTREAM_HEALTH_PORT):
        return None, (f"binary {binary} found but port {UPSTREAM_HEALTH_PORT} (its fixed "
                      "health port) is in use")
    return binary, ""


# Runs in a private mount namespace: a tmpfs over the ServiceAccount dir (or over /var/run
# when that dir does not exist, so nothing is created on the real filesystem), the token and
# CA copied in, then exec the binary (same PID as the Popen: unshare and sh both exec).
_UPSTREAM_SH = r"""
set -e
sa="$1"; token="$2"; ca="$3"; shift 3
if [ -d "$sa" ]; then
  mount -t tmpfs -o size=1m,mode=0755 bench-sa "$sa"
else
  base=$(readlink -f /var/run)
  mount -t tmpfs -o size=1m,mode=0755 bench-run "$base"
  mkdir -p "$sa"
fi
cp "$token" "$sa/token"
cp "$ca" "$sa/ca.crt"
exec "$@"
"""


def upstream(plane: ControlPlane, binary: Path, period: int, workdir: Path) -> Impl:
    token = workdir / "upstream-token"
    token.write_text(plane.autoscaler_token)
    token.chmod(0o600)
    port = plane.server.rsplit(":", 1)[1]

    def start(log_path: Path) -> measure.Process:
        argv = ["unshare", "-m", "--propagation", "private", "sh", "-c", _UPSTREAM_SH, "sh",
                SA_DIR, str(token), str(plane.ca_file), str(binary),
                f"--namespace={NS}", f"--configmap={CM}", f"--target=Deployment/{TARGET}",
                f"--default-params={KUBE_DNS_DEFAULTS}", f"--poll-period-seconds={period}",
                "--logtostderr=true", "--v=2"]
        env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "MY_POD_NAMESPACE")}
        env.update(KUBERNETES_SERVICE_HOST="127.0.0.1", KUBERNETES_SERVICE_PORT=port)
        return measure.Process(argv, log_path, env)

    def polls(_proc: measure.Process) -> int:
        # One ConfigMap GET per poll: upstream logs nothing per poll at --v=2.
        totals = measure.request_totals(plane.metrics())
        return int(totals.get(("GET", "configmaps", ""), 0))

    return Impl("upstream", start, polls)


# --- one measurement -----------------------------------------------------------------
def _wait_next_poll(impl: Impl, proc: measure.Process, after: int, timeout: float) -> int:
    got = after
    def more() -> bool:
        nonlocal got
        got = impl.polls(proc)
        return got > after
    measure.wait_for("the next poll", more, timeout, 0.05, proc.alive)
    return got


def measure_impl(impl: Impl, plane: ControlPlane, writer: nodes.NodeWriter, cluster: Cluster,
                 args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    admin = plane.admin()
    n = cluster.base
    expected = expected_replicas(cluster.counts())
    _set_replicas(admin, 1)
    log(f"{impl.name} @ {n} nodes: expecting {expected} replicas; starting the process")
    watches_before = measure.open_node_watches(plane.metrics())  # the apiserver's own
    plane_pids = {"apiserver": plane.apiserver_pid, "etcd": plane.etcd_pid}
    plane_cpu0 = {k: measure.cpu_seconds(p) for k, p in plane_pids.items() if p}
    proc = impl.start(workdir / f"{impl.name}-{n}.log")
    sampler = measure.RssSampler(proc.pid, 0.2)
    row: dict[str, Any] = {"impl": impl.name, "nodes": n, "expected_replicas": expected,
                           "poll_period_seconds": args.poll_period}
    try:
        # 1. time to the first correct scale write
        t_ok = measure.wait_for(f"{expected} replicas", lambda: _replicas(admin) == expected,
                                args.sync_timeout, 0.1, proc.alive)
        row["sync_seconds"] = round(t_ok - proc.started, 3)
        # Who the sync waited for: CPU seconds spent from the process start to that write.
        row["sync_cpu_seconds"] = {"autoscaler": round(measure.cpu_seconds(proc.pid), 2), **{
            k: round(measure.cpu_seconds(p) - plane_cpu0[k], 2)
            for k, p in plane_pids.items() if p}}
        synced = log_events(proc.logs(), "nodes.synced") if impl.name == "ours" else []
        if synced:
            row["sync_method"] = synced[0].get("method")
            row["cache_sync_seconds"] = synced[0].get("seconds")
        elif impl.name == "upstream":
            row["sync_method"] = "informer list+watch"
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
        row["steady_window_seconds"] = round(t1 - t0, 2)
        row["steady_polls"] = polls
        # schedstat (ns) is the figure; utime+stime (10 ms ticks) is kept as a cross-check.
        row["poll_cpu_ms"] = round((ns1 - ns0) / 1e6 / polls, 3)
        row["poll_cpu_ms_ticks"] = round((c1 - c0) * 1000 / polls, 2)
        row["steady_rss_mib"] = round(sampler.median_mib(t0, t1) or 0.0, 1)
        row["requests_per_poll"] = round(sum(cats.values()) / polls, 2)
        row["requests_breakdown_per_poll"] = {k: round(v / polls, 2) for k, v in cats.items()}
        # Node watches the autoscaler holds open (the apiserver's own, counted before the
        # process started, subtracted): 1 for a list+watch cache.
        row["node_watches_open"] = watches0 - watches_before
        log(f"  steady: {polls} polls in {row['steady_window_seconds']}s, "
            f"{row['poll_cpu_ms']} CPU ms/poll, {row['requests_per_poll']} requests/poll "
            f"{row['requests_breakdown_per_poll']}, RSS {row['steady_rss_mib']} MiB")

        # 3. reaction to a batch: +5% nodes and 5% cordoned, then both reverted
        reaction = _reaction(impl, proc, admin, writer, cluster, args)
        row.update(reaction)
        row["reaction_seconds"] = max(reaction["reaction_up_seconds"],
                                      reaction["reaction_down_seconds"])

        status = measure.proc_status(proc.pid)
        row["peak_rss_mib"] = round(status["VmHWM"] / 1024, 1)
        row["final_rss_mib"] = round(status["VmRSS"] / 1024, 1)
        row["peak_rss_within_64mib"] = row["peak_rss_mib"] <= RSS_BUDGET_MIB
        row["cpu_seconds_total"] = round(measure.cpu_seconds(proc.pid), 2)
        log(f"  peak RSS {row['peak_rss_mib']} MiB, reaction up "
            f"{reaction['reaction_up_seconds']}s / down {reaction['reaction_down_seconds']}s")
    finally:
        sampler.stop()
        code = proc.stop()
        row["exit_code"] = code
    failed = log_events(proc.log_path.read_text(errors="replace"), "poll.failed")
    row["poll_failures"] = len(failed)
    return row


def _reaction(impl: Impl, proc: measure.Process, admin: AdminClient,
              writer: nodes.NodeWriter, cluster: Cluster, args: argparse.Namespace
              ) -> dict[str, Any]:
    n = cluster.base
    want = max(1, n * 5 // 100)
    m_add = _bump_to_boundary(n, want)
    cordon = [nodes.node_name(i) for i in range(n) if not nodes.is_cordoned(i)][::20][:want]
    extras = [(i, nodes.node_name(i, nodes.EXTRA_PREFIX)) for i in range(m_add)]
    out: dict[str, Any] = {"reaction_batch_added": m_add, "reaction_batch_cordoned": len(cordon)}

    # up: cordon first, then add (the count, hence the replicas, moves only with the adds)
    t_start = time.monotonic()
    writer.cordon(cordon, True, progress=False)
    writer.create([i for i, _ in extras], nodes.EXTRA_PREFIX, progress=False)
    t_end = time.monotonic()
    for name in cordon:
        cluster.states[name] = nodes.NodeState(cluster.states[name].millicores, True,
                                               cluster.states[name].ready)
    for i, name in extras:
        cluster.states[name] = nodes.node_state(i, cordoned=nodes.is_cordoned(i))
    up = expected_replicas(cluster.counts())
    t_ok = measure.wait_for(f"{up} replicas after the batch",
                            lambda: _replicas(admin) == up, args.sync_timeout, 0.1, proc.alive)
    out.update(reaction_up_expected=up, reaction_up_batch_seconds=round(t_end - t_start, 2),
               reaction_up_seconds=round(max(0.0, t_ok - t_end), 2))

    # down: revert both
    t_start = time.monotonic()
    writer.cordon(cordon, False, progress=False)
    writer.delete([name for _, name in extras], progress=False)
    t_end = time.monotonic()
    for name in cordon:
        cluster.states[name] = nodes.NodeState(cluster.states[name].millicores, False,
                                               cluster.states[name].ready)
    for _, name in extras:
        del cluster.states[name]
    down = expected_replicas(cluster.counts())
    t_ok = measure.wait_for(f"{down} replicas after the revert",
                            lambda: _replicas(admin) == down, args.sync_timeout, 0.1, proc.alive)
    out.update(reaction_down_expected=down, reaction_down_batch_seconds=round(t_end - t_start, 2),
               reaction_down_seconds=round(max(0.0, t_ok - t_end), 2))
    return out


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
            ("reaction_seconds", "reaction s", "{:.2f}"),
            ("expected_replicas", "replicas", "{:,}"))


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
             f"- upstream {UPSTREAM_CPA_VERSION}: {meta['upstream']}", ""]
    head = "| " + " | ".join(c[1] for c in _COLUMNS) + " |"
    lines += [head, "|" + "---|" * len(_COLUMNS)]
    for row in rows:
        cells = []
        for key, _, fmt in _COLUMNS:
            value = row.get(key)
            cells.append("-" if value is None else fmt.format(value))
        lines.append("| " + " | ".join(cells) + " |")
    ratios = meta.get("ratios") or []
    if ratios:
        lines += ["", "Ratios ours / upstream:", "",
                  "| nodes | peak RSS | steady RSS | sync | CPU/poll | requests/poll |",
                  "|---|---|---|---|---|---|"]
        for r in ratios:
            lines.append(f"| {r['nodes']:,} | {r['peak_rss_mib']} | {r['steady_rss_mib']} | "
                         f"{r['sync_seconds']} | {r['poll_cpu_ms']} | {r['requests_per_poll']} |")
    lines += ["", "Definitions: *peak RSS* VmHWM at the end of the run; *steady RSS* median "
              "VmRSS (sampled every 0.2 s) over the steady window; *sync* process start to the "
              "first correct scale write (Deployment polled every 0.1 s); *CPU ms/poll* "
              "on-CPU time of the process's threads (/proc/PID/task/*/schedstat, ns) over the "
              "window / polls in it; *requests/poll* "
              "`apiserver_request_total` deltas (GET/POST configmaps, GET/PUT scale, any "
              "nodes request) / polls (ours: polls counted from its `poll.counts` log events; "
              "upstream: from ConfigMap GETs, one per poll, as it logs nothing per poll); "
              "*reaction* last write of a batch (+5% nodes and 5% "
              "cordoned, or its revert; the worse of the two) to the correct replicas.", ""]
    return "\n".join(lines)


def chart(rows: Sequence[dict[str, Any]], path: Path, meta: dict[str, Any]) -> str | None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (pip install '.[bench]'); no chart"
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6))
    styles = {"ours": ("tab:blue", "o"), "upstream": ("tab:orange", "s")}
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
        axes[1].plot(xs, [r["sync_seconds"] for r in rs], color=color, marker=marker,
                     label=impl)
        axes[2].plot(xs, [r["poll_cpu_ms"] for r in rs], color=color, marker=marker,
                     label=impl)
        for x, r in zip(xs, rs, strict=True):
            axes[0].annotate(f"{r['peak_rss_mib']:.0f}", (x, r["peak_rss_mib"]),
                             textcoords="offset points", xytext=(0, 6), ha="center", fontsize=8)
            axes[1].annotate(f"{r['sync_seconds']:.1f}s", (x, r["sync_seconds"]),
                             textcoords="offset points", xytext=(0, 6), ha="center", fontsize=8)
            axes[2].annotate(f"{r['poll_cpu_ms']:.2f}", (x, r["poll_cpu_ms"]),
                             textcoords="offset points", xytext=(0, 6), ha="center", fontsize=8)
    axes[0].axhline(RSS_BUDGET_MIB, color="tab:red", linestyle=":", label="64 MiB budget")
    titles = ("RSS (MiB)", "start to first correct scale write (s)", "CPU per poll (ms)")
    sizes = sorted({r["nodes"] for r in rows})
    for ax, title in zip(axes, titles, strict=True):
        ax.set_xscale("log")
        ax.set_xlabel("nodes (log scale)")
        ax.set_xticks(sizes, [f"{n / 1000:g}k" for n in sizes])
        ax.minorticks_off()
        ax.set_xlim(sizes[0] / 1.6, sizes[-1] * 1.6)
        ax.set_title(title)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
    axes[0].legend(fontsize=8, loc="lower right")
    axes[0].set_ylim(0, max([RSS_BUDGET_MIB * 1.25] + [r["peak_rss_mib"] * 1.2 for r in rows]))
    axes[1].set_ylim(0, max(r["sync_seconds"] for r in rows) * 1.25)
    axes[2].set_ylim(0, max(r["poll_cpu_ms"] for r in rows) * 1.6)
    upstream_note = "" if any(r["impl"] == "upstream" for r in rows) else \
        f"  (upstream {UPSTREAM_CPA_VERSION}: {meta['upstream']})"
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
        if impl != "ours" or u is None:
            continue
        ratio: dict[str, Any] = {"nodes": n}
        for key in ("peak_rss_mib", "steady_rss_mib", "sync_seconds", "poll_cpu_ms",
                    "requests_per_poll"):
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
    ap.add_argument("--impl", choices=("all", "ours", "upstream"), default="all")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--replot", action="store_true",
                    help="only rebuild latest.md/.png from latest.json (no control plane)")
    ap.add_argument("--keep-logs", type=Path, default=None,
                    help="copy the process logs here (default: discarded with the temp dir)")
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    if args.replot:
        rows = json.loads((args.out / "latest.json").read_text())
        meta = json.loads((args.out / "latest-meta.json").read_text())
        _write(args.out, rows, meta)
        print(markdown(rows, meta))
        return 0
    sizes = tuple(int(s) for s in args.sizes.split(",")) if args.sizes else (
        QUICK_SIZES if args.quick else FULL_SIZES)
    sizes = tuple(sorted(sizes))
    if args.window_polls is None:
        args.window_polls = 8 if args.quick else 12
    mode = "quick" if args.quick else ("custom" if args.sizes else "full")
    binary, problem = upstream_problem()
    upstream_note = f"available ({binary})" if binary else problem
    log(f"upstream {UPSTREAM_CPA_VERSION}: {upstream_note}")
    if binary is None and args.impl != "ours":
        print(f"upstream: {problem}", flush=True)

    meta: dict[str, Any] = {
        "mode": mode, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": f"{os.cpu_count()} cores, "
                   f"{os.sysconf('SC_PHYS_PAGES') * os.sysconf('SC_PAGE_SIZE') / 2**30:.0f} GiB",
        "sizes": list(sizes), "poll_period": args.poll_period,
        "window_polls": args.window_polls, "writer_threads": args.threads,
        "upstream": upstream_note, "python": sys.version.split()[0],
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
            impls.append(ours(plane, args.poll_period))
        if binary is not None and args.impl in ("all", "upstream"):
            impls.append(upstream(plane, binary, args.poll_period, workdir))
        try:
            for n in sizes:
                info = grow(plane, writer, cluster, n)
                created += info["nodes_created"]
                create_seconds += info.get("node_create_seconds", 0.0)
                for key in ("node_json_bytes", "node_post_bytes"):
                    if key in info:
                        meta[key] = info[key]
                for impl in impls:
                    row = measure_impl(impl, plane, writer, cluster, args, workdir)
                    row.update({k: v for k, v in info.items()
                                if k not in ("node_json_bytes", "node_post_bytes")})
                    rows.append(row)
                    _write(args.out, rows, meta)  # partial results survive a later failure
        finally:
            writer.close()
            if args.keep_logs:
                args.keep_logs.mkdir(parents=True, exist_ok=True)
                for f in workdir.glob("*.log"):
                    shutil.copy(f, args.keep_logs / f.name)
                shutil.copy(plane.apiserver_log, args.keep_logs / "kube-apiserver.log")
    meta["node_create_rate_overall"] = (round(created / create_seconds, 1)
                                        if create_seconds else None)
    _write(args.out, rows, meta)
    print(markdown(rows, meta))
    return 0


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
