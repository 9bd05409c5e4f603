"""The typed decoders of what a poll reads (Scale, HPA, ConfigMap, Lease): Go's types, as
client-go decodes them; a field of the wrong type is a MalformedObject naming the field."""

from __future__ import annotations

import json
import typing
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cpa.kube.api import ApiError
from cpa.kube.objects import (
    INT32_MAX,
    INT32_MIN,
    MalformedObject,
    check_discovery,
    check_pod,
    check_workload,
    decode_configmap,
    decode_hpa,
    decode_lease,
    decode_scale,
    list_items,
)

WHERE = "GET /apis/apps/v1/namespaces/ns/deployments/web/scale"


def scale(**spec: object) -> dict[str, Any]:
    return {"kind": "Scale", "metadata": {"name": "web", "uid": "u-1",
                                          "resourceVersion": "42"}, "spec": spec}


# --- Scale ---------------------------------------------------------------------------
@pytest.mark.parametrize("doc,replicas", [
    (scale(replicas=7), 7),
    (scale(replicas=0), 0),
    (scale(replicas=INT32_MAX), INT32_MAX),
    (scale(replicas=None), 0),  # null: Go leaves the int32 at 0
    (scale(), 0),  # missing: omitempty's 0
    ({"kind": "Scale", "spec": None}, 0),  # a null object is the zero struct
    ({"kind": "Scale"}, 0),
    ({"kind": "Scale", "metadata": None, "spec": {"replicas": 3}}, 3),
    (scale(replicas=3, Replicas="x"), 3),  # names are case sensitive: an unknown field
])
def test_a_scale_decodes_as_go_decodes_it(doc: dict[str, Any], replicas: int) -> None:
    assert decode_scale(doc, WHERE).replicas == replicas


@pytest.mark.parametrize("doc,field,problem", [
    (scale(replicas={"x": 1}), "spec.replicas", "is an object, not an int32"),
    (scale(replicas="7"), "spec.replicas", "is a string ('7'), not an int32"),
    (scale(replicas=7.0), "spec.replicas", "is a number (7.0), not an int32"),
    (scale(replicas=7.5), "spec.replicas", "not an int32"),
    (scale(replicas=True), "spec.replicas", "is a bool (true), not an int32"),
    (scale(replicas=[7]), "spec.replicas", "is an array, not an int32"),
    (scale(replicas=INT32_MAX + 1), "spec.replicas", "outside the int32 range"),
    (scale(replicas=INT32_MIN - 1), "spec.replicas", "outside the int32 range"),
    ({"spec": 7}, "spec", "is a number (7), not an object"),
    ({"spec": [], "metadata": {}}, "spec", "is an array, not an object"),
    ({"metadata": "x", "spec": {}}, "metadata", "is a string ('x'), not an object"),
    ({"metadata": {"uid": 5}, "spec": {}}, "metadata.uid", "not a string"),
    ({"metadata": {"resourceVersion": 5}}, "metadata.resourceVersion", "not a string"),
    ({"status": {"replicas": "2"}}, "status.replicas", "not an int32"),
    ({"status": {"selector": {"app": "x"}}}, "status.selector", "not a string"),
])
def test_a_malformed_scale_names_the_field(doc: dict[str, Any], field: str,
                                           problem: str) -> None:
    with pytest.raises(MalformedObject) as info:
        decode_scale(doc, WHERE)
    exc = info.value
    assert isinstance(exc, ApiError) and exc.status == 0  # a failed request, to callers
    assert exc.field == field and exc.kind == "Scale"
    assert problem in str(exc) and str(exc).startswith(f"{WHERE}: the Scale answered ")
    assert "client-go refuses" in str(exc)


def test_a_long_string_is_cut_in_the_message() -> None:
    with pytest.raises(MalformedObject) as info:
        decode_scale(scale(replicas="9" * 500), WHERE)
    assert len(str(info.value)) < 400


def test_the_rest_of_a_scale() -> None:
    read = decode_scale({"metadata": {"uid": "u", "resourceVersion": "9"},
                         "spec": {"replicas": 2},
                         "status": {"replicas": 3, "selector": "app=web"}}, WHERE)
    assert read == (2, "u", "9", 3, "app=web")
    assert decode_scale({"metadata": {"uid": ""}}, WHERE).uid is None


