"""Issue 9: the unchanged manifest running as a Pod on a real node, scaling real CoreDNS pods.
Issue 22 adds one self-contained test at the end: the HPA floor target with the real HPA
controller (``test_hpa_floor_raises_the_deployment``).

One cluster for the module (``cluster.py``); the steps run in order and build on each other:

1. ``make deploy IMAGE=<registry>/...@<index digest> KUBECONFIG=...`` (scripts/deploy.sh:
   ``kubectl apply -k`` of an overlay that only swaps the manifest's image, as a user would),
   after a ``coredns`` Deployment of the real CoreDNS (tests/cluster/coredns.py); the
   Deployment carries exactly that
   reference; the autoscaler reaches the API through the ``kubernetes`` Service's ClusterIP
   (10.0.0.1, DNAT by kube-proxy).
2. The autoscaler Pod becomes Ready (kubelet probes on /healthz), creates its ConfigMap from
   ``--default-params`` and scales coredns; the CoreDNS pods run on the node; `make deploy`
   returns 0 once the rollout is complete, with the autoscaler's first log lines.
3. API-only Nodes (no kubelet, tainted NoSchedule) grow the cluster past a threshold:
   replicas follow and the new CoreDNS pods run, on the real node.
4. The ConfigMap switches to ladder: replicas follow, same Pod, no restart.
5. The autoscaler Pod is deleted: its replacement writes nothing (replicas sampled over the
   whole transition stay what the formula says; the ConfigMap is not rewritten).
6. The Helm chart, installed the same way with the image overridden by values, takes over.

Every step's times are recorded and printed at the end, with the cleanup report; the host
is checked to be exactly as before (``Cluster.leftovers``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cluster.cluster import Cluster, Timings, module_cluster, wait_for
from tests.cluster.configs import NODE_NAME, SERVICE_IP
from tests.cluster.coredns import coredns_objects
from tests.cluster.host import run

REPO = Path(__file__).resolve().parents[2]
NS = "kube-system"
MANIFEST_IMAGE = "ghcr.io/cpa-py/cluster-proportional-autoscaler-py"
HELM = REPO / ".cache" / "bin" / "helm"
FAKE_TAINT = {"key": "cpa-e2e/api-only", "value": "true", "effect": "NoSchedule"}
FAKE_NODES = 32          # + the real node = 33 nodes: ceil(33 / 16) = 3 replicas (linear)
LADDER = {"coresToReplicas": [[1, 1]], "nodesToReplicas": [[1, 1], [2, 2], [20, 4]]}
HELM_LINEAR = {"coresPerReplica": 256, "nodesPerReplica": 8, "min": 1,
               "preventSinglePointFailure": True, "includeUnschedulableNodes": True}
POLL = 10                # the manifest's poll period (the default, not overridden)

pytestmark = pytest.mark.timeout(1200)


TIMES = Timings("cluster-e2e")
STATE: dict[str, Any] = {}


def _report_cleanup(c: Cluster) -> None:
    TIMES.add("cluster: cleanup (pods deleted, processes stopped, host restored)",
              c.timings.get("cleanup", 0.0))
    print("\n[cluster-e2e] cleanup:\n  " + "\n  ".join(c.cleanup_report), flush=True)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with module_cluster(TIMES, _report_cleanup) as c:
        for what, seconds in c.timings.items():
            TIMES.add(f"cluster: {what}", seconds)
        yield c


# ---------------------------------------------------------------------- helpers
def admin(c: Cluster) -> Any:
    assert c.plane is not None
    return c.plane.admin()


def coredns_replicas(c: Cluster) -> int:
    dep = admin(c).get(f"/apis/apps/v1/namespaces/{NS}/deployments/coredns")
    return int(dep["spec"]["replicas"])


def pods(c: Cluster, selector: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = admin(c).get(
        f"/api/v1/namespaces/{NS}/pods?labelSelector={selector}")["items"]
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


def is_ready(pod: dict[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions") or []
    return any(x["type"] == "Ready" and x["status"] == "True" for x in conditions)


def coredns_ready_on_node(c: Cluster, want: int) -> bool:
    """Exactly ``want`` CoreDNS pods, all Running and Ready on the real node."""
    found = pods(c, "k8s-app=kube-dns")
    return len(found) == want and all(
        p["spec"].get("nodeName") == NODE_NAME and p["status"].get("phase") == "Running"
        and is_ready(p) for p in found)


def wait_replicas(c: Cluster, want: int, timeout: float) -> None:
    wait_for(f"coredns spec.replicas == {want}", lambda: coredns_replicas(c) == want,
             timeout, interval=0.2)


def the_pod(c: Cluster, selector: str) -> dict[str, Any]:
    found = pods(c, selector)
    assert len(found) == 1, f"expected one pod for {selector}, got {len(found)}"
    return found[0]


def pod_logs(c: Cluster, name: str) -> str:
    return c.kubectl("logs", "-n", NS, name).stdout


def show_logs(title: str, logs: str, lines: int = 12) -> None:
    body = "\n".join(f"    {line}" for line in logs.splitlines()[:lines])
    print(f"[cluster-e2e] {title}:\n{body}", flush=True)


def log_times(logs: str, event: str) -> list[dt.datetime]:
    """Timestamps of the autoscaler's text-log lines for ``event`` (its own clock)."""
    out = []
    for line in logs.splitlines():
        match = re.match(r"timestamp=(\S+Z) level=\w+ event=(\S+)", line)
        if match and match.group(2) == event:
            out.append(dt.datetime.fromisoformat(match.group(1).replace("Z", "+00:00")))
    return out


