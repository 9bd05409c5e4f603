"""``/cpvpa``, the vertical autoscaler, as a real process against the real API server.

Each scenario runs the installed ``cpvpa`` console script (what the image's ``/cpvpa``
runs) with CPVA's flags, in a namespace of its own, and checks the target's pod template
as the API server stores it. There is no controller-manager or kubelet here: workloads
create no Pods, so the in-place scenarios create the Pods themselves (owned by the
DaemonSet, marked Running through the status subresource) and the API server's
``pods/resize`` validates and stores the resize as it would for a kubelet.

Expected values come from CPVA's formula as written out in each test (the pure core is
held against CPVA's own code by tests/unit/vertical/test_vectors.py).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cpa import VERTICAL_VERSION_TEXT
from tests.controlplane import AdminClient, ControlPlane
from tests.integration.support import (
    AutoscalerProcess,
    cpvpa_command,
    create_nodes,
    node_object,
    open_files_limit,
    via_address,
    wait_polls,
    wait_until,
)

pytestmark = pytest.mark.integration

# 3 Nodes of 8 cores: cpu 10m + 24 x 1m = 34m; memory 64Mi + 3 x 1Mi = 67Mi, printed in
# bytes as CPVA prints memory (DecimalSI); the limit 128Mi + 3 x 2Mi = 134Mi.
CONFIG = {"c": {"requests": {"cpu": {"base": "10m", "step": "1m", "coresPerStep": 1},
                             "memory": {"base": "64Mi", "step": "1Mi", "nodesPerStep": 1}},
                "limits": {"memory": {"base": "128Mi", "step": "2Mi", "nodesPerStep": 1,
                                      "max": "1Gi"}}}}
EXPECTED = {"requests": {"cpu": "34m", "memory": "70254592"}, "limits": {"memory": "140509184"}}

KINDS = {"deployment": ("Deployment", "deployments"),
         "daemonset": ("DaemonSet", "daemonsets"),
         "replicaset": ("ReplicaSet", "replicasets")}


def create_target(admin: AdminClient, namespace: str, kind: str, name: str, *,
                  containers: list[dict[str, Any]] | None = None,
                  strategy: str | None = None) -> dict[str, Any]:
    kind_name, plural = KINDS[kind]
    labels = {"app": name}
    spec: dict[str, Any] = {
        "selector": {"matchLabels": labels},
        "template": {"metadata": {"labels": labels}, "spec": {"containers": containers or [
            {"name": "c", "image": "registry.k8s.io/pause:3.10",
             "resources": {"requests": {"cpu": "5m"}}}]}}}
    if kind != "daemonset":
        spec["replicas"] = 1
    if strategy:
        spec["updateStrategy"] = {"type": strategy}
    return admin.post(f"/apis/apps/v1/namespaces/{namespace}/{plural}", {
        "apiVersion": "apps/v1", "kind": kind_name,
        "metadata": {"name": name, "namespace": namespace}, "spec": spec})


def template_resources(admin: AdminClient, namespace: str, kind: str, name: str,
                       container: str = "c") -> dict[str, Any]:
    obj = admin.get(f"/apis/apps/v1/namespaces/{namespace}/{KINDS[kind][1]}/{name}")
    for c in obj["spec"]["template"]["spec"]["containers"]:
        if c["name"] == container:
            return dict(c.get("resources") or {})
    raise AssertionError(f"{kind}/{name} has no container {container}")


def cpu_request(admin: AdminClient, namespace: str, kind: str, name: str) -> str:
    """The cpu request in the template of ``kind/name``'s container c."""
    return str(template_resources(admin, namespace, kind, name)["requests"]["cpu"])


def wait_fourth_node_counted(admin: AdminClient, namespace: str, target: str,
                             what: str) -> None:
    """Until ``target``'s template holds CONFIG's cpu for four Nodes (42m): a Node added to
    the three of :func:`three_nodes` was counted and written."""
    kind, name = target.split("/")
    wait_until(what, lambda: cpu_request(admin, namespace, kind, name) == "42m", 30)


def generation(admin: AdminClient, namespace: str, kind: str, name: str) -> int:
    obj = admin.get(f"/apis/apps/v1/namespaces/{namespace}/{KINDS[kind][1]}/{name}")
    return int(obj["metadata"]["generation"])


