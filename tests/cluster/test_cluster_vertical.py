"""Issue 23 on a real node: a CPVA Deployment with its image swapped for ours sizes a
DaemonSet; then, with ``--resize-mode=in-place``, the DaemonSet's Pod is resized where it
runs -- same UID, same restart count -- and the runtime applies it to the container's
cgroup.

A cluster of its own for this module (``cluster.py``; the other module's is stopped by
then), so it runs alone too (``PYTEST_ARGS='-k vertical' make cluster-e2e``). The steps
build on each other:

1. CPVA's manifest shape, unchanged but for the image: ``command: [/cpvpa, --target=
   daemonset/node-agent, ..., --config-file=/etc/config/node-agent]``, a ConfigMap volume,
   CPVA's RBAC (``list`` on nodes, ``patch`` on daemonsets; no watch: ours lists per poll
   then, as CPVA does). The template gets the computed values and the DaemonSet controller
   replaces its Pod with them (CPVA's behaviour: the workload rolls).
2. The same Deployment with ``--resize-mode=in-place`` and the extra rules (get
   daemonsets, list pods, patch pods/resize). API-only Nodes grow the cluster: the Pod's
   resources follow in place; the kubelet reports them applied, the cgroup has them, the
   Pod keeps its UID and restart count, the template is left alone (a RollingUpdate
   DaemonSet would replace the Pod) and nothing fell back.

3. Issue 32: one ``/cpvpa`` for two StatefulSets (``--target`` a list, per-target config
   blocks, ``--allow-statefulset``, in place, ``--resize-fallback-max-pods-per-cycle=1``):
   the Burstable set's Pods are resized in place (same UIDs, no restart); the Guaranteed
   set's resizes are refused (qos), so the bounded fallback patches its OnDelete template
   and evicts one Pod per poll, which the StatefulSet controller recreates with the values.

If the kubelet or containerd refuse the resize, step 2 fails with the Pod's conditions, the
kubelet's events and ``/cpvpa``'s fallback line.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cpa.vertical.decide.cpva_config import decode_config
from cpa.vertical.decide.formula import compute
from tests.cluster.cluster import Cluster, Timings, module_cluster, wait_for
from tests.cluster.configs import NODE_NAME

NS = "kube-system"
POLL = 2
NODES_ADDED = 4
# requests and limits that stay Burstable at every size (a resize cannot change the QoS).
CONFIG = {"node-agent": {
    "requests": {"cpu": {"base": "20m", "step": "10m", "nodesPerStep": 1},
                 "memory": {"base": "32Mi", "step": "4Mi", "nodesPerStep": 1}},
    "limits": {"cpu": {"base": "100m", "step": "20m", "nodesPerStep": 1},
               "memory": {"base": "64Mi", "step": "8Mi", "nodesPerStep": 1}}}}
CPVA_RULES = [  # CPVA's examples/RBAC in rbac/v1, for a DaemonSet target
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]},
    {"apiGroups": ["apps", "extensions"], "resources": ["daemonsets"], "verbs": ["patch"]},
]
IN_PLACE_RULES = [  # what --resize-mode=in-place adds
    {"apiGroups": ["apps"], "resources": ["daemonsets"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
    {"apiGroups": [""], "resources": ["pods/resize"], "verbs": ["patch"]},
]
STATE: dict[str, Any] = {}
TIMES = Timings("cluster-e2e vertical")
timed = TIMES.add

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with module_cluster(TIMES) as c:
        yield c


# ---------------------------------------------------------------------- helpers
def admin(c: Cluster) -> Any:
    assert c.plane is not None
    return c.plane.admin()


def apply(c: Cluster, *objs: dict[str, Any]) -> None:
    c.kubectl("apply", "-f", "-", input_text="\n".join(json.dumps(o) for o in objs))


def agent_pods(c: Cluster) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = admin(c).get(
        f"/api/v1/namespaces/{NS}/pods?labelSelector=app%3Dnode-agent")["items"]
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


def running_agent(c: Cluster) -> dict[str, Any] | None:
    found = agent_pods(c)
    if len(found) == 1 and found[0]["status"].get("phase") == "Running" and all(
            s.get("ready") for s in found[0]["status"].get("containerStatuses") or [{}]):
        return found[0]
    return None


def cpvpa_pod(c: Cluster) -> dict[str, Any] | None:
    items = admin(c).get(
        f"/api/v1/namespaces/{NS}/pods?labelSelector=app%3Dcpvpa")["items"]
    live = [p for p in items if not p["metadata"].get("deletionTimestamp")
            and p["status"].get("phase") == "Running"]
    return live[0] if len(live) == 1 and len(items) == 1 else None


def pod_logs(c: Cluster, name: str) -> str:
    return c.kubectl("logs", "-n", NS, name, check=False).stdout


def computed(c: Cluster) -> dict[str, dict[str, str]]:
    """What CPVA's formula gives for the cluster as it is now (every Node, capacity cpu)."""
    nodes = admin(c).get("/api/v1/nodes")["items"]
    cores = sum(int(n["status"]["capacity"]["cpu"]) for n in nodes)
    req = compute(decode_config(json.dumps(CONFIG)), len(nodes), cores)["node-agent"]
    return {"requests": {k: str(v) for k, v in req.requests.items()},
            "limits": {k: str(v) for k, v in req.limits.items()}}


