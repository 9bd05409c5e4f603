"""managePodDisruptionBudget's budget: what it holds, when it is written, whose it is."""

from __future__ import annotations

from typing import Any

import pytest

from cpa.kube.api import ApiError
from cpa.kube.pdb import (
    MANAGED_BY,
    TARGET_ANNOTATION,
    BudgetError,
    budget_name,
    desired_budget,
    ensure_budget,
    remove_budget,
)
from cpa.kube.targets import Target
from tests.fakes import FakeApi

NS = "kube-system"
DEPLOY = "/apis/apps/v1/namespaces/kube-system/deployments/coredns"
PDB = "/apis/policy/v1/namespaces/kube-system/poddisruptionbudgets/coredns-cpa"
TARGET = Target("deployment", "coredns")


def workload(selector: Any = None, uid: Any = "u-1") -> dict[str, Any]:
    return {"metadata": {"name": "coredns", "uid": uid},
            "spec": {"selector": {"matchLabels": {"k8s-app": "kube-dns"}}
                     if selector is None else selector}}


def api_with_workload(**kw: Any) -> FakeApi:
    api = FakeApi()
    api.put(DEPLOY, workload(**kw))
    return api


def test_the_budget_lets_one_pod_go_and_is_owned_by_the_workload() -> None:
    want = desired_budget(NS, TARGET, workload())
    assert want["spec"] == {"maxUnavailable": 1,
                            "selector": {"matchLabels": {"k8s-app": "kube-dns"}}}
    meta = want["metadata"]
    assert meta["name"] == "coredns-cpa" and meta["namespace"] == NS
    assert meta["labels"] == {MANAGED_BY[0]: MANAGED_BY[1]}
    assert meta["annotations"] == {TARGET_ANNOTATION: "deployment/coredns"}
    assert meta["ownerReferences"] == [{"apiVersion": "apps/v1", "kind": "Deployment",
                                        "name": "coredns", "uid": "u-1"}]


def test_a_replication_controllers_map_selector_becomes_match_labels() -> None:
    rc = Target("replicationcontroller", "dns")
    want = desired_budget(NS, rc, workload(selector={"app": "dns"}))
    assert want["spec"]["selector"] == {"matchLabels": {"app": "dns"}}
    assert want["metadata"]["ownerReferences"][0]["apiVersion"] == "v1"


@pytest.mark.parametrize("selector", [{}, [], "app=dns", {"app": 1}, {"": None}])
def test_a_workload_without_a_usable_selector_is_named(selector: Any) -> None:
    with pytest.raises(BudgetError, match="deployment/coredns has no Pod selector"):
        desired_budget(NS, TARGET, workload(selector=selector))


@pytest.mark.parametrize("uid", [None, "", 5])
def test_a_workload_without_uid_is_refused(uid: Any) -> None:
    with pytest.raises(BudgetError, match="no uid"):
        desired_budget(NS, TARGET, workload(uid=uid))


def test_a_name_too_long_for_a_budget_is_refused() -> None:
    with pytest.raises(BudgetError, match="longer than 253"):
        budget_name(Target("deployment", "a" * 251))


def test_in_step_with_the_replicas() -> None:
    api = api_with_workload()
    assert ensure_budget(api, NS, TARGET, 1) is None
    assert PDB not in api.objects
    assert ensure_budget(api, NS, TARGET, 3) == "created"
    assert api.objects[PDB]["spec"]["maxUnavailable"] == 1
    assert ensure_budget(api, NS, TARGET, 5) is None  # already right: no write
    writes = [c for c in api.calls if c[0] != "GET"]
    assert writes == [("POST", "/apis/policy/v1/namespaces/kube-system/poddisruptionbudgets")]
    assert ensure_budget(api, NS, TARGET, 1) == "deleted"
    assert PDB not in api.objects


def test_a_changed_selector_is_followed() -> None:
    api = api_with_workload()
    ensure_budget(api, NS, TARGET, 2)
    api.put(DEPLOY, workload(selector={"matchExpressions": [
        {"key": "k8s-app", "operator": "In", "values": ["kube-dns"]}]}))
    assert ensure_budget(api, NS, TARGET, 2) == "updated"
    assert "matchExpressions" in api.objects[PDB]["spec"]["selector"]


def test_someone_elses_budget_of_that_name_is_never_touched() -> None:
    api = api_with_workload()
    api.put(PDB, {"metadata": {"name": "coredns-cpa", "labels": {"team": "dns"}},
                  "spec": {"minAvailable": 2}})
    for replicas in (1, 3):
        with pytest.raises(BudgetError, match="exists and is not ours"):
            ensure_budget(api, NS, TARGET, replicas)
    assert remove_budget(api, NS, TARGET) is None
    assert api.objects[PDB]["spec"] == {"minAvailable": 2}


def test_an_hpa_floor_is_refused() -> None:
    with pytest.raises(BudgetError, match="HPA floor"):
        ensure_budget(FakeApi(), NS, Target("horizontalpodautoscaler", "x"), 3)


def test_a_403_names_the_rule() -> None:
    api = api_with_workload()
    api.fail_writes = ApiError(403, "Forbidden", "cannot create poddisruptionbudgets")
    with pytest.raises(ApiError, match=r"resources \[poddisruptionbudgets\] verbs "
                                       r"\[get, create, update, delete\]"):
        ensure_budget(api, NS, TARGET, 3)


def test_a_403_on_the_workload_names_its_rule() -> None:
    api = FakeApi()

    def forbidden(path: str, query: Any = None, *, deadline: Any = None) -> dict[str, Any]:
        if path == DEPLOY:
            raise ApiError(403, "Forbidden", "no")
        raise ApiError(404, "NotFound", "none")
    api.get_json = forbidden  # type: ignore[method-assign]
    with pytest.raises(ApiError, match=r"apiGroups \[apps\] resources \[deployments\] "
                                       r"verbs \[get\]"):
        ensure_budget(api, NS, TARGET, 3)


def test_removal_of_ours_and_of_none() -> None:
    api = api_with_workload()
    assert remove_budget(api, NS, TARGET) is None
    ensure_budget(api, NS, TARGET, 2)
    assert remove_budget(api, NS, TARGET) == "deleted"
    assert PDB not in api.objects
