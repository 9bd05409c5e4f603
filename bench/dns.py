"""``make dns-bench`` (``python -m bench.dns``, root): DNS served under a spike, on a real
node, by CoreDNS scaled four ways one after another.

The cluster is `make cluster-e2e`'s (tests/cluster: kubelet, containerd, kube-proxy, the
controllers, the HPA controller among them) with the API server's aggregation layer on as
kubeadm configures it, and metrics-server v0.8.0 in it. CoreDNS (the real one,
scripts/build-coredns.sh) runs with a CPU limit of ``dnscluster.CPU`` per Pod, so its
capacity grows with its replicas on a 2-core machine.

1. **Calibration**: one CoreDNS Pod under more load than it can answer; the answers a
   second it gives are its capacity C. The base rate is C/2: one Pod at half its capacity,
   as an HPA targeting 50 % CPU wants it. The load setup's ``targetPerReplica`` is the
   base times ``TARGET_MARGIN``: the load axis rounds up with no tolerance, so a target
   equal to the base would ask for a second replica on every noisy scrape (the HPA's 10 %
   tolerance plays that part for it), while a Pod saturated at its CPU limit (all that a
   served-queries counter can show) must still read above the target to ask for more.
2. **Each profile** (``bench/dnsload.py``: the spike, steady then five times the base for
   minutes then back; the ramp, to the same peak slowly) with each setup: (a) upstream
   v1.10.3 and (b) ours, the manifest with the kube-dns defaults; (c) ours with a ``load``
   key on CoreDNS's requests (the windows at their defaults); (d) an HPA on CPU at 50 %.
   Each starts from one Ready CoreDNS Pod and ends with the setup removed and CoreDNS back
   at one Pod. dnsperf runs a second at a time (``bench/dnsload.py`` says why); the
   Deployment, its Pods and the HPA are read every second.

Writes ``bench/results/dns.json`` after every run (``--out``), then the plot
(``--plot``; ``--replot`` draws it again from the file). Take figures under the host lock
on a quiet machine: the file records the load average around each run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench import dnsload
from bench.dnscluster import (
    CPU,
    MAX_REPLICAS,
    DnsCluster,
    Sampler,
    Setup,
    autoscaler_events,
    log,
    setups,
)
from bench.dnssummary import goal, summarize
from tests.cluster.coredns import CLUSTER_DNS_IP, ZONE

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results" / "dns.json"
PLOT = REPO / "docs" / "dns-spike.png"
CALIBRATION_SECONDS = 15
CALIBRATION_QPS = 10_000
TARGET_MARGIN = 1.2
# What sets each setup's pace, as deployed (recorded with the figures): the manifest's poll
# period; the load key's scrape interval and windows at their defaults; the HPA
# controller's sync period and metrics-server's resolution at theirs.
TIMING = {"poll_period_seconds": 10, "scrape_interval_seconds": 2,
          "stable_window_seconds": 60, "panic_window_seconds": 6,
          "panic_threshold_percent": 200, "hpa_sync_period_seconds": 15,
          "metrics_server_resolution_seconds": 15,
          "hpa_scale_down_stabilization_seconds": 300}


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.dns", description=__doc__.split("\n")[0])
    p.add_argument("--profiles", default="spike",
                   help=f"comma list of {', '.join(dnsload.PROFILES)}")
    p.add_argument("--setups", default="upstream,ours,ours_load,hpa")
    p.add_argument("--base-qps", type=int, default=0,
                   help="the base rate (default: half the calibrated capacity of one Pod)")
    p.add_argument("--upstream-bin", type=Path, required=False)
    p.add_argument("--metrics-server-bin", type=Path, required=False)
    p.add_argument("--metrics-server-dir", type=Path, required=False,
                   help="metrics-server's module directory (its manifests/base)")
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--plot", type=Path, default=PLOT)
    p.add_argument("--replot", action="store_true", help="only draw --plot from --out")
    return p.parse_args(argv)


def calibrate(dc: DnsCluster, queries: Path) -> float:
    """Answers a second one CoreDNS Pod gives under more load than it can answer (the
    median of the calibration's last ten seconds)."""
    driver = dnsload.Driver(CLUSTER_DNS_IP, queries, [CALIBRATION_QPS] * CALIBRATION_SECONDS)
    driver.run(time.monotonic() + 1)
    answered = [s.completed for s in driver.slices[-10:]]
    if not answered:
        raise SystemExit(f"calibration: dnsperf gave nothing: {driver.errors[:3]}")
    return float(statistics.median(answered))


def run_one(dc: DnsCluster, setup: Setup, profile: dnsload.Profile, base: int,
            queries: Path) -> dict[str, Any]:
    load_before = [round(x, 2) for x in os.getloadavg()]
    dc.install(setup)
    sampler = Sampler(dc.admin.get).start()
    driver = dnsload.Driver(CLUSTER_DNS_IP, queries, dnsload.rates(profile, base))
    start = time.monotonic() + 2
    wall0 = time.time() + (start - time.monotonic())
    try:
        driver.run(start)
        time.sleep(max(0.0, start + profile.seconds + 1 - time.monotonic()))
    finally:
        driver.stop()
        sampler.stop()
    result: dict[str, Any] = {"label": setup.label, **summarize(
        driver.slices, sampler.relative(wall0), profile.seconds, profile.jump,
        profile.jump_until)}
    result["pod_startups"] = sampler.startups(wall0)
    if sampler.hpa:
        result["hpa"] = [[round(t - wall0, 1), desired, cpu] for t, desired, cpu in sampler.hpa]
    if setup.image == "AUTOSCALER":
        result["events"] = autoscaler_events(dc.autoscaler_logs(), wall0)
    result["dnsperf_errors"] = driver.errors[:5]
    result["load_average"] = [load_before, [round(x, 2) for x in os.getloadavg()]]
    dc.remove(setup)
    return result


def write(path: Path, doc: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1) + "\n")