def config_dir(tmp_path: Path, config: dict[str, Any] | str, name: str = "config"
               ) -> tuple[Path, Callable[[dict[str, Any] | str], None]]:
    """A directory laid out as the kubelet lays out a ConfigMap volume: ``key`` ->
    ``..data/key`` -> ``..<timestamp>/key``; returns the key's path and an updater that
    swaps ``..data`` atomically to a new directory (a new inode), as the kubelet does."""
    root = tmp_path / "configmap"
    root.mkdir(exist_ok=True)
    version = [0]

    def update(value: dict[str, Any] | str) -> None:
        version[0] += 1
        data = root / f"..v{version[0]}"
        data.mkdir()
        (data / name).write_text(value if isinstance(value, str) else json.dumps(value))
        tmp = root / "..data_tmp"
        tmp.symlink_to(data.name)
        os.replace(tmp, root / "..data")

    update(config)
    key = root / name
    key.symlink_to(f"..data/{name}")
    return key, update


def three_nodes(controlplane: ControlPlane, prefix: str) -> AdminClient:
    """Three 8-core Nodes named ``prefix-N``, the cluster most tests here size for; returns
    the admin client the test goes on with."""
    admin = controlplane.admin()
    create_nodes(admin, prefix, 3, cpu="8")
    return admin


def targets_on_three_nodes(controlplane: ControlPlane, namespace: str, prefix: str,
                           *targets: str) -> AdminClient:
    """``targets`` (kind/name, each with one container c) on three Nodes: where most tests
    here start."""
    admin = three_nodes(controlplane, prefix)
    for target in targets:
        kind, name = target.split("/")
        create_target(admin, namespace, kind, name)
    return admin


def sizing(namespace: str, target: str) -> list[str]:
    """/cpvpa's flags for sizing ``target`` in ``namespace`` by CONFIG (as a default config)."""
    return [f"--target={target}", f"--namespace={namespace}",
            f"--default-config={json.dumps(CONFIG)}"]


# --- the three target kinds ------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_kind_is_sized_on_the_first_poll_and_rewritten_only_on_change(
        controlplane: ControlPlane, namespace: str, no_nodes: None, cpvpa: Any,
        kind: str) -> None:
    admin = targets_on_three_nodes(controlplane, namespace, f"v-{kind}", f"{kind}/addon")
    proc = cpvpa(*sizing(namespace, f"{kind}/addon"), "--logtostderr=true")
    wait_until("the computed resources in the template",
               lambda: template_resources(admin, namespace, kind, "addon") == EXPECTED, 30)
    # The merge keeps the container's image and other fields; one write, then quiet.
    written = generation(admin, namespace, kind, "addon")
    wait_polls(proc, count=3)
    assert generation(admin, namespace, kind, "addon") == written
    assert len(proc.events("update")) == 1
    assert {(e["container"], e["kind"], e["resource"], e["value"])
            for e in proc.events("setting")} == {
        ("c", "requests", "cpu", "34m"), ("c", "requests", "memory", "70254592"),
        ("c", "limits", "memory", "140509184")}
    # Two more Nodes: cpu 10m + 40 x 1m, memory 64Mi + 5Mi, limit 128Mi + 10Mi.
    create_nodes(admin, f"v-{kind}", 2, cpu="8", start=3)
    wait_until("the template follows the cluster", lambda: template_resources(
        admin, namespace, kind, "addon") == {
            "requests": {"cpu": "50m", "memory": "72351744"},
            "limits": {"memory": "144703488"}}, 30)
    metrics = proc.metrics()
    assert metrics['cpvpa_computed{container="c",kind="requests",resource="cpu"}'] == 0.05
    assert metrics['cpvpa_written{container="c",kind="requests",resource="memory"}'] == (
        72351744)
    assert metrics["cpvpa_cluster_nodes"] == 5 and metrics["cpvpa_cluster_cores"] == 40
    assert metrics['cpvpa_node_counts_source{source="watch"}'] == 1
    assert metrics['cpvpa_writes_total{result="success"}'] == 2


# --- the config file -------------------------------------------------------------------------


