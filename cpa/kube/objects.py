"""The objects we read from the API server, decoded by type as client-go decodes them.

Why: an answer is not to be trusted because it came with a 200. A Scale whose
``spec.replicas`` was ``{"x": 1}`` once raised a ``TypeError`` in the middle of a poll and
stopped every target after it; one whose ``spec.replicas`` was ``"7"`` was read as 7,
where client-go refuses to decode it. Each object a poll reads (Scale, HPA, ConfigMap,
Lease) has one decoder here that checks every field we use against its Go type and gives
a plain record; a field of the wrong type is :class:`MalformedObject`, an
:class:`~cpa.kube.api.ApiError`, so it is the failure of that one request (one target's
write, one Lease round) and the message names the object and the field.

/cpvpa's target and its Pods are checked the same way against a schema of the fields it
reads (:func:`check_workload`, :func:`check_pod`): one malformed Pod is that Pod's error,
the others are still resized.

Go's rules, as ``sigs.k8s.io/json`` (client-go's decoder) applies them: names are case
sensitive; an ``int32`` is a JSON number with no fraction or exponent within
-2147483648..2147483647 (``7.0``, ``"7"`` and ``true`` are refused); a ``string`` is a
JSON string; ``null`` leaves a field at its zero value (0, "", an empty object; nil for a
pointer such as ``minReplicas``), and so does a missing one; an object must be an object.

Hand-written rather than msgspec (the Node watch's JSON fallback,
:mod:`cpa.nodes.jsondecode`): Go's rules above (``null`` as the zero value, an int32's
range, a float refused) and a message that names the object and the field are a few
lines per field here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from cpa.kube.api import ApiError

__all__ = ["ConfigMapObject", "HpaObject", "LeaseSpec", "MalformedObject", "ScaleObject",
           "check_discovery", "check_pod", "check_workload", "decode_configmap",
           "decode_hpa", "decode_lease", "decode_scale", "json_type", "list_items"]

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1


class MalformedObject(ApiError):
    """An answer that does not decode as the object asked for (client-go would refuse it
    too). ``status`` 0: no usable answer, so callers treat it as they treat a failed
    request, never as a refusal to act on."""

    def __init__(self, kind: str, where: str, field: str, problem: str) -> None:
        super().__init__(0, "MalformedObject", (
            f"{where}: the {kind} answered does not decode: {field} {problem}; client-go "
            "refuses it too: look at what wrote it (a webhook, a proxy, a custom "
            "resource's scale paths)"))
        self.kind = kind
        self.field = field


class _Invalid(Exception):
    """A field of the wrong type, found deep down; the decoder adds the object."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field} {problem}")
        self.field = field
        self.problem = problem


def json_type(value: object, *, shown: bool = True) -> str:
    """The type of a decoded JSON or YAML value for an error (``a string ('7')``,
    ``a number (1)``, ``an array``); without the value itself when not ``shown`` (a
    credential's)."""
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, bool):
        kind, text = "bool", "true" if value else "false"
    elif isinstance(value, int | float):
        kind, text = "number", repr(value)
    elif isinstance(value, str):
        kind, text = "string", repr(value if len(value) <= 40 else value[:37] + "...")
    else:
        kind, text = type(value).__name__, str(value)
    return f"a {kind} ({text})" if shown else f"a {kind}"


def _typed(parent: Mapping[str, Any], key: str, field: str, accept: Callable[[Any], bool],
           noun: str) -> Any:
    """A field's value if ``accept`` takes it; None when null or missing."""
    value = parent.get(key)
    if value is not None and not accept(value):
        raise _Invalid(field, f"is {json_type(value)}, not {noun}")
    return value


def _object(parent: Mapping[str, Any], key: str, field: str) -> Mapping[str, Any]:
    """A nested object; null or missing is the empty one (Go's zero struct)."""
    value: Mapping[str, Any] | None = _typed(parent, key, field,
                                             lambda v: isinstance(v, dict), "an object")
    return {} if value is None else value


def _int32(parent: Mapping[str, Any], key: str, field: str) -> int | None:
    """An int32 field; None when null or missing (a pointer's nil, a value's 0)."""
    value: int | None = _typed(
        parent, key, field, lambda v: isinstance(v, int) and not isinstance(v, bool),
        "an int32")
    if value is not None and not INT32_MIN <= value <= INT32_MAX:
        raise _Invalid(field, f"is {value}, outside the int32 range")
    return value


def _string(parent: Mapping[str, Any], key: str, field: str) -> str | None:
    """A string field; None when null or missing."""
    value: str | None = _typed(parent, key, field, lambda v: isinstance(v, str), "a string")
    return value


