"""--target-selector: KIND:SELECTOR parsed, and the workloads one lists."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from cpa.kube.api import ApiError
from cpa.kube.targets import Target
from cpa.kube.targetselector import TargetSelector, matching_targets, parse_target_selector


@pytest.mark.parametrize(("text", "expected"), [
    ("deployment:k8s-app=kube-dns", TargetSelector("deployment", "k8s-app=kube-dns")),
    ("Deployment:a in (b,c),!d", TargetSelector("deployment", "a in (b,c),!d")),
    ("hpa:tier=dns", TargetSelector("horizontalpodautoscaler", "tier=dns")),
    ("statefulset: app = x ", TargetSelector("statefulset", "app = x")),
    ("replicaset:a:b=c", None),  # a colon is not a label key
])
def test_parse(text: str, expected: TargetSelector | None) -> None:
    selector, problem = parse_target_selector(text)
    assert selector == expected
    assert (problem is None) == (expected is not None)


@pytest.mark.parametrize(("text", "fragment"), [
    ("deployment", "is not KIND:SELECTOR"),
    ("pods:app=x", "is not KIND:SELECTOR"),
    ("rollouts.argoproj.io:app=x", "is not KIND:SELECTOR"),
    (":app=x", "is not KIND:SELECTOR"),
    ("deployment:", "empty selector"),
    ("deployment:   ", "empty selector"),
    ("deployment:a=b=c", "--target-selector: 'deployment:a=b=c'"),
    ("deployment:" + "a" * 70 + "=b", "--target-selector"),
    ("deployment:a=(", "--target-selector"),
    ("x" * 10_000, "is not KIND:SELECTOR"),
    ("deployment:" + "a" * 10_000, "--target-selector"),
    ("deployment:a=" + "b" * 10_000, "--target-selector"),
])
def test_refused_with_the_reason(text: str, fragment: str) -> None:
    selector, problem = parse_target_selector(text)
    assert selector is None and problem is not None and fragment in problem
    assert len(problem) < 700  # a hostile value is cut, never echoed whole


class ListApi:
    """Answers one list; records the query."""

    def __init__(self, answer: Any = None, error: ApiError | None = None) -> None:
        self.answer = answer
        self.error = error
        self.asked: list[tuple[str, Mapping[str, str] | None]] = []

    def get_json(self, path: str, query: Mapping[str, str] | None = None, *,
                 deadline: float | None = None) -> dict[str, Any]:
        self.asked.append((path, query))
        if self.error is not None:
            raise self.error
        result: dict[str, Any] = self.answer
        return result

    def send_json(self, method: str, path: str, body: Any, *,
                  deadline: float | None = None) -> dict[str, Any]:
        raise AssertionError("a selector never writes")


SEL = TargetSelector("deployment", "k8s-app=kube-dns")


def item(name: Any, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-07T00:00:00Z"
    return {"metadata": meta}


def test_the_matching_workloads_by_name() -> None:
    api = ListApi({"items": [item("b"), item("a"), item("gone", deleting=True), item("a")]})
    assert matching_targets(api, "ns", SEL) == (Target("deployment", "a"),
                                                 Target("deployment", "b"))
    assert api.asked == [("/apis/apps/v1/namespaces/ns/deployments",
                          {"labelSelector": "k8s-app=kube-dns"})]
    assert matching_targets(ListApi({"items": None}), "ns", SEL) == ()
    assert matching_targets(ListApi({}), "ns", SEL) == ()


@pytest.mark.parametrize("answer", [
    {"items": "x"}, {"items": [None]}, {"items": [item(None)]}, {"items": [item("A B")]},
    {"items": [item("a" * 300)]}, {"items": [{"metadata": []}]},
])
def test_a_malformed_list_names_the_selector(answer: Any) -> None:
    with pytest.raises(ApiError, match=r"--target-selector=deployment:k8s-app=kube-dns"):
        matching_targets(ListApi(answer), "ns", SEL)


def test_a_403_names_the_rule() -> None:
    api = ListApi(error=ApiError(403, "Forbidden", "cannot list"))
    with pytest.raises(ApiError, match=r"apiGroups \[apps\] resources \[deployments\] "
                                       r"verbs \[list\]"):
        matching_targets(api, "ns", SEL)
    rc = TargetSelector("replicationcontroller", "a=b")
    with pytest.raises(ApiError, match=r'apiGroups \[""\] resources \[replicationcontrollers\]'):
        matching_targets(api, "ns", rc)