def binaries(args: argparse.Namespace) -> tuple[Path, Path, Path]:
    from tests.controlplane import UPSTREAM_HOWTO, upstream_autoscaler_binary

    upstream = args.upstream_bin or upstream_autoscaler_binary()
    if upstream is None:
        raise SystemExit(f"dns-bench: upstream v1.10.3 {UPSTREAM_HOWTO}")
    missing = [str(p) for p in (args.metrics_server_bin, args.metrics_server_dir)
               if p is None or not p.exists()]
    if missing or args.metrics_server_bin is None or args.metrics_server_dir is None:
        raise SystemExit("dns-bench: give --metrics-server-bin and --metrics-server-dir "
                         "(scripts/dns-bench.sh builds and finds them)")
    return upstream, args.metrics_server_bin, args.metrics_server_dir


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.replot:
        from bench.dnsplot import plot
        plot(json.loads(args.out.read_text()), args.plot)
        return 0
    if os.geteuid() != 0:
        raise SystemExit("dns-bench: needs root (the node's bridge, iptables, mounts)")
    profiles = [dnsload.PROFILES[name] for name in args.profiles.split(",")]
    upstream, ms_bin, ms_dir = binaries(args)
    dc = DnsCluster(upstream, ms_bin, ms_dir)
    doc: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": f"{os.cpu_count()} cores",
        "cpu_limit": CPU, "max_replicas": MAX_REPLICAS,
        "dnsperf": {"clients_a_second": dnsload.CLIENTS, "timeout_seconds": dnsload.TIMEOUT},
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()], "profiles": {}}
    try:
        dc.start()
        queries = dnsload.write_queries(dc.work / "queries.txt", ZONE)
        capacity = calibrate(dc, queries)
        base = args.base_qps or round(capacity / 2)
        target = round(base * TARGET_MARGIN)
        doc.update(capacity_qps_per_pod=capacity, base_qps=base, target_per_replica=target)
        log(f"one CoreDNS Pod at {CPU} answers {capacity:.0f} queries a second; base {base}")
        chosen = [s for s in setups(target) if s.key in args.setups.split(",")]
        doc["settings"] = {s.key: {"label": s.label, "configmap": s.configmap}
                           for s in chosen} | {"timing": TIMING}
        for profile in profiles:
            runs: dict[str, Any] = {}
            doc["profiles"][profile.name] = {"phases": [list(p) for p in profile.phases],
                                             "jump": profile.jump, "runs": runs}
            for setup in chosen:
                log(f"{profile.name}: {setup.label} ({profile.seconds} s)")
                runs[setup.key] = run_one(dc, setup, profile, base, queries)
                r = runs[setup.key]
                log(f"  lost {r['lost']} of {r['sent']}, {r['replica_seconds']} "
                    f"replica-seconds, capacity after {r['capacity_seconds']} s")
                doc["profiles"][profile.name]["goal"] = goal(runs)
                write(args.out, doc)
    finally:
        dc.stop()
        doc["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
        doc["cleanup"] = {"leftovers": dc.cluster.leftovers,
                          "timings": {k: round(v, 1) for k, v in dc.cluster.timings.items()}}
        write(args.out, doc)
        log(f"host leftovers: {dc.cluster.leftovers or 'none'}")
    from bench.dnsplot import plot
    plot(doc, args.plot)
    return 0 if not dc.cluster.leftovers else 1


if __name__ == "__main__":
    sys.exit(main())
