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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cpa import VERTICAL_VERSION_TEXT
from tests.controlplane import AdminClient, ControlPlane
from tests.integration.support import (
    AutoscalerProcess,
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


def cpvpa_command() -> list[str]:
    exe = shutil.which("cpvpa")
    if exe:
        return [exe]
    return [sys.executable, "-c", "from cpa.cli import vertical_main; vertical_main()"]


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


def generation(admin: AdminClient, namespace: str, kind: str, name: str) -> int:
    obj = admin.get(f"/apis/apps/v1/namespaces/{namespace}/{KINDS[kind][1]}/{name}")
    return int(obj["metadata"]["generation"])


@pytest.fixture
def cpvpa(controlplane: ControlPlane, tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """Start ``cpvpa`` processes; each is stopped by PID when the test ends."""
    procs: list[AutoscalerProcess] = []

    def _start(*args: str, poll_period: int = 1, kubeconfig: Path | None = None,
               nofile: tuple[int, int] | None = None) -> AutoscalerProcess:
        proc = AutoscalerProcess(kubeconfig or controlplane.admin_kubeconfig, list(args),
            tmp_path / f"cpvpa-{len(procs)}.log", poll_period, command=cpvpa_command(),
            prefix="cpvpa", nofile=nofile)
        procs.append(proc)
        return proc

    yield _start
    for proc in procs:
        proc.stop()


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


def three_nodes(admin: AdminClient, prefix: str) -> None:
    create_nodes(admin, prefix, 3, cpu="8")


# --- the three target kinds ------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_kind_is_sized_on_the_first_poll_and_rewritten_only_on_change(
        controlplane: ControlPlane, namespace: str, no_nodes: None, cpvpa: Any,
        kind: str) -> None:
    admin = controlplane.admin()
    three_nodes(admin, f"v-{kind}")
    create_target(admin, namespace, kind, "addon")
    proc = cpvpa(f"--target={kind}/addon", f"--namespace={namespace}",
                 f"--default-config={json.dumps(CONFIG)}", "--logtostderr=true")
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
    admin = controlplane.admin()
    three_nodes(admin, "v-file")
    create_target(admin, namespace, "daemonset", "agent")
    key, update = config_dir(tmp_path, CONFIG)
    proc = cpvpa("--target=DaemonSet/Agent", f"--namespace={namespace}",
                 f"--config-file={key}",
                 '--default-config={"c": {"requests": {"cpu": {"base": "1"}}}}')
    wait_until("the file's values", lambda: template_resources(
        admin, namespace, "daemonset", "agent") == EXPECTED, 30)
    # A ConfigMap update (a new ..data directory): read at the next poll.
    update({"c": {"requests": {"cpu": {"base": "100m"}}}})
    wait_until("the new file's value", lambda: template_resources(
        admin, namespace, "daemonset", "agent")["requests"]["cpu"] == "100m", 30)
    # The other values stay: CPVA never removes what it stops configuring.
    assert template_resources(admin, namespace, "daemonset", "agent")["limits"] == {
        "memory": "140509184"}
    # The same file rewritten in place (same inode) is not re-read, as in CPVA.
    target = key.resolve()
    target.write_text(json.dumps({"c": {"requests": {"cpu": {"base": "300m"}}}}))
    wait_polls(proc, count=3)
    assert template_resources(admin, namespace, "daemonset", "agent")["requests"]["cpu"] == (
        "100m")
    assert len(proc.events("config.set")) == 2


def test_invalid_config_file_is_refused_until_the_file_changes(
        controlplane: ControlPlane, namespace: str, no_nodes: None, cpvpa: Any,
        tmp_path: Path) -> None:
    admin = controlplane.admin()
    three_nodes(admin, "v-bad")
    create_target(admin, namespace, "deployment", "addon")
    key, update = config_dir(tmp_path, CONFIG)
    proc = cpvpa("--target=deployment/addon", f"--namespace={namespace}",
                 f"--config-file={key}")
    wait_until("the file's values", lambda: template_resources(
        admin, namespace, "deployment", "addon") == EXPECTED, 30)
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
    wait_until("the values at 4 nodes", lambda: template_resources(
        admin, namespace, "deployment", "addon")["requests"]["cpu"] == "42m", 30)
    proc.wait_poll_ok()


def test_keep_previous_is_cpvas_fail_open(
        controlplane: ControlPlane, namespace: str, no_nodes: None, cpvpa: Any,
        tmp_path: Path) -> None:
    admin = controlplane.admin()
    three_nodes(admin, "v-keep")
    create_target(admin, namespace, "deployment", "addon")
    key, update = config_dir(tmp_path, CONFIG)
    proc = cpvpa("--target=deployment/addon", f"--namespace={namespace}",
                 f"--config-file={key}", "--invalid-config=keep-previous")
    wait_until("the file's values", lambda: template_resources(
        admin, namespace, "deployment", "addon") == EXPECTED, 30)
    update("{not json")
    proc.wait_poll_error("invalid config file")
    create_nodes(admin, "v-keep", 1, cpu="8", start=3)
    wait_until("the previous config applied at 4 nodes", lambda: template_resources(
        admin, namespace, "deployment", "addon")["requests"]["cpu"] == "42m", 30)
    proc.wait_poll_ok()


def test_a_missing_config_file_blocks_the_default_config_too(
        controlplane: ControlPlane, namespace: str, no_nodes: None, cpvpa: Any,
        tmp_path: Path) -> None:
    admin = controlplane.admin()
    three_nodes(admin, "v-missing")
    create_target(admin, namespace, "deployment", "addon")
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
    admin = controlplane.admin()
    three_nodes(admin, "v-dry")
    create_target(admin, namespace, "replicaset", "addon")
    proc = cpvpa("--target=replicaset/addon", f"--namespace={namespace}",
                 f"--default-config={json.dumps(CONFIG)}", "--dry-run")
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
    admin = controlplane.admin()
    three_nodes(admin, "v-frac")
    odd = node_object("v-frac-odd", "1500m")
    admin.post("/api/v1/nodes", odd)
    create_target(admin, namespace, "deployment", "addon")
    proc = cpvpa("--target=deployment/addon", f"--namespace={namespace}",
                 f"--default-config={json.dumps(CONFIG)}")
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


def test_cpvas_rbac_alone_lists_nodes_per_poll_and_still_writes(
        controlplane: ControlPlane, namespace: str, no_nodes: None, cpvpa: Any) -> None:
    admin = controlplane.admin()
    three_nodes(admin, "v-rbac")
    create_target(admin, namespace, "daemonset", "agent")
    grant(admin, namespace, "cpvpa", CPVA_RBAC)
    kubeconfig = controlplane.kubeconfig_for(
        f"system:serviceaccount:{namespace}:cpvpa",
        ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"])
    proc = cpvpa("--target=daemonset/agent", f"--namespace={namespace}",
                 f"--default-config={json.dumps(CONFIG)}", kubeconfig=kubeconfig)
    wait_until("the values", lambda: template_resources(
        admin, namespace, "daemonset", "agent") == EXPECTED, 30)
    [forbidden] = proc.events("nodes.watch_forbidden")
    assert "watch" in forbidden["hint"]
    assert proc.metrics()['cpvpa_node_counts_source{source="list"}'] == 1
    create_nodes(admin, "v-rbac", 1, cpu="8", start=3)  # seen by the next list
    wait_until("the values at 4 nodes", lambda: template_resources(
        admin, namespace, "daemonset", "agent")["requests"]["cpu"] == "42m", 30)
    proc.wait_poll_ok()


def test_no_patch_right_is_a_poll_error_that_says_which_rule(
        controlplane: ControlPlane, namespace: str, no_nodes: None, cpvpa: Any) -> None:
    admin = controlplane.admin()
    three_nodes(admin, "v-norbac")
    create_target(admin, namespace, "deployment", "addon")
    grant(admin, namespace, "cpvpa", CPVA_RBAC)  # daemonsets, not deployments
    kubeconfig = controlplane.kubeconfig_for(
        f"system:serviceaccount:{namespace}:cpvpa",
        ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"])
    proc = cpvpa("--target=deployment/addon", f"--namespace={namespace}",
                 f"--default-config={json.dumps(CONFIG)}", kubeconfig=kubeconfig)
    body = proc.wait_poll_error("Update failure")
    assert "grant patch on deployments in group apps" in body
    wait_polls(proc, count=2)
    assert len(proc.events("update")) >= 2  # retried every poll, as CPVA does


def test_a_container_the_target_lacks_fails_every_poll_naming_it(
        controlplane: ControlPlane, namespace: str, no_nodes: None, cpvpa: Any) -> None:
    admin = controlplane.admin()
    three_nodes(admin, "v-other")
    create_target(admin, namespace, "daemonset", "agent")
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
    admin = controlplane.admin()
    three_nodes(admin, "v-restart")
    create_target(admin, namespace, "deployment", "addon")
    args = ("--target=deployment/addon", f"--namespace={namespace}",
            f"--default-config={json.dumps(CONFIG)}")
    first = cpvpa(*args)
    wait_until("the values", lambda: template_resources(
        admin, namespace, "deployment", "addon") == EXPECTED, 30)
    edit = {"spec": {"template": {"spec": {"containers": [
        {"name": "c", "resources": {"requests": {"cpu": "999m"}}}]}}}}
    admin.patch(f"/apis/apps/v1/namespaces/{namespace}/deployments/addon", edit,
                content_type="application/strategic-merge-patch+json")
    wait_polls(first, count=2)  # CPVA never reads the target: the edit stays
    assert template_resources(admin, namespace, "deployment", "addon")["requests"][
        "cpu"] == "999m"
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
        proc = cpvpa("--target=deployment/addon", f"--namespace={namespace}",
                     f"--default-config={json.dumps(CONFIG)}", kubeconfig=kubeconfig,
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
    admin = controlplane.admin()
    three_nodes(admin, "v-leader")
    create_target(admin, namespace, "deployment", "addon")
    args = ("--target=deployment/addon", f"--namespace={namespace}",
            f"--default-config={json.dumps(CONFIG)}", "--leader-elect",
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
    wait_until("the follower writes", lambda: template_resources(
        admin, namespace, "deployment", "addon")["requests"]["cpu"] == "42m", 30)
    assert follower.metrics()["cpvpa_leader"] == 1


# --- in place ------------------------------------------------------------------------------


def create_pod(admin: AdminClient, namespace: str, owner: dict[str, Any], name: str,
               resources: dict[str, Any], node: str = "v-inplace-0000") -> None:
    """A Pod of ``owner`` as its controller would create it, bound to ``node`` (which must
    exist: from Kubernetes 1.37 ``pods/resize`` is refused, 403 "node ... not found", for a
    Pod on a missing Node), marked Running."""
    meta = owner["metadata"]
    labels = owner["spec"]["selector"]["matchLabels"]
    admin.post(f"/api/v1/namespaces/{namespace}/pods", {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels, "ownerReferences": [{
            "apiVersion": "apps/v1", "kind": owner["kind"], "name": meta["name"],
            "uid": meta["uid"], "controller": True}]},
        "spec": {"nodeName": node, "containers": [
            {"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": resources}]}})
    admin.patch(f"/api/v1/namespaces/{namespace}/pods/{name}/status",
                {"status": {"phase": "Running"}},
                content_type="application/strategic-merge-patch+json")


def pod_resources(admin: AdminClient, namespace: str, name: str) -> dict[str, Any]:
    pod = admin.get(f"/api/v1/namespaces/{namespace}/pods/{name}")
    return dict(pod["spec"]["containers"][0]["resources"])


INPLACE = {"c": {"requests": {"cpu": {"base": "10m", "step": "1m", "coresPerStep": 1},
                              "memory": {"base": "64Mi", "step": "1Mi", "nodesPerStep": 1}}}}


@pytest.mark.parametrize("strategy", ["OnDelete", "RollingUpdate"])
def test_in_place_resizes_the_pods_and_patches_the_template_only_when_safe(
        controlplane: ControlPlane, namespace: str, no_nodes: None, cpvpa: Any,
        strategy: str) -> None:
    admin = controlplane.admin()
    three_nodes(admin, "v-inplace")
    ds = create_target(admin, namespace, "daemonset", "agent", strategy=strategy)
    burstable = {"requests": {"cpu": "5m", "memory": "32Mi"}, "limits": {"memory": "1Gi"}}
    create_pod(admin, namespace, ds, "agent-a", burstable)
    create_pod(admin, namespace, ds, "agent-b", burstable)
    uid = admin.get(f"/api/v1/namespaces/{namespace}/pods/agent-a")["metadata"]["uid"]
    proc = cpvpa("--target=daemonset/agent", f"--namespace={namespace}",
                 f"--default-config={json.dumps(INPLACE)}", "--resize-mode=in-place")
    want = {"requests": {"cpu": "34m", "memory": "70254592"}, "limits": {"memory": "1Gi"}}
    wait_until("both Pods resized", lambda: all(
        pod_resources(admin, namespace, pod) == want for pod in ("agent-a", "agent-b")), 30)
    assert admin.get(f"/api/v1/namespaces/{namespace}/pods/agent-a")["metadata"]["uid"] == uid
    template = template_resources(admin, namespace, "daemonset", "agent")
    metrics = proc.metrics()
    if strategy == "OnDelete":  # patching it restarts nothing: patched
        wait_until("the template", lambda: template_resources(
            admin, namespace, "daemonset", "agent")["requests"] == want["requests"], 30)
    else:  # left alone: a RollingUpdate would replace both Pods
        wait_polls(proc, count=2)
        assert template == {"requests": {"cpu": "5m"}}
        assert proc.events("resize.template_skipped")
        metrics = proc.metrics()
        assert metrics['cpvpa_template_drift{container="c",kind="requests",resource="cpu"}'] == 1
    assert metrics["cpvpa_pod_resizes_total"] == 2
    proc.wait_poll_ok()
    # A Pod created later from the old template is resized at the next poll.
    create_pod(admin, namespace, ds, "agent-c", burstable)
    wait_until("the new Pod resized", lambda: pod_resources(
        admin, namespace, "agent-c") == want, 30)


def test_in_place_falls_back_to_the_template_when_the_qos_class_would_change(
        controlplane: ControlPlane, namespace: str, no_nodes: None, cpvpa: Any) -> None:
    admin = controlplane.admin()
    three_nodes(admin, "v-inplace")
    ds = create_target(admin, namespace, "daemonset", "agent")
    guaranteed = {"requests": {"cpu": "5m", "memory": "32Mi"},
                  "limits": {"cpu": "5m", "memory": "32Mi"}}
    create_pod(admin, namespace, ds, "agent-g", guaranteed)
    proc = cpvpa("--target=daemonset/agent", f"--namespace={namespace}",
                 f"--default-config={json.dumps(INPLACE)}", "--resize-mode=in-place")
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
    admin = controlplane.admin()
    three_nodes(admin, "v-explain")
    create_target(admin, namespace, "deployment", "addon")
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
    admin = controlplane.admin()
    three_nodes(admin, "v-manifest")
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
    admin = controlplane.admin()
    three_nodes(admin, "v-inplace")
    ds = create_target(admin, namespace, "daemonset", "node-agent", containers=[
        {"name": "node-agent", "image": "registry.k8s.io/pause:3.10",
         "resources": {"requests": {"cpu": "10m", "memory": "16Mi"},
                       "limits": {"memory": "64Mi"}}}])
    meta = ds["metadata"]
    admin.post(f"/api/v1/namespaces/{namespace}/pods", {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "node-agent-x", "labels": {"app": "node-agent"},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet",
                                          "name": meta["name"], "uid": meta["uid"],
                                          "controller": True}]},
        "spec": {"nodeName": "v-inplace-0000", "containers": [
            {"name": "node-agent", "image": "registry.k8s.io/pause:3.10",
             "resources": {"requests": {"cpu": "10m", "memory": "16Mi"},
                           "limits": {"memory": "64Mi"}}}]}})
    admin.patch(f"/api/v1/namespaces/{namespace}/pods/node-agent-x/status",
                {"status": {"phase": "Running"}},
                content_type="application/strategic-merge-patch+json")
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
