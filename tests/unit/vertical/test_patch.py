"""cpa.vertical.decide.patch: CPVA's PATCH body, its write decision, and template differences."""

from __future__ import annotations

import json

import pytest

from cpa.go.quantity import Format, Quantity
from cpa.vertical.decide.cpva_config import decode_config
from cpa.vertical.decide.formula import ContainerRequirements, compute
from cpa.vertical.decide.patch import (
    Difference,
    PatchTarget,
    TargetError,
    cpva_patch,
    differences,
    parse_target,
    patch_body,
    should_write,
)

CONFIG = decode_config(
    '{"proxy":{"requests":{"cpu":{"base":"10m","step":"1m","nodesPerStep":1},'
    '"memory":{"base":"8Mi","step":"1Mi","nodesPerStep":1}},'
    '"limits":{"memory":{"base":"16Mi","step":"2Mi","nodesPerStep":1}}},'
    '"a<b>&c":{"requests":{"cpu":{"base":"1"}}}}')
DAEMONSET = PatchTarget("DaemonSet", "kube-proxy")


def test_patch_body_is_gos_json_marshal() -> None:
    """Sorted keys, compact, HTML-safe escapes; limits before requests; containers by name."""
    body = patch_body(DAEMONSET, compute(CONFIG, nodes=3, cores=12))
    assert body == (
        '{"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"name":"kube-proxy"},'
        '"spec":{"template":{"spec":{"containers":['
        '{"name":"a\\u003cb\\u003e\\u0026c","resources":{"requests":{"cpu":"1"}}},'
        '{"name":"proxy","resources":{"limits":{"memory":"23068672"},'
        '"requests":{"cpu":"13m","memory":"11534336"}}}]}}}}')
    assert json.loads(body)["spec"]["template"]["spec"]["containers"][0]["name"] == "a<b>&c"


def test_containers_follow_the_template_order_when_it_is_known() -> None:
    """The server's strategic merge orders patched containers as the patch does."""
    computed = compute(CONFIG, nodes=3, cores=12)
    names = [c["name"] for c in json.loads(patch_body(DAEMONSET, computed, order=(
        "istio-proxy", "proxy", "a<b>&c")))["spec"]["template"]["spec"]["containers"]]
    assert names == ["proxy", "a<b>&c"]
    names = [c["name"] for c in json.loads(patch_body(DAEMONSET, computed, order=(
        "proxy",)))["spec"]["template"]["spec"]["containers"]]
    assert names == ["proxy", "a<b>&c"]  # unknown ones after, by name


def test_empty_requests_and_limits_are_omitted() -> None:
    body = patch_body(PatchTarget("Deployment", "x"),
                      {"c": ContainerRequirements({}, {}), "d": ContainerRequirements(
                          {}, {"cpu": Quantity.from_milli(5, Format.BINARY_SI)})})
    containers = json.loads(body)["spec"]["template"]["spec"]["containers"]
    assert containers == [{"name": "c", "resources": {}},
                          {"name": "d", "resources": {"limits": {"cpu": "5m"}}}]
    assert json.loads(patch_body(PatchTarget("ReplicaSet", "x"), {}))["spec"] == {
        "template": {"spec": {"containers": []}}}


def test_should_write_is_deep_equal_against_the_last_successful_write() -> None:
    first = compute(CONFIG, nodes=3, cores=12)
    assert should_write(None, first)
    assert should_write(None, {})  # a nil map never equals a computed one
    assert not should_write(first, compute(CONFIG, nodes=3, cores=99))  # cores unused
    assert should_write(first, compute(CONFIG, nodes=4, cores=12))
    assert not should_write({}, {})
    memory = Quantity.from_milli(1000, Format.DECIMAL_SI)
    same_value_other_format = Quantity.from_milli(1000, Format.BINARY_SI)
    assert should_write({"c": ContainerRequirements({"m": memory}, {})},
                        {"c": ContainerRequirements({"m": same_value_other_format}, {})})


def test_cpva_patch() -> None:
    first = compute(CONFIG, nodes=3, cores=12)
    assert cpva_patch(DAEMONSET, first, None) == patch_body(DAEMONSET, first)
    assert cpva_patch(DAEMONSET, first, first) is None


@pytest.mark.parametrize(
    ("text", "kind", "name"),
    [("deployment/coredns", "Deployment", "coredns"),
     ("DaemonSet/Kube-Proxy", "DaemonSet", "kube-proxy"),  # the name is lower-cased too
     ("REPLICASET/x", "ReplicaSet", "x"),
     ("deployment/", "Deployment", "")],  # accepted: the PATCH fails later
)
def test_parse_target(text: str, kind: str, name: str) -> None:
    assert parse_target(text) == PatchTarget(kind, name, "apps/v1")


@pytest.mark.parametrize(
    ("text", "message"),
    [("", "cannot be empty"), ("statefulset/x", "Unknown target format"),
     ("deployments/x", "Unknown target format"), ("deployment", "Unknown target format"),
     ("deployment/a/b", "target format error")],
)
def test_parse_target_refuses(text: str, message: str) -> None:
    with pytest.raises(TargetError, match=message):
        parse_target(text)


def test_differences_compare_values_not_spellings() -> None:
    computed = compute(CONFIG, nodes=3, cores=12)
    template = [
        {"name": "proxy", "image": "x", "resources": {
            "requests": {"cpu": "0.013", "memory": "11Mi", "ephemeral-storage": "1Gi"},
            "limits": {"memory": "20Mi"}}},
        {"name": "other", "resources": {"requests": {"cpu": "1"}}},
    ]
    found = differences(template, computed)
    assert found == [
        Difference("a<b>&c", "requests", "cpu", None,
                   Quantity.from_milli(1000, Format.BINARY_SI), container_missing=True),
        Difference("proxy", "limits", "memory", "20Mi",
                   Quantity.from_milli(23068672000, Format.DECIMAL_SI)),
    ]
    assert differences(template[:1], {"proxy": computed["proxy"]})[0].resource == "memory"


def test_differences_tolerate_odd_objects() -> None:
    computed = {"c": ContainerRequirements({"cpu": Quantity.from_milli(5, Format.BINARY_SI)},
                                           {})}
    for containers in (None, [], [{"name": "c"}], [{"name": "c", "resources": None}],
                       [{"name": "c", "resources": {"requests": {"cpu": "bogus"}}}],
                       [{"name": "c", "resources": {"requests": ["cpu"]}}], [{"no": "name"}]):
        assert [d.resource for d in differences(containers, computed)] == ["cpu"]
    assert differences([{"name": "c", "resources": {"requests": {"cpu": "5m"}}}],
                       computed) == []
