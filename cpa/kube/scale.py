"""The scale targets: which kinds there are, and reading and writing their ``scale``
subresource.

The one table of target kinds lives here, beside the code that turns a kind into an API
path; ``--target`` parsing (flags) and the RBAC docs follow it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from cpa.kube.api import Api, ApiError


@dataclass(frozen=True, slots=True)
class Kind:
    """A kind ``--target`` accepts, and where its scale subresource lives."""

    name: str  # as in an object's "kind"
    api_prefix: str
    plural: str
    upstream: bool  # False: ours (upstream's flag validation refuses it)

    @property
    def api_version(self) -> str:
        return self.api_prefix.removeprefix("/apis/").removeprefix("/api/")


KINDS: Final = {
    "deployment": Kind("Deployment", "/apis/apps/v1", "deployments", True),
    "replicationcontroller": Kind("ReplicationController", "/api/v1", "replicationcontrollers",
                                  True),
    "replicaset": Kind("ReplicaSet", "/apis/apps/v1", "replicasets", True),
    "statefulset": Kind("StatefulSet", "/apis/apps/v1", "statefulsets", False),
}
TARGET_KINDS: Final = tuple(KINDS)


@dataclass(frozen=True, slots=True)
class Target:
    """One scale target: ``kind/name`` after lower-casing, as upstream normalises it."""

    kind: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind}/{self.name}"


def scale_path(namespace: str, target: Target) -> str:
    kind = KINDS[target.kind]
    return f"{kind.api_prefix}/namespaces/{namespace}/{kind.plural}/{target.name}/scale"


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


def ensure_replicas(api: Api, namespace: str, target: Target, replicas: int,
                    shape: Callable[[int], int] | None = None) -> ScaleResult:
    """GET the scale; PUT it back with ``replicas`` if it differs.

    The PUT carries the GET's resourceVersion, so it fails with 409 when someone changed the
    target in between; we then GET again and retry once within the same poll (ours: upstream
    fails the poll and waits a whole period). ``shape`` (ours, for ``behavior``) turns the
    replicas the GET found into the count to write instead of ``replicas``.
    """
    path = scale_path(namespace, target)
    previous: int | None = None
    try:
        for attempt in range(2):
            scale = api.get_json(path)
            previous = _replicas(scale)
            if shape is not None:
                replicas = shape(previous)
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