def _string_map(parent: Mapping[str, Any], key: str, field: str) -> dict[str, str] | None:
    """A ``map[string]string``; None when null or missing, a null value is ""."""
    value: dict[str, Any] | None = _typed(parent, key, field, lambda v: isinstance(v, dict),
                                          "an object of strings")
    if value is None:
        return None
    out: dict[str, str] = {}
    for name, item in value.items():
        if item is None:
            item = ""
        elif not isinstance(item, str):
            raise _Invalid(f"{field}[{name!r}]", f"is {json_type(item)}, not a string")
        out[name] = item
    return out


def _decoded(kind: str, where: str, exc: _Invalid) -> MalformedObject:
    return MalformedObject(kind, where, exc.field, exc.problem)


def _meta(doc: Mapping[str, Any]) -> tuple[str | None, str]:
    """(uid, resourceVersion)."""
    meta = _object(doc, "metadata", "metadata")
    return (_string(meta, "uid", "metadata.uid") or None,
            _string(meta, "resourceVersion", "metadata.resourceVersion") or "")


class ScaleObject(NamedTuple):
    """An autoscaling/v1 Scale, the fields we use."""

    replicas: int
    """``spec.replicas`` (0 when null or missing, as Go decodes it)."""
    uid: str | None
    resource_version: str
    status_replicas: int
    selector: str
    """``status.selector``; "" when the Scale has none."""


def decode_scale(doc: Mapping[str, Any], where: str) -> ScaleObject:
    """A Scale answer (``where``: the request, for the message); raises
    :class:`MalformedObject`."""
    try:
        uid, version = _meta(doc)
        spec = _object(doc, "spec", "spec")
        status = _object(doc, "status", "status")
        return ScaleObject(_int32(spec, "replicas", "spec.replicas") or 0, uid, version,
                           _int32(status, "replicas", "status.replicas") or 0,
                           _string(status, "selector", "status.selector") or "")
    except _Invalid as exc:
        raise _decoded("Scale", where, exc) from None


class HpaObject(NamedTuple):
    """An autoscaling/v2 HorizontalPodAutoscaler, the fields we use."""

    min_replicas: int
    """``spec.minReplicas``; 1 when null or missing (the API's default)."""
    max_replicas: int | None
    """``spec.maxReplicas``; None when null or missing."""
    uid: str | None
    resource_version: str


def decode_hpa(doc: Mapping[str, Any], where: str) -> HpaObject:
    """An HPA answer; raises :class:`MalformedObject`."""
    try:
        uid, version = _meta(doc)
        spec = _object(doc, "spec", "spec")
        low = _int32(spec, "minReplicas", "spec.minReplicas")
        return HpaObject(1 if low is None else low,
                         _int32(spec, "maxReplicas", "spec.maxReplicas"), uid, version)
    except _Invalid as exc:
        raise _decoded("HorizontalPodAutoscaler", where, exc) from None


class ConfigMapObject(NamedTuple):
    resource_version: str
    data: dict[str, str] | None
    """``data``; None when the ConfigMap has none."""


def decode_configmap(doc: Mapping[str, Any], where: str) -> ConfigMapObject:
    """A ConfigMap answer; raises :class:`MalformedObject`."""
    try:
        meta = _object(doc, "metadata", "metadata")
        _string_map(meta, "annotations", "metadata.annotations")
        _string_map(meta, "labels", "metadata.labels")
        return ConfigMapObject(_meta(doc)[1],
                               _string_map(doc, "data", "data"))
    except _Invalid as exc:
        raise _decoded("ConfigMap", where, exc) from None


class LeaseSpec(NamedTuple):
    """A coordination.k8s.io/v1 Lease's spec, the fields leader election uses."""

    holder: str
    """``holderIdentity``; "" when null or missing."""
    duration: int | None
    """``leaseDurationSeconds``; None when null or missing."""
    transitions: int
    acquire_time: str | None
    renew_time: str | None


def decode_lease(doc: Mapping[str, Any], where: str) -> LeaseSpec:
    """A Lease answer's spec; raises :class:`MalformedObject`."""
    try:
        _meta(doc)
        spec = _object(doc, "spec", "spec")
        return LeaseSpec(_string(spec, "holderIdentity", "spec.holderIdentity") or "",
                         _int32(spec, "leaseDurationSeconds", "spec.leaseDurationSeconds"),
                         _int32(spec, "leaseTransitions", "spec.leaseTransitions") or 0,
                         _string(spec, "acquireTime", "spec.acquireTime"),
                         _string(spec, "renewTime", "spec.renewTime"))
    except _Invalid as exc:
        raise _decoded("Lease", where, exc) from None


# --- the vertical autoscaler's objects: checked by type, then used as decoded ----------
# /cpvpa reads its target (a Deployment, DaemonSet or ReplicaSet) and the target's Pods
# whole (their containers go into a resize plan), so these are checked against a schema
# of the fields it reads rather than turned into records: a schema is a type name, an
# object's fields ({name: schema}), a list of one schema ([schema]: an array of it), or
# _MapOf(schema) (a map[string]...). Every field may be null or missing (Go's zero value).

