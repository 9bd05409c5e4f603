"""`make demo`: the DNS-autoscaling story, live, against a real local control plane.

Starts kube-apiserver + etcd on 127.0.0.1 (built once from Go modules), applies the
autoscaler's ServiceAccount and RBAC from manifests/, creates a `coredns` Deployment, and runs
the real autoscaler process with the flags of manifests/kube-dns-autoscaler.yaml (as its
ServiceAccount identity). Then nodes join, the cluster grows, the ConfigMap switches to
ladder and nodes are cordoned; after each step it prints the ConfigMap's data when it was
written, every write the autoscaler made during the step, why the replicas are what they
are, and `cpa explain`'s reasoning. It ends by itself and cleans up.

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


def show(plane: ControlPlane, proc: AutoscalerProcess, expected: int, writes_before: int,
         why: str) -> int:
    """After a step: the replicas the autoscaler wrote, every write it made during the step
    (Nodes change one API call at a time and it polls every second, so a step may pass
    through intermediate counts), why, and `cpa explain`'s reasoning. Returns the writes
    logged so far."""
    admin = plane.admin()
    wait_while_running(proc, f"deployment/coredns at {expected} replicas",
                       lambda: replicas(admin, NS, "deployment", "coredns") == expected, 60)
    # Its events are held until the first poll is done (cpa.logs.hold), and a write's event
    # follows the write: wait for it, so the writes shown are all there.
    wait_while_running(proc, f"the write of {expected} replicas in the log", lambda: any(
        e["new"] == expected for e in proc.events("scale.changed")[writes_before:]), 10)
    writes = proc.events("scale.changed")
    for event in writes[writes_before:]:
        print(f"  scale.changed {event['old']} -> {event['new']} ({event['mode']}, "
              f"{event['nodes']} nodes, {event['cores']} cores counted)")
    print(f"  why: {why}")
    out = run_cli(["explain", "--from-cluster", f"--namespace={NS}", f"--configmap={CM}",
                   f"--kubeconfig={plane.autoscaler_kubeconfig}"])
    print("\n".join("    " + line for line in out.stdout.splitlines()))
    print(f"  -> the autoscaler wrote spec.replicas = "
          f"{replicas(admin, NS, 'deployment', 'coredns')} to deployment/coredns", flush=True)
    return len(writes)


def show_data(plane: ControlPlane, how: str) -> None:
    """The ConfigMap's data as it is now, and who wrote it."""
    cm = plane.admin().get(f"/api/v1/namespaces/{NS}/configmaps/{CM}")
    print(f"  ConfigMap {NS}/{CM} ({how}):")
    for key, value in cm["data"].items():
        print(f"    {key}: {value}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=STEPS, choices=range(1, STEPS + 1),
                        help=f"walk only the first N of the {STEPS} steps")
    steps = parser.parse_args(argv).steps
    cached = find_binaries()
    banner("control plane: kube-apiserver + etcd from Go modules"
           + (f" (cached in {cached})" if cached else
              " (built once; the README's 'The two commands' says how long)"))
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


LADDER = {"coresToReplicas": [[1, 1], [64, 3], [512, 5], [2048, 10]],
          "nodesToReplicas": [[1, 1], [2, 2]]}
CORDONED = 33
"""Cordoned in step 4: 48 - 33 = 15 schedulable Nodes of 32 cores, 480 cores, below the
ladder's 512-core step; after 32 cordons 512 cores still give 5. So only the last cordon
changes the count, and the one write lands when the cordoning is complete."""


def walk(plane: ControlPlane, proc: AutoscalerProcess, steps: int) -> None:
    """The story's first ``steps`` steps, then what the autoscaler logged."""
    admin = plane.admin()
    banner("step 1: 16 Nodes of 8 cores join")
    create_nodes(admin, "node", 16, cpu="8")
    print("  (Nodes join one API call at a time and the autoscaler polls every second, so "
          "a write may count part of a step's Nodes; each step lists its writes)")
    wait_while_running(proc, "the ConfigMap the autoscaler creates", lambda: bool(
        proc.events("configmap.created")), 60)
    show_data(plane, "created by the autoscaler from its --default-params")
    logged = show(plane, proc, 2, 0, (
        "linear: 128 cores / 256 per replica and 16 nodes / 16 per replica give 1 each; "
        "preventSinglePointFailure raises a cluster of more than one node to 2"))
    if steps >= 2:
        banner("step 2: the cluster grows to 48 Nodes of 32 allocatable cores")
        for i in range(16):
            admin.patch(f"/api/v1/nodes/node-{i:04d}/status",
                        {"status": {"allocatable": {"cpu": "32"}, "capacity": {"cpu": "32"}}})
        create_nodes(admin, "node", 32, cpu="32", start=16)
        print("  (the ConfigMap is unchanged)")
        logged = show(plane, proc, 6, logged, (
            "linear: 1536 cores / 256 = 6 against 48 nodes / 16 = 3; the larger wins"))
    if steps >= 3:
        banner("step 3: the demo writes the ConfigMap's data as ladder (no restart)")
        put_configmap_data(admin, NS, CM, {"ladder": json.dumps(LADDER)})
        show_data(plane, "written by the demo; no includeUnschedulableNodes, so from now on "
                         "only schedulable Nodes count")
        logged = show(plane, proc, 5, logged, (
            "ladder: 1536 cores reach the [512, 5] step, 48 nodes the [2, 2] step; the "
            "larger wins"))
    if steps >= 4:
        banner(f"step 4: {CORDONED} of the 48 Nodes are cordoned")
        for i in range(CORDONED):
            cordon(admin, f"node-{i:04d}")
        print("  (the ConfigMap is unchanged: its ladder data has no "
              "includeUnschedulableNodes, so cordoned Nodes do not count; until the last "
              f"of the {CORDONED} cordons the schedulable Nodes keep 512 cores or more, so "
              "the write lands once the cordoning is complete)")
        show(plane, proc, 3, logged, (
            f"ladder: {48 - CORDONED} schedulable Nodes have {(48 - CORDONED) * 32} cores, "
            "below the [512, 5] step: [64, 3] gives 3"))

    banner("what the autoscaler logged (scale.changed events)")
    for event in proc.events("scale.changed"):
        print(f"  {event['old']} -> {event['new']} ({event['mode']}, "
              f"{event['nodes']} nodes, {event['cores']} cores)")
    status, _ = proc.last_poll()
    print(f"  /last-poll: {status}")


if __name__ == "__main__":
    sys.exit(main())
