"""In-place resize planning (pure): the body sent to ``pods/resize`` and the refusals
predicted before sending, the Pod's resize conditions, selectors and owners."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cpa.vertical.decide.cpva_config import decode_config
from cpa.vertical.decide.formula import compute
from cpa.vertical.decide.resize import (
    controller_uid,
    label_selector,
    plan_pod,
    qos_class,
    resize_status,
    template_is_safe,
)


def pod(*containers: dict[str, Any], qos: str | None = None,
        conditions: list[dict[str, str]] | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": "Running"}
    if qos:
        status["qosClass"] = qos
    if conditions:
        status["conditions"] = conditions
    return {"metadata": {"name": "p", "uid": "u"}, "spec": {"containers": list(containers)},
            "status": status}


def container(name: str, requests: dict[str, str] | None = None,
              limits: dict[str, str] | None = None) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    return {"name": name, "image": "x", "resources": resources}


def computed(text: str, nodes: int = 3, cores: int = 24) -> Any:
    return compute(decode_config(text), nodes, cores)


CPU_MEM = computed('{"app": {"requests": {"cpu": {"base": "10m", "step": "1m", '
                   '"coresPerStep": 1}, "memory": {"base": "64Mi"}}}}')


def test_only_what_differs_is_sent_in_the_pods_container_order() -> None:
    config = computed('{"b": {"requests": {"cpu": {"base": "20m"}}},'
                      ' "a": {"requests": {"cpu": {"base": "10m"}}}}')
    p = pod(container("a", {"cpu": "5m"}, {"memory": "1Gi"}), container("z"),
            container("b", {"cpu": "5m"}, {"memory": "1Gi"}), qos="Burstable")
    plan = plan_pod(p, config)
    assert plan.refusal is None and plan.body is not None
    assert json.loads(plan.body) == {"spec": {"containers": [
        {"name": "a", "resources": {"requests": {"cpu": "10m"}}},
        {"name": "b", "resources": {"requests": {"cpu": "20m"}}}]}}
    assert [(d.container, d.current, str(d.wanted)) for d in plan.differences] == [
        ("a", "5m", "10m"), ("b", "5m", "20m")]


def test_equal_values_written_differently_are_equal() -> None:
    p = pod(container("app", {"cpu": "0.034", "memory": "64Mi"}, {"memory": "1Gi"}))
    plan = plan_pod(p, CPU_MEM)
    assert plan.body is None and plan.refusal is None and plan.differences == ()


def test_a_resource_other_than_cpu_and_memory_cannot_be_resized() -> None:
    config = computed('{"app": {"limits": {"ephemeral-storage": {"base": "2Gi"}}}}')
    plan = plan_pod(pod(container("app", limits={"ephemeral-storage": "1Gi"})), config)
    assert plan.refusal == "resource" and "app limits[ephemeral-storage]" in plan.message
    same = plan_pod(pod(container("app", limits={"ephemeral-storage": "2Gi"})), config)
    assert same.refusal is None and same.body is None  # not sent when it does not differ


def test_a_missing_container_is_refused() -> None:
    plan = plan_pod(pod(container("other")), CPU_MEM)
    assert plan.refusal == "container" and "'app'" in plan.message


@pytest.mark.parametrize(("requests", "limits", "qos"), [
    ({"cpu": "1", "memory": "1Gi"}, {"cpu": "1", "memory": "1Gi"}, "Guaranteed"),
    (None, {"cpu": "1", "memory": "1Gi"}, "Guaranteed"),  # requests default to limits
    ({"cpu": "1"}, None, "Burstable"),
    ({"cpu": "1", "memory": "1Gi"}, {"cpu": "2", "memory": "1Gi"}, "Burstable"),
    (None, None, "BestEffort"),
    ({"cpu": "0"}, None, "BestEffort"),
    ({"nvidia.com/gpu": "1"}, {"nvidia.com/gpu": "1"}, "BestEffort"),
])
def test_qos_class_as_kubernetes_computes_it(requests: dict[str, str] | None,
                                            limits: dict[str, str] | None, qos: str) -> None:
    c = container("c", requests or (limits if requests is None and limits else None), limits)
    assert qos_class([c]) == qos


def test_a_qos_change_is_refused_before_sending() -> None:
    guaranteed = pod(container("app", {"cpu": "5m", "memory": "64Mi"},
                               {"cpu": "5m", "memory": "64Mi"}), qos="Guaranteed")
    plan = plan_pod(guaranteed, CPU_MEM)  # requests up, limits unchanged: Burstable
    assert plan.refusal == "qos" and "Burstable" in plan.message and "Guaranteed" in plan.message
    both = computed('{"app": {"requests": {"cpu": {"base": "34m"}, "memory": {"base": "64Mi"}},'
                    ' "limits": {"cpu": {"base": "34m"}, "memory": {"base": "64Mi"}}}}')
    plan = plan_pod(guaranteed, both)  # requests and limits move together: stays Guaranteed
    assert plan.refusal is None and plan.body is not None


def test_init_containers_count_for_the_qos_class() -> None:
    p = pod(container("app", {"cpu": "5m"}), qos="Burstable")
    p["spec"]["initContainers"] = [container("init", {"memory": "1Mi"})]
    plan = plan_pod(p, CPU_MEM)
    assert plan.refusal is None and plan.body is not None


@pytest.mark.parametrize(("conditions", "state"), [
    ([], None),
    ([{"type": "PodResizePending", "status": "True", "reason": "Infeasible",
       "message": "Node didn't have enough capacity"}], "infeasible"),
    ([{"type": "PodResizePending", "status": "True", "reason": "Deferred"}], "deferred"),
    ([{"type": "PodResizeInProgress", "status": "True"}], "in-progress"),
    ([{"type": "PodResizeInProgress", "status": "True", "reason": "Error",
       "message": "runtime refused"}], "error"),
    ([{"type": "PodResizePending", "status": "False", "reason": "Infeasible"}], None),
])
def test_resize_conditions(conditions: list[dict[str, str]], state: str | None) -> None:
    assert resize_status(pod(container("c"), conditions=conditions)).state == state


def test_label_selectors_render_as_the_query_parameter() -> None:
    assert label_selector({"matchLabels": {"b": "2", "a": "1"}, "matchExpressions": [
        {"key": "tier", "operator": "In", "values": ["x", "y"]},
        {"key": "env", "operator": "NotIn", "values": ["dev"]},
        {"key": "has", "operator": "Exists"},
        {"key": "not", "operator": "DoesNotExist"}]}) == (
        "a=1,b=2,tier in (x,y),env notin (dev),has,!not")


def test_owner_and_template_safety() -> None:
    owned = {"metadata": {"ownerReferences": [{"uid": "x", "controller": False},
                                              {"uid": "y", "controller": True}]}}
    assert controller_uid(owned) == "y" and controller_uid({"metadata": {}}) is None
    assert template_is_safe({"spec": {"updateStrategy": {"type": "OnDelete"}}},
                            "DaemonSet")[0]
    assert not template_is_safe({"spec": {}}, "DaemonSet")[0]
    assert template_is_safe({}, "ReplicaSet")[0]
    assert not template_is_safe({}, "Deployment")[0]
