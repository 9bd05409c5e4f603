"""The RBAC rules real clusters grant the autoscaler (../shared/deployments-in-the-wild.md).

One copy, used by the manifest, chart and live-apiserver tests alike: (apiGroup, resource,
verb) triples, nothing more.
"""

from __future__ import annotations

Rule = tuple[str, str, str]


def grant(group: str, resource: str, *verbs: str) -> frozenset[Rule]:
    """The rules for ``verbs`` on one resource: a role's rule is written that way too."""
    return frozenset((group, resource, verb) for verb in verbs)


BASE_RULES: frozenset[Rule] = (
    grant("", "nodes", "list", "watch")
    | grant("", "replicationcontrollers/scale", "get", "update")
    | grant("apps", "deployments/scale", "get", "update")
    | grant("apps", "replicasets/scale", "get", "update")
    | grant("", "configmaps", "get", "create"))

# Our extension: StatefulSet targets need this extra right, granted separately.
STATEFULSET_RULES: frozenset[Rule] = grant("apps", "statefulsets/scale", "get", "update")

# Ours, opt-in: --events creates events.k8s.io Events in the autoscaler's namespace.
EVENT_RULES: frozenset[Rule] = grant("events.k8s.io", "events", "create")

# Ours, opt-in: --leader-elect holds a Lease in the autoscaler's namespace.
LEASE_RULES: frozenset[Rule] = grant("coordination.k8s.io", "leases", "get", "create", "update")

# Ours, opt-in: --target=horizontalpodautoscaler/NAME writes the HPA's spec.minReplicas.
HPA_FLOOR_RULES: frozenset[Rule] = grant("autoscaling", "horizontalpodautoscalers", "get",
                                         "patch")

# Ours, opt-in: --update-configmap-from-defaults replaces the ConfigMap's data.
CONFIGMAP_UPDATE_RULES: frozenset[Rule] = grant("", "configmaps", "update")

# Ours, opt-in: --config-dir reads the parameters from a volume: no ConfigMap right at all.
CONFIG_DIR_RULES: frozenset[Rule] = frozenset(
    rule for rule in BASE_RULES if rule[1] != "configmaps")

# Ours, opt-in: "managePodDisruptionBudget" keeps a budget per target, reading its selector.
BUDGET_RULES: frozenset[Rule] = (
    grant("policy", "poddisruptionbudgets", "get", "create", "update", "delete")
    | grant("apps", "deployments", "get"))

# Ours, opt-in: --watch-targets lists and watches the targets' kind (metadata only).
WATCH_TARGET_RULES: frozenset[Rule] = grant("apps", "deployments", "get", "list", "watch")
