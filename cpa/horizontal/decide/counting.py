"""Smarter node counting (ours, opt-in): three keys beside upstream's in the same JSON value.

Why: upstream counts every Node and all its cores. Virtual-kubelet Nodes report 10,000+
cores and blow CoreDNS up to hundreds of replicas (upstream #153, AKS#1865); one huge Node
can outweigh a fleet; and under required anti-affinity, replicas beyond the Nodes that can
run them stay Pending (kubespray#3876). The keys, absent by default (upstream's counting):

* ``excludeNodesWithTaints``: a list of taint keys; a Node carrying any of them is not
  counted at all (neither its Node nor its cores), e.g. ``["virtual-kubelet.io/provider"]``.
  An entry starting with ``@`` names a preset: ``"@lifecycle"`` stands for the taints that
  Cluster Autoscaler, Karpenter and the cloud node lifecycle put on Nodes that are leaving
  or not ready for work (:data:`PRESETS`; upstream #209, #255);
* ``maxCoresPerNode``: cores one Node contributes at most (a positive number);
* ``maxReplicasPerNode``: replicas per counted Node at most, applied to the formula's
  result (a positive number; ``1`` for required anti-affinity); never below 1.

The first two are applied in the node store's running totals (a change of these keys costs
one pass over the Nodes; a poll stays O(1)); the third is a step of the decision. Upstream's
parser ignores unknown keys, so the same ConfigMap still works there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Final, NamedTuple

from cpa.go.json import (
    GoJsonError,
    JsonValue,
    describe,
    format_go_float,
    go_float,
    go_string,
)
from cpa.horizontal.decide.steps import Step, plural
from cpa.nodes.counts import DEFAULT_POLICY, CountingPolicy

__all__ = ["FIELDS", "NO_COUNTING", "PRESETS", "Counting", "CountingDoc",
           "counting_problems", "decode_counting_field", "expand_taints"]

FIELDS = ("excludeNodesWithTaints", "maxCoresPerNode", "maxReplicasPerNode")

PRESETS: Final[dict[str, tuple[str, ...]]] = {
    # Nodes that are leaving, or not ready for work yet. Each key as its project spells it
    # (docs/node-counting.md cites the source files):
    "@lifecycle": (
        # Cluster Autoscaler: NoSchedule before it drains and deletes a Node
        # (kubernetes/autoscaler cluster-autoscaler/utils/taints/taints.go, ToBeDeletedTaint).
        "ToBeDeletedByClusterAutoscaler",
        # Karpenter v1: a Node it is disrupting or terminating (kubernetes-sigs/karpenter
        # pkg/apis/v1/taints.go, DisruptedTaintKey).
        "karpenter.sh/disrupted",
        # Karpenter v0.32-v0.37 (v1beta1): the same, before v1 renamed it
        # (pkg/apis/v1beta1/taints.go, DisruptionTaintKey).
        "karpenter.sh/disruption",
        # Karpenter v1: a launched Node until Karpenter has registered it (pkg/apis/v1/
        # taints.go, UnregisteredTaintKey; aws/karpenter-provider-aws adds it to every Node's
        # kubelet registration, pkg/providers/amifamily/resolver.go).
        "karpenter.sh/unregistered",
        # The cloud node lifecycle (k8s.io/cloud-provider api/well_known_taints.go): a Node
        # whose kubelet runs with an external cloud provider, until the cloud controller
        # manager initialised it (TaintExternalCloudProvider) ...
        "node.cloudprovider.kubernetes.io/uninitialized",
        # ... and a Node whose instance is shut down (TaintNodeShutdown, set by
        # kubernetes/cloud-provider controllers/nodelifecycle/node_lifecycle_controller.go).
        "node.cloudprovider.kubernetes.io/shutdown",
    ),
}
"""Named sets of taint keys an ``excludeNodesWithTaints`` entry may stand for."""


def expand_taints(entries: tuple[str, ...]) -> tuple[str, ...]:
    """The taint keys ``entries`` mean: presets replaced by their keys, in order, each key
    once."""
    keys: dict[str, None] = {}
    for entry in entries:
        for key in PRESETS.get(entry, (entry,)):
            keys.setdefault(key, None)
    return tuple(keys)


class Counting(NamedTuple):
    """The counting keys of one parameters value; the default is upstream's counting."""

    exclude_taints: tuple[str, ...] = ()
    max_cores_per_node: float | None = None
    max_replicas_per_node: float | None = None

    @property
    def active(self) -> bool:
        return self != NO_COUNTING

    def policy(self) -> CountingPolicy:
        """What the node store applies in its totals."""
        if not self.exclude_taints and self.max_cores_per_node is None:
            return DEFAULT_POLICY
        cap = None
        if self.max_cores_per_node is not None:
            millicores = Fraction(format_go_float(self.max_cores_per_node)) * 1000
            cap = int(millicores) if millicores.denominator == 1 else millicores
        return CountingPolicy(frozenset(expand_taints(self.exclude_taints)), cap)

    def fields(self) -> dict[str, object]:
        """The keys as the ConfigMap spells them (only those given)."""
        out: dict[str, object] = {}
        if self.exclude_taints:
            out["excludeNodesWithTaints"] = list(self.exclude_taints)
        if self.max_cores_per_node is not None:
            out["maxCoresPerNode"] = self.max_cores_per_node
        if self.max_replicas_per_node is not None:
            out["maxReplicasPerNode"] = self.max_replicas_per_node
        return out

    # --- the decision's steps -------------------------------------------------------------
    def count_steps(self, excluded: int | None, capped: int | None) -> list[Step]:
        """How the counts were shaped (after upstream's counts step); None: the counts were
        given by hand, and are taken as counted already."""
        steps: list[Step] = []
        if self.exclude_taints:
            keys = ", ".join(self._described_taints())
            steps.append(Step("counting.exclude", (
                f"excludeNodesWithTaints ({keys}) leaves {plural(excluded, 'Node')} out of the "
                "counts entirely." if excluded is not None else
                f"excludeNodesWithTaints ({keys}) leaves Nodes with those taints out of the "
                "counts; the counts given here are taken as counted already.")))
        if self.max_cores_per_node is not None:
            cap = format_go_float(self.max_cores_per_node)
            steps.append(Step("counting.cap", (
                f"maxCoresPerNode {cap} caps the cores of {plural(capped, 'Node')}."
                if capped is not None else
                f"maxCoresPerNode {cap} caps what one Node's cores count; the counts given "
                "here are taken as counted already.")))
        return steps

    def _described_taints(self) -> list[str]:
        """The entries as written, each preset followed by what it expanded to."""
        return [f"{entry} = {' + '.join(PRESETS[entry])}" if entry in PRESETS else entry
                for entry in self.exclude_taints]

    def cap_replicas(self, replicas: int, nodes: int, steps: list[Step]) -> int:
        """``maxReplicasPerNode``: at most that many replicas per counted Node, never
        below 1 (an empty or NotReady cluster must not take the add-on to 0)."""
        per = self.max_replicas_per_node
        if per is None:
            return replicas
        limit = max(1, math.floor(per * nodes))
        on = plural(nodes, "Node")
        outcome = (f"up to {limit} replicas on {on}, so {replicas} stays." if replicas <= limit
                   else f"at most {limit} replicas on {on}, so {replicas} is lowered to {limit}.")
        steps.append(Step("counting.replicas_per_node",
                          f"maxReplicasPerNode {format_go_float(per)} allows {outcome}"))
        return min(replicas, limit)


