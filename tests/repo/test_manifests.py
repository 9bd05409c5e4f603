"""Static checks of manifests/: the DNS addon replacement and the examples."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.rbac import (
    BASE_RULES,
    BUDGET_RULES,
    CONFIG_DIR_RULES,
    CONFIGMAP_UPDATE_RULES,
    EVENT_RULES,
    HPA_FLOOR_RULES,
    LEASE_RULES,
    STATEFULSET_RULES,
    WATCH_TARGET_RULES,
    Rule,
)

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "manifests"
MAIN = MANIFESTS / "kube-dns-autoscaler.yaml"
EXAMPLES = MANIFESTS / "examples"
EXAMPLE_FILES = sorted(EXAMPLES.glob("*.yaml"))

Doc = dict[str, Any]

# The Kubernetes DNS addon's kube-dns-autoscaler command line, flag for flag.
DNS_ADDON_COMMAND = [
    "/cluster-proportional-autoscaler",
    "--namespace=kube-system",
    "--configmap=kube-dns-autoscaler",
    "--target=Deployment/coredns",
    '--default-params={"linear":{"coresPerReplica":256,"nodesPerReplica":16,'
    '"preventSinglePointFailure":true,"includeUnschedulableNodes":true}}',
    "--logtostderr=true",
    "--v=2",
]



def load(path: Path) -> list[Doc]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def of_kind(docs: Iterable[Doc], kind: str) -> list[Doc]:
    return [d for d in docs if d["kind"] == kind]


def one(docs: Iterable[Doc], kind: str) -> Doc:
    found = of_kind(docs, kind)
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def expand(rules: Iterable[Doc]) -> set[Rule]:
    return {
        (group, resource, verb)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def granted_to(docs: list[Doc], namespace: str, service_account: str) -> set[Rule]:
    """Union of the rules every (Cluster)RoleBinding in docs gives the ServiceAccount."""
    roles = {(d["kind"], d["metadata"]["name"]): d for d in docs if d["kind"].endswith("Role")}
    out: set[Rule] = set()
    for binding in docs:
        if not binding["kind"].endswith("RoleBinding"):
            continue
        subject = {"kind": "ServiceAccount", "name": service_account, "namespace": namespace}
        if subject not in binding["subjects"]:
            continue
        ref = binding["roleRef"]
        assert ref["apiGroup"] == "rbac.authorization.k8s.io"
        role = roles.get((ref["kind"], ref["name"]))
        assert role is not None, f"{binding['metadata']['name']} binds a missing {ref}"
        out |= expand(role["rules"])
    return out


def flags(command: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for arg in command[1:]:
        assert arg.startswith("--") and "=" in arg, arg
        name, _, value = arg[2:].partition("=")
        out[name] = value
    return out


def default_params_as_configmap_data(raw: str) -> dict[str, str]:
    """--default-params -> ConfigMap data, as the autoscaler writes it."""
    params = json.loads(raw)
    assert isinstance(params, dict)
    return {k: json.dumps(v, sort_keys=True, separators=(",", ":")) for k, v in params.items()}


def check_autoscaler_deployment(deployment: Doc) -> None:
    """Security and health settings every shipped autoscaler Deployment must carry."""
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 65534
    assert pod["securityContext"]["runAsGroup"] == 65534
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod.get("hostNetwork") is not True
    (container,) = pod["containers"]
    sc = container["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert "add" not in sc["capabilities"]
    assert container["command"][0] == "/cluster-proportional-autoscaler"
    resources = container["resources"]
    assert resources["requests"] == {"cpu": "20m", "memory": "10Mi"}
    assert "memory" in resources["limits"]
    assert "cpu" not in resources["limits"], "a CPU limit only throttles a 20m poller"
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": 8080}, probe
    assert {"name": "health", "containerPort": 8080, "protocol": "TCP"} in container["ports"]
    # HOME=/tmp in the image; with a read-only root it must be a volume.
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in volumes[mounts["/tmp"]]
    sa = pod["serviceAccountName"]
    assert sa and sa != "default"


def check_never_blocks_a_drain(docs: list[Doc]) -> None:
    """The shipped autoscaler's Pods may be evicted one at a time: a budget of
    maxUnavailable 1 selecting exactly the Deployment's Pods, and safe-to-evict."""
    deployment = one(docs, "Deployment")
    pdb = one(docs, "PodDisruptionBudget")
    assert pdb["apiVersion"] == "policy/v1"
    assert pdb["spec"] == {"maxUnavailable": 1, "selector": deployment["spec"]["selector"]}
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"] == "true"
    assert "karpenter.sh/do-not-disrupt" not in annotations


