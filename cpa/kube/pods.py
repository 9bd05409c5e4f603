"""The Pods behind a scale target: its ``/scale`` ``status.selector``, and the Ready Pods
it selects (what the load axis scrapes).

Why a list every scrape rather than a watch: the load axis scrapes every couple of
seconds and needs the Ready Pods of that moment; one list with ``resourceVersion=0`` is
served from the API server's watch cache, and a few dozen Pods decode in well under a
millisecond each (only the fields below are decoded). A Pod counts when it is Running,
its Ready condition is True, it has an IP and it is not being deleted: an endpoint a
Service would send traffic to.

RBAC: ``pods`` ``list`` in the target's namespace (and ``get`` on the target's scale,
which the autoscaler already has).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from cpa.kube.api import Api, ApiError
from cpa.kube.objects import decode_scale

__all__ = ["ReadyPod", "Selection", "list_ready_pods", "read_selection"]


class ReadyPod(NamedTuple):
    name: str
    uid: str
    ip: str


class Selection(NamedTuple):
    """What a target's ``/scale`` says about its Pods."""

    selector: str
    """``status.selector`` (label-selector text); "" when the scale has none."""
    replicas: int
    """``status.replicas``: Pods the target's controller counts (the ready count of the
    Prometheus source, which lists no Pods)."""


def read_selection(api: Api, scale_path: str) -> Selection:
    """GET the scale: its selector and replicas (raises :class:`ApiError`, a malformed
    Scale :class:`~cpa.kube.objects.MalformedObject`)."""
    read = decode_scale(api.get_json(scale_path), f"GET {scale_path}")
    return Selection(read.selector, read.status_replicas)


def _ready(pod: dict[str, Any]) -> ReadyPod | None:
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    if meta.get("deletionTimestamp") or status.get("phase") != "Running":
        return None
    ip = status.get("podIP")
    if not isinstance(ip, str) or not ip:
        return None
    for condition in status.get("conditions") or ():
        if isinstance(condition, dict) and condition.get("type") == "Ready":
            if condition.get("status") != "True":
                return None
            return ReadyPod(str(meta.get("name") or ""), str(meta.get("uid") or ""), ip)
    return None


def list_ready_pods(api: Api, namespace: str, selector: str) -> tuple[list[ReadyPod], int]:
    """The Ready Pods the selector picks, and how many Pods it picked in all. A 403 names
    the RBAC rule to add."""
    try:
        body = api.get_json(f"/api/v1/namespaces/{namespace}/pods",
                            {"labelSelector": selector, "resourceVersion": "0"})
    except ApiError as exc:
        if exc.forbidden:
            raise ApiError(exc.status, exc.reason, (
                f"cannot list the Pods of the load axis: {exc.message}; the load key needs "
                f'an RBAC Role rule {{apiGroups: [""], resources: ["pods"], verbs: ["list"]}}'
                f" in namespace {namespace}")) from exc
        raise
    items = body.get("items") or []
    ready = [pod for pod in (_ready(item) for item in items if isinstance(item, dict))
             if pod is not None]
    return ready, len(items)