def test_config_file_swap_is_read_and_an_in_place_rewrite_is_not(
        controlplane: ControlPlane, namespace: str, no_nodes: None, cpvpa: Any,
        tmp_path: Path) -> None:
    admin = targets_on_three_nodes(controlplane, namespace, "v-file", "daemonset/agent")
    key, update = config_dir(tmp_path, CONFIG)
    proc = cpvpa("--target=DaemonSet/Agent", f"--namespace={namespace}",
                 f"--config-file={key}",
                 '--default-config={"c": {"requests": {"cpu": {"base": "1"}}}}')
    wait_until("the file's values", lambda: template_resources(
        admin, namespace, "daemonset", "agent") == EXPECTED, 30)
    # A ConfigMap update (a new ..data directory): read at the next poll.
    update({"c": {"requests": {"cpu": {"base": "100m"}}}})
    wait_until("the new file's value", lambda: cpu_request(
        admin, namespace, "daemonset", "agent") == "100m", 30)
    # The other values stay: CPVA never removes what it stops configuring.
    assert template_resources(admin, namespace, "daemonset", "agent")["limits"] == {
        "memory": "140509184"}
    # The same file rewritten in place (same inode) is not re-read, as in CPVA.
    target = key.resolve()
    target.write_text(json.dumps({"c": {"requests": {"cpu": {"base": "300m"}}}}))
    wait_polls(proc, count=3)
    assert cpu_request(admin, namespace, "daemonset", "agent") == "100m"
    assert len(proc.events("config.set")) == 2


def sized_by_file(controlplane: ControlPlane, namespace: str, cpvpa: Callable[..., Any],
                  tmp_path: Path, prefix: str, *flags: str
                  ) -> tuple[AdminClient, Callable[[dict[str, Any] | str], None], Any]:
    """deployment/addon on three Nodes, sized by /cpvpa from a mounted config file holding
    CONFIG: where each test of the file going bad starts. Returns the admin client, the
    file's atomic update and the process."""
    admin = targets_on_three_nodes(controlplane, namespace, prefix, "deployment/addon")
    key, update = config_dir(tmp_path, CONFIG)
    proc = cpvpa("--target=deployment/addon", f"--namespace={namespace}",
                 f"--config-file={key}", *flags)
    wait_until("the file's values", lambda: template_resources(
        admin, namespace, "deployment", "addon") == EXPECTED, 30)
    return admin, update, proc


def test_invalid_config_file_is_refused_until_the_file_changes(
        controlplane: ControlPlane, namespace: str, no_nodes: None, cpvpa: Any,
        tmp_path: Path) -> None:
    admin, update, proc = sized_by_file(controlplane, namespace, cpvpa, tmp_path, "v-bad")
    update('{"c": {"requests": {"cpu": {"base": "1K"}}}}')
    body = proc.wait_poll_error("invalid config file")
    assert "unable to parse quantity's suffix" in body
    # Cluster grows: CPVA would apply the previous config; we write nothing, every poll
    # says why, until the file changes.
    create_nodes(admin, "v-bad", 1, cpu="8", start=3)
    wait_polls(proc, count=3)
    assert template_resources(admin, namespace, "deployment", "addon") == EXPECTED
    assert "nothing is written until the file changes" in proc.last_poll()[1]
    update(CONFIG)
    wait_fourth_node_counted(admin, namespace, "deployment/addon", "the values at 4 nodes")
    proc.wait_poll_ok()


def test_keep_previous_is_cpvas_fail_open(
        controlplane: ControlPlane, namespace: str, no_nodes: None, cpvpa: Any,
        tmp_path: Path) -> None:
    admin, update, proc = sized_by_file(controlplane, namespace, cpvpa, tmp_path, "v-keep",
                                        "--invalid-config=keep-previous")
    update("{not json")
    proc.wait_poll_error("invalid config file")
    create_nodes(admin, "v-keep", 1, cpu="8", start=3)
    wait_fourth_node_counted(admin, namespace, "deployment/addon",
                             "the previous config applied at 4 nodes")
    proc.wait_poll_ok()


def test_a_missing_config_file_blocks_the_default_config_too(
        controlplane: ControlPlane, namespace: str, no_nodes: None, cpvpa: Any,
        tmp_path: Path) -> None:
    admin = targets_on_three_nodes(controlplane, namespace, "v-missing", "deployment/addon")
    proc = cpvpa("--target=deployment/addon", f"--namespace={namespace}",
                 f"--config-file={tmp_path / 'absent'}",
                 f"--default-config={json.dumps(CONFIG)}")
    body = proc.wait_poll_error("can't stat file")
    assert "No such file" in body
    wait_polls(proc, count=2)
    assert template_resources(admin, namespace, "deployment", "addon") == {
        "requests": {"cpu": "5m"}}
    (tmp_path / "absent").write_text("")  # an empty file: the default config applies
    wait_until("the default config", lambda: template_resources(
        admin, namespace, "deployment", "addon") == EXPECTED, 30)