class _MapOf:
    """A ``map[string]...`` of ``values`` (a plain class: cheaper to make than a tuple
    type)."""

    __slots__ = ("values",)

    def __init__(self, values: object) -> None:
        self.values = values


_STRING = "string"
_BOOL = "bool"
_QUANTITY = "quantity"
"""resource.Quantity: a JSON string, or a number (its UnmarshalJSON takes either)."""

_CONTAINER = {"name": _STRING,
              "resources": {"requests": _MapOf(_QUANTITY), "limits": _MapOf(_QUANTITY)}}
_OWNED_META = {"name": _STRING, "uid": _STRING, "resourceVersion": _STRING,
               "deletionTimestamp": _STRING,
               "ownerReferences": [{"controller": _BOOL, "uid": _STRING, "kind": _STRING,
                                    "name": _STRING}]}
_POD_SPEC = {"containers": [_CONTAINER], "initContainers": [_CONTAINER]}
_WORKLOAD = {
    "metadata": _OWNED_META,
    "spec": {"selector": {"matchLabels": _MapOf(_STRING),
                          "matchExpressions": [{"key": _STRING, "operator": _STRING,
                                                "values": [_STRING]}]},
             "updateStrategy": {"type": _STRING},
             "template": {"spec": _POD_SPEC}},
}
_POD = {
    "metadata": _OWNED_META,
    "spec": _POD_SPEC,
    "status": {"phase": _STRING, "qosClass": _STRING,
               "conditions": [{"type": _STRING, "status": _STRING, "reason": _STRING,
                               "message": _STRING}]},
}
_API_GROUP = {"preferredVersion": {"version": _STRING},
              "versions": [{"version": _STRING, "groupVersion": _STRING}]}
_RESOURCE_LIST = {"resources": [{"name": _STRING, "kind": _STRING, "namespaced": _BOOL,
                                 "verbs": [_STRING]}]}
_NAMES = {_STRING: "a string", _BOOL: "a bool", _QUANTITY: "a quantity (string or number)"}


def _check(value: object, schema: object, field: str) -> None:
    """Raise :class:`_Invalid` where ``value`` is not of ``schema``'s types."""
    if value is None:
        return
    if isinstance(schema, dict):
        if not isinstance(value, dict):
            raise _Invalid(field, f"is {json_type(value)}, not an object")
        for key, inner in schema.items():
            _check(value.get(key), inner, f"{field}.{key}" if field else key)
    elif isinstance(schema, list):
        if not isinstance(value, list):
            raise _Invalid(field, f"is {json_type(value)}, not an array")
        for i, item in enumerate(value):
            _check(item, schema[0], f"{field}[{i}]")
    elif isinstance(schema, _MapOf):
        if not isinstance(value, dict):
            raise _Invalid(field, f"is {json_type(value)}, not an object")
        for key, item in value.items():
            _check(item, schema.values, f"{field}[{key!r}]")
    elif not _leaf_ok(value, str(schema)):
        raise _Invalid(field, f"is {json_type(value)}, not {_NAMES[str(schema)]}")


def _leaf_ok(value: object, schema: str) -> bool:
    if schema == _BOOL:
        return isinstance(value, bool)
    if isinstance(value, str):
        return True
    return schema == _QUANTITY and isinstance(value, int | float) and not isinstance(
        value, bool)


def check_workload(doc: Mapping[str, Any], kind: str, where: str) -> None:
    """A Deployment, DaemonSet or ReplicaSet as /cpvpa reads it; raises
    :class:`MalformedObject`."""
    try:
        _check(doc, _WORKLOAD, "")
    except _Invalid as exc:
        raise _decoded(kind, where, exc) from None


def check_pod(doc: Mapping[str, Any], where: str) -> None:
    """A Pod as /cpvpa reads it (to resize it in place); raises :class:`MalformedObject`."""
    try:
        _check(doc, _POD, "")
    except _Invalid as exc:
        raise _decoded("Pod", where, exc) from None


def check_discovery(doc: Mapping[str, Any], kind: str, where: str) -> None:
    """An APIGroup or APIResourceList (``kind``) from API discovery (a ``RESOURCE.GROUP``
    target at start-up); raises :class:`MalformedObject`."""
    try:
        _check(doc, _API_GROUP if kind == "APIGroup" else _RESOURCE_LIST, "")
    except _Invalid as exc:
        raise _decoded(kind, where, exc) from None


def list_items(doc: Mapping[str, Any], kind: str, where: str) -> list[dict[str, Any]]:
    """A list's ``items``, each an object (not checked further); raises
    :class:`MalformedObject`."""
    items = doc.get("items")
    if items is None:
        return []
    if not isinstance(items, list):
        raise MalformedObject(f"{kind}List", where, "items",
                              f"is {json_type(items)}, not an array")
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise MalformedObject(f"{kind}List", where, f"items[{i}]",
                                  f"is {json_type(item)}, not an object")
    return items
