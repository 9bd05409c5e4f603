"""The Node's JSON decoder (msgspec structs, strict types): a field of the wrong type is a
ValueError naming its path (the watch then lists again and says so), null and missing are
the zero values, a number is never read from a string (issue 27 #4: every answer decoded by
type)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cpa.nodes import jsondecode as nodejson
from cpa.nodes.records import NodeInfo
from tests.unit.kube.test_objects import JSON_VALUES  # any JSON value, as both decoders may meet


def node(**parts: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "metadata": {"name": "n1", "resourceVersion": "7"},
        "spec": {"unschedulable": False, "taints": [{"key": "k", "effect": "NoSchedule"}]},
        "status": {"allocatable": {"cpu": "4"}, "capacity": {"cpu": "8"},
                   "conditions": [{"type": "Ready", "status": "True"}]}}
    doc.update(parts)
    return doc


def decode(doc: dict[str, Any]) -> NodeInfo:
    return nodejson.decode_node(json.dumps(doc).encode())


@pytest.mark.parametrize("doc,want", [
    (node(), NodeInfo("n1", "7", False, True, "4", ("k",))),
    (node(spec=None), NodeInfo("n1", "7", False, True, "4", ())),
    (node(spec={"unschedulable": None, "taints": None}), NodeInfo("n1", "7", False, True, "4",
                                                                 ())),
    (node(status=None), NodeInfo("n1", "7", False, False, None, ("k",))),
    (node(status={"allocatable": None}), NodeInfo("n1", "7", False, False, None, ("k",))),
    (node(status={"allocatable": {}}), NodeInfo("n1", "7", False, False, None, ("k",))),
    ({"metadata": {"name": "n2"}}, NodeInfo("n2", "", False, False, None, ())),
])
def test_null_and_missing_are_zero_values(doc: dict[str, Any], want: NodeInfo) -> None:
    assert decode(doc) == want


@pytest.mark.parametrize("doc,path", [
    (node(spec={"unschedulable": "true"}), "$.spec.unschedulable"),
    (node(spec={"unschedulable": 1}), "$.spec.unschedulable"),
    (node(spec={"taints": {"key": "k"}}), "$.spec.taints"),
    (node(spec={"taints": [{"key": 5}]}), "$.spec.taints[0].key"),
    (node(status={"allocatable": {"cpu": 4}}), "$.status.allocatable.cpu"),
    (node(status={"allocatable": "4"}), "$.status.allocatable"),
    (node(status={"conditions": [{"type": "Ready", "status": True}]}),
     "$.status.conditions[0].status"),
    (node(metadata={"name": ["n1"]}), "$.metadata.name"),
    (node(metadata={"name": "n1", "resourceVersion": 7}), "$.metadata.resourceVersion"),
    (node(metadata=None), "$.metadata"),
])
def test_a_wrong_type_is_refused_with_its_path(doc: dict[str, Any], path: str) -> None:
    with pytest.raises(ValueError, match="at `" + path.replace("[", r"\[").replace("$", r"\$")
                       ):
        decode(doc)


def test_a_list_page_with_one_malformed_node_is_refused_with_its_index() -> None:
    page = {"metadata": {"resourceVersion": "9"},
            "items": [node(), node(spec={"unschedulable": "yes"})]}
    with pytest.raises(ValueError, match=r"\$\.items\[1\]\.spec\.unschedulable"):
        nodejson.decode_list_page(json.dumps(page).encode())


PLACES = [("spec", "unschedulable"), ("spec", "taints"), ("status", "allocatable"),
          ("status", "conditions"), ("status", "capacity"), ("metadata", "name")]


@given(value=JSON_VALUES, place=st.sampled_from(PLACES))
def test_any_value_where_a_field_is_read_decodes_or_raises_value_error(
        value: object, place: tuple[str, str]) -> None:
    doc = node()
    doc[place[0]][place[1]] = value
    body = json.dumps(doc).encode()
    for decoder in (nodejson.decode_node,
                    lambda raw: nodejson.decode_event(
                        b'{"type":"ADDED","object":' + raw + b"}", capacity=True).node):
        try:
            info = decoder(body)
        except ValueError as exc:
            assert ".".join(place) in str(exc)
            continue
        assert info is not None and isinstance(info.name, str)
        assert info.cpu is None or isinstance(info.cpu, str)
        assert all(isinstance(t, str) for t in info.taints)