# --- HPA -----------------------------------------------------------------------------
@pytest.mark.parametrize("spec,bounds", [
    ({"minReplicas": 2, "maxReplicas": 10}, (2, 10)),
    ({"maxReplicas": 10}, (1, 10)),  # the API's default minReplicas
    ({"minReplicas": None, "maxReplicas": 10}, (1, 10)),  # *int32: nil
    ({"minReplicas": 0, "maxReplicas": 10}, (0, 10)),  # HPAScaleToZero
    ({}, (1, None)),
    (None, (1, None)),
])
def test_an_hpa_decodes(spec: dict[str, Any] | None, bounds: tuple[int, int | None]) -> None:
    read = decode_hpa({"spec": spec}, "GET x")
    assert (read.min_replicas, read.max_replicas) == bounds


MALFORMED_HPA_SPECS: list[tuple[dict[str, Any], str]] = [  # spec, the field named
    ({"minReplicas": "2"}, "spec.minReplicas"),
    ({"minReplicas": 2, "maxReplicas": "10"}, "spec.maxReplicas"),
    ({"maxReplicas": 2**31}, "spec.maxReplicas"),
    ({"maxReplicas": 1.5}, "spec.maxReplicas"),
    ({"minReplicas": False}, "spec.minReplicas"),
]


# --- ConfigMap -----------------------------------------------------------------------
@pytest.mark.parametrize("doc,data", [
    ({"metadata": {"resourceVersion": "5"}, "data": {"linear": "{}"}}, {"linear": "{}"}),
    ({"metadata": {"resourceVersion": "5"}}, None),
    ({"data": None}, None),
    ({"data": {}}, {}),
    ({"data": {"linear": None}}, {"linear": ""}),  # null in a map[string]string is ""
])
def test_a_configmap_decodes(doc: dict[str, Any], data: dict[str, str] | None) -> None:
    assert decode_configmap(doc, "GET cm").data == data


MALFORMED_CONFIGMAPS: list[tuple[dict[str, Any], str]] = [  # the object, the field named
    ({"data": {"linear": 5}}, "data['linear']"),
    ({"data": {"linear": {"min": 1}}}, "data['linear']"),
    ({"data": "linear"}, "data"),
    ({"data": ["linear"]}, "data"),
    ({"metadata": {"resourceVersion": 5}}, "metadata.resourceVersion"),
    ({"metadata": {"annotations": {"a": 1}}}, "metadata.annotations['a']"),
    ({"metadata": {"labels": ["x"]}}, "metadata.labels"),
]


# --- Lease ---------------------------------------------------------------------------
def test_a_lease_decodes() -> None:
    read = decode_lease({"spec": {"holderIdentity": "a", "leaseDurationSeconds": 15,
                                  "leaseTransitions": 3,
                                  "acquireTime": "2026-12-02T06:00:00.000000Z",
                                  "renewTime": "2026-12-02T06:00:02.000000Z"}}, "GET l")
    assert read == ("a", 15, 3, "2026-12-02T06:00:00.000000Z", "2026-12-02T06:00:02.000000Z")
    empty = decode_lease({"spec": {"holderIdentity": None}}, "GET l")
    assert empty == ("", None, 0, None, None)
    assert decode_lease({}, "GET l") == empty


MALFORMED_LEASE_SPECS: list[tuple[dict[str, Any], str]] = [  # spec, the field named
    ({"holderIdentity": 5}, "spec.holderIdentity"),
    ({"leaseDurationSeconds": "15"}, "spec.leaseDurationSeconds"),
    ({"leaseDurationSeconds": 15.0}, "spec.leaseDurationSeconds"),
    ({"leaseDurationSeconds": 2**31}, "spec.leaseDurationSeconds"),
    ({"leaseTransitions": {"n": 1}}, "spec.leaseTransitions"),
    ({"acquireTime": 0}, "spec.acquireTime"),
    ({"renewTime": True}, "spec.renewTime"),
]


@pytest.mark.parametrize("decode,doc,field,kind", [
    *[(decode_hpa, {"spec": spec}, field, "HorizontalPodAutoscaler")
      for spec, field in MALFORMED_HPA_SPECS],
    *[(decode_configmap, doc, field, "ConfigMap") for doc, field in MALFORMED_CONFIGMAPS],
    *[(decode_lease, {"spec": spec}, field, "Lease") for spec, field in MALFORMED_LEASE_SPECS],
])
def test_a_malformed_object_names_its_kind_and_field(
        decode: Callable[[Any, str], object], doc: dict[str, Any], field: str,
        kind: str) -> None:
    with pytest.raises(MalformedObject) as info:
        decode(doc, "GET x")
    assert info.value.field == field and kind in str(info.value)


# --- any JSON value where an int32 is read ------------------------------------------
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=50),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=4),
    max_leaves=10)