def test_dry_run_computes_and_logs_but_writes_nothing(
        controlplane: ControlPlane, namespace: str, no_nodes: None, cpvpa: Any) -> None:
    admin = targets_on_three_nodes(controlplane, namespace, "v-dry", "replicaset/addon")
    proc = cpvpa(*sizing(namespace, "replicaset/addon"), "--dry-run")
    wait_until("the dry run's log line", lambda: proc.events("dry_run"), 30)
    wait_polls(proc, count=2)
    [dry] = proc.events("dry_run")  # a dry run counts as written: once
    assert json.loads(dry["body"])["spec"]["template"]["spec"]["containers"] == [
        {"name": "c", "resources": {"limits": EXPECTED["limits"],
                                    "requests": EXPECTED["requests"]}}]
    assert template_resources(admin, namespace, "replicaset", "addon") == {
        "requests": {"cpu": "5m"}}
    assert proc.metrics()['cpvpa_writes_total{result="dry_run"}'] == 1


# --- counting ------------------------------------------------------------------------------


def test_a_fractional_cpu_capacity_fails_every_poll_as_in_cpva(
        controlplane: ControlPlane, namespace: str, no_nodes: None, cpvpa: Any) -> None:
    admin = three_nodes(controlplane, "v-frac")
    odd = node_object("v-frac-odd", "1500m")
    admin.post("/api/v1/nodes", odd)
    create_target(admin, namespace, "deployment", "addon")
    proc = cpvpa(*sizing(namespace, "deployment/addon"))
    body = proc.wait_poll_error("unable to compute integer values of cores in the cluster")
    assert "v-frac-odd=1500m" in body
    assert template_resources(admin, namespace, "deployment", "addon") == {
        "requests": {"cpu": "5m"}}
    admin.delete("/api/v1/nodes/v-frac-odd")
    wait_until("the values once the Node is gone", lambda: template_resources(
        admin, namespace, "deployment", "addon") == EXPECTED, 30)


CPVA_RBAC = [  # CPVA's examples/RBAC, in rbac.authorization.k8s.io/v1 and for a DaemonSet
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]},
    {"apiGroups": ["apps", "extensions"], "resources": ["daemonsets"], "verbs": ["patch"]},
]


def grant(admin: AdminClient, namespace: str, name: str, rules: list[dict[str, Any]]) -> None:
    role = f"{namespace}-{name}"
    admin.post("/apis/rbac.authorization.k8s.io/v1/clusterroles", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": role}, "rules": rules})
    admin.post("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": role},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        "roleRef": {"kind": "ClusterRole", "name": role,
                    "apiGroup": "rbac.authorization.k8s.io"}})


