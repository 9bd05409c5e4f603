"""In-place resize of running Pods (``--resize-mode=in-place``, ours): what to send, and
what the API server or the kubelet would refuse, decided before sending.

Kubernetes resizes a running Pod's cpu and memory through the ``pods/resize``
subresource (GA in 1.35, beta and on by default since 1.33): a PATCH of
``spec.containers[*].resources``; the kubelet applies it to the running containers and
reports problems as Pod conditions (``PodResizePending`` with reason ``Infeasible`` or
``Deferred``, ``PodResizeInProgress`` with reason ``Error``). CPVA instead patches the
template and the controller replaces every Pod.

This module is the pure part: for one Pod (decoded JSON) and the computed requirements,
the body of its resize PATCH (only the containers and resources that differ, in the Pod's
container order), or the reason it cannot be resized in place:

* ``resource``: a configured resource other than cpu and memory differs (only those two
  are resizable);
* ``container``: the Pod has no container of that name;
* ``qos``: the new values would change the Pod's QoS class, which is immutable (the API
  server refuses the resize);
* and from its conditions, after a resize was sent: ``infeasible`` (the node can never fit
  it), ``error`` (the runtime failed to apply it); ``deferred`` is reported separately.

Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from cpa.go.quantity import Quantity, QuantityError
from cpa.vertical.decide.formula import ContainerRequirements, Requirements
from cpa.vertical.decide.patch import Difference, differences

__all__ = [
    "RESIZABLE",
    "PodPlan",
    "ResizeStatus",
    "controller_uid",
    "label_selector",
    "plan_pod",
    "qos_class",
    "resize_status",
    "rollout_note",
    "template_is_safe",
]

RESIZABLE: Final = frozenset({"cpu", "memory"})
_QOS_RESOURCES: Final = ("cpu", "memory")


@dataclass(frozen=True, slots=True)
class PodPlan:
    """What to do with one Pod this poll."""

    name: str
    differences: tuple[Difference, ...]
    body: str | None = None  # the resize PATCH (strategic merge JSON); None: nothing to send
    refusal: str | None = None  # "resource", "container" or "qos": cannot resize in place
    message: str = ""


@dataclass(frozen=True, slots=True)
class ResizeStatus:
    """A Pod's resize conditions: ``state`` is ``infeasible``, ``deferred``, ``error``,
    ``in-progress`` or None (nothing pending)."""

    state: str | None
    message: str = ""


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _containers(spec: Mapping[str, Any], key: str = "containers") -> list[Mapping[str, Any]]:
    found = spec.get(key)
    return [c for c in found if isinstance(c, Mapping)] if isinstance(found, list) else []


def _quantity(text: object) -> Quantity | None:
    if not isinstance(text, str):
        return None
    try:
        return Quantity.parse(text)
    except QuantityError:
        return None


def qos_class(containers: Sequence[Mapping[str, Any]],
              init_containers: Sequence[Mapping[str, Any]] = ()) -> str:
    """The Pod's QoS class from its containers' resources, as Kubernetes' ``GetPodQOS``
    computes it (cpu and memory only; zero values do not count)."""
    requests: dict[str, Quantity] = {}
    limits: dict[str, Quantity] = {}
    guaranteed = True
    for container in (*init_containers, *containers):
        resources = _mapping(container.get("resources"))
        for name, value in _mapping(resources.get("requests")).items():
            q = _quantity(value)
            if name in _QOS_RESOURCES and q is not None and not q.is_zero():
                requests[name] = requests[name].add(q) if name in requests else q
        found: set[str] = set()
        for name, value in _mapping(resources.get("limits")).items():
            q = _quantity(value)
            if name in _QOS_RESOURCES and q is not None and not q.is_zero():
                found.add(name)
                limits[name] = limits[name].add(q) if name in limits else q
        if not found >= set(_QOS_RESOURCES):
            guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    if guaranteed:
        for name, q in requests.items():
            if name not in limits or limits[name].normalized() != q.normalized():
                guaranteed = False
                break
    if guaranteed and len(requests) == len(limits):
        return "Guaranteed"
    return "Burstable"


def _with_values(container: Mapping[str, Any], wanted: ContainerRequirements
                 ) -> dict[str, Any]:
    """The container with the computed values set (as the merge would set them)."""
    resources = dict(_mapping(container.get("resources")))
    for kind, values in (("requests", wanted.requests), ("limits", wanted.limits)):
        if values:
            merged = dict(_mapping(resources.get(kind)))
            merged.update({res: str(q) for res, q in values.items()})
            resources[kind] = merged
    return {**container, "resources": resources}


def plan_pod(pod: Mapping[str, Any], computed: Requirements) -> PodPlan:
    """The resize PATCH for ``pod`` (decoded JSON), or why it cannot be resized in place."""
    meta = _mapping(pod.get("metadata"))
    name = str(meta.get("name", ""))
    spec = _mapping(pod.get("spec"))
    containers = _containers(spec)
    found = tuple(differences(containers, computed))
    if not found:
        return PodPlan(name, found)
    missing = sorted({d.container for d in found if d.container_missing})
    if missing:
        return PodPlan(name, found, refusal="container",
                       message=f"the Pod has no container {', '.join(map(repr, missing))}")
    fixed = sorted({f"{d.container} {d.kind}[{d.resource}]" for d in found
                    if d.resource not in RESIZABLE})
    if fixed:
        return PodPlan(name, found, refusal="resource",
                       message=f"only cpu and memory can be resized in place; "
                               f"{', '.join(fixed)} differs")
    changed = {d.container for d in found}
    after = [_with_values(c, computed[str(c.get("name"))]) if c.get("name") in changed else c
             for c in containers]
    init = _containers(spec, "initContainers")
    status = _mapping(pod.get("status"))
    before_qos = str(status.get("qosClass") or qos_class(containers, init))
    after_qos = qos_class(after, init)
    if after_qos != before_qos:
        return PodPlan(name, found, refusal="qos",
                       message=f"the new values would make the Pod {after_qos} (it is "
                               f"{before_qos}); a Pod's QoS class cannot change in place")
    patch_containers = []
    for container in containers:
        cname = container.get("name")
        if cname not in changed:
            continue
        wanted = computed[str(cname)]
        resources: dict[str, dict[str, str]] = {}
        for kind, values in (("limits", wanted.limits), ("requests", wanted.requests)):
            chosen = {res: str(q) for res, q in values.items() if res in RESIZABLE}
            if chosen:
                resources[kind] = chosen
        patch_containers.append({"name": cname, "resources": resources})
    body = json.dumps({"spec": {"containers": patch_containers}}, separators=(",", ":"))
    return PodPlan(name, found, body=body)


def resize_status(pod: Mapping[str, Any]) -> ResizeStatus:
    """The Pod's pending resize, from its ``PodResizePending`` and ``PodResizeInProgress``
    conditions."""
    conditions = _mapping(pod.get("status")).get("conditions")
    state: str | None = None
    message = ""
    for condition in conditions if isinstance(conditions, list) else ():
        if not isinstance(condition, Mapping) or condition.get("status") != "True":
            continue
        ctype, reason = condition.get("type"), condition.get("reason")
        text = str(condition.get("message") or "")
        if ctype == "PodResizePending":
            if reason == "Infeasible":
                return ResizeStatus("infeasible", text)
            state, message = "deferred", text
        elif ctype == "PodResizeInProgress":
            if reason == "Error":
                return ResizeStatus("error", text)
            if state is None:
                state, message = "in-progress", text
    return ResizeStatus(state, message)


# --- the target and its Pods ------------------------------------------------------------


def label_selector(selector: Mapping[str, Any]) -> str:
    """A ``LabelSelector`` object as the ``labelSelector`` query parameter."""
    parts = [f"{k}={v}" for k, v in sorted(dict(selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or ():
        if not isinstance(expr, Mapping):  # null: Go's zero requirement, none
            continue
        key, op = expr.get("key", ""), expr.get("operator", "")
        values = ",".join(expr.get("values") or ())
        if op == "In":
            parts.append(f"{key} in ({values})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({values})")
        elif op == "Exists":
            parts.append(key)
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts)


def controller_uid(obj: Mapping[str, Any]) -> str | None:
    """The uid of the object's controller (its owner reference marked ``controller``)."""
    for ref in _mapping(obj.get("metadata")).get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("controller"):
            return str(ref.get("uid"))
    return None