# --- every file -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path", [MAIN, *EXAMPLE_FILES], ids=lambda p: str(p.relative_to(MANIFESTS))
)
def test_parses_as_kubernetes_objects(path: Path) -> None:
    docs = load(path)
    assert docs
    for doc in docs:
        assert {"apiVersion", "kind", "metadata"} <= set(doc), doc
        assert doc["metadata"]["name"]
        if doc["kind"] in {"ServiceAccount", "ConfigMap", "Deployment", "Role", "RoleBinding"}:
            assert doc["metadata"]["namespace"], f"{doc['kind']} must name its namespace"


def test_examples_exist() -> None:
    names = {p.name for p in EXAMPLE_FILES}
    assert {
        "linear-configmap.yaml",
        "ladder-configmap.yaml",
        "scale-from-zero-configmap.yaml",
        "multi-target.yaml",
        "nodelabels.yaml",
        "events-rbac.yaml",
        "leader-election.yaml",
        "hpa-floor-rbac.yaml",
        "config-dir.yaml",
        "configmap-update-rbac.yaml",
        "watch-targets-rbac.yaml",
    } <= names


# --- the main manifest ------------------------------------------------------------------


@pytest.fixture(scope="module")
def main() -> list[Doc]:
    return load(MAIN)


def test_main_objects(main: list[Doc]) -> None:
    assert sorted(d["kind"] for d in main) == [
        "ClusterRole",
        "ClusterRoleBinding",
        "Deployment",
        "PodDisruptionBudget",
        "ServiceAccount",
    ]


def test_main_never_blocks_a_node_drain(main: list[Doc]) -> None:
    """A budget that lets its one Pod be evicted, over exactly the Deployment's Pods, and
    cluster-autoscaler told the Pod is safe to evict."""
    deployment = one(main, "Deployment")
    check_never_blocks_a_drain(main)
    assert one(main, "PodDisruptionBudget")["metadata"]["namespace"] == (
        deployment["metadata"]["namespace"])


def test_main_rbac_is_exactly_the_addons(main: list[Doc]) -> None:
    role = one(main, "ClusterRole")
    assert expand(role["rules"]) == BASE_RULES
    # No wildcard and no duplicate grants hidden in the rule list.
    listed = [
        (g, r, v)
        for rule in role["rules"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    ]
    assert len(listed) == len(BASE_RULES)
    assert granted_to(main, "kube-system", "kube-dns-autoscaler") == BASE_RULES


def test_main_deployment_runs_the_addons_command_line(main: list[Doc]) -> None:
    deployment = one(main, "Deployment")
    assert deployment["metadata"]["namespace"] == "kube-system"
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["command"] == DNS_ADDON_COMMAND
    assert "args" not in container


def test_main_deployment_security_and_scheduling(main: list[Doc]) -> None:
    deployment = one(main, "Deployment")
    check_autoscaler_deployment(deployment)
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == one(main, "ServiceAccount")["metadata"]["name"]
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert {"key": "CriticalAddonsOnly", "operator": "Exists"} in pod["tolerations"]
    assert pod["securityContext"]["fsGroup"] == 65534
    assert pod["securityContext"]["supplementalGroups"] == [65534]
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert selector.items() <= deployment["spec"]["template"]["metadata"]["labels"].items()


def test_main_default_params_are_valid(main: list[Doc]) -> None:
    from cpa.horizontal.decide.modes.registry import parse_configmap_data

    (container,) = one(main, "Deployment")["spec"]["template"]["spec"]["containers"]
    data = default_params_as_configmap_data(flags(container["command"])["default-params"])
    assert parse_configmap_data(data).name == "linear"


# --- kustomize --------------------------------------------------------------------------


def test_kustomization_deploys_only_the_main_manifest() -> None:
    kustomization = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())
    assert kustomization["kind"] == "Kustomization"
    assert kustomization["resources"] == ["kube-dns-autoscaler.yaml"]
    for key in ("namespace", "namePrefix", "nameSuffix", "patches"):
        assert key not in kustomization, f"{key} would change the addon-compatible objects"
    # The image goes through an `images:` entry (test_published_name checks its value),
    # which `kustomize edit set image` and `make deploy` change; the objects stay the same.
    assert [set(i) for i in kustomization["images"]] == [{"name", "newTag"}]