def granted(controlplane: ControlPlane, namespace: str, rules: list[dict[str, Any]]) -> Path:
    """A kubeconfig for the ServiceAccount ``cpvpa`` of ``namespace``, holding ``rules``
    alone (what a manifest's RBAC grants, no more)."""
    grant(controlplane.admin(), namespace, "cpvpa", rules)
    return controlplane.kubeconfig_for(
        f"system:serviceaccount:{namespace}:cpvpa",
        ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"])


def test_cpvas_rbac_alone_lists_nodes_per_poll_and_still_writes(
        controlplane: ControlPlane, namespace: str, no_nodes: None, cpvpa: Any) -> None:
    admin = targets_on_three_nodes(controlplane, namespace, "v-rbac", "daemonset/agent")
    kubeconfig = granted(controlplane, namespace, CPVA_RBAC)
    proc = cpvpa(*sizing(namespace, "daemonset/agent"), kubeconfig=kubeconfig)
    wait_until("the values", lambda: template_resources(
        admin, namespace, "daemonset", "agent") == EXPECTED, 30)
    [forbidden] = proc.events("nodes.watch_forbidden")
    assert "watch" in forbidden["hint"]
    assert proc.metrics()['cpvpa_node_counts_source{source="list"}'] == 1
    create_nodes(admin, "v-rbac", 1, cpu="8", start=3)  # seen by the next list
    wait_fourth_node_counted(admin, namespace, "daemonset/agent", "the values at 4 nodes")
    proc.wait_poll_ok()


def test_no_patch_right_is_a_poll_error_that_says_which_rule(
        controlplane: ControlPlane, namespace: str, no_nodes: None, cpvpa: Any) -> None:
    targets_on_three_nodes(controlplane, namespace, "v-norbac", "deployment/addon")
    kubeconfig = granted(controlplane, namespace, CPVA_RBAC)  # daemonsets, not deployments
    proc = cpvpa(*sizing(namespace, "deployment/addon"), kubeconfig=kubeconfig)
    body = proc.wait_poll_error("Update failure")
    assert "grant patch on deployments in group apps" in body
    wait_polls(proc, count=2)
    assert len(proc.events("update")) >= 2  # retried every poll, as CPVA does


def test_a_container_the_target_lacks_fails_every_poll_naming_it(
        controlplane: ControlPlane, namespace: str, no_nodes: None, cpvpa: Any) -> None:
    admin = targets_on_three_nodes(controlplane, namespace, "v-other", "daemonset/agent")
    config = {**CONFIG, "sidecar": {"requests": {"cpu": {"base": "1m"}}}}
    proc = cpvpa("--target=daemonset/agent", f"--namespace={namespace}",
                 f"--default-config={json.dumps(config)}")
    body = proc.wait_poll_error("Update failure")
    assert "the target has no container 'sidecar'" in body
    assert template_resources(admin, namespace, "daemonset", "agent") == {
        "requests": {"cpu": "5m"}}


# --- restarts and leaders ------------------------------------------------------------------


def test_a_restart_writes_again_and_corrects_an_outside_edit(
        controlplane: ControlPlane, namespace: str, no_nodes: None, cpvpa: Any) -> None:
    admin = targets_on_three_nodes(controlplane, namespace, "v-restart", "deployment/addon")
    args = sizing(namespace, "deployment/addon")
    first = cpvpa(*args)
    wait_until("the values", lambda: template_resources(
        admin, namespace, "deployment", "addon") == EXPECTED, 30)
    edit = {"spec": {"template": {"spec": {"containers": [
        {"name": "c", "resources": {"requests": {"cpu": "999m"}}}]}}}}
    admin.patch(f"/apis/apps/v1/namespaces/{namespace}/deployments/addon", edit,
                content_type="application/strategic-merge-patch+json")
    wait_polls(first, count=2)  # CPVA never reads the target: the edit stays
    assert cpu_request(admin, namespace, "deployment", "addon") == "999m"
    assert first.stop() == 0  # SIGTERM: a clean exit
    cpvpa(*args)
    wait_until("the values again", lambda: template_resources(
        admin, namespace, "deployment", "addon") == EXPECTED, 30)


def test_the_soft_open_files_limit_is_raised_and_sigterm_cuts_a_hung_start(
        controlplane: ControlPlane, namespace: str, no_nodes: None, cpvpa: Any,
        tmp_path: Path) -> None:
    """As the autoscaler (cpa.runtime.process): the open-files limit a container runtime
    sets is raised to the hard one, and SIGTERM is honoured while a request hangs."""
    create_target(controlplane.admin(), namespace, "deployment", "addon")
    silent = socket.socket()  # accepts (the kernel's backlog) and never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    try:
        kubeconfig = via_address(f"127.0.0.1:{silent.getsockname()[1]}",
                                 controlplane.admin_kubeconfig, tmp_path / "hung.kubeconfig")
        proc = cpvpa(*sizing(namespace, "deployment/addon"), kubeconfig=kubeconfig,
                     nofile=(1024, 4096))
        proc.wait_healthy()
        assert open_files_limit(proc.pid) == (4096, 4096), "as Go programs do at start"
        time.sleep(1.0)  # the Node list is out and hangs on the silent socket
        began = time.monotonic()
        proc.signal(signal.SIGTERM)
        code = proc.wait_exit(30)
        took = time.monotonic() - began
        print(f"\n/cpvpa: SIGTERM during a hung request: exit {code} after {took:.2f} s")
        assert code == 0, proc.logs()[-2000:]
        assert took < 3.0, "SIGTERM must be honoured within 2 s (1 s of slack for the machine)"
    finally:
        silent.close()


@pytest.mark.api_paths
def test_leader_election_only_the_leader_writes_and_a_follower_takes_over(
        controlplane: ControlPlane, namespace: str, no_nodes: None, cpvpa: Any) -> None:
    admin = targets_on_three_nodes(controlplane, namespace, "v-leader", "deployment/addon")
    args = (*sizing(namespace, "deployment/addon"), "--leader-elect",
            "--leader-elect-lease-duration=3s", "--leader-elect-renew-deadline=2s",
            "--leader-elect-retry-period=500ms")
    one, two = cpvpa(*args), cpvpa(*args)
    wait_until("the values", lambda: template_resources(
        admin, namespace, "deployment", "addon") == EXPECTED, 30)
    one.wait_healthy()  # on a busy machine the leader may write before the other serves
    two.wait_healthy()
    lease = admin.get(f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/"
                      "cpvpa-deployment-addon")
    leaders = [p for p in (one, two) if p.metrics()["cpvpa_leader"] == 1]
    assert len(leaders) == 1 and lease["spec"]["holderIdentity"]
    leader = leaders[0]
    follower = two if leader is one else one
    assert follower.events("update") == []
    leader.stop()
    create_nodes(admin, "v-leader", 1, cpu="8", start=3)
    wait_fourth_node_counted(admin, namespace, "deployment/addon", "the follower writes")
    assert follower.metrics()["cpvpa_leader"] == 1


# --- in place ------------------------------------------------------------------------------


def create_pod(admin: AdminClient, namespace: str, owner: dict[str, Any], name: str,
               resources: dict[str, Any], *, node: str = "v-inplace-0000",
               container: str = "c") -> None:
    """A Pod of ``owner`` (any kind) as its controller would create it, bound to ``node``
    (which must exist: from Kubernetes 1.37 ``pods/resize`` is refused, 403 "node ... not
    found", for a Pod on a missing Node), marked Running."""
    meta = owner["metadata"]
    labels = owner["spec"]["selector"]["matchLabels"]
    admin.post(f"/api/v1/namespaces/{namespace}/pods", {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels, "ownerReferences": [{
            "apiVersion": "apps/v1", "kind": owner["kind"], "name": meta["name"],
            "uid": meta["uid"], "controller": True}]},
        "spec": {"nodeName": node, "containers": [
            {"name": container, "image": "registry.k8s.io/pause:3.10",
             "resources": resources}]}})
    admin.patch(f"/api/v1/namespaces/{namespace}/pods/{name}/status",
                {"status": {"phase": "Running"}},
                content_type="application/strategic-merge-patch+json")


