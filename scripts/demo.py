"""`make demo`: the DNS-autoscaling story, live, against a real local control plane.

Starts kube-apiserver + etcd on 127.0.0.1 (built once from Go modules), applies the
autoscaler's ServiceAccount and RBAC from manifests/, creates a `coredns` Deployment, and runs
the real autoscaler process with the flags of manifests/kube-dns-autoscaler.yaml (as its
ServiceAccount identity). Then nodes join, the cluster grows, the ConfigMap switches to
ladder and nodes are cordoned; after each step it prints the counts, the replicas the
autoscaler wrote, and `cpa explain`'s reasoning. It ends by itself and cleans up.

If the autoscaler process stops, the demo says so at once with its exit code and the last
lines it wrote (its own reason), not a harness's time-out. `--steps N` walks only the first
N steps (the tests of `make demo`'s environment use 1).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.controlplane import ControlPlane, ensure_binaries, find_binaries  # noqa: E402
from tests.integration.support import (  # noqa: E402
    AutoscalerProcess,
    LoggedProcess,
    cordon,
    create_nodes,
    create_workload,
    put_configmap_data,
    replicas,
    run_cli,
)

MANIFEST = REPO / "manifests" / "kube-dns-autoscaler.yaml"
NS, CM = "kube-system", "kube-dns-autoscaler"
STEPS = 4
TAIL_LINES = 20


class DaemonExited(Exception):
    """The autoscaler process is gone: nothing the demo waits for can happen any more."""

    def __init__(self, proc: LoggedProcess) -> None:
        super().__init__(f"the autoscaler exited with code {proc.proc.returncode}")
        self.proc = proc


def wait_while_running(proc: LoggedProcess, what: str, ready: Callable[[], bool],
                       timeout: float) -> None:
    """Wait for ``ready`` while the daemon runs: its exit ends the wait at once."""
    deadline = time.monotonic() + timeout
    while True:
        if not proc.alive():
            raise DaemonExited(proc)
        if ready():
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.2)


def failure_report(proc: LoggedProcess, problem: str) -> str:
    """What went wrong, for the operator: the process's exit code (or that it still runs)
    and the last lines it wrote, which carry its own reason."""
    code = proc.proc.poll()
    state = (f"the autoscaler (pid {proc.pid}) exited with code {code}" if code is not None
             else f"the autoscaler (pid {proc.pid}) is still running")
    lines = proc.logs().splitlines()[-TAIL_LINES:]
    shown = "\n".join("    " + line for line in lines) or "    (nothing)"
    return (f"\nmake demo failed: {problem}\n{state}; the last lines it wrote "
            f"({proc.log_path.name}):\n{shown}")


def banner(text: str) -> None:
    print(f"\n=== {text}", flush=True)


def manifest_args() -> list[str]:
    """The autoscaler's flags exactly as the manifest's Deployment passes them."""
    docs = [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d]
    deploy = next(d for d in docs if d["kind"] == "Deployment")
    command: list[str] = deploy["spec"]["template"]["spec"]["containers"][0]["command"]
    return command[1:]


def show(plane: ControlPlane, proc: AutoscalerProcess, expected: int) -> None:
    admin = plane.admin()
    wait_while_running(proc, f"deployment/coredns at {expected} replicas",
                       lambda: replicas(admin, NS, "deployment", "coredns") == expected, 60)
    # Its events are held until the first poll is done (cpa.logs.hold): wait for them, so
    # the log shown at the end has every write.
    wait_while_running(proc, "the daemon's start-up events in its log",
                       lambda: bool(proc.events("starting")), 10)
    out = run_cli(["explain", "--from-cluster", f"--namespace={NS}", f"--configmap={CM}",
                   f"--kubeconfig={plane.autoscaler_kubeconfig}"])
    print("\n".join("    " + line for line in out.stdout.splitlines()))
    print(f"  -> the autoscaler wrote spec.replicas = "
          f"{replicas(admin, NS, 'deployment', 'coredns')} to deployment/coredns", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=STEPS, choices=range(1, STEPS + 1),
                        help=f"walk only the first N of the {STEPS} steps")
    steps = parser.parse_args(argv).steps
    cached = find_binaries()
    banner("control plane: kube-apiserver + etcd from Go modules"
           + (f" (cached in {cached})" if cached else " (first build: 10-20 min)"))
    bin_dir = cached or ensure_binaries()
    with tempfile.TemporaryDirectory(prefix="cpa-demo-") as tmp, \
            ControlPlane(bin_dir=bin_dir) as plane:
        admin = plane.admin()
        print(f"  API server {plane.server} (pid {plane.apiserver_pid}), "
              f"etcd pid {plane.etcd_pid}")
        for doc in yaml.safe_load_all(MANIFEST.read_text()):
            if doc and doc["kind"] != "Deployment":
                admin.apply(doc)
                print(f"  applied {doc['kind']} {doc['metadata']['name']}")
        create_workload(admin, NS, "deployment", "coredns", replicas=1)
        print("  created deployment/coredns with 1 replica (stands in for CoreDNS)")

        args = manifest_args()
        banner("autoscaler: " + " ".join(args))
        print("  (plus --kubeconfig for the ServiceAccount identity, --poll-period-seconds=1 "
              "to keep the demo short)")
        proc = AutoscalerProcess(plane.autoscaler_kubeconfig, args,
                                 Path(tmp) / "autoscaler.log", poll_period=1)
        failure = ""
        try:
            walk(plane, proc, steps)
        except (DaemonExited, TimeoutError) as exc:
            failure = failure_report(proc, str(exc))
        finally:
            began, running = time.monotonic(), proc.alive()
            proc.stop()
            how = (f"stopped (SIGTERM, exit {proc.proc.returncode}, "
                   f"{time.monotonic() - began:.2f}s)" if running
                   else f"had exited by itself (exit {proc.proc.returncode})")
            print(f"\n  autoscaler {how}; stopping the control plane")
    banner("done: everything started was stopped and removed")
    if failure:  # last, where the operator looks
        print(failure, file=sys.stderr, flush=True)
        return 1
    return 0


def walk(plane: ControlPlane, proc: AutoscalerProcess, steps: int) -> None:
    """The story's first ``steps`` steps, then what the autoscaler logged."""
    admin = plane.admin()
    banner("step 1: 16 Nodes of 8 cores join")
    create_nodes(admin, "node", 16, cpu="8")
    show(plane, proc, 2)
    cm = admin.get(f"/api/v1/namespaces/{NS}/configmaps/{CM}")
    print(f"  ConfigMap created from --default-params: {cm['data']}")
    if steps >= 2:
        banner("step 2: the cluster grows to 48 Nodes of 32 allocatable cores")
        for i in range(16):
            admin.patch(f"/api/v1/nodes/node-{i:04d}/status",
                        {"status": {"allocatable": {"cpu": "32"}, "capacity": {"cpu": "32"}}})
        create_nodes(admin, "node", 32, cpu="32", start=16)
        show(plane, proc, 6)
    if steps >= 3:
        banner("step 3: the ConfigMap's key becomes ladder (no restart)")
        ladder = {"coresToReplicas": [[1, 1], [64, 3], [512, 5], [2048, 10]],
                  "nodesToReplicas": [[1, 1], [2, 2]]}
        put_configmap_data(admin, NS, CM, {"ladder": json.dumps(ladder)})
        show(plane, proc, 5)
    if steps >= 4:
        banner("step 4: 40 Nodes are cordoned (ladder counts schedulable Nodes only)")
        for i in range(40):
            cordon(admin, f"node-{i:04d}")
        show(plane, proc, 3)

    banner("what the autoscaler logged (scale.changed events)")
    for event in proc.events("scale.changed"):
        print(f"  {event['old']} -> {event['new']} ({event['mode']}, "
              f"{event['nodes']} nodes, {event['cores']} cores)")
    status, _ = proc.last_poll()
    print(f"  /last-poll: {status}")


if __name__ == "__main__":
    sys.exit(main())