def same_values(have: dict[str, Any] | None, want: dict[str, dict[str, str]]) -> bool:
    from cpa.go.quantity import Quantity

    have = have or {}
    return all(
        kind in have and set(have[kind]) >= set(values) and all(
            Quantity.parse(str(have[kind][res])).normalized()
            == Quantity.parse(val).normalized() for res, val in values.items())
        for kind, values in want.items())


def template(c: Cluster) -> dict[str, Any]:
    ds = admin(c).get(f"/apis/apps/v1/namespaces/{NS}/daemonsets/node-agent")
    return dict(ds["spec"]["template"]["spec"]["containers"][0].get("resources") or {})


def fake_node(index: int) -> dict[str, Any]:
    name = f"vertical-api-only-{index:02d}"
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {"taints": [{"key": "cpa-e2e/api-only", "value": "true",
                                 "effect": "NoSchedule"}]},
            "status": {"capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                       "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True",
                                       "reason": "APIOnly", "message": "no kubelet"}]}}


def daemonset(image: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "node-agent", "namespace": NS},
            "spec": {"selector": {"matchLabels": {"app": "node-agent"}},
                     "template": {"metadata": {"labels": {"app": "node-agent"}}, "spec": {
                         "terminationGracePeriodSeconds": 2,
                         "containers": [{
                             "name": "node-agent", "image": image,
                             "imagePullPolicy": "IfNotPresent",
                             "resources": {"requests": {"cpu": "10m", "memory": "16Mi"},
                                           "limits": {"cpu": "50m", "memory": "32Mi"}}}]}}}}


def rbac(rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    ref = {"kind": "ClusterRole", "name": "cpvpa-e2e", "apiGroup": "rbac.authorization.k8s.io"}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": "cpvpa", "namespace": NS}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": "cpvpa-e2e"}, "rules": rules},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": "cpvpa-e2e"}, "roleRef": ref,
         "subjects": [{"kind": "ServiceAccount", "name": "cpvpa", "namespace": NS}]},
    ]


