"""The Pods behind a scale target (cpa.kube.pods): the Ready ones only, the selector from
its /scale, a 403 that names the RBAC rule."""

from __future__ import annotations

from typing import Any

import pytest

from cpa.kube.api import ApiError
from cpa.kube.pods import list_ready_pods, read_selection
from tests.fakes import FakeApi


def _pod(name: str, ip: str | None, ready: str = "True", phase: str = "Running",
         deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "uid": f"uid-{name}"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    status: dict[str, Any] = {"phase": phase,
                              "conditions": [{"type": "Ready", "status": ready}]}
    if ip:
        status["podIP"] = ip
    return {"metadata": meta, "status": status}


def test_ready_pods_only() -> None:
    api = FakeApi()
    path = "/api/v1/namespaces/kube-system/pods"
    api.objects[path] = {"items": [
        _pod("a", "10.0.0.2"), _pod("b", "10.0.0.3", ready="False"), _pod("c", None),
        _pod("d", "10.0.0.5", phase="Pending"), _pod("e", "10.0.0.6", deleting=True),
        _pod("f", "fd00::7")]}
    pods, selected = list_ready_pods(api, "kube-system", "k8s-app=kube-dns")
    assert [(p.name, p.ip) for p in pods] == [("a", "10.0.0.2"), ("f", "fd00::7")]
    assert selected == 6
    scale = "/apis/apps/v1/namespaces/kube-system/deployments/coredns/scale"
    api.objects[scale] = {"status": {"selector": "k8s-app=kube-dns", "replicas": 3}}
    assert read_selection(api, scale) == ("k8s-app=kube-dns", 3)


class _Forbidden(FakeApi):
    def get_json(self, path: str, query: Any = None, *, deadline: float | None = None
                 ) -> dict[str, Any]:
        raise ApiError(403, "Forbidden", 'pods is forbidden: cannot list resource "pods"')


def test_a_403_names_the_rule() -> None:
    api = _Forbidden()
    with pytest.raises(ApiError, match=r'resources: \["pods"\], verbs: \["list"\]'):
        list_ready_pods(api, "kube-system", "a=b")