def check_security_context(c: Cluster, container_id: str) -> None:
    """The container's process, seen from the host, has what the manifest asks for: uid/gid
    65534, no capabilities, no privilege escalation, seccomp on, a read-only root, 64Mi."""
    cid = container_id.removeprefix("containerd://")
    tasks = c.ctr("tasks", "ls").stdout.splitlines()[1:]
    pid = next(int(line.split()[1]) for line in tasks if line.split()[0] == cid)
    status = dict(line.split(":\t", 1) for line in
                  Path(f"/proc/{pid}/status").read_text().splitlines() if ":\t" in line)
    assert status["Uid"].split()[:2] == ["65534", "65534"], status["Uid"]
    assert status["Gid"].split()[:2] == ["65534", "65534"], status["Gid"]
    assert int(status["CapEff"], 16) == 0 and int(status["CapBnd"], 16) == 0
    assert status["NoNewPrivs"].strip() == "1"
    assert status["Seccomp"].strip() == "2", "no seccomp filter (RuntimeDefault)"
    root = next(line.split() for line in Path(f"/proc/{pid}/mountinfo").read_text()
                .splitlines() if line.split()[4] == "/")
    assert "ro" in root[5].split(","), f"root filesystem not read-only: {root}"
    memory = next(line.split(":", 2)[2] for line in
                  Path(f"/proc/{pid}/cgroup").read_text().splitlines()
                  if line.split(":")[1] == "memory")
    limit = Path(f"/sys/fs/cgroup/memory{memory}/memory.limit_in_bytes").read_text().strip()
    assert int(limit) == 64 * 2**20, f"memory limit {limit}"
    print(f"[cluster-e2e] step 2: autoscaler process {pid}: uid/gid 65534, no capabilities, "
          f"no_new_privs, seccomp filter, read-only root, memory limit 64Mi", flush=True)


@pytest.fixture(scope="module")
def deploy() -> Iterator[dict[str, subprocess.Popen[str]]]:
    """Holds the `make deploy` process of step 1 (it waits for the rollout while step 2
    watches); stopped by its PID at the end of the module if still running."""
    procs: dict[str, subprocess.Popen[str]] = {}
    yield procs
    for proc in procs.values():
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, 15)
            proc.wait(30)