def pod_resources(admin: AdminClient, namespace: str, name: str) -> dict[str, Any]:
    pod = admin.get(f"/api/v1/namespaces/{namespace}/pods/{name}")
    return dict(pod["spec"]["containers"][0]["resources"])


INPLACE = {"c": {"requests": {"cpu": {"base": "10m", "step": "1m", "coresPerStep": 1},
                              "memory": {"base": "64Mi", "step": "1Mi", "nodesPerStep": 1}}}}
BURSTABLE = {"requests": {"cpu": "5m", "memory": "32Mi"}, "limits": {"memory": "1Gi"}}
RESIZED_BURSTABLE = {"requests": {"cpu": "34m", "memory": "70254592"},
                     "limits": {"memory": "1Gi"}}  # INPLACE on three Nodes of 8 cores
AGENTS = ("agent-a", "agent-b", "agent-c")


def agents_to_resize(controlplane: ControlPlane, namespace: str, prefix: str
                     ) -> AdminClient:
    """A RollingUpdate DaemonSet agent on three Nodes with its Burstable Pods AGENTS
    Running: where a resize must never fall back to the template."""
    admin = three_nodes(controlplane, prefix)
    ds = create_target(admin, namespace, "daemonset", "agent", strategy="RollingUpdate")
    for pod in AGENTS:
        create_pod(admin, namespace, ds, pod, BURSTABLE, node=f"{prefix}-0000")
    return admin


def in_place(namespace: str) -> list[str]:
    """/cpvpa's flags for resizing daemonset/agent's Pods in place by INPLACE."""
    return ["--target=daemonset/agent", f"--namespace={namespace}",
            f"--default-config={json.dumps(INPLACE)}", "--resize-mode=in-place"]


def resized_agents(admin: AdminClient, namespace: str) -> list[str]:
    """Which of AGENTS hold INPLACE's values for three Nodes, in order."""
    return [pod for pod in AGENTS if pod_resources(admin, namespace, pod) == RESIZED_BURSTABLE]


