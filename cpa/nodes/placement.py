"""Where a Pod template could be scheduled (``targetPlacement``, ours, opt-in): pure rules.

Why: upstream counts every Node ``--nodelabels`` lists, so an add-on pinned to one pool (a
``nodeSelector``, a required node affinity, no toleration for a pool's taint) is sized for
the whole cluster (upstream #38, #68, #82). With the key, a Node counts for a target only
when the target's Pod template passes the scheduler's two placement filters:

* NodeAffinity, as ``k8s.io/component-helpers/scheduling/corev1/nodeaffinity``
  (``nodeaffinity.go``: ``GetRequiredNodeAffinity`` / ``RequiredNodeAffinity.Match``) has
  it: every ``nodeSelector`` label equal; then, when
  ``requiredDuringSchedulingIgnoredDuringExecution`` is set, its terms ORed
  (``LazyErrorNodeSelector.Match``), a term's expressions and fields ANDed
  (``nodeSelectorTerm.match``); an empty term is skipped (``isEmptyNodeSelectorTerm``: it
  matches nothing), so an empty or all-empty term list matches no Node; a term that does
  not parse (an unknown operator, ``In`` without values, ``Gt`` with a value that is no
  int64: ``labels.NewRequirement``'s checks) matches no Node either. Label operators as
  ``k8s.io/apimachinery/pkg/labels`` ``Requirement.Matches``: ``In``, ``NotIn`` (a Node
  without the label matches), ``Exists``, ``DoesNotExist``, ``Gt``/``Lt`` (the label must
  parse as a base-10 int64). ``matchFields``: ``In``/``NotIn`` with exactly one value on
  ``metadata.name`` (``nodeSelectorRequirementsAsFieldSelector``).
* TaintToleration: every taint whose effect is ``NoSchedule`` or ``NoExecute`` tolerated
  (``PreferNoSchedule`` only scores), as ``k8s.io/api/core/v1`` ``Toleration.ToleratesTaint``
  (``toleration.go``): an empty effect matches every effect, an empty key every key,
  ``Exists`` every value, ``Equal`` (or no operator) the same value, ``Lt``/``Gt`` a
  numeric comparison of the two values (the TaintTolerationComparisonOperators gate).

One departure from the scheduler, on purpose: the taints Kubernetes' node lifecycle
controller writes from a Node's state (:data:`NODE_STATE_TAINTS`: ``spec.unschedulable``
and the Ready, MemoryPressure, DiskPressure, PIDPressure and NetworkUnavailable conditions,
``nodeConditionToTaintKeyStatusMap`` and ``doNoScheduleTaintingPass`` in
``pkg/controller/nodelifecycle/node_lifecycle_controller.go``) keep no Node off. Why: they
say how a Node is now, not which Pods it is meant for, and how a Node is now is already
counted by upstream's rule, which ``targetPlacement`` leaves as it is: a cordoned or
NotReady Node counts with ``includeUnschedulableNodes`` and not without, and a Node under
pressure counts as any other. Judged as taints, they would drop a cordoned Node from every
target that does not tolerate them, whatever ``includeUnschedulableNodes`` says, and move a
target's count with each passing pressure condition that the whole cluster's count ignores.

``capToPlaceable`` (ours, opt-in) uses the same two filters to find where a target's Pods
can go, then counts the topology domains there that a required pod anti-affinity of the
Pods against each other allows one Pod each (:func:`self_anti_affinity_keys`,
:func:`count_domains`): the scheduler's InterPodAffinity filter for the Pods' own terms.

The API server validates a template's selectors and tolerations before it stores them, so
the parse errors above can only come from a template this code was handed by hand; they
are judged as the scheduler judges them all the same.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final, NamedTuple

from cpa.go.strconv import parse_decimal_int
from cpa.kube.selector import Requirement, matches, node_requirement

__all__ = ["EVERYWHERE", "NODE_STATE_TAINTS", "Domains", "Placement", "Term", "Toleration",
           "count_domains", "excluded_by", "fits", "placement_of", "self_anti_affinity_keys",
           "term"]

_SCHEDULING_EFFECTS: Final = frozenset({"NoSchedule", "NoExecute"})
NODE_STATE_TAINTS: Final = frozenset({
    "node.kubernetes.io/unschedulable",  # spec.unschedulable: a cordon
    "node.kubernetes.io/not-ready",  # Ready False
    "node.kubernetes.io/unreachable",  # Ready Unknown: the kubelet stopped reporting
    "node.kubernetes.io/memory-pressure",
    "node.kubernetes.io/disk-pressure",
    "node.kubernetes.io/pid-pressure",
    "node.kubernetes.io/network-unavailable",
})
"""The taint keys the node lifecycle controller mirrors a Node's state with
(``k8s.io/api/core/v1`` ``well_known_taints.go`` names them): the placement rule passes
over them (the module doc says why); the counting rules decide on those Nodes."""


class Term(NamedTuple):
    """One ``nodeSelectorTerms`` entry: its ``matchExpressions`` (on labels) and
    ``matchFields`` (on fields: ``metadata.name``) as selector requirements. ``valid`` is
    False when one of them is not a valid requirement: the scheduler then matches the term
    against no Node."""

    expressions: tuple[Requirement, ...] = ()
    fields: tuple[Requirement, ...] = ()
    valid: bool = True


class Toleration(NamedTuple):
    key: str = ""
    operator: str = ""
    value: str = ""
    effect: str = ""


class Placement(NamedTuple):
    """What of a Pod template decides which Nodes it can be placed on; hashable, so that
    targets with the same placement share one set of running totals."""

    node_selector: tuple[tuple[str, str], ...] = ()  # sorted (key, value)
    required: tuple[Term, ...] | None = None
    """The required node affinity's terms; None when the template has none (every Node)."""
    tolerations: tuple[Toleration, ...] = ()

    def excludes(self, name: str, labels: Mapping[str, str],
                 taints: Iterable[tuple[str, str, str]]) -> str | None:
        """:func:`excluded_by` this placement."""
        return excluded_by(self, name, labels, taints)