def fake_node(index: int) -> dict[str, Any]:
    """A Node object no kubelet backs: Ready, 4 cores, tainted so nothing schedules there."""
    name = f"api-only-{index:02d}"
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/os": "linux",
                                              "kubernetes.io/hostname": name,
                                              "cpa-e2e/api-only": "true"}},
        "spec": {"taints": [FAKE_TAINT]},
        "status": {
            "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
            "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "APIOnly",
                            "message": "no kubelet: created through the API by the test"}],
        },
    }


# ---------------------------------------------------------------------- the steps
def test_1_make_deploy_with_the_registry_image(cluster: Cluster,
                                              deploy: dict[str, subprocess.Popen[str]]
                                              ) -> None:
    began = time.monotonic()
    cluster.kubectl("apply", "-f", "-", input_text=json.dumps(
        coredns_objects(cluster.images["COREDNS_IMAGE"])))
    wait_for("2 CoreDNS pods Running and Ready", lambda: coredns_ready_on_node(cluster, 2),
             120, interval=0.2)
    TIMES.add("step 1: coredns applied -> 2 CoreDNS pods Ready on the node",
              time.monotonic() - began)
    assert cluster.plane is not None
    image = cluster.images["AUTOSCALER_IMAGE"]
    STATE["applied"] = time.monotonic()
    STATE["applied_wall"] = dt.datetime.now(dt.UTC)
    # As the README says: make deploy IMAGE=... KUBECONFIG=... (it waits for the rollout,
    # up to WAIT=180 s here, while step 2 watches the Pod come up).
    deploy["make"] = subprocess.Popen(
        ["make", "--no-print-directory", "deploy", f"IMAGE={image}",
         f"KUBECONFIG={cluster.plane.admin_kubeconfig}",
         f"KUBECTL={cluster.bin_dir / 'kubectl'}", "WAIT=180"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True)
    live = wait_for("the Deployment applied by make deploy", lambda: cluster.kubectl(
        "get", "-n", NS, "deployment/kube-dns-autoscaler", "-o", "json",
        check=False).stdout, 60, interval=0.2)
    containers = json.loads(live)["spec"]["template"]["spec"]["containers"]
    assert [c["image"] for c in containers] == [image], containers
    for obj in ("serviceaccounts/kube-dns-autoscaler",
                "clusterroles.rbac.authorization.k8s.io/system:kube-dns-autoscaler",
                "clusterrolebindings.rbac.authorization.k8s.io/system:kube-dns-autoscaler"):
        cluster.kubectl("get", "-n", NS, obj)
    svc = admin(cluster).get("/api/v1/namespaces/default/services/kubernetes")
    assert svc["spec"]["clusterIP"] == SERVICE_IP


def test_2_autoscaler_ready_creates_configmap_and_scales(
        cluster: Cluster, deploy: dict[str, subprocess.Popen[str]]) -> None:
    began = STATE["applied"]
    pod = wait_for("the autoscaler pod Running", lambda: [
        p for p in pods(cluster, "k8s-app=kube-dns-autoscaler")
        if p["status"].get("phase") == "Running"], 120, interval=0.2)[0]
    TIMES.add("step 2: apply -> autoscaler container running", time.monotonic() - began)
    # One real node with 2 cores: 1 replica (preventSinglePointFailure needs > 1 node).
    wait_replicas(cluster, 1, 60)
    TIMES.add("step 2: apply -> first scale write observed (coredns 2 -> 1)",
              time.monotonic() - began)
    wait_for("autoscaler pod Ready", lambda: is_ready(
        the_pod(cluster, "k8s-app=kube-dns-autoscaler")), 60, interval=0.2)
    TIMES.add("step 2: apply -> autoscaler pod Ready (readiness probe on /healthz)",
              time.monotonic() - began)
    wait_for("1 CoreDNS pod Running", lambda: coredns_ready_on_node(cluster, 1), 60)

    pod = the_pod(cluster, "k8s-app=kube-dns-autoscaler")
    name = pod["metadata"]["name"]
    STATE["pod"] = pod
    assert pod["spec"]["nodeName"] == NODE_NAME
    assert pod["spec"]["containers"][0]["image"] == cluster.images["AUTOSCALER_IMAGE"]
    status = pod["status"]["containerStatuses"][0]
    assert status["restartCount"] == 0 and status["ready"]

    cm = admin(cluster).get(f"/api/v1/namespaces/{NS}/configmaps/kube-dns-autoscaler")
    assert cm["data"] == {"linear": '{"coresPerReplica":256,"includeUnschedulableNodes":true,'
                                    '"nodesPerReplica":16,"preventSinglePointFailure":true}'}
    logs = pod_logs(cluster, name)
    show_logs(f"step 2: kubectl logs {name}", logs)
    for event in ("starting", "configmap.created", "scale.changed", "params.loaded"):
        assert event in logs, f"{event} missing from the pod's logs:\n{logs}"
    # In-cluster config through the kubernetes Service's ClusterIP, not the bridge address.
    assert f"server=https://{SERVICE_IP}:443" in logs and "config=in-cluster" in logs, logs
    start, write = log_times(logs, "starting")[0], log_times(logs, "scale.changed")[0]
    TIMES.add("step 2: autoscaler process start -> first scale write (its own log)",
              (write - start).total_seconds())
    check_security_context(cluster, status["containerID"])
    # kube-proxy's DNAT carried that traffic: conntrack shows the Pod's connections to the
    # ClusterIP, translated to the API server on the bridge.
    pod_ip = pod["status"]["podIP"]
    flows = run("conntrack", "-L", "-p", "tcp", "--orig-dst", SERVICE_IP, check=False).stdout
    assert any(f"src={pod_ip} dst={SERVICE_IP}" in f and "dport=443" in f for f in
               flows.splitlines()), f"no conntrack entry {pod_ip} -> {SERVICE_IP}:443:\n{flows}"
    # make deploy (step 1) saw the rollout complete and printed the autoscaler's logs.
    out, _ = deploy["make"].communicate(timeout=240)
    print(f"[cluster-e2e] step 2: make deploy output:\n{out}", flush=True)
    assert deploy["make"].returncode == 0, out
    assert 'deployment "kube-dns-autoscaler" successfully rolled out' in out, out
    assert "configmap.created" in out, out
    TIMES.add("step 2: make deploy -> returned (rollout complete, logs printed)",
              time.monotonic() - began)


def test_3_api_only_nodes_grow_the_cluster(cluster: Cluster) -> None:
    client = admin(cluster)
    began = time.monotonic()
    for i in range(FAKE_NODES):
        client.post("/api/v1/nodes", fake_node(i))
    created = time.monotonic()
    TIMES.add(f"step 3: create {FAKE_NODES} API-only Nodes", created - began)
    # 33 nodes, 2 + 128 cores: max(ceil(130/256), ceil(33/16)) = 3.
    wait_replicas(cluster, 3, POLL * 3 + 30)
    TIMES.add("step 3: nodes created -> coredns replicas 3", time.monotonic() - created)
    wait_for("3 CoreDNS pods Running and Ready on the real node",
             lambda: coredns_ready_on_node(cluster, 3), 90)
    TIMES.add("step 3: nodes created -> 3 CoreDNS pods Ready", time.monotonic() - created)
    # The API-only Nodes are tainted NoSchedule, so no pod went (or waits) there.
    on_fake = [p["metadata"]["name"] for p in pods(cluster, "k8s-app=kube-dns")
               if p["spec"].get("nodeName", "").startswith("api-only-")]
    assert on_fake == []


def test_4_switch_to_ladder_without_restart(cluster: Cluster) -> None:
    client = admin(cluster)
    began = time.monotonic()
    client.put(f"/api/v1/namespaces/{NS}/configmaps/kube-dns-autoscaler", {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "kube-dns-autoscaler", "namespace": NS},
        "data": {"ladder": json.dumps(LADDER)},
    })
    # 33 nodes -> the [20, 4] step; 130 cores -> 1: 4 replicas.
    wait_replicas(cluster, 4, POLL * 3 + 30)
    TIMES.add("step 4: ConfigMap -> ladder -> coredns replicas 4", time.monotonic() - began)
    wait_for("4 CoreDNS pods Ready", lambda: coredns_ready_on_node(cluster, 4), 90)
    TIMES.add("step 4: ConfigMap -> ladder -> 4 CoreDNS pods Ready", time.monotonic() - began)
    pod = the_pod(cluster, "k8s-app=kube-dns-autoscaler")
    assert pod["metadata"]["uid"] == STATE["pod"]["metadata"]["uid"], "the pod was replaced"
    assert pod["status"]["containerStatuses"][0]["restartCount"] == 0
    logs = pod_logs(cluster, pod["metadata"]["name"])
    assert "mode.changed" in logs and "mode=ladder" in logs, logs