@pytest.mark.parametrize("strategy", ["OnDelete", "RollingUpdate"])
def test_in_place_resizes_the_pods_and_patches_the_template_only_when_safe(
        controlplane: ControlPlane, namespace: str, no_nodes: None, cpvpa: Any,
        strategy: str) -> None:
    admin = three_nodes(controlplane, "v-inplace")
    ds = create_target(admin, namespace, "daemonset", "agent", strategy=strategy)
    create_pod(admin, namespace, ds, "agent-a", BURSTABLE)
    create_pod(admin, namespace, ds, "agent-b", BURSTABLE)
    uid = admin.get(f"/api/v1/namespaces/{namespace}/pods/agent-a")["metadata"]["uid"]
    proc = cpvpa(*in_place(namespace))
    wait_until("both Pods resized", lambda: all(
        pod_resources(admin, namespace, pod) == RESIZED_BURSTABLE
        for pod in ("agent-a", "agent-b")), 30)
    assert admin.get(f"/api/v1/namespaces/{namespace}/pods/agent-a")["metadata"]["uid"] == uid
    template = template_resources(admin, namespace, "daemonset", "agent")
    metrics = proc.metrics()
    if strategy == "OnDelete":  # patching it restarts nothing: patched
        wait_until("the template", lambda: template_resources(
            admin, namespace, "daemonset", "agent")["requests"] == RESIZED_BURSTABLE[
                "requests"], 30)
    else:  # left alone: a RollingUpdate would replace both Pods
        wait_polls(proc, count=2)
        assert template == {"requests": {"cpu": "5m"}}
        assert proc.events("resize.template_skipped")
        metrics = proc.metrics()
        assert metrics['cpvpa_template_drift{container="c",kind="requests",resource="cpu"}'] == 1
    assert metrics["cpvpa_pod_resizes_total"] == 2
    proc.wait_poll_ok()
    # A Pod created later from the old template is resized at the next poll.
    create_pod(admin, namespace, ds, "agent-c", BURSTABLE)
    wait_until("the new Pod resized", lambda: pod_resources(
        admin, namespace, "agent-c") == RESIZED_BURSTABLE, 30)


def test_in_place_falls_back_to_the_template_when_the_qos_class_would_change(
        controlplane: ControlPlane, namespace: str, no_nodes: None, cpvpa: Any) -> None:
    admin = three_nodes(controlplane, "v-inplace")
    ds = create_target(admin, namespace, "daemonset", "agent")
    guaranteed = {"requests": {"cpu": "5m", "memory": "32Mi"},
                  "limits": {"cpu": "5m", "memory": "32Mi"}}
    create_pod(admin, namespace, ds, "agent-g", guaranteed)
    proc = cpvpa(*in_place(namespace))
    body = proc.wait_poll_error("in-place resize refused")
    assert "qos" in body and "Guaranteed" in body
    wait_until("the template patched instead", lambda: template_resources(
        admin, namespace, "daemonset", "agent")["requests"] == {
            "cpu": "34m", "memory": "70254592"}, 30)
    assert pod_resources(admin, namespace, "agent-g") == guaranteed
    [fallback] = proc.events("resize.fallback")
    assert fallback["reasons"] == ["qos"]
    wait_polls(proc, count=2)
    assert len(proc.events("resize.fallback")) == 1  # once per change of the values
    assert proc.metrics()['cpvpa_resize_fallbacks_total{reason="qos"}'] == 1


# --- the command line and explain --------------------------------------------------------


def test_bad_command_lines_exit_as_cpva(controlplane: ControlPlane) -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k != "MY_NAMESPACE"}
        return subprocess.run([*cpvpa_command(), *args], capture_output=True, text=True,
                              timeout=60, check=False, env=env)

    assert run("--bogus").returncode == 2
    bad = run("--target=statefulset/x", "--default-config={\"c\": 1}")
    assert bad.returncode == 1
    for fragment in ("Unknown target format", "--namespace parameter not set",
                     "invalid default config", "failed to validate config parameters"):
        assert fragment in bad.stderr
    assert run("--version").stdout.strip() == VERTICAL_VERSION_TEXT


