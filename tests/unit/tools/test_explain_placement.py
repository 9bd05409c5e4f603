"""``cpa explain`` with ``targetPlacement``: what each rule kept off, in text and JSON, and
what given counts mean with the key."""

from __future__ import annotations

from cpa.nodes.counts import ClusterCounts
from cpa.nodes.placement import Placement, Term, Toleration
from cpa.tools.explain import PlacementView, placement_json, placement_text


def view(excluded: dict[str, int]) -> PlacementView:
    return PlacementView(Placement((("pool", "core"),), (Term(),), (Toleration("", "Exists"),)),
                         ClusterCounts(3, 12, 3, 12), excluded)


def test_each_rule_is_counted_in_text_and_json() -> None:
    v = view({"taint dedicated": 2, "nodeSelector": 4})
    assert placement_text(v) == ("Placement (targetPlacement): the target's Pod template fits "
                                 "3 of the counted Nodes; excluded: 4 by nodeSelector, 2 by "
                                 "taint dedicated.")
    assert placement_json(v) == {"node_selector": {"pool": "core"}, "affinity_terms": 1,
                                 "tolerations": 1, "nodes": 3,
                                 "excluded": {"taint dedicated": 2, "nodeSelector": 4}}
    assert placement_text(view({})).endswith("; none excluded.")