NO_COUNTING: Final = Counting()


# --- parsing, with Go's encoding/json semantics ------------------------------------------


@dataclass(slots=True)
class CountingDoc:
    """The keys as decoded so far (Go decodes a repeated key over the earlier value)."""

    exclude_taints: list[str] | None = None
    max_cores_per_node: float | None = None
    max_replicas_per_node: float | None = None


def decode_counting_field(doc: CountingDoc, field: str, value: JsonValue, where: str) -> None:
    """Decode one member into ``doc``: a ``[]string`` and two ``*float64`` as Go would
    (``null`` resets to absent)."""
    if field == "excludeNodesWithTaints":
        if value is None:
            doc.exclude_taints = None
            return
        if not isinstance(value, tuple):
            raise GoJsonError(f"{where}: expected an array of taint keys such as "
                              f'["virtual-kubelet.io/provider"], got {describe(value)}')
        doc.exclude_taints = [go_string(item, f"{where}[{i}]") if item is not None else ""
                              for i, item in enumerate(value)]
    elif field == "maxCoresPerNode":
        doc.max_cores_per_node = None if value is None else go_float(value, where)
    else:
        doc.max_replicas_per_node = None if value is None else go_float(value, where)


def counting_problems(doc: CountingDoc) -> tuple[Counting, list[str]]:
    """Validate the decoded keys; every problem, each saying how to fix it."""
    problems: list[str] = []
    taints = tuple(doc.exclude_taints or ())
    if any(not key for key in taints):
        problems.append("excludeNodesWithTaints has an empty taint key; list keys such as "
                        '"virtual-kubelet.io/provider"')
    for key in taints:
        if key.startswith("@") and key not in PRESETS:
            problems.append(f"excludeNodesWithTaints has the unknown preset {key!r}; the "
                            f"presets are {', '.join(PRESETS)} (a taint key never starts "
                            "with @)")
    for name, number in (("maxCoresPerNode", doc.max_cores_per_node),
                         ("maxReplicasPerNode", doc.max_replicas_per_node)):
        if number is not None and not number > 0:
            problems.append(f"{name} is {format_go_float(number)}; it must be positive "
                            "(leave it out for no limit)")
    return Counting(taints, doc.max_cores_per_node, doc.max_replicas_per_node), problems