def _statefulset_strategy(obj: Mapping[str, Any]) -> tuple[str, int, int]:
    """A StatefulSet's update strategy type, its partition and its replicas."""
    spec = _mapping(obj.get("spec"))
    strategy = _mapping(spec.get("updateStrategy"))
    partition = _mapping(strategy.get("rollingUpdate")).get("partition")
    replicas = spec.get("replicas")
    return (str(strategy.get("type") or "RollingUpdate"),
            partition if isinstance(partition, int) else 0,
            replicas if isinstance(replicas, int) else 1)


def template_is_safe(obj: Mapping[str, Any], kind: str) -> tuple[bool, str]:
    """Whether patching this target's template restarts no Pod, and why."""
    if kind == "StatefulSet":
        strategy, partition, replicas = _statefulset_strategy(obj)
        if strategy == "OnDelete":
            return True, "the StatefulSet's updateStrategy is OnDelete"
        if partition >= replicas:
            return True, (f"the StatefulSet's rollingUpdate partition ({partition}) is at or "
                          f"above its replicas ({replicas}): no Pod is updated")
        return False, (f"the StatefulSet's updateStrategy is RollingUpdate (partition "
                       f"{partition}): a template change replaces the Pods of ordinal "
                       f"{partition} and up, one at a time")
    if kind == "ReplicaSet":
        return True, "a ReplicaSet's template applies only to the Pods it creates later"
    if kind == "DaemonSet":
        ds_strategy = ((obj.get("spec") or {}).get("updateStrategy") or {}).get("type")
        if ds_strategy == "OnDelete":
            return True, "the DaemonSet's updateStrategy is OnDelete"
        return False, (f"the DaemonSet's updateStrategy is {ds_strategy or 'RollingUpdate'}: "
                       "a template change replaces every Pod")
    return False, "a Deployment replaces every Pod when its template changes"


def rollout_note(obj: Mapping[str, Any], kind: str) -> str | None:
    """What the target's controller does with a patched template, from its update strategy:
    said with each template write of a StatefulSet or DaemonSet (the write respects the
    strategy; /cpvpa never deletes a Pod for it). None for the other kinds."""
    if kind == "StatefulSet":
        strategy, partition, replicas = _statefulset_strategy(obj)
        if strategy == "OnDelete":
            return ("updateStrategy OnDelete: each Pod takes the new values when it is "
                    "deleted; none is restarted for this change")
        if partition >= replicas:
            return (f"updateStrategy RollingUpdate with partition {partition} (replicas "
                    f"{replicas}): no Pod is updated until the partition is lowered")
        first = f"ordinals {partition} and up" if partition else "every Pod"
        return (f"updateStrategy RollingUpdate: the StatefulSet controller replaces {first}, "
                "one at a time, highest ordinal first")
    if kind == "DaemonSet":
        safe, why = template_is_safe(obj, kind)
        return ("updateStrategy OnDelete: each Pod takes the new values when it is deleted"
                if safe else why)
    return None
