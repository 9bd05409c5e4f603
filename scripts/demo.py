"""`make demo`: the DNS-autoscaling story, live, against a real local control plane.

Starts kube-apiserver + etcd on 127.0.0.1 (built once from Go modules), applies the
autoscaler's ServiceAccount and RBAC from manifests/, creates a `coredns` Deployment, and runs
the real autoscaler process with the flags of manifests/kube-dns-autoscaler.yaml (as its
ServiceAccount identity). Then nodes join, the cluster grows, the ConfigMap switches to
ladder and nodes are cordoned; after each step it prints the counts, the replicas the
autoscaler wrote, and `cpa explain`'s reasoning. It ends by itself and cleans up.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.controlplane import ControlPlane, ensure_binaries  # noqa: E402
from tests.integration.support import (  # noqa: E402
    AutoscalerProcess,
    cordon,
    create_nodes,
    create_workload,
    put_configmap_data,
    replicas,
    run_cli,
    wait_replicas,
)

MANIFEST = REPO / "manifests" / "kube-dns-autoscaler.yaml"
NS, CM = "kube-system", "kube-dns-autoscaler"


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
    wait_replicas(admin, NS, "deployment", "coredns", expected, timeout=60, proc=proc)
    out = run_cli(["explain", "--from-cluster", f"--namespace={NS}", f"--configmap={CM}",
                   f"--kubeconfig={plane.autoscaler_kubeconfig}"])
    print("\n".join("    " + line for line in out.stdout.splitlines()))
    print(f"  -> the autoscaler wrote spec.replicas = "
          f"{replicas(admin, NS, 'deployment', 'coredns')} to deployment/coredns", flush=True)


def main() -> int:
    banner("control plane: kube-apiserver + etcd from Go modules (first build: 10-20 min)")
    bin_dir = ensure_binaries()
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
        try:
            banner("step 1: 16 Nodes of 8 cores join")
            create_nodes(admin, "node", 16, cpu="8")
            show(plane, proc, 2)
            cm = admin.get(f"/api/v1/namespaces/{NS}/configmaps/{CM}")
            print(f"  ConfigMap created from --default-params: {cm['data']}")

            banner("step 2: the cluster grows to 48 Nodes of 32 allocatable cores")
            for i in range(16):
                admin.patch(f"/api/v1/nodes/node-{i:04d}/status",
                            {"status": {"allocatable": {"cpu": "32"},
                                        "capacity": {"cpu": "32"}}})
            create_nodes(admin, "node", 32, cpu="32", start=16)
            show(plane, proc, 6)

            banner("step 3: the ConfigMap's key becomes ladder (no restart)")
            ladder = {"coresToReplicas": [[1, 1], [64, 3], [512, 5], [2048, 10]],
                      "nodesToReplicas": [[1, 1], [2, 2]]}
            put_configmap_data(admin, NS, CM, {"ladder": json.dumps(ladder)})
            show(plane, proc, 5)

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
        finally:
            began = time.monotonic()
            proc.stop()
            print(f"\n  autoscaler stopped (SIGTERM, exit {proc.proc.returncode}, "
                  f"{time.monotonic() - began:.2f}s); stopping the control plane")
    banner("done: everything started was stopped and removed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