def cpva_deployment(image: str, extra: list[str]) -> dict[str, Any]:
    """CPVA's example Deployment (examples/cpvpa-nginx-example-with-configmap.yaml) with our
    image, a DaemonSet target and a short poll period."""
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "cpvpa", "namespace": NS, "labels": {"app": "cpvpa"}},
            "spec": {"replicas": 1, "strategy": {"type": "Recreate"},
                     "selector": {"matchLabels": {"app": "cpvpa"}},
                     "template": {"metadata": {"labels": {"app": "cpvpa"}}, "spec": {
                         "serviceAccountName": "cpvpa",
                         "terminationGracePeriodSeconds": 5,
                         "containers": [{
                             "image": image, "name": "autoscaler",
                             "imagePullPolicy": "IfNotPresent",
                             "command": ["/cpvpa", "--target=daemonset/node-agent",
                                         f"--namespace={NS}", "--logtostderr=true",
                                         f"--poll-period-seconds={POLL}", "--v=2",
                                         "--config-file=/etc/config/node-agent", *extra],
                             "volumeMounts": [{"name": "config", "mountPath": "/etc/config"}]}],
                         "volumes": [{"name": "config", "configMap": {
                             "name": "node-agent-autoscaler", "optional": True}}]}}}}


def configmap() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "node-agent-autoscaler", "namespace": NS},
            "data": {"node-agent": json.dumps(CONFIG, indent=2)}}


def cgroup_values(c: Cluster, container_id: str) -> dict[str, int]:
    """cpu.shares, cpu.cfs_quota_us and memory.limit_in_bytes of the container, read from
    the host's cgroup v1 hierarchies (the kubelet here uses cgroupfs on v1 controllers)."""
    cid = container_id.removeprefix("containerd://")
    tasks = c.ctr("tasks", "ls").stdout.splitlines()[1:]
    pid = next(int(line.split()[1]) for line in tasks if line.split()[0] == cid)
    paths = {}
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(","):
            paths[controller] = (controllers, path)
    out = {}
    for controller, name in (("cpu", "cpu.shares"), ("cpu", "cpu.cfs_quota_us"),
                             ("memory", "memory.limit_in_bytes")):
        mount, path = paths[controller]
        out[name] = int(Path(f"/sys/fs/cgroup/{mount}{path}/{name}").read_text())
    return out


def describe(c: Cluster, pod: dict[str, Any] | None) -> str:
    """What to show when the resize did not happen: the Pod's conditions and resources,
    the kubelet's events for it, and /cpvpa's resize lines."""
    parts = []
    if pod is not None:
        name = pod["metadata"]["name"]
        fresh = admin(c).get(f"/api/v1/namespaces/{NS}/pods/{name}")
        parts.append("conditions: " + json.dumps(fresh["status"].get("conditions")))
        parts.append("spec resources: " + json.dumps(
            fresh["spec"]["containers"][0].get("resources")))
        parts.append("status resources: " + json.dumps(
            (fresh["status"].get("containerStatuses") or [{}])[0].get("resources")))
        parts.append(c.kubectl("get", "events", "-n", NS, "--field-selector",
                               f"involvedObject.name={name}", check=False).stdout)
    autoscaler = cpvpa_pod(c)
    if autoscaler is not None:
        parts += [line for line in pod_logs(c, autoscaler["metadata"]["name"]).splitlines()
                  if "resize" in line or "error" in line][-20:]
    return "\n".join(parts)


# ---------------------------------------------------------------------- the steps
def test_1_cpva_deployment_with_our_image_sizes_the_daemonset(cluster: Cluster) -> None:
    began = time.monotonic()
    apply(cluster, daemonset(cluster.images["PAUSE_IMAGE"]))
    first = wait_for("the node-agent Pod running", lambda: running_agent(cluster), 120)
    assert first["spec"]["nodeName"] == NODE_NAME
    timed("step 1: DaemonSet applied -> its Pod running on the node",
          time.monotonic() - began)
    began = time.monotonic()
    apply(cluster, configmap(), *rbac(CPVA_RULES),
          cpva_deployment(cluster.images["AUTOSCALER_IMAGE"], []))
    want = computed(cluster)
    wait_for("the template sized by /cpvpa", lambda: same_values(template(cluster), want),
             120)
    timed("step 1: CPVA Deployment applied -> template sized", time.monotonic() - began)
    # CPVA's way: the DaemonSet controller replaces the Pod with the new template.
    pod = wait_for("the node-agent Pod replaced with the values", lambda: (
        p if (p := running_agent(cluster)) is not None
        and p["metadata"]["uid"] != first["metadata"]["uid"]
        and same_values(p["spec"]["containers"][0]["resources"], want) else None), 120)
    timed("step 1: CPVA Deployment applied -> Pod replaced (rolled)", time.monotonic() - began)
    autoscaler = cpvpa_pod(cluster)
    assert autoscaler is not None
    logs = pod_logs(cluster, autoscaler["metadata"]["name"])
    assert "nodes.watch_forbidden" in logs, logs  # CPVA's RBAC: a list per poll
    assert "config=in-cluster" in logs and "setting" in logs, logs
    STATE["pod"] = pod


