"""The placement rules (``targetPlacement``): the scheduler's NodeAffinity and TaintToleration
filters, as tables of the cases the Go code singles out and as properties over random Nodes,
selectors, affinities and tolerations."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpa.nodes.placement import (
    EVERYWHERE,
    Placement,
    Term,
    Toleration,
    excluded_by,
    fits,
    placement_of,
)

Labels = dict[str, str]
Taint = tuple[str, str, str]


Raw = dict[str, Any]  # a template's nodeSelectorTerms entry or expression, as the API has it


def term(*exprs: Raw, fields: tuple[Raw, ...] = ()) -> Raw:
    return {"matchExpressions": list(exprs), "matchFields": list(fields)}


def req(key: str, op: str, *values: str) -> Raw:
    return {"key": key, "operator": op, "values": list(values)}


def spec_of(terms: tuple[Raw, ...] | None = None, node_selector: Labels | None = None,
            tolerations: tuple[Raw, ...] = ()) -> Raw:
    """A Pod template's spec with these placement fields."""
    spec: Raw = {"tolerations": list(tolerations)}
    if node_selector:
        spec["nodeSelector"] = node_selector
    if terms is not None:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                                             {"nodeSelectorTerms": list(terms)}}}
    return spec


def affinity(*terms: Raw) -> tuple[Term, ...] | None:
    """The required terms as the placement reads them from a template."""
    return placement_of(spec_of(terms)).required


# --- the cases the Go code singles out -------------------------------------------------------
LABELS: Labels = {"pool": "core", "gen": "7", "kubernetes.io/hostname": "n1"}

AFFINITY_CASES: list[tuple[str, tuple[Raw, ...] | None, bool]] = [
    ("no affinity: every Node", None, True),
    ("an empty term list matches nothing", (), False),
    ("an empty term matches nothing", (term(),), False),
    ("an empty term beside a matching one: ORed", (term(), term(req("pool", "In", "core"))),
     True),
    ("In", (term(req("pool", "In", "gpu", "core")),), True),
    ("In, another value", (term(req("pool", "In", "gpu")),), False),
    ("In without values does not parse", (term(req("pool", "In")),), False),
    ("NotIn", (term(req("pool", "NotIn", "gpu")),), True),
    ("NotIn on a missing label matches", (term(req("zone", "NotIn", "a")),), True),
    ("Exists", (term(req("pool", "Exists")),), True),
    ("Exists with values does not parse", (term(req("pool", "Exists", "core")),), False),
    ("DoesNotExist", (term(req("zone", "DoesNotExist")),), True),
    ("DoesNotExist, present", (term(req("pool", "DoesNotExist")),), False),
    ("Gt", (term(req("gen", "Gt", "6")),), True),
    ("Gt, equal", (term(req("gen", "Gt", "7")),), False),
    ("Lt", (term(req("gen", "Lt", "+8")),), True),
    ("Gt on a label that is no integer", (term(req("pool", "Gt", "1")),), False),
    ("Gt on a missing label", (term(req("zone", "Gt", "1")),), False),
    ("Gt with a bound that is no int64 does not parse", (term(req("gen", "Gt", "1.5")),), False),
    ("Gt with an int64 overflow does not parse",
     (term(req("gen", "Gt", str(1 << 63))),), False),
    ("Gt with two values does not parse", (term(req("gen", "Gt", "1", "2")),), False),
    ("an unknown operator does not parse", (term(req("pool", "Equals", "core")),), False),
    ("expressions ANDed", (term(req("pool", "In", "core"), req("gen", "Lt", "7")),), False),
    ("matchFields metadata.name In", (term(fields=(req("metadata.name", "In", "n1"),)),), True),
    ("matchFields NotIn", (term(fields=(req("metadata.name", "NotIn", "n1"),)),), False),
    ("matchFields with two values does not parse",
     (term(fields=(req("metadata.name", "In", "n1", "n2"),)),), False),
    ("matchFields Exists does not parse", (term(fields=(req("metadata.name", "Exists"),)),),
     False),
    ("expressions and fields ANDed",
     (term(req("pool", "In", "core"), fields=(req("metadata.name", "In", "n2"),)),), False),
    ("a term that does not parse beside a matching one",
     (term(req("pool", "In")), term(req("gen", "Exists"))), True),
]


