"""The RBAC rules real clusters grant the autoscaler (../shared/deployments-in-the-wild.md).

One copy, used by the manifest, chart and live-apiserver tests alike: (apiGroup, resource,
verb) triples, nothing more.
"""

from __future__ import annotations

Rule = tuple[str, str, str]

BASE_RULES: frozenset[Rule] = frozenset({
    ("", "nodes", "list"),
    ("", "nodes", "watch"),
    ("", "replicationcontrollers/scale", "get"),
    ("", "replicationcontrollers/scale", "update"),
    ("apps", "deployments/scale", "get"),
    ("apps", "deployments/scale", "update"),
    ("apps", "replicasets/scale", "get"),
    ("apps", "replicasets/scale", "update"),
    ("", "configmaps", "get"),
    ("", "configmaps", "create"),
})

# Our extension: StatefulSet targets need this extra right, granted separately.
STATEFULSET_RULES: frozenset[Rule] = frozenset({
    ("apps", "statefulsets/scale", "get"),
    ("apps", "statefulsets/scale", "update"),
})

# Ours, opt-in: --events creates events.k8s.io Events in the autoscaler's namespace.
EVENT_RULES: frozenset[Rule] = frozenset({("events.k8s.io", "events", "create")})

# Ours, opt-in: --leader-elect holds a Lease in the autoscaler's namespace.
LEASE_RULES: frozenset[Rule] = frozenset({
    ("coordination.k8s.io", "leases", "get"),
    ("coordination.k8s.io", "leases", "create"),
    ("coordination.k8s.io", "leases", "update"),
})

# Ours, opt-in: --target=horizontalpodautoscaler/NAME writes the HPA's spec.minReplicas.
HPA_FLOOR_RULES: frozenset[Rule] = frozenset({
    ("autoscaling", "horizontalpodautoscalers", "get"),
    ("autoscaling", "horizontalpodautoscalers", "patch"),
})

# Ours, opt-in: --update-configmap-from-defaults replaces the ConfigMap's data.
CONFIGMAP_UPDATE_RULES: frozenset[Rule] = frozenset({("", "configmaps", "update")})

# Ours, opt-in: --config-dir reads the parameters from a volume: no ConfigMap right at all.
CONFIG_DIR_RULES: frozenset[Rule] = frozenset(
    rule for rule in BASE_RULES if rule[1] != "configmaps")

# Ours, opt-in: "managePodDisruptionBudget" keeps a budget per target, reading its selector.
BUDGET_RULES: frozenset[Rule] = frozenset({
    ("policy", "poddisruptionbudgets", "get"),
    ("policy", "poddisruptionbudgets", "create"),
    ("policy", "poddisruptionbudgets", "update"),
    ("policy", "poddisruptionbudgets", "delete"),
    ("apps", "deployments", "get"),
})