def test_explain_vertical_from_the_cluster(
        controlplane: ControlPlane, namespace: str, no_nodes: None) -> None:
    admin = targets_on_three_nodes(controlplane, namespace, "v-explain", "deployment/addon")
    kubeconfig = controlplane.admin_kubeconfig
    cpa = shutil.which("cpa")
    cmd = [cpa] if cpa else [sys.executable, "-m", "cpa"]
    out = subprocess.run([*cmd, "explain", "--vertical", "--from-cluster", "-o", "json",
                          f"--kubeconfig={kubeconfig}", "--target=deployment/addon",
                          f"--namespace={namespace}", f"--default-config={json.dumps(CONFIG)}"],
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert (doc["nodes"], doc["cores"]) == (3, 24)
    assert {(v["kind"], v["resource"], v["value"]) for v in doc["values"]} == {
        ("requests", "cpu", "34m"), ("requests", "memory", "70254592"),
        ("limits", "memory", "140509184")}
    assert {(c["resource"], c["current"], c["wanted"]) for c in doc["template_changes"]} == {
        ("cpu", "5m", "34m"), ("memory", None, "70254592"), ("memory", None, "140509184")}
    assert template_resources(admin, namespace, "deployment", "addon") == {
        "requests": {"cpu": "5m"}}


# --- the shipped manifests ---------------------------------------------------------------

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests" / "vertical"


def run_manifest(controlplane: ControlPlane, namespace: str, cpvpa: Any, tmp_path: Path,
                 name: str) -> tuple[AdminClient, AutoscalerProcess, dict[str, Any]]:
    """The manifest's RBAC applied (moved into ``namespace``), its Deployment's command run
    as its ServiceAccount, its ConfigMap's key as the config file."""
    import yaml

    from tests.integration.test_manifests_apply import relocate, strict_apply

    admin = controlplane.admin()
    docs = relocate([d for d in yaml.safe_load_all((MANIFESTS / name).read_text()) if d],
                    namespace)
    for doc in docs:
        if doc["kind"] != "Deployment":
            strict_apply(admin, doc)
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    command = list(pod["containers"][0]["command"])
    configmap = next(d for d in docs if d["kind"] == "ConfigMap")
    [(key, text)] = configmap["data"].items()
    path = tmp_path / key
    path.write_text(text)
    args = [a for a in command[1:] if not a.startswith(("--config-file=", "--health-port=",
                                                        "--namespace=", "--v="))]
    kubeconfig = controlplane.kubeconfig_for(
        f"system:serviceaccount:{namespace}:{pod['serviceAccountName']}",
        ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"])
    proc = cpvpa(*args, f"--namespace={namespace}", f"--config-file={path}",
                 kubeconfig=kubeconfig)
    config = json.loads(text)
    return admin, proc, config


def test_the_template_mode_manifest_runs_with_its_own_rbac(
        controlplane: ControlPlane, namespace: str, no_nodes: None, cpvpa: Any,
        tmp_path: Path) -> None:
    admin = three_nodes(controlplane, "v-manifest")
    create_target(admin, namespace, "deployment", "metrics-server", containers=[
        {"name": "metrics-server", "image": "registry.k8s.io/pause:3.10"}])
    admin, proc, _ = run_manifest(controlplane, namespace, cpvpa, tmp_path, "cpvpa.yaml")
    # 100m + 3 x 1m; 200Mi + 3 x 2Mi in bytes.
    wait_until("the manifest's values", lambda: template_resources(
        admin, namespace, "deployment", "metrics-server", "metrics-server") == {
            "requests": {"cpu": "103m", "memory": "216006656"}}, 30)
    proc.wait_poll_ok()
    assert proc.metrics()['cpvpa_node_counts_source{source="watch"}'] == 1


def test_the_in_place_manifest_runs_with_its_own_rbac(
        controlplane: ControlPlane, namespace: str, no_nodes: None, cpvpa: Any,
        tmp_path: Path) -> None:
    admin = three_nodes(controlplane, "v-inplace")
    ds = create_target(admin, namespace, "daemonset", "node-agent", containers=[
        {"name": "node-agent", "image": "registry.k8s.io/pause:3.10",
         "resources": {"requests": {"cpu": "10m", "memory": "16Mi"},
                       "limits": {"memory": "64Mi"}}}])
    create_pod(admin, namespace, ds, "node-agent-x", {
        "requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "64Mi"}},
        container="node-agent")
    admin, proc, _ = run_manifest(controlplane, namespace, cpvpa, tmp_path,
                                  "cpvpa-in-place.yaml")
    # cpu 20m + ceil(3/10) x 5m; memory 50Mi + ceil(3/4) x 1Mi; limit 100Mi + 2Mi.
    want = {"requests": {"cpu": "25m", "memory": "53477376"},
            "limits": {"memory": "106954752"}}
    wait_until("the Pod resized in place", lambda: pod_resources(
        admin, namespace, "node-agent-x") == want, 30)
    proc.wait_poll_ok()
    assert template_resources(admin, namespace, "daemonset", "node-agent",
                              "node-agent")["requests"]["cpu"] == "10m"  # RollingUpdate