@pytest.mark.parametrize(("case", "terms", "expected"), AFFINITY_CASES,
                         ids=[c[0] for c in AFFINITY_CASES])
def test_required_node_affinity(case: str, terms: tuple[Raw, ...] | None,
                                expected: bool) -> None:
    assert fits(placement_of(spec_of(terms)), "n1", LABELS, ()) is expected


TOLERATION_CASES: list[tuple[str, Taint, tuple[Toleration, ...], bool]] = [
    ("an untolerated NoSchedule", ("pool", "gpu", "NoSchedule"), (), False),
    ("an untolerated NoExecute", ("pool", "gpu", "NoExecute"), (), False),
    ("PreferNoSchedule only scores", ("pool", "gpu", "PreferNoSchedule"), (), True),
    ("Equal, same value", ("pool", "gpu", "NoSchedule"),
     (Toleration("pool", "Equal", "gpu", "NoSchedule"),), True),
    ("no operator is Equal", ("pool", "gpu", "NoSchedule"),
     (Toleration("pool", "", "gpu", "NoSchedule"),), True),
    ("Equal, another value", ("pool", "gpu", "NoSchedule"),
     (Toleration("pool", "Equal", "cpu", "NoSchedule"),), False),
    ("Exists, any value", ("pool", "gpu", "NoSchedule"),
     (Toleration("pool", "Exists", "", "NoSchedule"),), True),
    ("an empty effect matches every effect", ("pool", "gpu", "NoExecute"),
     (Toleration("pool", "Exists"),), True),
    ("another effect", ("pool", "gpu", "NoExecute"),
     (Toleration("pool", "Exists", "", "NoSchedule"),), False),
    ("an empty key with Exists tolerates everything", ("any", "thing", "NoExecute"),
     (Toleration("", "Exists"),), True),
    ("another key", ("pool", "gpu", "NoSchedule"), (Toleration("team", "Exists"),), False),
    ("Gt (the comparison gate)", ("gen", "8", "NoSchedule"), (Toleration("gen", "Gt", "7"),),
     True),
    ("Lt, not less", ("gen", "8", "NoSchedule"), (Toleration("gen", "Lt", "8"),), False),
    ("Gt on a value that is no integer", ("gen", "x", "NoSchedule"),
     (Toleration("gen", "Gt", "7"),), False),
    ("an unknown operator", ("pool", "gpu", "NoSchedule"), (Toleration("pool", "In", "gpu"),),
     False),
]


@pytest.mark.parametrize(("case", "taint", "tolerations", "expected"), TOLERATION_CASES,
                         ids=[c[0] for c in TOLERATION_CASES])
def test_taints_and_tolerations(case: str, taint: Taint, tolerations: tuple[Toleration, ...],
                                expected: bool) -> None:
    assert fits(Placement(tolerations=tolerations), "n1", LABELS, (taint,)) is expected


def test_node_selector_and_the_first_rule_named() -> None:
    both = Placement((("pool", "gpu"),), affinity(term(req("gen", "Gt", "9"))))
    assert excluded_by(both, "n1", LABELS, ()) == "nodeSelector"
    assert excluded_by(both._replace(node_selector=(("pool", "core"),)), "n1", LABELS,
                       ()) == "nodeAffinity"
    assert excluded_by(EVERYWHERE, "n1", LABELS, [("a", "", "PreferNoSchedule"),
                                                  ("b", "", "NoSchedule")]) == "taint b"
    assert excluded_by(EVERYWHERE, "n1", LABELS, ()) is None
    assert excluded_by(Placement((("pool", "core"),)), "n1", {}, ()) == "nodeSelector"


STATE_TAINTS: list[Taint] = [
    ("node.kubernetes.io/unschedulable", "", "NoSchedule"),
    ("node.kubernetes.io/not-ready", "", "NoSchedule"),
    ("node.kubernetes.io/not-ready", "", "NoExecute"),
    ("node.kubernetes.io/unreachable", "", "NoSchedule"),
    ("node.kubernetes.io/unreachable", "", "NoExecute"),
    ("node.kubernetes.io/memory-pressure", "", "NoSchedule"),
    ("node.kubernetes.io/disk-pressure", "", "NoSchedule"),
    ("node.kubernetes.io/pid-pressure", "", "NoSchedule"),
    ("node.kubernetes.io/network-unavailable", "", "NoSchedule"),
]


