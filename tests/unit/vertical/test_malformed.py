"""Issue 27 #4 for /cpvpa: its target and the target's Pods are checked by type; one
malformed Pod is the poll's error naming it, the other Pods are still resized, and nothing
falls back to the template for it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.vertical.test_loop import WANT, Cluster, make_loop, resources


@pytest.mark.parametrize("spoil,field", [
    (lambda p: p["metadata"].update(ownerReferences={"x": 1}), "metadata.ownerReferences"),
    (lambda p: p["metadata"].update(name=7), "metadata.name"),
    (lambda p: p["spec"]["containers"][0]["resources"].update(requests="5m"),
     "spec.containers[0].resources.requests"),
    (lambda p: p["spec"]["containers"][0]["resources"]["requests"].update(cpu=True),
     "spec.containers[0].resources.requests['cpu']"),
    (lambda p: p["status"].update(conditions={"type": "PodResizePending"}),
     "status.conditions"),
    (lambda p: p.update(spec=[]), "spec"),
])
def test_a_malformed_pod_is_named_and_the_others_are_resized(spoil: Any, field: str) -> None:
    cluster = Cluster("RollingUpdate")
    cluster.pods.append(cluster.new_pod("p3"))
    spoil(cluster.pods[1])
    result = make_loop(cluster, in_place=True).poll_once()
    assert result.first.inplace is not None and sorted(result.first.inplace.resized) == ["p1", "p3"]
    assert resources(cluster.pods[0]) == resources(cluster.pods[2]) == WANT
    assert result.error is not None and "the Pod answered does not decode" in result.error
    assert f"{field} is " in result.error and "unexpected" not in result.error
    assert result.first.fallbacks == [] and cluster.template_patches == []


def test_a_quantity_may_be_a_number() -> None:
    """resource.Quantity decodes a JSON number too (its UnmarshalJSON)."""
    cluster = Cluster("RollingUpdate")
    cluster.pods[0]["spec"]["containers"][0]["resources"]["limits"]["memory"] = 1073741824
    result = make_loop(cluster, in_place=True).poll_once()
    assert result.first.inplace is not None and "p1" in result.first.inplace.resized
    assert result.error is None


@pytest.mark.parametrize("spoil,field", [
    (lambda d: d["spec"].update(selector={"matchLabels": ["app"]}),
     "spec.selector.matchLabels"),
    (lambda d: d["spec"]["updateStrategy"].update(type=1), "spec.updateStrategy.type"),
    (lambda d: d["metadata"].update(uid={"u": 1}), "metadata.uid"),
])
def test_a_malformed_target_patches_nothing(spoil: Any, field: str) -> None:
    cluster = Cluster("RollingUpdate")
    spoil(cluster.ds)
    result = make_loop(cluster, in_place=True).poll_once()
    assert result.error is not None and f"{field} is " in result.error
    assert result.error.startswith("cannot read the target: GET ")
    assert result.first.fallbacks == [] and cluster.template_patches == [] and cluster.resizes == []


def test_a_null_selector_requirement_or_owner_is_skipped() -> None:
    """null in an array of objects is Go's zero element: no requirement, no controller."""
    cluster = Cluster("RollingUpdate")
    cluster.ds["spec"]["selector"]["matchExpressions"] = [None]
    cluster.pods[0]["metadata"]["ownerReferences"].insert(0, None)
    result = make_loop(cluster, in_place=True).poll_once()
    assert result.error is None and result.first.inplace is not None
    assert sorted(result.first.inplace.resized) == ["p1", "p2"]
