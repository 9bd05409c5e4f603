"""Reading and writing the ``scale`` subresource of each target."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cpa.flags import Target
from cpa.kubeapi import ApiError, KubeApi

_API_PREFIX = {
    "deployment": ("/apis/apps/v1", "deployments"),
    "replicaset": ("/apis/apps/v1", "replicasets"),
    "statefulset": ("/apis/apps/v1", "statefulsets"),
    "replicationcontroller": ("/api/v1", "replicationcontrollers"),
}


def scale_path(namespace: str, target: Target) -> str:
    prefix, plural = _API_PREFIX[target.kind]
    return f"{prefix}/namespaces/{namespace}/{plural}/{target.name}/scale"


@dataclass(frozen=True, slots=True)
class ScaleResult:
    """What happened to one target during a poll."""

    target: Target
    previous: int | None
    replicas: int
    changed: bool
    error: str | None = None


def _replicas(scale: dict[str, Any]) -> int:
    spec = scale.get("spec") or {}
    value = spec.get("replicas", 0) if isinstance(spec, dict) else 0
    return int(value or 0)


def ensure_replicas(api: KubeApi, namespace: str, target: Target, replicas: int) -> ScaleResult:
    """GET the scale; PUT it back with ``replicas`` if it differs.

    The PUT carries the GET's resourceVersion, so it fails with 409 when someone changed the
    target in between; we then GET again and retry once within the same poll (ours: upstream
    fails the poll and waits a whole period).
    """
    path = scale_path(namespace, target)
    previous: int | None = None
    try:
        for attempt in range(2):
            scale = api.get_json(path)
            previous = _replicas(scale)
            if previous == replicas:
                return ScaleResult(target, previous, replicas, False)
            scale.setdefault("spec", {})["replicas"] = replicas
            scale.pop("status", None)
            try:
                api.send_json("PUT", path, scale)
                return ScaleResult(target, previous, replicas, True)
            except ApiError as exc:
                if not exc.conflict or attempt == 1:
                    raise
        raise AssertionError("unreachable")
    except ApiError as exc:
        return ScaleResult(target, previous, replicas, False,
                           f"{target}: cannot scale to {replicas}: {exc}")