@pytest.mark.parametrize("taint", STATE_TAINTS, ids=[f"{t[0]}:{t[2]}" for t in STATE_TAINTS])
def test_the_taints_of_a_nodes_state_keep_no_node_off(taint: Taint) -> None:
    """Cordoning, readiness and the pressure conditions are the counting rules' to judge
    (``includeUnschedulableNodes``, the schedulable rule), not the placement's."""
    assert excluded_by(EVERYWHERE, "n1", LABELS, (taint,)) is None
    pool = ("dedicated", "gpu", "NoSchedule")
    assert excluded_by(EVERYWHERE, "n1", LABELS, (taint, pool)) == "taint dedicated"
    assert excluded_by(Placement((("pool", "gpu"),)), "n1", LABELS, (taint,)) == "nodeSelector"


def test_a_cordoned_not_ready_node_under_pressure_fits_every_template() -> None:
    assert fits(EVERYWHERE, "n1", LABELS, STATE_TAINTS)
    assert fits(Placement(tolerations=(Toleration("x", "Exists"),)), "n1", LABELS,
                STATE_TAINTS)


def test_other_node_kubernetes_io_taints_are_judged() -> None:
    """An administrator's out-of-service taint (non-graceful shutdown) is no state the
    controller mirrors: it is judged as the scheduler judges it."""
    taint = ("node.kubernetes.io/out-of-service", "nodeshutdown", "NoExecute")
    assert excluded_by(EVERYWHERE, "n1", LABELS, (taint,)) == (
        "taint node.kubernetes.io/out-of-service")


def test_placement_of_a_template() -> None:
    spec: dict[str, Any] = {
        "nodeSelector": {"pool": "core", "a": "b"},
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["6"]}]},
                {"matchFields": [{"key": "metadata.name", "operator": "In",
                                  "values": ["n9"]}]}]},
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1}]},
            "podAntiAffinity": {}},
        "tolerations": [{"key": "pool", "operator": "Exists", "effect": "NoSchedule"},
                        {"operator": "Exists"},
                        {"key": "pool", "operator": "Exists", "effect": "NoSchedule"}],
    }
    assert placement_of(spec) == Placement(
        (("a", "b"), ("pool", "core")),
        affinity(term(req("gen", "Gt", "6")), term(fields=(req("metadata.name", "In", "n9"),))),
        (Toleration("", "Exists"), Toleration("pool", "Exists", "", "NoSchedule")))
    assert placement_of({}) == EVERYWHERE
    assert placement_of({"affinity": {"nodeAffinity": {}}}) == EVERYWHERE
    no_terms: dict[str, Any] = {"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}}
    assert placement_of(no_terms).required == ()
    # the same placement written in another order is the same placement (shared totals)
    assert placement_of({"nodeSelector": {"b": "1", "a": "2"}, "tolerations": [
        {"key": "x"}, {"key": "y"}]}) == placement_of(
        {"nodeSelector": {"a": "2", "b": "1"}, "tolerations": [{"key": "y"}, {"key": "x"}]})


# --- properties over random Nodes and templates ---------------------------------------------
KEYS = ["pool", "gen", "zone", "team"]
VALUES = ["a", "b", "1", "7", "-3", "x1", ""]
EFFECTS = ["NoSchedule", "NoExecute", "PreferNoSchedule"]
OPS = ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Bogus"]

labels_st = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=4)
term_labels = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), min_size=1,
                              max_size=4)
taints_st = st.lists(st.tuples(st.sampled_from(KEYS), st.sampled_from(VALUES),
                               st.sampled_from(EFFECTS)), max_size=2).map(tuple)
INTS = ["1", "7", "-3", "+8"]