def test_2_in_place_resize_keeps_the_pod(cluster: Cluster) -> None:
    began = time.monotonic()
    old = cpvpa_pod(cluster)
    assert old is not None
    apply(cluster, *rbac(CPVA_RULES + IN_PLACE_RULES),
          cpva_deployment(cluster.images["AUTOSCALER_IMAGE"], ["--resize-mode=in-place"]))
    autoscaler = wait_for("the in-place /cpvpa running", lambda: (
        p if (p := cpvpa_pod(cluster)) is not None
        and p["metadata"]["uid"] != old["metadata"]["uid"] else None), 120)
    name = autoscaler["metadata"]["name"]
    wait_for("its first poll (config.set)", lambda: "config.set" in pod_logs(cluster, name),
             60)
    assert "resize_mode=in-place" in pod_logs(cluster, name)
    timed("step 2: in-place /cpvpa running", time.monotonic() - began)
    pod = running_agent(cluster)
    assert pod is not None and pod["metadata"]["uid"] == STATE["pod"]["metadata"]["uid"]
    restarts = pod["status"]["containerStatuses"][0]["restartCount"]
    before_template = template(cluster)
    before_cgroup = cgroup_values(cluster, pod["status"]["containerStatuses"][0]["containerID"])

    began = time.monotonic()
    for i in range(NODES_ADDED):
        admin(cluster).post("/api/v1/nodes", fake_node(i))
    want = computed(cluster)
    assert not same_values(pod["spec"]["containers"][0]["resources"], want)

    def resized() -> dict[str, Any] | None:
        current = running_agent(cluster)
        if current is None:
            return None
        status = current["status"]
        conditions = {x["type"] for x in status.get("conditions") or []
                      if x.get("status") == "True"}
        applied = (status.get("containerStatuses") or [{}])[0].get("resources")
        if (same_values(current["spec"]["containers"][0]["resources"], want)
                and same_values(applied, want)
                and not conditions & {"PodResizePending", "PodResizeInProgress"}):
            return current
        return None

    try:
        after = wait_for("the Pod resized in place and the resize applied", resized, 120)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{describe(cluster, running_agent(cluster))}") from None
    timed("step 2: Nodes added -> Pod resized in place (applied)", time.monotonic() - began)
    assert after["metadata"]["uid"] == pod["metadata"]["uid"], "the Pod was replaced"
    assert after["status"]["containerStatuses"][0]["restartCount"] == restarts
    assert template(cluster) == before_template, "the RollingUpdate template was patched"
    cgroup = cgroup_values(cluster, after["status"]["containerStatuses"][0]["containerID"])
    # The kubelet's cgroup v1 arithmetic: shares = millicpu * 1024 / 1000, quota = limit
    # millicpu * 100 (100 ms periods), memory in bytes.
    from cpa.go.quantity import Quantity

    cpu_request = Quantity.parse(want["requests"]["cpu"]).milli_value()
    cpu_limit = Quantity.parse(want["limits"]["cpu"]).milli_value()
    memory_limit = Quantity.parse(want["limits"]["memory"]).value()
    assert cgroup == {"cpu.shares": cpu_request * 1024 // 1000,
                      "cpu.cfs_quota_us": cpu_limit * 100,
                      "memory.limit_in_bytes": memory_limit}, (before_cgroup, cgroup)
    logs = pod_logs(cluster, name)
    assert "resize.pod" in logs and "resize.fallback" not in logs, logs
    assert "resize.template_skipped" in logs, logs
    print(f"[cluster-e2e vertical] step 2: Pod {after['metadata']['name']} resized in place, "
          f"uid and restartCount {restarts} kept; cgroup {before_cgroup} -> {cgroup}",
          flush=True)


