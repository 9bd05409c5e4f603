"""End-to-end scenarios: the real autoscaler process against a real kube-apiserver + etcd.

The process authenticates as the ServiceAccount that manifests/kube-dns-autoscaler.yaml
binds, so every scenario also proves those RBAC rules are enough. Each scenario asserts
what the API server holds afterwards, and every wait is bounded.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.controlplane import ControlPlane
from tests.integration.support import (
    KUBE_DNS_DEFAULTS,
    configmap,
    cordon,
    coredns_and_nodes,
    create_configmap,
    create_nodes,
    create_workload,
    explain_json,
    one_replica_per_node,
    put_configmap_data,
    replicas,
    run_cli,
    set_node_ready,
    wait_polls,
    wait_replicas,
    wait_until,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

REPO = Path(__file__).resolve().parents[2]
CM = "kube-dns-autoscaler"


def kube_dns_args(namespace: str, target: str = "deployment/coredns") -> list[str]:
    return [f"--namespace={namespace}", f"--configmap={CM}", f"--target={target}",
            f"--default-params={KUBE_DNS_DEFAULTS}", "--logtostderr=true"]


@pytest.mark.api_paths
def test_seed_walkthrough(controlplane: ControlPlane, namespace: str, no_nodes: None,
                          start: Any) -> None:
    """16 nodes x 8 cores -> 2; 48 x 32 -> 6; ladder by editing the ConfigMap -> 5."""
    admin = controlplane.admin()
    coredns_and_nodes(admin, namespace, "seed", 16, cpu="8")
    proc = start(*kube_dns_args(namespace))
    wait_replicas(admin, namespace, "deployment", "coredns", 2, proc=proc)
    cm = configmap(admin, namespace, CM)
    assert cm["data"] == {"linear": '{"coresPerReplica":256,"includeUnschedulableNodes":true,'
                                    '"nodesPerReplica":16,"preventSinglePointFailure":true}'}

    # The cluster grows to 48 nodes of 32 cores: 1536 cores -> 6 (cores axis wins).
    create_nodes(admin, "big", 48, cpu="32")
    for i in range(16):
        admin.delete(f"/api/v1/nodes/seed-{i:04d}")
    wait_replicas(admin, namespace, "deployment", "coredns", 6, proc=proc)

    # Swap the key to ladder: mode switches, no restart.
    put_configmap_data(admin, namespace, CM, {"ladder": json.dumps({
        "coresToReplicas": [[1, 1], [64, 3], [512, 5], [1024, 5], [2048, 10]],
        "nodesToReplicas": [[1, 1], [2, 2]]})})
    wait_replicas(admin, namespace, "deployment", "coredns", 5, proc=proc)
    assert proc.proc.poll() is None
    changes = [(e["old"], e["new"], e["mode"]) for e in proc.events("scale.changed")]
    assert changes[0] == (1, 2, "linear") and changes[-1] == (6, 5, "ladder")
    proc.wait_poll_ok()


def test_unschedulable_and_notready_nodes(controlplane: ControlPlane, namespace: str,
                                          no_nodes: None, start: Any) -> None:
    admin = controlplane.admin()
    create_workload(admin, namespace, "deployment", "coredns")
    # 3 x 3920m = 11760m -> 12 cores; one node per replica.
    names = create_nodes(admin, "mc", 3, cpu="3920m")
    create_configmap(admin, namespace, CM,
                     {"linear": '{"coresPerReplica":1,"nodesPerReplica":100}'})
    proc = start(f"--namespace={namespace}", f"--configmap={CM}", "--target=deployment/coredns")
    wait_replicas(admin, namespace, "deployment", "coredns", 12, proc=proc)  # ceil(11.76)

    cordon(admin, names[0])
    set_node_ready(admin, names[1], False)
    wait_replicas(admin, namespace, "deployment", "coredns", 4, proc=proc)  # ceil(3.92)

    put_configmap_data(admin, namespace, CM, {
        "linear": '{"coresPerReplica":1,"nodesPerReplica":100,"includeUnschedulableNodes":true}'})
    wait_replicas(admin, namespace, "deployment", "coredns", 12, proc=proc)

    put_configmap_data(admin, namespace, CM, {"linear": '{"coresPerReplica":1}'})
    cordon(admin, names[0], False)
    set_node_ready(admin, names[1], True)
    wait_replicas(admin, namespace, "deployment", "coredns", 12, proc=proc)


def test_nodelabels_filter(controlplane: ControlPlane, namespace: str, no_nodes: None,
                           start: Any) -> None:
    admin = controlplane.admin()
    workers = coredns_and_nodes(admin, namespace, "w", 5, cpu="4",
                                labels={"pool": "dns", "tier": "a"})
    create_nodes(admin, "other", 7, cpu="4", labels={"pool": "batch"})
    create_configmap(admin, namespace, CM, {"linear": '{"nodesPerReplica":1}'})
    proc = start(f"--namespace={namespace}", f"--configmap={CM}",
                 "--target=deployment/coredns", "--nodelabels=pool=dns,tier in (a,b)")
    wait_replicas(admin, namespace, "deployment", "coredns", 5, proc=proc)
    # Relabel one worker out of the selector: it leaves the counts.
    admin.patch(f"/api/v1/nodes/{workers[0]}", {"metadata": {"labels": {"pool": "batch"}}})
    wait_replicas(admin, namespace, "deployment", "coredns", 4, proc=proc)
    # And back in.
    admin.patch(f"/api/v1/nodes/{workers[0]}", {"metadata": {"labels": {"pool": "dns"}}})
    wait_replicas(admin, namespace, "deployment", "coredns", 5, proc=proc)


@pytest.mark.api_paths
def test_configmap_recreated_and_invalid_configmaps(controlplane: ControlPlane,
                                                    namespace: str, no_nodes: None,
                                                    start: Any) -> None:
    admin = controlplane.admin()
    coredns_and_nodes(admin, namespace, "cm", 3, cpu="2")
    proc = start(*kube_dns_args(namespace))
    wait_replicas(admin, namespace, "deployment", "coredns", 2, proc=proc)

    admin.delete(f"/api/v1/namespaces/{namespace}/configmaps/{CM}")
    wait_until("the ConfigMap re-created from the defaults",
               lambda: configmap(admin, namespace, CM)["data"].get("linear"))

    bad: list[tuple[dict[str, str], str]] = [
        ({"linear": '{"nodesPerReplica": 1,}'}, "linear"),
        ({"linear": '{"nodesPerReplica":1}', "ladder": '{"nodesToReplicas":[[1,3]]}'},
         "one"),
        ({"quadratic": '{"nodesPerReplica":1}'}, "quadratic"),
    ]
    for data, fragment in bad:
        put_configmap_data(admin, namespace, CM, data)
        body = proc.wait_poll_error(fragment)
        assert body.startswith("Encountered error at last poll cycle: ")
        assert replicas(admin, namespace, "deployment", "coredns") == 2  # nothing scaled

    put_configmap_data(admin, namespace, CM, {"linear": '{"nodesPerReplica":1}'})
    wait_replicas(admin, namespace, "deployment", "coredns", 3, proc=proc)
    proc.wait_poll_ok()


def test_multi_target_with_one_missing(controlplane: ControlPlane, namespace: str,
                                       no_nodes: None, start: Any) -> None:
    admin = controlplane.admin()
    # StatefulSet targets need the extra rule from the multi-target example. Like the
    # example, give a ServiceAccount of its own the manifest's ClusterRole plus that rule
    # (the shared kube-dns-autoscaler identity must keep exactly the manifest's rules).
    docs = [d for d in yaml.safe_load_all((REPO / "manifests/examples/multi-target.yaml")
                                          .read_text()) if d]
    role = next(d for d in docs if d["kind"] == "ClusterRole"
                and d["metadata"]["name"] == "cluster-proportional-autoscaler:statefulsets-scale")
    admin.apply(role)
    sa = "multi-target"
    kubeconfig = controlplane.kubeconfig_for(
        f"system:serviceaccount:{namespace}:{sa}",
        ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"])
    for role_name in ("system:kube-dns-autoscaler", role["metadata"]["name"]):
        admin.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                     "metadata": {"name": f"{namespace}:{role_name}".replace(":", "-")},
                     "subjects": [{"kind": "ServiceAccount", "name": sa,
                                   "namespace": namespace}],
                     "roleRef": {"kind": "ClusterRole", "name": role_name,
                                 "apiGroup": "rbac.authorization.k8s.io"}})
    for kind, name in [("deployment", "a"), ("replicationcontroller", "c"),
                       ("statefulset", "d")]:
        create_workload(admin, namespace, kind, name)
    create_nodes(admin, "mt", 4, cpu="2")
    create_configmap(admin, namespace, CM, {"linear": '{"nodesPerReplica":1}'})
    proc = start(f"--namespace={namespace}", f"--configmap={CM}",
                 "--target=deployment/a,replicaset/b,replicationcontroller/c,statefulset/d",
                 kubeconfig=kubeconfig)
    for kind, name in [("deployment", "a"), ("replicationcontroller", "c"),
                       ("statefulset", "d")]:
        wait_replicas(admin, namespace, kind, name, 4, proc=proc)
    body = proc.wait_poll_error("replicaset/b")
    assert "not found" in body.lower()
    create_workload(admin, namespace, "replicaset", "b")
    wait_replicas(admin, namespace, "replicaset", "b", 4, proc=proc)
    proc.wait_poll_ok()


def test_max_sync_failures_exits_1(controlplane: ControlPlane, namespace: str,
                                   no_nodes: None, start: Any) -> None:
    admin = controlplane.admin()
    coredns_and_nodes(admin, namespace, "msf", 2)
    proc = start(*kube_dns_args(namespace), "--max-sync-failures=3")
    wait_replicas(admin, namespace, "deployment", "coredns", 2, proc=proc)
    controlplane.stop_apiserver()
    try:
        began = time.monotonic()
        code = proc.wait_exit(60)
        elapsed = time.monotonic() - began
    finally:
        controlplane.start_apiserver()
    assert code == 1
    failures = proc.events("poll.failed")
    assert len(failures) >= 3 and failures[-1]["consecutive_failures"] == 3
    assert proc.events("exit.max_sync_failures")
    print(f"exited 1 after {elapsed:.1f}s of outage with 3 failed polls (period 1s)")


@pytest.mark.api_paths
def test_apiserver_and_etcd_restart(controlplane: ControlPlane, namespace: str,
                                    no_nodes: None, start: Any) -> None:
    admin = controlplane.admin()
    one_replica_per_node(admin, namespace, CM, "rs", 4, cpu="2")
    proc = start(f"--namespace={namespace}", f"--configmap={CM}", "--target=deployment/coredns")
    wait_replicas(admin, namespace, "deployment", "coredns", 4, proc=proc)

    controlplane.stop_apiserver()
    time.sleep(2)
    controlplane.start_apiserver()
    create_nodes(controlplane.admin(), "rs", 2, cpu="2", start=4)
    wait_replicas(admin, namespace, "deployment", "coredns", 6, timeout=60, proc=proc)

    controlplane.stop_apiserver()
    controlplane.stop_etcd()
    time.sleep(1)
    controlplane.start_etcd()
    controlplane.start_apiserver()
    create_nodes(controlplane.admin(), "rs", 1, cpu="2", start=6)
    wait_replicas(admin, namespace, "deployment", "coredns", 7, timeout=60, proc=proc)
    proc.wait_poll_ok(60)
    # No spurious writes: nodes were only ever added, so every write must go up (a cache
    # emptied by a reconnect would write a lower count first), and nothing more is written
    # once the count is right.
    changes = [(e["old"], e["new"]) for e in proc.events("scale.changed")]
    assert all(new > old for old, new in changes), changes
    assert changes[-1] == (6, 7)
    wait_polls(proc, count=3)
    assert len(proc.events("scale.changed")) == len(changes)


def test_sigterm_exits_0_quickly(controlplane: ControlPlane, namespace: str, no_nodes: None,
                                 start: Any) -> None:
    admin = controlplane.admin()
    coredns_and_nodes(admin, namespace, "st", 2)
    proc = start(*kube_dns_args(namespace), poll_period=30)
    wait_replicas(admin, namespace, "deployment", "coredns", 2, proc=proc)
    began = time.monotonic()
    proc.signal(signal.SIGTERM)
    assert proc.wait_exit(30) == 0
    print(f"SIGTERM -> exit 0 in {time.monotonic() - began:.2f}s")
    proc2 = start(*kube_dns_args(namespace), poll_period=30)
    proc2.wait_poll_ok()
    began = time.monotonic()
    proc2.signal(signal.SIGINT)
    assert proc2.wait_exit(30) == 0
    print(f"SIGINT -> exit 0 in {time.monotonic() - began:.2f}s")


def test_explain_from_cluster_agrees(controlplane: ControlPlane, namespace: str,
                                     no_nodes: None, start: Any) -> None:
    admin = controlplane.admin()
    names = coredns_and_nodes(admin, namespace, "ex", 20, cpu="3920m")
    cordon(admin, names[0])
    create_configmap(admin, namespace, CM, {
        "linear": '{"coresPerReplica":8,"nodesPerReplica":4,"min":2,"max":9}'})
    proc = start(f"--namespace={namespace}", f"--configmap={CM}", "--target=deployment/coredns")
    # /last-poll is 200 before the first poll too (as upstream's): wait for the write.
    wait_replicas(admin, namespace, "deployment", "coredns", 9)
    proc.wait_poll_ok()
    written = replicas(admin, namespace, "deployment", "coredns")
    doc = explain_json(controlplane.autoscaler_kubeconfig, namespace, CM)
    assert doc["replicas"] == written == 9  # ceil(19*3.92/8)=10 -> max 9
    assert doc["counts"]["schedulable_nodes"] == 19
    text = run_cli(["explain", "--from-cluster", f"--namespace={namespace}",
                    f"--configmap={CM}", f"--kubeconfig={controlplane.autoscaler_kubeconfig}"])
    assert text.returncode == 0 and "=> 9 replicas" in text.stdout