def test_5_replaced_pod_writes_nothing_wrong(cluster: Cluster) -> None:
    client = admin(cluster)
    old = the_pod(cluster, "k8s-app=kube-dns-autoscaler")
    cm_version = client.get(
        f"/api/v1/namespaces/{NS}/configmaps/kube-dns-autoscaler")["metadata"]["resourceVersion"]
    samples: list[int] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            with contextlib.suppress(Exception):  # an API error is not a replica count
                samples.append(coredns_replicas(cluster))
            time.sleep(0.25)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        began = time.monotonic()
        cluster.kubectl("delete", "pod", "-n", NS, old["metadata"]["name"], "--wait=false")
        new = wait_for("a new autoscaler pod Ready", lambda: [
            p for p in pods(cluster, "k8s-app=kube-dns-autoscaler")
            if p["metadata"]["uid"] != old["metadata"]["uid"] and is_ready(p)], 120)[0]
        TIMES.add("step 5: pod deleted -> replacement Ready", time.monotonic() - began)
        name = new["metadata"]["name"]
        wait_for("the replacement's first poll (params.loaded)",
                 lambda: "params.loaded" in pod_logs(cluster, name), 60)
        TIMES.add("step 5: pod deleted -> replacement's first poll", time.monotonic() - began)
        time.sleep(POLL + 2)  # one more poll period: still nothing to write
    finally:
        stop.set()
        sampler.join(5)
    logs = pod_logs(cluster, name)
    show_logs(f"step 5: kubectl logs {name} (the replacement)", logs)
    assert samples and set(samples) == {4}, f"coredns replicas over the transition: {samples}"
    assert "scale.changed" not in logs, logs
    assert "configmap.created" not in logs, logs
    assert "mode=ladder" in logs, logs
    cm = client.get(f"/api/v1/namespaces/{NS}/configmaps/kube-dns-autoscaler")
    assert cm["metadata"]["resourceVersion"] == cm_version, "the ConfigMap was rewritten"
    assert coredns_ready_on_node(cluster, 4)
    print(f"[cluster-e2e] step 5: {len(samples)} samples of coredns replicas, all 4", flush=True)