INT32_FIELDS: list[tuple[Callable[[Mapping[str, Any], str], tuple[Any, ...]],
                         Callable[[object], dict[str, Any]], Callable[[tuple[Any, ...]], object],
                         object]] = [
    (decode_scale, lambda v: {"spec": {"replicas": v}}, lambda r: r[0], 0),
    (decode_hpa, lambda v: {"spec": {"minReplicas": v}}, lambda r: r[0], 1),
    (decode_hpa, lambda v: {"spec": {"maxReplicas": v}}, lambda r: r[1], None),
    (decode_lease, lambda v: {"spec": {"leaseDurationSeconds": v}}, lambda r: r[1], None),
    (decode_lease, lambda v: {"spec": {"leaseTransitions": v}}, lambda r: r[2], 0),
]


@pytest.mark.parametrize("decode,place,pick,zero", INT32_FIELDS)
@given(value=JSON_VALUES)
def test_an_int32_field_is_the_value_or_refused(
        decode: Callable[[Mapping[str, Any], str], tuple[Any, ...]],
        place: Callable[[object], dict[str, Any]], pick: Callable[[tuple[Any, ...]], object],
        zero: object, value: object) -> None:
    """Whatever JSON stands in the field: exactly an integer in int32 range is read as it
    is, null is the zero value, anything else is a MalformedObject; never another
    exception."""
    doc = json.loads(json.dumps(place(value)))  # as it comes off the wire
    is_int32 = (isinstance(value, int) and not isinstance(value, bool)
                and INT32_MIN <= value <= INT32_MAX)
    if value is None or is_int32:
        assert pick(decode(doc, "GET x")) == (zero if value is None else value)
    else:
        with pytest.raises(MalformedObject):
            decode(doc, "GET x")


@given(doc=st.dictionaries(st.sampled_from(["metadata", "spec", "status", "data", "kind"]),
                           JSON_VALUES, max_size=5))
def test_any_object_decodes_or_is_refused(doc: dict[str, Any]) -> None:
    """Any top-level object: each decoder gives its record, every field of it of its
    type (an int32 is an int in range, never a bool), or a MalformedObject; never
    another exception."""
    for decode in (decode_scale, decode_hpa, decode_configmap, decode_lease):
        try:
            record: tuple[Any, ...] = decode(doc, "GET x")
        except MalformedObject as exc:
            assert exc.field and exc.field.split(".")[0].split("[")[0] in doc
            continue
        hints = typing.get_type_hints(type(record))
        for name, field in zip(record._fields, record, strict=True):  # type: ignore[attr-defined]
            want = hints[name]
            if field is None:
                assert type(None) in typing.get_args(want)
            elif isinstance(field, int):
                assert not isinstance(field, bool) and INT32_MIN <= field <= INT32_MAX
            elif isinstance(field, dict):
                assert all(isinstance(k, str) and isinstance(v, str) for k, v in field.items())
            else:
                assert isinstance(field, str)


@given(data=st.dictionaries(st.text(max_size=10), st.none() | st.text(max_size=20)
                            | st.integers(), max_size=6))
def test_configmap_data_is_strings_or_refused(data: dict[str, Any]) -> None:
    if all(v is None or isinstance(v, str) for v in data.values()):
        assert decode_configmap({"data": data}, "GET cm").data == {
            k: v or "" for k, v in data.items()}
    else:
        with pytest.raises(MalformedObject):
            decode_configmap({"data": data}, "GET cm")


# --- /cpvpa's objects: checked against a schema of the fields it reads ------------------
def pod(**over: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "metadata": {"name": "p", "uid": "u", "ownerReferences": [{"uid": "o",
                                                                   "controller": True}]},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "5m"},
                                                            "limits": {"memory": 1024}}}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
    doc.update(over)
    return doc


@pytest.mark.parametrize("doc", [
    pod(), pod(metadata=None), pod(spec={}), pod(status={"conditions": None}),
    pod(spec={"containers": [None]}),  # null elements: Go's zero values
    pod(spec={"containers": [{"name": "c", "resources": {"requests": {"cpu": None}}}]}),
    pod(extra={"anything": [1, "x"]}),  # fields we do not read are not looked at
])
def test_a_pod_checks(doc: dict[str, Any]) -> None:
    check_pod(doc, "Pod p")