# ------------------------------------------------ issue 32: StatefulSets, the fallback's budget
SETS_CONFIG = {
    # Burstable at every size: resized in place.
    "statefulset/store": {"store": {
        "requests": {"cpu": {"base": "20m", "step": "5m", "nodesPerStep": 1},
                     "memory": {"base": "32Mi", "step": "2Mi", "nodesPerStep": 1}},
        "limits": {"memory": {"base": "64Mi", "step": "4Mi", "nodesPerStep": 1}}}},
    # Only requests move, below the limits: a Guaranteed Pod would turn Burstable, so every
    # resize is refused (qos) and the bounded fallback restarts the Pods, one per poll.
    "statefulset/ledger": {"ledger": {
        "requests": {"cpu": {"base": "10m", "step": "1m", "nodesPerStep": 1},
                     "memory": {"base": "16Mi", "step": "1Mi", "nodesPerStep": 1}}}},
}
SETS_RULES = [
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "watch"]},
    {"apiGroups": ["apps"], "resources": ["statefulsets"], "verbs": ["get", "patch"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
    {"apiGroups": [""], "resources": ["pods/resize"], "verbs": ["patch"]},
    {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
]


def statefulset(name: str, image: str, replicas: int, resources: dict[str, Any]
                ) -> dict[str, Any]:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"replicas": replicas, "serviceName": name,
                     "podManagementPolicy": "Parallel",
                     "updateStrategy": {"type": "OnDelete"},
                     "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {
                         "terminationGracePeriodSeconds": 1,
                         "containers": [{"name": name, "image": image,
                                         "imagePullPolicy": "IfNotPresent",
                                         "resources": resources}]}}}}


def sets_autoscaler(image: str) -> dict[str, Any]:
    """One /cpvpa for both StatefulSets: per-target config blocks, in place, the budget."""
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "cpvpa-sets", "namespace": NS, "labels": {"app": "cpvpa-sets"}},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "cpvpa-sets"}},
                     "template": {"metadata": {"labels": {"app": "cpvpa-sets"}}, "spec": {
                         "serviceAccountName": "cpvpa", "terminationGracePeriodSeconds": 5,
                         "containers": [{
                             "image": image, "name": "autoscaler",
                             "imagePullPolicy": "IfNotPresent",
                             "command": ["/cpvpa", "--target=statefulset/store,statefulset/ledger",
                                         "--allow-statefulset", f"--namespace={NS}",
                                         f"--poll-period-seconds={POLL}", "--v=2",
                                         "--log-format=json", "--resize-mode=in-place",
                                         "--resize-fallback-max-pods-per-cycle=1",
                                         f"--default-config={json.dumps(SETS_CONFIG)}"]}]}}}}