EVERYWHERE: Final = Placement()
"""A template without selector, affinity or tolerations: every untainted Node."""


# --- reading a template --------------------------------------------------------------
def _strings(value: object) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def _requirements(value: object) -> tuple[Requirement | None, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(node_requirement(str(r.get("key") or ""), str(r.get("operator") or ""),
                                  _strings(r.get("values")))
                 for r in value if isinstance(r, dict))


def term(expressions: Iterable[Requirement | None] = (),
         fields: Iterable[Requirement | None] = ()) -> Term:
    """A term of the requirements :func:`~cpa.kube.selector.node_requirement` made (None:
    one that was not valid). A field takes ``In`` or ``NotIn`` and one value, as the
    scheduler's field selector does; a Node's only field is ``metadata.name``."""
    exprs, flds = tuple(expressions), tuple(fields)
    valid = None not in exprs and all(
        f is not None and f.operator in ("in", "notin") and len(f.values) == 1 for f in flds)
    return Term(tuple(e for e in exprs if e is not None),
                tuple(f for f in flds if f is not None), valid)


def placement_of(pod_spec: Mapping[str, Any]) -> Placement:
    """The placement of a Pod template's ``spec`` (a workload's ``spec.template.spec``)."""
    selector = pod_spec.get("nodeSelector")
    pairs = (tuple(sorted((str(k), str(v)) for k, v in selector.items()))
             if isinstance(selector, dict) else ())
    required: tuple[Term, ...] | None = None
    affinity = pod_spec.get("affinity")
    node = affinity.get("nodeAffinity") if isinstance(affinity, dict) else None
    chosen = (node.get("requiredDuringSchedulingIgnoredDuringExecution")
              if isinstance(node, dict) else None)
    if isinstance(chosen, dict):
        terms = chosen.get("nodeSelectorTerms")
        required = tuple(term(_requirements(t.get("matchExpressions")),
                              _requirements(t.get("matchFields")))
                         for t in (terms if isinstance(terms, list) else ())
                         if isinstance(t, dict))
    tolerations = pod_spec.get("tolerations")
    tols = tuple(sorted({Toleration(str(t.get("key") or ""), str(t.get("operator") or ""),
                                    str(t.get("value") or ""), str(t.get("effect") or ""))
                         for t in (tolerations if isinstance(tolerations, list) else ())
                         if isinstance(t, dict)}))
    return Placement(pairs, required, tols)


# --- judging a Node -----------------------------------------------------------------
def _term_ok(term: Term, name: str, labels: Mapping[str, str]) -> bool:
    """The scheduler's ``nodeaffinity`` match of one term: an empty or invalid term matches
    nothing; a Node without a name is matched on its labels only."""
    if not term.valid or (not term.expressions and not term.fields):
        return False
    if not all(matches(r, labels) for r in term.expressions):
        return False
    return not name or all(matches(f, {"metadata.name": name}) for f in term.fields)


def _tolerates(tol: Toleration, key: str, value: str, effect: str) -> bool:
    if tol.effect and tol.effect != effect:
        return False
    if tol.key and tol.key != key:
        return False
    if tol.operator in ("", "Equal"):
        return tol.value == value
    if tol.operator == "Exists":
        return True
    if tol.operator in ("Lt", "Gt"):
        try:
            mine, theirs = parse_decimal_int(tol.value), parse_decimal_int(value)
        except ValueError:
            return False
        return theirs < mine if tol.operator == "Lt" else theirs > mine
    return False


def excluded_by(placement: Placement, name: str, labels: Mapping[str, str],
                taints: Iterable[tuple[str, str, str]]) -> str | None:
    """None when a Pod of ``placement`` could be scheduled on the Node, else the first rule
    that keeps it off: ``nodeSelector``, ``nodeAffinity`` or ``taint KEY`` (what ``cpa
    explain`` counts per rule). A taint of :data:`NODE_STATE_TAINTS` keeps no Node off."""
    for key, value in placement.node_selector:
        if labels.get(key) != value:
            return "nodeSelector"
    if placement.required is not None and not any(
            _term_ok(t, name, labels) for t in placement.required):
        return "nodeAffinity"
    for key, value, effect in taints:
        if effect in _SCHEDULING_EFFECTS and key not in NODE_STATE_TAINTS and not any(
                _tolerates(t, key, value, effect) for t in placement.tolerations):
            return f"taint {key}"
    return None


def fits(placement: Placement, name: str, labels: Mapping[str, str],
         taints: Iterable[tuple[str, str, str]]) -> bool:
    """Whether a Pod of ``placement`` could be scheduled on the Node (these two filters)."""
    return excluded_by(placement, name, labels, taints) is None


# --- one Pod per topology domain (capToPlaceable) ------------------------------------
class Domains(NamedTuple):
    """The topology domains a placement's Pods can go to: ``distinct`` values of the
    topology key among the Nodes they can be placed on, and ``unlabelled`` such Nodes
    without the key. The scheduler's anti-affinity filter cannot hold a Pod off a Node
    that lacks the key, so any ``unlabelled`` Node makes the room unbounded."""

    distinct: int
    unlabelled: int = 0

    @property
    def bounded(self) -> bool:
        return not self.unlabelled


def count_domains(placement: Placement, key: str,
                  nodes: Iterable[tuple[str, Mapping[str, str],
                                        Iterable[tuple[str, str, str]]]]) -> Domains:
    """The domains of ``key`` among ``nodes`` (name, labels, taints: the schedulable
    ones) that ``placement`` fits; ``kubernetes.io/hostname`` gives one per Node."""
    values: set[str] = set()
    unlabelled = 0
    for name, labels, taints in nodes:
        if excluded_by(placement, name, labels, taints) is not None:
            continue
        value = labels.get(key)
        if value is None:
            unlabelled += 1
        else:
            values.add(value)
    return Domains(len(values), unlabelled)


_POD_OPERATORS: Final = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})