@st.composite
def req_st(draw: st.DrawFn) -> Raw:
    """Mostly expressions that parse (so that matching is what is tested), a few not."""
    key, op = draw(st.sampled_from(KEYS)), draw(st.sampled_from(OPS))
    if draw(st.integers(0, 9)) == 0:  # any values: mostly ones that do not parse
        return req(key, op, *draw(st.lists(st.sampled_from(VALUES), max_size=2)))
    if op in ("In", "NotIn"):
        values = draw(st.lists(st.sampled_from(VALUES), min_size=1, max_size=2))
    elif op in ("Gt", "Lt"):
        values = [draw(st.sampled_from(INTS))]
    else:
        values = []
    return req(key, op, *values)


field_st = st.builds(req, st.sampled_from(["metadata.name", "metadata.name", "spec.x"]),
                     st.sampled_from(["In", "NotIn", "In", "NotIn", "Exists"]),
                     st.sampled_from(["n1", "n2"]), st.sampled_from(["n1", "n2"]) | st.none()
                     ).map(lambda r: {**r, "values": [v for v in r["values"] if v]})
term_st = st.builds(lambda e, f: term(*e, fields=tuple(f)), st.lists(req_st(), max_size=2),
                    st.lists(field_st, max_size=1))
tol_st = st.builds(lambda k, o, v, e: {"key": k, "operator": o, "value": v, "effect": e},
                   st.sampled_from(["", *KEYS]),
                   st.sampled_from(["", "Equal", "Exists", "Gt", "Lt"]),
                   st.sampled_from(VALUES), st.sampled_from(["", *EFFECTS]))
spec_st = st.builds(
    spec_of,
    st.none() | st.lists(term_st, max_size=3).map(tuple),
    st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=1),
    st.lists(tol_st, max_size=4).map(tuple))
name_st = st.sampled_from(["n1", "n2"])


def _go_int(text: str) -> int | None:
    """strconv.ParseInt(text, 10, 64), written out digit by digit."""
    body = text[1:] if text[:1] in "+-" else text
    if not body or any(c not in "0123456789" for c in body):
        return None
    n = int(body) * (-1 if text[:1] == "-" else 1)
    return n if -2**63 <= n <= 2**63 - 1 else None


def _parses(t: Raw) -> bool:
    """NewLazyErrorNodeSelector and labels.NewRequirement's checks of one term."""
    ok = True
    for r in t["matchExpressions"]:
        if r["operator"] in ("In", "NotIn"):
            ok &= len(r["values"]) > 0
        elif r["operator"] in ("Exists", "DoesNotExist"):
            ok &= len(r["values"]) == 0
        elif r["operator"] in ("Gt", "Lt"):
            ok &= len(r["values"]) == 1 and _go_int(r["values"][0]) is not None
        else:
            ok = False
    for r in t["matchFields"]:
        ok &= r["operator"] in ("In", "NotIn") and len(r["values"]) == 1
    return ok


def _term_matches(t: Raw, name: str, labels: Labels) -> bool:
    good = True
    for r in t["matchExpressions"]:
        have = r["key"] in labels
        if r["operator"] == "In":
            good &= have and labels[r["key"]] in r["values"]
        elif r["operator"] == "NotIn":
            good &= not (have and labels[r["key"]] in r["values"])
        elif r["operator"] == "Exists":
            good &= have
        elif r["operator"] == "DoesNotExist":
            good &= not have
        else:
            mine = _go_int(labels.get(r["key"], "")) if have else None
            bound = _go_int(r["values"][0])
            assert bound is not None
            good &= mine is not None and (mine > bound if r["operator"] == "Gt"
                                          else mine < bound)
    fields = {"metadata.name": name}
    for r in t["matchFields"]:
        equal = fields.get(r["key"], "") == r["values"][0]
        good &= equal if r["operator"] == "In" else not equal
    return good