def test_6_helm_chart_takes_over(cluster: Cluster) -> None:
    assert HELM.exists(), f"{HELM} missing: run scripts/install-helm.sh"
    assert cluster.plane is not None
    began = time.monotonic()
    # The objects make deploy applied (the image does not matter to delete them).
    cluster.kubectl("delete", "-k", str(REPO / "manifests"), "--wait=true", timeout=120)
    cluster.kubectl("delete", "configmap", "-n", NS, "kube-dns-autoscaler")
    wait_for("the kubectl-applied autoscaler pod gone",
             lambda: not pods(cluster, "k8s-app=kube-dns-autoscaler"), 60)
    TIMES.add("step 6: kubectl delete -k (the applied manifest) done", time.monotonic() - began)
    repo, digest = cluster.images["AUTOSCALER_IMAGE"].split("@", 1)
    values = {
        "image": {"repository": repo, "digest": digest, "pullPolicy": "IfNotPresent"},
        "options": {"target": "deployment/coredns", "logLevel": 2},
        "config": {"linear": HELM_LINEAR},
        "priorityClassName": "system-cluster-critical",
    }
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        yaml.safe_dump(values, f)
    try:
        began = time.monotonic()
        proc = subprocess.run(
            [str(HELM), "install", "dns-autoscaler",
             str(REPO / "charts" / "cluster-proportional-autoscaler"),
             "--namespace", NS, "--kubeconfig", str(cluster.plane.admin_kubeconfig),
             "-f", f.name, "--wait", "--timeout", "180s"],
            capture_output=True, text=True, timeout=240, check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        TIMES.add("step 6: helm install --wait (pod Ready)", time.monotonic() - began)
    finally:
        os.unlink(f.name)
    # 33 nodes / 8 per replica = 5.
    wait_replicas(cluster, 5, POLL * 3 + 30)
    TIMES.add("step 6: helm install -> coredns replicas 5", time.monotonic() - began)
    wait_for("5 CoreDNS pods Ready", lambda: coredns_ready_on_node(cluster, 5), 90)
    TIMES.add("step 6: helm install -> 5 CoreDNS pods Ready", time.monotonic() - began)
    selector = "app.kubernetes.io/instance=dns-autoscaler"
    pod = the_pod(cluster, selector)
    assert pod["spec"]["containers"][0]["image"] == cluster.images["AUTOSCALER_IMAGE"]
    assert is_ready(pod)
    logs = pod_logs(cluster, pod["metadata"]["name"])
    assert "config=in-cluster" in logs and "scale.changed" in logs, logs
    assert "configmap.created" not in logs, "the chart's ConfigMap should have been used"
    proc = subprocess.run([str(HELM), "uninstall", "dns-autoscaler", "--namespace", NS,
                           "--kubeconfig", str(cluster.plane.admin_kubeconfig), "--wait"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    wait_for("the chart's pod gone", lambda: not pods(cluster, selector), 60)


# ------------------------------------------------- issue 22: the HPA floor target
def test_hpa_floor_raises_the_deployment(cluster: Cluster) -> None:
    """``--target=hpa/web``: we write the HPA's spec.minReplicas, the kube-controller-
    manager's HPA controller raises the Deployment to it. No metrics server runs here: the
    HPA controller scales a target below minReplicas before it looks at any metric.

    Self-contained (it needs only the cluster): the manifest with the image swapped, plus
    manifests/examples/hpa-floor-rbac.yaml and the one change its comment describes (the
    --target argument), as a kustomize overlay; a ladder ConfigMap that asks for 3 whatever
    the Node count, then 2.
    """
    client = admin(cluster)
    began = time.monotonic()
    labels = {"app": "hpa-web"}
    web = {"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": "web", "namespace": NS, "labels": labels},
           "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                    "template": {"metadata": {"labels": labels}, "spec": {
                        "terminationGracePeriodSeconds": 5,
                        "containers": [{"name": "web", "image": cluster.images["STANDIN_IMAGE"],
                                        "imagePullPolicy": "IfNotPresent",
                                        "resources": {"requests": {"cpu": "10m"}}}]}}}}
    hpa = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
           "metadata": {"name": "web", "namespace": NS},
           "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                       "name": "web"},
                    "minReplicas": 1, "maxReplicas": 6,
                    "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
                        "type": "Utilization", "averageUtilization": 70}}}]}}
    cluster.kubectl("apply", "-f", "-", input_text=json.dumps({
        "apiVersion": "v1", "kind": "List", "items": [web, hpa]}))
    cluster.kubectl("delete", "configmap", "-n", NS, "kube-dns-autoscaler",
                    "--ignore-not-found")
    cluster.kubectl("create", "configmap", "-n", NS, "kube-dns-autoscaler",
                    "--from-literal=ladder=" + json.dumps({"nodesToReplicas": [[0, 3]]}))

    root = REPO / ".cache" / "cluster" / "hpa-overlay"
    root.mkdir(parents=True, exist_ok=True)
    rbac = REPO / "manifests" / "examples" / "hpa-floor-rbac.yaml"
    (root / rbac.name).write_text(rbac.read_text())  # kustomize loads files below its root
    ref = cluster.images["AUTOSCALER_IMAGE"]  # by digest (a registry) or by tag
    name, at, digest = ref.partition("@")
    image: dict[str, str] = ({"name": MANIFEST_IMAGE, "newName": name, "digest": digest} if at
                             else dict(zip(("name", "newName", "newTag"),
                                           (MANIFEST_IMAGE, *ref.rsplit(":", 1)),
                                           strict=True)))
    (root / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": [os.path.relpath(REPO / "manifests", root), rbac.name],
        "images": [image],
        "patches": [{"target": {"kind": "Deployment", "name": "kube-dns-autoscaler"},
                     "patch": json.dumps([{"op": "replace",
                                           "path": "/spec/template/spec/containers/0/command/3",
                                           "value": "--target=hpa/web"}])}],
    }))
    cluster.kubectl("apply", "-k", str(root))
    path = f"/apis/autoscaling/v2/namespaces/{NS}/horizontalpodautoscalers/web"
    deployment = f"/apis/apps/v1/namespaces/{NS}/deployments/web"
    try:
        wait_for("the HPA's minReplicas at 3 (our write)",
                 lambda: client.get(path)["spec"].get("minReplicas") == 3, 120, interval=0.2)
        written = time.monotonic()
        TIMES.add("hpa: apply -> minReplicas 3 written", written - began)
        wait_for("the Deployment at 3 replicas (the HPA controller's write)",
                 lambda: client.get(deployment)["spec"]["replicas"] == 3, 90, interval=0.5)
        TIMES.add("hpa: minReplicas 3 -> Deployment replicas 3 (HPA controller)",
                  time.monotonic() - written)
        dep = client.get(deployment)
        writers = [f["manager"] for f in dep["metadata"].get("managedFields", [])
                   if "f:replicas" in json.dumps(f.get("fieldsV1", {}))]
        status = client.get(path).get("status", {})
        conditions = {c["type"]: f"{c['status']} {c.get('reason')}"
                      for c in status.get("conditions", [])}
        events = client.get(f"/api/v1/namespaces/{NS}/events?fieldSelector="
                            "involvedObject.kind=HorizontalPodAutoscaler,"
                            "involvedObject.name=web")["items"]
        print(f"[cluster-e2e] hpa: spec.replicas of web written by {writers}; HPA "
              f"conditions {conditions}; HPA events "
              f"{sorted({(e['reason'], e['message'][:90]) for e in events})}", flush=True)
        assert "kube-controller-manager" in writers, writers
        assert any(e["reason"] == "SuccessfulRescale" and "below Spec.MinReplicas"
                   in e["message"] for e in events), events

        # The floor goes down to 2: without metrics the HPA scales nothing down (it only
        # raises a target below minReplicas), so web stays at 3.
        client.patch(f"/api/v1/namespaces/{NS}/configmaps/kube-dns-autoscaler",
                     {"data": {"ladder": json.dumps({"nodesToReplicas": [[0, 2]]})}})
        wait_for("the HPA's minReplicas at 2",
                 lambda: client.get(path)["spec"].get("minReplicas") == 2, POLL * 3 + 30)
        time.sleep(35)  # two HPA syncs (15 s each)
        after = client.get(deployment)["spec"]["replicas"]
        print(f"[cluster-e2e] hpa: minReplicas lowered to 2; 35 s later web has {after} "
              "replicas (no metrics server: the HPA does not scale down)", flush=True)
        assert after == 3
        pod = the_pod(cluster, "k8s-app=kube-dns-autoscaler")
        logs = pod_logs(cluster, pod["metadata"]["name"])
        assert "target=horizontalpodautoscaler/web" in logs and "scale.changed" in logs, logs
    finally:
        cluster.kubectl("delete", "-k", str(root), "--wait=true", check=False, timeout=120)
        cluster.kubectl("delete", "hpa,deployment", "-n", NS, "web", "--wait=true",
                        check=False, timeout=120)