def test_kustomize_build_equals_the_main_manifest() -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl not installed")
    result = subprocess.run(
        [kubectl, "kustomize", str(MANIFESTS)], capture_output=True, text=True, timeout=60
    )
    if result.returncode != 0 and "unknown command" in result.stderr:
        pytest.skip("this kubectl has no kustomize")
    assert result.returncode == 0, result.stderr
    built = [d for d in yaml.safe_load_all(result.stdout) if d]

    def key(d: Doc) -> tuple[str, str]:
        return d["kind"], d["metadata"]["name"]

    assert sorted(built, key=key) == sorted(load(MAIN), key=key)


# --- examples ---------------------------------------------------------------------------


def example(name: str) -> list[Doc]:
    return load(EXAMPLES / name)


def configmaps_in_examples() -> list[tuple[str, Doc]]:
    return [(p.name, cm) for p in EXAMPLE_FILES for cm in of_kind(load(p), "ConfigMap")]


@pytest.mark.parametrize(
    ("name", "configmap"),
    configmaps_in_examples(),
    ids=[f"{n}:{cm['metadata']['name']}" for n, cm in configmaps_in_examples()],
)
def test_example_configmap_data_is_valid_params(name: str, configmap: Doc) -> None:
    from cpa.horizontal.decide.modes.registry import parse_configmap_data

    data = configmap["data"]
    assert len(data) == 1 and next(iter(data)) in ("linear", "ladder"), name
    json.loads(next(iter(data.values())))
    parse_configmap_data(data)


def test_only_the_axes_example_grants_pods_and_services() -> None:
    """Counting Pods and Services (ours, opt-in) needs list/watch on them cluster-wide: in
    the example that uses the axes, nowhere else."""
    docs = example("pods-services.yaml")
    (role,) = of_kind(docs, "ClusterRole")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods", "services"],
                              "verbs": ["list", "watch"]}]
    (binding,) = of_kind(docs, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    (cm,) = of_kind(docs, "ConfigMap")
    assert "podsPerReplica" in cm["data"]["linear"]
    for path in [MAIN, *EXAMPLE_FILES]:
        if path.name == "pods-services.yaml":
            continue
        for doc in load(path):
            for rule in doc.get("rules") or ():
                assert not {"pods", "services"} & set(rule.get("resources", ())) or (
                    "watch" not in rule.get("verbs", ())), path.name


def example_deployments() -> list[tuple[str, Doc]]:
    return [(p.name, d) for p in EXAMPLE_FILES for d in of_kind(load(p), "Deployment")]


@pytest.mark.parametrize(
    ("name", "deployment"), example_deployments(), ids=[n for n, _ in example_deployments()]
)
def test_example_deployments(name: str, deployment: Doc) -> None:
    check_autoscaler_deployment(deployment)
    docs = example(name)
    check_never_blocks_a_drain(docs)
    pod = deployment["spec"]["template"]["spec"]
    namespace = deployment["metadata"]["namespace"]
    (container,) = pod["containers"]
    f = flags(container["command"])
    assert f["namespace"] == namespace
    assert (f.get("configmap") or f.get("config-dir")) and f["target"]
    targets = [t.strip().lower() for t in f["target"].split(",")]
    wanted = set(CONFIG_DIR_RULES if "config-dir" in f else BASE_RULES)
    if f.get("update-configmap-from-defaults") == "true":
        wanted |= CONFIGMAP_UPDATE_RULES
    if any(t.startswith("statefulset/") for t in targets):
        wanted |= STATEFULSET_RULES
    if f.get("events") == "true":
        wanted |= EVENT_RULES
    if f.get("leader-elect") == "true":
        wanted |= LEASE_RULES
    assert granted_to(docs, namespace, pod["serviceAccountName"]) == wanted
    if "config-dir" in f:
        check_config_dir_volume(docs, pod, f["config-dir"])
    elif "default-params" in f:
        from cpa.horizontal.decide.modes.registry import parse_configmap_data

        parse_configmap_data(default_params_as_configmap_data(f["default-params"]))
    else:
        names = {cm["metadata"]["name"] for cm in of_kind(docs, "ConfigMap")}
        assert f["configmap"] in names, "no --default-params and no ConfigMap shipped"


def check_config_dir_volume(docs: list[Doc], pod: Doc, path: str) -> None:
    """--config-dir names a whole configMap volume (no subPath: the kubelet never updates
    those) of a ConfigMap the file ships."""
    (container,) = pod["containers"]
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == path]
    assert "subPath" not in mount and mount.get("readOnly") is True
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    assert "items" not in volume["configMap"]
    names = {cm["metadata"]["name"] for cm in of_kind(docs, "ConfigMap")}
    assert volume["configMap"]["name"] in names