def _selects(selector: object, labels: Mapping[str, str]) -> bool:
    """apimachinery's ``LabelSelectorAsSelector`` matched against ``labels``: a null
    selector selects nothing, an empty one everything; an invalid one nothing."""
    if not isinstance(selector, dict):
        return False
    match = selector.get("matchLabels")
    if isinstance(match, dict) and any(labels.get(str(k)) != str(v) for k, v in match.items()):
        return False
    exprs = selector.get("matchExpressions")
    for expr in exprs if isinstance(exprs, list) else ():
        op = str(expr.get("operator") or "") if isinstance(expr, dict) else ""
        req = (node_requirement(str(expr.get("key") or ""), op, _strings(expr.get("values")))
               if op in _POD_OPERATORS and isinstance(expr, dict) else None)
        if req is None or not matches(req, labels):
            return False
    return True


def _own_namespace(term: Mapping[str, Any], namespace: str) -> bool:
    """Whether the term's namespaces take in the Pod's own: none listed and no selector
    (the Pod's namespace), the namespace listed, or an empty selector (every one). A
    selector with labels is not judged here: the Namespace's labels are not read."""
    listed = _strings(term.get("namespaces"))
    chosen = term.get("namespaceSelector")
    if namespace in listed or chosen == {}:
        return True
    return not listed and chosen is None


def self_anti_affinity_keys(template: Mapping[str, Any], namespace: str) -> tuple[str, ...]:
    """The topology keys of a Pod template's required pod anti-affinity terms that select
    the template's own Pods (its labels, its namespace): each allows one of its Pods per
    value of that key. ``mismatchLabelKeys`` on a label the Pods carry selects none of
    them; ``matchLabelKeys`` only narrows to Pods like this one and keeps it selected."""
    meta, spec = template.get("metadata"), template.get("spec")
    raw = meta.get("labels") if isinstance(meta, dict) else None
    labels = {str(k): str(v) for k, v in raw.items()} if isinstance(raw, dict) else {}
    affinity = spec.get("affinity") if isinstance(spec, dict) else None
    anti = affinity.get("podAntiAffinity") if isinstance(affinity, dict) else None
    terms = (anti.get("requiredDuringSchedulingIgnoredDuringExecution")
             if isinstance(anti, dict) else None)
    keys: list[str] = []
    for t in terms if isinstance(terms, list) else ():
        if not isinstance(t, dict) or not t.get("topologyKey"):
            continue
        if any(k in labels for k in _strings(t.get("mismatchLabelKeys"))):
            continue
        if _selects(t.get("labelSelector"), labels) and _own_namespace(t, namespace):
            key = str(t["topologyKey"])
            if key not in keys:
                keys.append(key)
    return tuple(keys)