def _oracle(spec: Raw, name: str, labels: Labels, taints: tuple[Taint, ...]) -> bool:
    """The two filters as the Go code reads, statement by statement, on the template as the
    API has it: parse the terms first, then match."""
    if any(labels.get(k) != v for k, v in spec.get("nodeSelector", {}).items()):
        return False
    if "affinity" in spec:
        terms = spec["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        parsed = [t for t in terms if (t["matchExpressions"] or t["matchFields"])
                  and _parses(t)]
        if not any(_term_matches(t, name, labels) for t in parsed):
            return False
    for key, value, effect in taints:
        if effect == "PreferNoSchedule":
            continue
        tolerated = False
        for tol in spec["tolerations"]:
            if (tol["effect"] and tol["effect"] != effect) or (tol["key"] and tol["key"] != key):
                continue
            if tol["operator"] in ("", "Equal"):
                tolerated |= tol["value"] == value
            elif tol["operator"] == "Exists":
                tolerated = True
            else:
                a, b = _go_int(tol["value"]), _go_int(value)
                tolerated |= a is not None and b is not None and (
                    b < a if tol["operator"] == "Lt" else b > a)
        if not tolerated:
            return False
    return True


@settings(max_examples=300, deadline=None)
@given(spec_st, name_st, labels_st, taints_st)
def test_fits_as_the_scheduler_reads(spec: Raw, name: str, labels: Labels,
                                     taints: tuple[Taint, ...]) -> None:
    assert fits(placement_of(spec), name, labels, taints) is _oracle(spec, name, labels, taints)


@settings(max_examples=500, deadline=None)
@given(st.lists(term_st, min_size=1, max_size=2).map(tuple), name_st, term_labels)
def test_affinity_alone_as_the_scheduler_reads(terms: tuple[Raw, ...], name: str,
                                               labels: Labels) -> None:
    spec = spec_of(terms)
    assert fits(placement_of(spec), name, labels, ()) is _oracle(spec, name, labels, ())


@settings(max_examples=300, deadline=None)
@given(st.lists(tol_st, max_size=3).map(tuple), taints_st)
def test_taints_alone_as_the_scheduler_reads(tolerations: tuple[Raw, ...],
                                             taints: tuple[Taint, ...]) -> None:
    spec = spec_of(tolerations=tolerations)
    assert fits(placement_of(spec), "n1", {}, taints) is _oracle(spec, "n1", {}, taints)


@settings(max_examples=300, deadline=None)
@given(spec_st, name_st, labels_st, taints_st)
def test_terms_are_ored_and_expressions_anded(spec: Raw, name: str, labels: Labels,
                                              taints: tuple[Taint, ...]) -> None:
    p = placement_of(spec)
    base = p._replace(required=None)
    if not fits(base, name, labels, taints) or p.required is None:
        return
    each = [fits(base._replace(required=(t,)), name, labels, taints) for t in p.required]
    assert fits(p, name, labels, taints) is any(each)
    for t in p.required:
        if t.expressions and not t.fields and t.valid:
            single = [fits(base._replace(required=(Term((r,)),)), name, labels, taints)
                      for r in t.expressions]
            assert fits(base._replace(required=(t,)), name, labels, taints) is all(single)


@settings(max_examples=300, deadline=None)
@given(spec_st, tol_st, name_st, labels_st, taints_st)
def test_tolerations_only_widen_and_prefer_no_schedule_never_counts(
        spec: Raw, extra: Raw, name: str, labels: Labels, taints: tuple[Taint, ...]) -> None:
    p = placement_of(spec)
    before = fits(p, name, labels, taints)
    wider = placement_of({**spec, "tolerations": [*spec["tolerations"], extra]})
    assert fits(wider, name, labels, taints) >= before
    soft = tuple((k, v, "PreferNoSchedule") for k, v, _ in taints)
    assert fits(p, name, labels, soft) is fits(p, name, labels, ())
    everything = p._replace(tolerations=(Toleration("", "Exists"),))
    assert fits(everything, name, labels, taints) is fits(p, name, labels, ())


@settings(max_examples=200, deadline=None)
@given(labels_st, st.data())
def test_a_selector_of_the_nodes_own_labels_matches(labels: Labels, data: st.DataObject) -> None:
    own = data.draw(st.lists(st.sampled_from(sorted(labels)), unique=True)) if labels else []
    selector = tuple(sorted((k, labels[k]) for k in own))
    assert fits(Placement(selector), "n1", labels, ())
    assert fits(Placement(required=affinity(term(*(req(k, "In", labels[k]) for k in own)))),
                "n1", labels, ()) is bool(own)