def test_config_dir_example_is_the_main_manifest_without_configmap_rights(
        main: list[Doc]) -> None:
    docs = example("config-dir.yaml")
    assert sorted(d["kind"] for d in docs) == sorted([*(d["kind"] for d in main), "ConfigMap"])
    sa = one(main, "ServiceAccount")["metadata"]
    assert granted_to(docs, sa["namespace"], sa["name"]) == CONFIG_DIR_RULES
    (container,) = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert "configmap" not in flags(container["command"])


def test_configmap_update_example_grants_only_update_on_configmaps(main: list[Doc]) -> None:
    docs = example("configmap-update-rbac.yaml")
    assert {d["kind"] for d in docs} == {"Role", "RoleBinding"}
    sa = one(main, "ServiceAccount")["metadata"]
    assert granted_to(docs, sa["namespace"], sa["name"]) == CONFIGMAP_UPDATE_RULES


def test_events_example_grants_only_event_creation(main: list[Doc]) -> None:
    docs = example("events-rbac.yaml")
    assert {d["kind"] for d in docs} == {"Role", "RoleBinding"}
    sa = one(main, "ServiceAccount")["metadata"]
    assert granted_to(docs, sa["namespace"], sa["name"]) == EVENT_RULES


def test_hpa_floor_example_grants_only_get_and_patch_on_hpas(main: list[Doc]) -> None:
    docs = example("hpa-floor-rbac.yaml")
    assert {d["kind"] for d in docs} == {"Role", "RoleBinding"}
    sa = one(main, "ServiceAccount")["metadata"]
    assert granted_to(docs, sa["namespace"], sa["name"]) == HPA_FLOOR_RULES


def test_leader_election_example_is_the_main_manifest_with_two_replicas(
        main: list[Doc]) -> None:
    docs = example("leader-election.yaml")
    deployment = one(docs, "Deployment")
    base = one(main, "Deployment")
    assert deployment["metadata"] == base["metadata"]
    assert deployment["spec"]["replicas"] == 2
    command = deployment["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command == [*base["spec"]["template"]["spec"]["containers"][0]["command"],
                       "--leader-elect=true"]


def test_ladder_example_is_the_aks_default() -> None:
    cm = one(example("ladder-configmap.yaml"), "ConfigMap")
    assert cm["metadata"] == {
        "name": "kube-dns-autoscaler",
        "namespace": "kube-system",
        "labels": {"app.kubernetes.io/name": "kube-dns-autoscaler"},
    }
    assert json.loads(cm["data"]["ladder"]) == {
        "coresToReplicas": [[1, 2], [512, 3], [1024, 4], [2048, 5]],
        "nodesToReplicas": [[1, 2], [8, 3], [16, 4], [32, 5]],
    }


