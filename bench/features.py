"""What each opt-in feature costs in memory and CPU at N GKE-sized nodes (default 15,000).

    python -m bench.features [--nodes 15000] [--polls 20]

One control plane and one set of Nodes; then our daemon runs once per variant, each for the
same number of polls (1 s period), and its steady RSS (median VmRSS over the polls), peak
RSS (VmHWM) and CPU per poll are compared with the baseline's:

* ``without metrics``: the daemon with ``cpa.horizontal.daemon.cpa_metrics`` replaced by a no-op
before start (so
  ``prometheus_client`` is never imported): what ``/metrics`` itself costs;
* ``baseline``: default flags and the kube-dns ConfigMap (upstream's behaviour, /metrics on);
* ``--events``, ``--leader-elect``, a ConfigMap with a ``behavior``, and one with the
  counting keys, each on its own.

Every variant authenticates as the admin (the opt-in features need RBAC the addon's
identity lacks); the figures are printed and written to bench/results/features.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench import measure, nodes  # noqa: E402
from bench.run import CM, KUBE_DNS_DEFAULTS, NS, TARGET, Cluster, grow, setup  # noqa: E402
from cpa.horizontal.decide.defaults import default_params_to_data  # noqa: E402
from tests.controlplane import ControlPlane, ensure_binaries  # noqa: E402
from tests.integration.support import free_port  # noqa: E402

OUT = REPO / "bench" / "results" / "features.json"

_NO_METRICS = r"""
import sys, types
stub = types.ModuleType("cpa.horizontal.daemon.cpa_metrics")
class Metrics:
    def __init__(self, *a, **k): pass
    def observe(self, result): pass
    def set_leader(self, leading): pass
    def exposition(self): return b""
stub.Metrics = Metrics
sys.modules["cpa.horizontal.daemon.cpa_metrics"] = stub
from cpa.cli import run_daemon
sys.exit(run_daemon(sys.argv[1:]))
"""

BEHAVIOR = {"scaleDown": {"stabilizationWindowSeconds": 600,
                          "policies": [{"type": "Percent", "value": 33, "periodSeconds": 180}]},
            "scaleUp": {"policies": [{"type": "Pods", "value": 10, "periodSeconds": 60}]}}
COUNTING = {"excludeNodesWithTaints": ["virtual-kubelet.io/provider"], "maxCoresPerNode": 64,
            "maxReplicasPerNode": 1}


def _params(extra: dict[str, Any]) -> dict[str, str]:
    defaults = json.loads(KUBE_DNS_DEFAULTS)
    defaults["linear"].update(extra)
    return default_params_to_data(json.dumps(defaults))


VARIANTS: list[tuple[str, list[str], dict[str, Any], bool]] = [
    # name, extra flags, extra ConfigMap keys, metrics stubbed out
    ("without metrics", [], {}, True),
    ("baseline", [], {}, False),
    ("--events", ["--events"], {}, False),
    ("--leader-elect", ["--leader-elect"], {}, False),
    ("behavior", [], {"behavior": BEHAVIOR}, False),
    ("counting keys", [], COUNTING, False),
]


def run_variant(plane: ControlPlane, name: str, flags: list[str], keys: dict[str, Any],
                stub: bool, polls: int, workdir: Path) -> dict[str, Any]:
    admin = plane.admin()
    cm = admin.get(f"/api/v1/namespaces/{NS}/configmaps/{CM}")
    cm["data"] = _params(keys)
    admin.put(f"/api/v1/namespaces/{NS}/configmaps/{CM}", cm)
    command = [sys.executable, "-c", _NO_METRICS] if stub else measure.our_command()
    argv = [*command, f"--kubeconfig={plane.admin_kubeconfig}", f"--health-port={free_port()}",
            f"--namespace={NS}", f"--configmap={CM}", f"--target=Deployment/{TARGET}",
            "--poll-period-seconds=1", "--v=4", "--log-format=json", *flags]
    log_path = workdir / f"features-{name.strip('-').replace(' ', '-')}.log"
    proc = measure.Process(argv, log_path, None)
    try:
        measure.wait_for("the first poll", lambda: '"poll.counts"' in proc.logs(), 120)
        start_polls = proc.logs().count('"poll.counts"')
        cpu0 = measure.cpu_ns(proc.pid)
        samples = []
        while proc.logs().count('"poll.counts"') < start_polls + polls:
            samples.append(measure.rss_kib(proc.pid))
            time.sleep(0.2)
        cpu1 = measure.cpu_ns(proc.pid)
        status = measure.proc_status(proc.pid)
    finally:
        proc.stop()
    return {"variant": name, "steady_rss_mib": round(statistics.median(samples) / 1024, 2),
            "peak_rss_mib": round(status["VmHWM"] / 1024, 2),
            "cpu_ms_per_poll": round((cpu1 - cpu0) / 1e6 / polls, 2)}


def main() -> int:
    p = argparse.ArgumentParser(prog="python -m bench.features")
    p.add_argument("--nodes", type=int, default=15_000)
    p.add_argument("--polls", type=int, default=20)
    args = p.parse_args()
    plane = ControlPlane(bin_dir=ensure_binaries())
    rows: list[dict[str, Any]] = []
    try:
        plane.start()
        setup(plane)
        writer = nodes.NodeWriter(plane.server, plane.ca_file, plane.admin_token)
        grow(plane, writer, Cluster(), args.nodes)
        writer.close()
        for name, flags, keys, stub in VARIANTS:
            row = run_variant(plane, name, flags, keys, stub, args.polls, plane.workdir)
            rows.append(row)
            print(f"{name:16} steady {row['steady_rss_mib']:6.2f} MiB  peak "
                  f"{row['peak_rss_mib']:6.2f} MiB  {row['cpu_ms_per_poll']:6.2f} ms/poll",
                  flush=True)
    finally:
        plane.stop()
    base = next(r for r in rows if r["variant"] == "baseline")
    for row in rows:
        row["steady_delta_mib"] = round(row["steady_rss_mib"] - base["steady_rss_mib"], 2)
    OUT.write_text(json.dumps({"nodes": args.nodes, "polls": args.polls, "rows": rows},
                              indent=2) + "\n")
    print(f"written {OUT.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
