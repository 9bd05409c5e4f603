"""The Helm chart, rendered with `helm template` for a few value sets.

helm comes from scripts/install-helm.sh (.cache/bin/helm), $HELM, or PATH; without it
the whole module is skipped.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.rbac import BASE_RULES, EVENT_RULES, LEASE_RULES
from tests.rbac import STATEFULSET_RULES as STS_RULES

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "cluster-proportional-autoscaler"
MAIN_MANIFEST = REPO / "manifests" / "kube-dns-autoscaler.yaml"


def find_helm() -> str | None:
    for candidate in (os.environ.get("HELM"), str(REPO / ".cache" / "bin" / "helm")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("helm")


HELM = find_helm()
if HELM is None:
    pytest.skip(
        "helm not built yet: make test-tools (make test and make chart-test build it), or "
        "set $HELM", allow_module_level=True
    )

Doc = dict[str, Any]
Render = Callable[..., list[Doc]]

DNS_DEFAULTS = {
    "linear": {
        "coresPerReplica": 256,
        "nodesPerReplica": 16,
        "preventSinglePointFailure": True,
        "includeUnschedulableNodes": True,
    }
}
AKS_LADDER = {
    "coresToReplicas": [[1, 2], [512, 3], [1024, 4], [2048, 5]],
    "nodesToReplicas": [[1, 2], [8, 3], [16, 4], [32, 5]],
}


def _helm(
    args: list[str], tmp_path: Path, values: Mapping[str, Any]
) -> subprocess.CompletedProcess[str]:
    values_file = tmp_path / "values.yaml"
    values_file.write_text(yaml.safe_dump(dict(values)))
    assert HELM is not None
    env = {
        **os.environ,
        "HELM_CACHE_HOME": str(tmp_path / "helm-cache"),
        "HELM_CONFIG_HOME": str(tmp_path / "helm-config"),
        "HELM_DATA_HOME": str(tmp_path / "helm-data"),
    }
    return subprocess.run(
        [HELM, *args, str(CHART), "-f", str(values_file)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


@pytest.fixture
def render(tmp_path: Path) -> Render:
    def _render(
        values: Mapping[str, Any], *, release: str = "rel", namespace: str = "ns1"
    ) -> list[Doc]:
        result = _helm(["template", release, "--namespace", namespace], tmp_path, values)
        assert result.returncode == 0, result.stderr
        return [d for d in yaml.safe_load_all(result.stdout) if d]

    return _render


@pytest.fixture
def render_error(tmp_path: Path) -> Callable[[Mapping[str, Any]], str]:
    def _render_error(values: Mapping[str, Any]) -> str:
        result = _helm(["template", "rel"], tmp_path, values)
        assert result.returncode != 0, f"expected a render error, got:\n{result.stdout}"
        return result.stderr

    return _render_error


def one(docs: list[Doc], kind: str) -> Doc:
    found = [d for d in docs if d["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return found[0]


def container(docs: list[Doc]) -> Doc:
    containers: list[Doc] = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def args(docs: list[Doc]) -> list[str]:
    return list(container(docs)["args"])


def flag_map(argv: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for arg in argv:
        assert arg.startswith("--") and "=" in arg, arg
        name, _, value = arg[2:].partition("=")
        out[name.replace("_", "-")] = value
    return out


def rules(docs: list[Doc]) -> set[tuple[str, str, str]]:
    out: set[tuple[str, str, str]] = set()
    for doc in docs:
        if doc["kind"] in ("ClusterRole", "Role"):
            for rule in doc["rules"]:
                for group in rule["apiGroups"]:
                    for resource in rule["resources"]:
                        for verb in rule["verbs"]:
                            out.add((group, resource, verb))
    return out


def base(**extra: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "options": {"target": "deployment/coredns"},
        "config": {"linear": {"coresPerReplica": 256, "nodesPerReplica": 16}},
    }
    for key, value in extra.items():
        if key == "options":
            values["options"].update(value)
        else:
            values[key] = value
    return values


def test_lint() -> None:
    assert HELM is not None
    result = subprocess.run(
        [
            HELM,
            "lint",
            str(CHART),
            "--set",
            "options.target=deployment/coredns",
            "--set",
            "config.linear.nodesPerReplica=16",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_default_values_render_the_upstream_argument_set(render: Render) -> None:
    docs = render(base())
    assert args(docs) == [
        "--configmap=rel-cluster-proportional-autoscaler",
        "--logtostderr=true",
        "--namespace=ns1",
        "--target=deployment/coredns",
        "--v=0",
    ]
    cm = one(docs, "ConfigMap")
    assert cm["metadata"]["name"] == "rel-cluster-proportional-autoscaler"
    assert cm["metadata"]["namespace"] == "ns1"
    assert list(cm["data"]) == ["linear"]
    assert json.loads(cm["data"]["linear"]) == {"coresPerReplica": 256, "nodesPerReplica": 16}


def test_default_values_are_secure_and_probed(render: Render) -> None:
    docs = render(base())
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    c = container(docs)
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 65534
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert c["resources"]["requests"] == {"cpu": "20m", "memory": "10Mi"}
    assert "memory" in c["resources"]["limits"]
    for probe in ("livenessProbe", "readinessProbe"):
        assert c[probe]["httpGet"] == {"path": "/healthz", "port": 8080}
    assert c["image"] == "ghcr.io/cpa-py/cluster-proportional-autoscaler-py:0.1.0"
    assert "command" not in c, "the image ENTRYPOINT is the binary, as upstream's"


def test_rbac_equals_the_main_manifest_and_is_namespaced(render: Render) -> None:
    docs = render(base())
    assert rules(docs) == BASE_RULES
    assert one(docs, "ClusterRole")["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "watch"]}
    ]
    sa = one(docs, "ServiceAccount")["metadata"]
    for kind in ("ClusterRoleBinding", "RoleBinding"):
        binding = one(docs, kind)
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": sa["name"], "namespace": sa["namespace"]}
        ]
        assert binding["roleRef"]["kind"] == kind.removesuffix("Binding")
    assert one(docs, "Role")["metadata"]["namespace"] == "ns1"

    main_rules: set[tuple[str, str, str]] = rules(
        [d for d in yaml.safe_load_all(MAIN_MANIFEST.read_text()) if d]
    )
    assert rules(docs) == main_rules


def test_statefulset_rbac_only_when_enabled(render: Render) -> None:
    assert (
        rules(render(base(rbac={"create": True, "statefulSets": True}))) == BASE_RULES | STS_RULES
    )
    docs = render(base(options={"target": "Deployment/a,StatefulSet/b"}))
    assert rules(docs) == BASE_RULES | STS_RULES
    assert flag_map(args(docs))["target"] == "Deployment/a,StatefulSet/b"


def test_load_axis_pods_rule_only_when_needed(render: Render) -> None:
    pods = {("", "pods", "list")}
    assert rules(render(base(rbac={"create": True, "pods": True}))) == BASE_RULES | pods
    load = {"metric": "coredns_dns_requests_total", "port": 9153, "targetPerReplica": 5000}
    with_load = base(config={"linear": {"nodesPerReplica": 16, "load": load}})
    assert rules(render(with_load)) == BASE_RULES | pods
    prometheus = {"targetPerReplica": 5000, "prometheus": {"url": "http://p:9090",
                                                           "query": "sum(x)"}}
    assert rules(render(base(config={"ladder": {"nodesToReplicas": [[1, 1]],
                                                "load": prometheus}}))) == BASE_RULES


def test_events_and_leader_election_are_opt_in_with_their_rbac(render: Render) -> None:
    docs = render(base())
    assert "events" not in flag_map(args(docs)) and "leader-elect" not in flag_map(args(docs))
    docs = render(base(options={"events": True}))
    assert flag_map(args(docs))["events"] == "true"
    assert rules(docs) == BASE_RULES | EVENT_RULES
    docs = render(base(replicaCount=2, options={"leaderElection": {
        "enabled": True, "leaseDuration": "20s", "retryPeriod": "3s"}}))
    flags_ = flag_map(args(docs))
    assert flags_["leader-elect"] == "true"
    assert flags_["leader-elect-lease-duration"] == "20s"
    assert flags_["leader-elect-retry-period"] == "3s"
    assert "leader-elect-renew-deadline" not in flags_
    assert rules(docs) == BASE_RULES | LEASE_RULES
    assert one(docs, "Deployment")["spec"]["replicas"] == 2


def test_rbac_and_service_account_can_be_disabled(render: Render) -> None:
    docs = render(base(rbac={"create": False}, serviceAccount={"create": False, "name": "mine"}))
    assert {d["kind"] for d in docs} == {"ConfigMap", "Deployment"}
    assert one(docs, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == "mine"


def test_ladder_config(render: Render) -> None:
    docs = render(base(config={"ladder": AKS_LADDER}))
    data = one(docs, "ConfigMap")["data"]
    assert list(data) == ["ladder"]
    assert json.loads(data["ladder"]) == AKS_LADDER


def test_config_given_as_a_json_string_is_kept(render: Render) -> None:
    raw = '{"nodesToReplicas":[[0,0],[6,1]]}'
    data = one(render(base(config={"ladder": raw})), "ConfigMap")["data"]
    assert data == {"ladder": raw}


def test_rendered_configmaps_are_valid_params(render: Render) -> None:
    from cpa.horizontal.decide.modes.registry import parse_configmap_data

    for config in (
        {"ladder": AKS_LADDER},
        {"linear": DNS_DEFAULTS["linear"]},
        {"ladder": {"nodesToReplicas": [[0, 0], [6, 1]]}},
    ):
        parse_configmap_data(one(render(base(config=config)), "ConfigMap")["data"])


def test_node_labels(render: Render) -> None:
    docs = render(
        base(options={"nodeLabels": {"node-role.kubernetes.io/worker": "true", "pool": "system"}})
    )
    assert "--nodelabels=node-role.kubernetes.io/worker=true,pool=system" in args(docs)


@pytest.mark.parametrize(("value", "expected"), [(3, "3"), (0, "0"), (-1, "0")])
def test_max_sync_failures(render: Render, value: int, expected: str) -> None:
    assert (
        flag_map(args(render(base(options={"maxSyncFailures": value}))))["max-sync-failures"]
        == expected
    )


def test_max_sync_failures_unset_is_not_rendered(render: Render) -> None:
    assert "max-sync-failures" not in flag_map(args(render(base())))


def test_every_upstream_option(render: Render) -> None:
    """A values file written for the upstream chart renders the upstream flags."""
    docs = render(
        base(
            options={
                "target": "deployment/coredns",
                "namespace": "kube-system",
                "logLevel": 2,
                "logToStdErr": True,
                "alsoLogToStdErr": True,
                "logBacktraceAt": "main.go:1",
                "logDir": "/tmp/logs",
                "maxSyncFailures": 5,
                "pollPeriodSeconds": 30,
                "stdErrThreshold": 2,
                "vmodule": "poller=4",
                "nodeLabels": {"a": "b"},
            }
        )
    )
    flags = flag_map(args(docs))
    assert flags == {
        "configmap": "rel-cluster-proportional-autoscaler",
        "logtostderr": "true",
        "namespace": "kube-system",
        "target": "deployment/coredns",
        "v": "2",
        "alsologtostderr": "true",
        "log-backtrace-at": "main.go:1",
        "log-dir": "/tmp/logs",
        "max-sync-failures": "5",
        "nodelabels": "a=b",
        "poll-period-seconds": "30",
        "stderrthreshold": "2",
        "vmodule": "poller=4",
    }
    for doc in docs:
        if doc["kind"] not in ("ClusterRole", "ClusterRoleBinding"):
            assert doc["metadata"]["namespace"] == "kube-system", doc["kind"]


def test_default_params_without_config_renders_no_configmap(render: Render) -> None:
    values = base(options={"defaultParams": DNS_DEFAULTS})
    del values["config"]
    docs = render(values)
    assert not [d for d in docs if d["kind"] == "ConfigMap"]
    assert json.loads(flag_map(args(docs))["default-params"]) == DNS_DEFAULTS


@pytest.mark.parametrize(
    "extra",
    [["--log-format=json", "--health-port=9090"], {"log-format": "json", "health-port": 9090}],
)
def test_extra_args(render: Render, extra: Any) -> None:
    argv = args(render(base(extraArgs=extra)))
    assert set(argv[-2:]) == {"--log-format=json", "--health-port=9090"}


def test_can_reproduce_the_dns_addon(render: Render) -> None:
    """Values equivalent to manifests/kube-dns-autoscaler.yaml give the same flags."""
    values = base(
        fullnameOverride="kube-dns-autoscaler",
        options={
            "target": "Deployment/coredns",
            "namespace": "kube-system",
            "defaultParams": DNS_DEFAULTS,
            "logLevel": 2,
        },
        priorityClassName="system-cluster-critical",
        tolerations=[{"key": "CriticalAddonsOnly", "operator": "Exists"}],
    )
    del values["config"]
    docs = render(values)
    main = [d for d in yaml.safe_load_all(MAIN_MANIFEST.read_text()) if d]
    main_pod = one(main, "Deployment")["spec"]["template"]["spec"]
    chart_pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    want = flag_map(main_pod["containers"][0]["command"][1:])
    got = flag_map(args(docs))
    assert json.loads(got.pop("default-params")) == json.loads(want.pop("default-params"))
    assert got == want
    assert chart_pod["priorityClassName"] == main_pod["priorityClassName"]
    assert chart_pod["tolerations"] == main_pod["tolerations"]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"config": {"linear": {"nodesPerReplica": 1}}}, "options.target must be specified"),
        (base(options={"target": "daemonset/x"}), "daemonset/x"),
        (base(options={"target": "deployment/a deployment/b"}), "deployment/a deployment/b"),
        (base(options={"target": "deployment/"}), "deployment/"),
        ({"options": {"target": "deployment/x"}}, "config must be supplied"),
        (base(config={"linear": {"min": 1}, "ladder": {"nodesToReplicas": [[1, 1]]}}), "not both"),
    ],
    ids=["no-target", "bad-kind", "space-separated", "empty-name", "no-config", "both-modes"],
)
def test_invalid_values_fail_to_render(
    render_error: Callable[[Mapping[str, Any]], str], values: dict[str, Any], message: str
) -> None:
    assert message in render_error(values)


# --- health port, log format, several replicas, monitoring (ours) ----------------------


def test_health_port_moves_the_port_and_both_probes(render: Render) -> None:
    docs = render(base(healthPort=9090))
    c = container(docs)
    assert flag_map(args(docs))["health-port"] == "9090"
    assert c["ports"] == [{"name": "health", "containerPort": 9090, "protocol": "TCP"}]
    for probe in ("livenessProbe", "readinessProbe"):
        assert c[probe]["httpGet"] == {"path": "/healthz", "port": 9090}


def test_log_format(render: Render) -> None:
    assert flag_map(args(render(base(logFormat="json"))))["log-format"] == "json"
    assert "log-format" not in flag_map(args(render(base(logFormat="text"))))


def test_defaults_render_nothing_new(render: Render) -> None:
    """Default values: the same objects and arguments as before the opt-in options."""
    docs = render(base())
    assert sorted(d["kind"] for d in docs) == sorted(
        ["ServiceAccount", "ConfigMap", "ClusterRole", "ClusterRoleBinding", "Role",
         "RoleBinding", "Deployment"])
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert "affinity" not in pod and "topologySpreadConstraints" not in pod


def ha(**extra: Any) -> dict[str, Any]:
    return base(replicaCount=3, options={"leaderElection": {"enabled": True}}, **extra)


def test_several_replicas_get_a_budget_and_are_spread(render: Render) -> None:
    docs = render(ha())
    selector = one(docs, "Deployment")["spec"]["selector"]["matchLabels"]
    pdb = one(docs, "PodDisruptionBudget")
    assert pdb["spec"] == {"minAvailable": 1, "selector": {"matchLabels": selector}}
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    (term,) = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"] == {"topologyKey": "kubernetes.io/hostname",
                                       "labelSelector": {"matchLabels": selector}}
    assert pod["topologySpreadConstraints"] == [{
        "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {"matchLabels": selector}}]


def test_spreading_can_be_hard_or_given_or_off(render: Render) -> None:
    pod = one(render(ha(podAntiAffinity="hard")), "Deployment")["spec"]["template"]["spec"]
    assert "requiredDuringSchedulingIgnoredDuringExecution" in pod["affinity"]["podAntiAffinity"]
    own = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "pool", "operator": "In", "values": ["system"]}]}]}}}
    constraints = [{"maxSkew": 2, "topologyKey": "kubernetes.io/hostname",
                    "whenUnsatisfiable": "DoNotSchedule"}]
    docs = render(ha(affinity=own, topologySpreadConstraints=constraints))
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert pod["affinity"] == own and pod["topologySpreadConstraints"] == constraints
    docs = render(ha(podAntiAffinity="", spreadAcrossZones=False,
                     podDisruptionBudget={"enabled": False}))
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert "affinity" not in pod and "topologySpreadConstraints" not in pod
    assert not [d for d in docs if d["kind"] == "PodDisruptionBudget"]


def test_one_replica_gets_no_budget(render: Render) -> None:
    docs = render(base(options={"leaderElection": {"enabled": True}}))
    assert not [d for d in docs if d["kind"] == "PodDisruptionBudget"]


def test_monitoring_objects_are_opt_in_and_follow_the_port(render: Render) -> None:
    from tests.monitoring import DASHBOARD, RULES

    docs = render(base(healthPort=9102, metrics={
        "podMonitor": {"enabled": True, "labels": {"release": "kps"}},
        "serviceMonitor": {"enabled": True, "interval": "15s"},
        "prometheusRule": {"enabled": True, "labels": {"release": "kps"}},
        "grafanaDashboard": {"enabled": True}}))
    selector = one(docs, "Deployment")["spec"]["selector"]["matchLabels"]
    service = one(docs, "Service")
    assert service["spec"]["selector"] == selector
    assert service["spec"]["ports"] == [{"name": "health", "port": 9102,
                                         "targetPort": "health", "protocol": "TCP"}]
    pod_monitor = one(docs, "PodMonitor")
    assert pod_monitor["metadata"]["labels"]["release"] == "kps"
    assert pod_monitor["spec"]["selector"]["matchLabels"] == selector
    assert pod_monitor["spec"]["podMetricsEndpoints"] == [
        {"port": "health", "path": "/metrics", "interval": "30s"}]
    service_monitor = one(docs, "ServiceMonitor")
    assert service_monitor["spec"]["selector"]["matchLabels"] == {
        k: v for k, v in service["metadata"]["labels"].items()
        if k in (*selector, "app.kubernetes.io/component")}
    assert service_monitor["spec"]["endpoints"][0]["interval"] == "15s"
    rule = one(docs, "PrometheusRule")
    assert rule["spec"] == yaml.safe_load(RULES.read_text())
    dashboards = [d for d in docs if d["kind"] == "ConfigMap" and "dashboard" in
                  d["metadata"]["name"]]
    assert dashboards[0]["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboards[0]["data"]["cluster-proportional-autoscaler.json"]) == \
        json.loads(DASHBOARD.read_text())


def test_the_metrics_service_alone(render: Render) -> None:
    docs = render(base(metrics={"service": {"enabled": True}}))
    assert one(docs, "Service")["spec"]["ports"][0]["port"] == 8080
    long_name = render(base(metrics={"service": {"enabled": True}}), release="r" * 53)
    name = one(long_name, "Service")["metadata"]["name"]
    assert len(name) <= 63 and name.endswith("-metrics")
    assert not [d for d in docs if d["kind"] in ("PodMonitor", "ServiceMonitor")]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (base(replicaCount=2),
         "replicaCount is 2 but options.leaderElection.enabled is false: every replica would "
         "poll and write the same targets"),
        (base(healthPort=70000), "healthPort: 70000 is not a port"),
        (base(logFormat="yaml"), 'logFormat: "yaml" is not a log format; give text or json'),
    ],
    ids=["replicas-without-leader-election", "bad-port", "bad-log-format"],
)
def test_unsafe_values_are_refused_with_the_reason(
    render_error: Callable[[Mapping[str, Any]], str], values: dict[str, Any], message: str
) -> None:
    assert message in render_error(values)