def test_linear_example_targets_the_main_manifests_configmap(main: list[Doc]) -> None:
    cm = one(example("linear-configmap.yaml"), "ConfigMap")
    (container,) = one(main, "Deployment")["spec"]["template"]["spec"]["containers"]
    f = flags(container["command"])
    assert (cm["metadata"]["namespace"], cm["metadata"]["name"]) == (f["namespace"], f["configmap"])
    assert list(cm["data"]) == ["linear"]


def test_scale_from_zero_example() -> None:
    from cpa.horizontal.decide.modes.registry import parse_configmap_data

    cm = one(example("scale-from-zero-configmap.yaml"), "ConfigMap")
    assert json.loads(cm["data"]["ladder"]) == {"nodesToReplicas": [[0, 0], [6, 1]]}
    assert parse_configmap_data(cm["data"]).name == "ladder"


def test_multi_target_example() -> None:
    docs = example("multi-target.yaml")
    (container,) = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    kinds = {t.split("/")[0].lower() for t in flags(container["command"])["target"].split(",")}
    assert kinds == {"deployment", "replicaset", "statefulset"}
    # The StatefulSet right lives in its own ClusterRole, separate from the base rules.
    sts_roles = [r for r in of_kind(docs, "ClusterRole") if expand(r["rules"]) & STATEFULSET_RULES]
    assert len(sts_roles) == 1
    assert expand(sts_roles[0]["rules"]) == STATEFULSET_RULES


def test_nodelabels_example() -> None:
    (container,) = one(example("nodelabels.yaml"), "Deployment")["spec"]["template"]["spec"][
        "containers"
    ]
    assert flags(container["command"])["nodelabels"] == "node-role.kubernetes.io/worker=true"


def test_statefulset_rights_only_in_the_multi_target_example(main: list[Doc]) -> None:
    assert not expand(one(main, "ClusterRole")["rules"]) & STATEFULSET_RULES
    for path in EXAMPLE_FILES:
        if path.name == "multi-target.yaml":
            continue
        for role in of_kind(load(path), "ClusterRole"):
            assert not expand(role["rules"]) & STATEFULSET_RULES, path.name


def _mebibytes(quantity: str) -> float:
    units = {"Ki": 1 / 1024, "Mi": 1.0, "Gi": 1024.0, "M": 1e6 / 2**20, "k": 1e3 / 2**20}
    for suffix, factor in units.items():
        if quantity.endswith(suffix):
            return float(quantity[: -len(suffix)]) * factor
    return float(quantity) / 2**20


def test_memory_limit_is_justified_by_the_benchmarks(main: list[Doc]) -> None:
    """The limit must cover the largest peak RSS measured (bench/results/latest.json) with
    headroom, and fit the tightest limit seen in the wild (Gardener's 70Mi)."""
    rows = json.loads((REPO / "bench" / "results" / "latest.json").read_text())
    peak = max(r["peak_rss_mib"] for r in rows if r["impl"] == "ours")
    container = one(main, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    limit = _mebibytes(container["resources"]["limits"]["memory"])
    assert peak * 1.2 <= limit <= 70, (peak, limit)


@pytest.mark.parametrize("path", ["migrations/kops/coredns-autoscaler.yaml",
                                  "migrations/kubespray/dns-autoscaler.yaml"])
def test_migration_overlays_never_block_a_node_drain(path: str) -> None:
    """The overlays that carry their own Deployment ship the same budget and annotation
    (dns-addon and eks build on manifests/)."""
    check_never_blocks_a_drain(load(MANIFESTS.parent / path))


def test_budget_example_grants_only_what_the_budgets_need(main: list[Doc]) -> None:
    docs = example("pod-disruption-budget-rbac.yaml")
    assert {d["kind"] for d in docs} == {"Role", "RoleBinding"}
    sa = one(main, "ServiceAccount")["metadata"]
    assert granted_to(docs, sa["namespace"], sa["name"]) == BUDGET_RULES


def test_watch_targets_example_grants_only_what_the_watch_needs(main: list[Doc]) -> None:
    docs = example("watch-targets-rbac.yaml")
    assert {d["kind"] for d in docs} == {"Role", "RoleBinding"}
    sa = one(main, "ServiceAccount")["metadata"]
    assert granted_to(docs, sa["namespace"], sa["name"]) == WATCH_TARGET_RULES