@pytest.mark.parametrize("doc,field", [
    (pod(metadata={"name": ["p"]}), "metadata.name"),
    (pod(metadata={"ownerReferences": {"uid": "o"}}), "metadata.ownerReferences"),
    (pod(metadata={"ownerReferences": [{"controller": "true"}]}),
     "metadata.ownerReferences[0].controller"),
    (pod(metadata={"deletionTimestamp": 0}), "metadata.deletionTimestamp"),
    (pod(spec={"containers": {"c": {}}}), "spec.containers"),
    (pod(spec={"containers": [7]}), "spec.containers[0]"),
    (pod(spec={"containers": [{"name": None, "resources": {"limits": {"cpu": True}}}]}),
     "spec.containers[0].resources.limits['cpu']"),
    (pod(spec={"initContainers": [{"resources": {"requests": "1"}}]}),
     "spec.initContainers[0].resources.requests"),
    (pod(status={"phase": 1}), "status.phase"),
    (pod(status={"conditions": [{"message": {"x": 1}}]}), "status.conditions[0].message"),
])
def test_a_malformed_pod_names_the_field(doc: dict[str, Any], field: str) -> None:
    with pytest.raises(MalformedObject) as info:
        check_pod(doc, "Pod p")
    assert info.value.field == field and str(info.value).startswith("Pod p: the Pod ")


@pytest.mark.parametrize("doc,field", [
    ({"spec": {"selector": {"matchLabels": {"app": 1}}}}, "spec.selector.matchLabels['app']"),
    ({"spec": {"selector": {"matchExpressions": [{"values": "a,b"}]}}},
     "spec.selector.matchExpressions[0].values"),
    ({"spec": {"template": {"spec": {"containers": [{"name": 3}]}}}},
     "spec.template.spec.containers[0].name"),
    ({"spec": {"updateStrategy": "OnDelete"}}, "spec.updateStrategy"),
])
def test_a_malformed_workload_names_the_field(doc: dict[str, Any], field: str) -> None:
    check_workload({"spec": {}}, "DaemonSet", "GET ds")
    with pytest.raises(MalformedObject) as info:
        check_workload(doc, "DaemonSet", "GET ds")
    assert info.value.field == field and "the DaemonSet answered" in str(info.value)


@pytest.mark.parametrize("doc,field", [
    ({"items": {"a": {}}}, "items"), ({"items": [{}, "x"]}, "items[1]"),
    ({"items": [None]}, "items[0]"),
])
def test_list_items(doc: dict[str, Any], field: str) -> None:
    assert list_items({"items": [{"a": 1}]}, "Pod", "GET pods") == [{"a": 1}]
    assert list_items({"items": None}, "Pod", "GET pods") == []
    with pytest.raises(MalformedObject) as info:
        list_items(doc, "Pod", "GET pods")
    assert info.value.field == field and info.value.kind == "PodList"


@given(value=JSON_VALUES, where=st.sampled_from([
    ("metadata",), ("metadata", "ownerReferences"), ("spec", "containers"),
    ("spec", "containers", 0, "resources"), ("spec", "containers", 0, "resources", "limits"),
    ("status", "conditions"), ("status", "conditions", 0, "type"), ("status", "phase")]))
def test_any_value_anywhere_in_a_pod_checks_or_is_refused(value: object,
                                                          where: tuple[Any, ...]) -> None:
    """Any JSON value put at a place /cpvpa reads: checked, or a MalformedObject naming
    a field at or below that place; never another exception."""
    doc: Any = json.loads(json.dumps(pod()))
    node = doc
    for step in where[:-1]:
        node = node[step]
    node[where[-1]] = value
    doc = json.loads(json.dumps(doc))
    try:
        check_pod(doc, "Pod p")
    except MalformedObject as exc:
        place = "".join(f"[{s}]" if isinstance(s, int) else f".{s}" for s in where)[1:]
        assert exc.field.startswith(place), (exc.field, place)


@pytest.mark.parametrize("kind,doc,field", [
    ("APIGroup", {"preferredVersion": {"version": 1}}, "preferredVersion.version"),
    ("APIGroup", {"versions": {"v1": {}}}, "versions"),
    ("APIResourceList", {"resources": [{"name": "rollouts", "namespaced": "false"}]},
     "resources[0].namespaced"),
    ("APIResourceList", {"resources": [{"name": ["rollouts"]}]}, "resources[0].name"),
])
def test_a_malformed_discovery_answer_names_the_field(kind: str, doc: dict[str, Any],
                                                      field: str) -> None:
    """``namespaced: "false"`` was read as true (``bool("false")``)."""
    check_discovery({"resources": [{"name": "r", "namespaced": False}]}, kind, "GET /apis/g")
    with pytest.raises(MalformedObject) as info:
        check_discovery(doc, kind, "GET /apis/g")
    assert info.value.field == field and f"the {kind} answered" in str(info.value)
