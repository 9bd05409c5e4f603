"""The real kube-scheduler as the oracle of ``targetPlacement``'s rules.

Extra Node objects without a kubelet, carrying random labels and taints, and random Pod
specs (a ``nodeSelector``, a required node affinity, tolerations): for each case as many
Pods as there are Nodes, spread one per Node by a required pod anti-affinity on the
hostname, handed to a kube-scheduler of this build (its own scheduler name, so it touches
no other test's Pods). Binding is the scheduler's verdict (no Pod needs to run): every
Node it binds a case's Pod to must be one we count for that Pod spec, and, the Pods being
spread, every Node we count must be one it bound. Our side reads the Nodes and the Pod
spec as the API server returns them, through the daemon's decoder and template reader.

Needs ``kube-scheduler`` beside the control plane's binaries (``tests/controlplane/build.sh
node`` builds it); skipped without it.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cpa.nodes.jsondecode import decode_node
from cpa.nodes.placement import fits, placement_of
from cpa.nodes.records import ALL_LABELS
from tests.controlplane import ControlPlane
from tests.controlplane.client import AdminClient, ApiError
from tests.integration.support import LoggedProcess, node_object, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

SCHEDULER = "cpa-oracle"
NODES = 12
CASES = int(os.environ.get("CPA_ORACLE_CASES", "60"))
SEED = int(os.environ.get("CPA_ORACLE_SEED", "29"))
KEYS = ["pool", "gen", "tier"]
VALUES = {"pool": ["a", "b", "c"], "gen": ["1", "5", "9", "x"], "tier": ["web", "db"]}
TAINT_KEYS = ["dedicated", "spot", "gpu"]
EFFECTS = ["NoSchedule", "NoExecute", "PreferNoSchedule"]


@pytest.fixture
def scheduler(controlplane: ControlPlane, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    binary = controlplane.bin_dir / "kube-scheduler"
    if not os.access(binary, os.X_OK):
        pytest.skip(f"no kube-scheduler in {controlplane.bin_dir} "
                    "(tests/controlplane/build.sh node builds it)")
    config = tmp_path / "scheduler.yaml"
    config.write_text(json.dumps({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(controlplane.admin_kubeconfig)},
        "leaderElection": {"leaderElect": False},
        "profiles": [{"schedulerName": SCHEDULER}]}))
    proc = LoggedProcess([str(binary), f"--config={config}", "--secure-port=0", "--v=1"],
                         tmp_path / "kube-scheduler.log")
    try:
        yield proc.proc
    finally:
        proc.stop()


def random_node(rng: random.Random, name: str) -> dict[str, Any]:
    labels = {k: rng.choice(VALUES[k]) for k in KEYS if rng.random() < 0.7}
    node = node_object(name, "4", labels=labels)
    taints = [{"key": k, "value": rng.choice(["", "yes", "batch"]), "effect": rng.choice(EFFECTS)}
              for k in TAINT_KEYS if rng.random() < 0.25]
    if taints:
        node["spec"]["taints"] = taints
    return node


def random_expression(rng: random.Random) -> dict[str, Any]:
    key = rng.choice(KEYS)
    op = rng.choice(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"])
    if op in ("In", "NotIn"):
        return {"key": key, "operator": op,
                "values": rng.sample(VALUES[key], rng.randint(1, 2))}
    if op in ("Gt", "Lt"):
        return {"key": "gen", "operator": op, "values": [rng.choice(["0", "4", "6", "10"])]}
    return {"key": key, "operator": op}


def random_pod_spec(rng: random.Random, node_names: list[str]) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if rng.random() < 0.4:
        spec["nodeSelector"] = {k: rng.choice(VALUES[k])
                                for k in rng.sample(KEYS, rng.randint(1, 2))}
    if rng.random() < 0.6:
        terms = []
        for _ in range(rng.randint(1, 3)):
            term: dict[str, Any] = {}
            if rng.random() < 0.9:
                term["matchExpressions"] = [random_expression(rng)
                                            for _ in range(rng.randint(1, 2))]
            if rng.random() < 0.2:
                term["matchFields"] = [{"key": "metadata.name",
                                        "operator": rng.choice(["In", "NotIn"]),
                                        "values": [rng.choice(node_names)]}]
            terms.append(term)
        spec["affinity"] = {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}
    tolerations = []
    for _ in range(rng.randint(0, 3)):
        choice = rng.random()
        if choice < 0.1:
            tolerations.append({"operator": "Exists"})
            continue
        tol: dict[str, Any] = {"key": rng.choice(TAINT_KEYS)}
        if choice < 0.5:
            tol["operator"] = "Exists"
        else:
            tol["operator"] = rng.choice(["Equal", ""]) or None
            tol["value"] = rng.choice(["", "yes", "batch"])
        if rng.random() < 0.6:
            tol["effect"] = rng.choice(EFFECTS)
        tolerations.append({k: v for k, v in tol.items() if v is not None})
    if tolerations:
        spec["tolerations"] = tolerations
    return spec


def pod(case: int, index: int, spec: dict[str, Any]) -> dict[str, Any]:
    labels = {"oracle-case": str(case)}
    anti = {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchLabels": labels}, "topologyKey": "kubernetes.io/hostname"}]}
    affinity = {**spec.get("affinity", {}), "podAntiAffinity": anti}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"case-{case:03d}-{index:02d}", "labels": labels},
            "spec": {**spec, "affinity": affinity, "schedulerName": SCHEDULER,
                     "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}


def decided(admin: AdminClient, namespace: str, total: int) -> list[dict[str, Any]] | None:
    """Every Pod bound or judged unschedulable by the scheduler; else None (wait)."""
    pods = admin.get(f"/api/v1/namespaces/{namespace}/pods")["items"]
    done = [p for p in pods if p["spec"].get("nodeName") or any(
        c["type"] == "PodScheduled" and c["status"] == "False"
        for c in p.get("status", {}).get("conditions", []))]
    return pods if len(done) == total else None


def test_every_node_the_scheduler_binds_to_is_one_we_count(
        controlplane: ControlPlane, namespace: str, no_nodes: None,
        scheduler: subprocess.Popen[bytes]) -> None:
    admin = controlplane.admin()
    rng = random.Random(SEED)
    names = [f"oracle-{i:02d}" for i in range(NODES)]
    for name in names:
        admin.post("/api/v1/nodes", random_node(rng, name))
    ours = {}
    for name in names:
        raw = admin.get(f"/api/v1/nodes/{name}")
        info = decode_node(json.dumps(raw).encode(), ALL_LABELS)
        ours[name] = (dict(info.labels or ()), info.taint_details)

    specs: dict[int, dict[str, Any]] = {}
    rejected = 0
    for case in range(CASES):
        spec = random_pod_spec(rng, names)
        try:
            for index in range(NODES):
                admin.post(f"/api/v1/namespaces/{namespace}/pods", pod(case, index, spec))
        except ApiError:  # the API server refused the random spec: not a case
            rejected += 1
            continue
        specs[case] = spec
    total = len(specs) * NODES
    pods = wait_until("the scheduler's verdict on every Pod",
                      lambda: decided(admin, namespace, total), timeout=300)

    bound: dict[int, set[str]] = {case: set() for case in specs}
    stored: dict[int, dict[str, Any]] = {}
    for p in pods:
        case = int(p["metadata"]["labels"]["oracle-case"])
        stored[case] = p["spec"]  # as the API server stored it (defaults applied)
        if p["spec"].get("nodeName"):
            bound[case].add(p["spec"]["nodeName"])
    agreed, disagreements = 0, []
    for case, spec in stored.items():
        placement = placement_of(spec)
        counted = {n for n, (labels, taints) in ours.items()
                   if fits(placement, n, labels, taints)}
        if counted == bound[case]:
            agreed += 1
        else:
            disagreements.append((case, specs[case], sorted(bound[case] - counted),
                                  sorted(counted - bound[case])))
    sizes = sorted(len(b) for b in bound.values())
    print(f"\nkube-scheduler oracle: {agreed} of {len(stored)} random cases agreed "
          f"({rejected} specs refused by the API server; {NODES} Nodes, seed {SEED}; "
          f"{sum(sizes)} Pods bound; Nodes per case {sizes})")
    assert not disagreements, "\n".join(
        f"case {c}: spec {json.dumps(s)}: bound but not counted {extra}, counted but not "
        f"bound {missing}" for c, s, extra, missing in disagreements)
    assert any(bound.values()) and any(len(b) < NODES for b in bound.values())