def set_pods(c: Cluster, name: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = admin(c).get(
        f"/api/v1/namespaces/{NS}/pods?labelSelector=app%3D{name}")["items"]
    return items


def running_set(c: Cluster, name: str, replicas: int) -> list[dict[str, Any]] | None:
    pods = set_pods(c, name)
    live = [p for p in pods if not p["metadata"].get("deletionTimestamp")
            and p["status"].get("phase") == "Running"
            and all(s.get("ready") for s in p["status"].get("containerStatuses") or [{}])]
    return live if len(pods) == replicas and len(live) == replicas else None


def set_computed(c: Cluster, key: str) -> dict[str, dict[str, str]]:
    nodes = admin(c).get("/api/v1/nodes")["items"]
    cores = sum(int(n["status"]["capacity"]["cpu"]) for n in nodes)
    config = decode_config(json.dumps(SETS_CONFIG[key]))
    [(_, req)] = compute(config, len(nodes), cores).items()
    out = {"requests": {k: str(v) for k, v in req.requests.items()}}
    if req.limits:
        out["limits"] = {k: str(v) for k, v in req.limits.items()}
    return out


def json_logs(c: Cluster, pod: str) -> list[dict[str, Any]]:
    out = []
    for line in pod_logs(c, pod).splitlines():
        with_brace = line[line.find("{"):] if "{" in line else ""
        try:
            out.append(json.loads(with_brace))
        except ValueError:
            continue
    return out


def test_3_statefulsets_one_instance_in_place_and_a_bounded_fallback(cluster: Cluster) -> None:
    pause = cluster.images["PAUSE_IMAGE"]
    began = time.monotonic()
    apply(cluster,
          statefulset("store", pause, 2, {"requests": {"cpu": "10m", "memory": "16Mi"},
                                          "limits": {"memory": "32Mi"}}),
          statefulset("ledger", pause, 3, {"requests": {"cpu": "50m", "memory": "64Mi"},
                                           "limits": {"cpu": "50m", "memory": "64Mi"}}))
    store = wait_for("the store Pods running", lambda: running_set(cluster, "store", 2), 180)
    ledger = wait_for("the ledger Pods running", lambda: running_set(cluster, "ledger", 3), 180)
    timed("step 3: two StatefulSets running on the node", time.monotonic() - began)
    store_uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in store}
    ledger_uids = {p["metadata"]["uid"] for p in ledger}

    began = time.monotonic()
    apply(cluster, *rbac(CPVA_RULES + IN_PLACE_RULES + SETS_RULES),
          sets_autoscaler(cluster.images["AUTOSCALER_IMAGE"]))
    want_store = set_computed(cluster, "statefulset/store")
    want_ledger = set_computed(cluster, "statefulset/ledger")

    def store_resized() -> list[dict[str, Any]] | None:
        pods = running_set(cluster, "store", 2)
        if pods is None:
            return None
        for pod in pods:
            applied = (pod["status"].get("containerStatuses") or [{}])[0].get("resources")
            if not (same_values(pod["spec"]["containers"][0]["resources"], want_store)
                    and same_values(applied, want_store)):
                return None
        return pods

    resized = wait_for("the store Pods resized in place and applied", store_resized, 180)
    timed("step 3: store resized in place (2 Pods)", time.monotonic() - began)
    assert {p["metadata"]["name"]: p["metadata"]["uid"] for p in resized} == store_uids
    assert all(p["status"]["containerStatuses"][0]["restartCount"] == 0 for p in resized)

    def ledger_restarted() -> list[dict[str, Any]] | None:
        pods = running_set(cluster, "ledger", 3)
        if pods is None or {p["metadata"]["uid"] for p in pods} & ledger_uids:
            return None
        ok = all(same_values(p["spec"]["containers"][0]["resources"], want_ledger)
                 for p in pods)
        return pods if ok else None

    wait_for("every ledger Pod restarted with the values", ledger_restarted, 300)
    timed("step 3: ledger restarted by the bounded fallback (3 Pods)",
          time.monotonic() - began)
    [autoscaler] = [p for p in admin(cluster).get(
        f"/api/v1/namespaces/{NS}/pods?labelSelector=app%3Dcpvpa-sets")["items"]
        if not p["metadata"].get("deletionTimestamp")]
    lines = json_logs(cluster, autoscaler["metadata"]["name"])
    restarts = [e["pods"] for e in lines if e.get("event") == "resize.fallback_restart"]
    print(f"[cluster-e2e vertical] step 3: ledger Pods evicted per poll: {restarts}",
          flush=True)
    assert restarts and all(len(r) <= 1 for r in restarts), restarts
    assert len({p for r in restarts for p in r}) == 3
    rollouts = [e["rollout"] for e in lines if e.get("event") == "update.rollout"]
    assert rollouts and all("OnDelete" in r for r in rollouts), rollouts
    resizes = [e for e in lines if e.get("event") == "resize.pod"]
    assert {e["pod"] for e in resizes} >= set(store_uids), resizes
