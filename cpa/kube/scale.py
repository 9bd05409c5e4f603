"""The scale targets: which kinds there are, how ``--target`` names them, and reading and
writing their ``scale`` subresource.

The one table of target kinds lives here, beside the code that turns a kind into an API
path and the parsing of ``kind/name`` (the daemon's ``--target`` and ``cpa explain
--target``); the RBAC docs follow it.
"""

from __future__ import annotations

import re
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


_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def parse_targets(text: str) -> tuple[tuple[Target, ...], list[str]]:
    """Split ``--target`` as upstream does (lower-case all, split on commas, trim each)."""
    problems: list[str] = []
    targets: list[Target] = []
    if text.strip() == "":
        return (), ["--target parameter cannot be empty: pass e.g. --target=deployment/coredns"]
    for raw in text.lower().split(","):
        item = raw.strip()
        kind, slash, name = item.partition("/")
        if not slash or kind not in TARGET_KINDS:
            problems.append(
                f"--target: {item!r} is not kind/name with kind one of "
                f"{', '.join(TARGET_KINDS)} (separate several targets with commas)")
            continue
        if not name:
            problems.append(f"--target: {item!r} has an empty name")
            continue
        if len(name) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(name):
            problems.append(
                f"--target: {item!r}: {name!r} is not a valid object name (lower-case letters, "
                "digits, '-' and '.'; separate several targets with commas, not spaces)")
            continue
        targets.append(Target(kind, name))
    return tuple(targets), problems


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
    uid: str | None = None  # the target object's (a deleted and recreated one has another)


def _replicas(scale: dict[str, Any]) -> int:
    spec = scale.get("spec") or {}
    value = spec.get("replicas", 0) if isinstance(spec, dict) else 0
    return int(value or 0)


def _uid(scale: dict[str, Any]) -> str | None:
    """The target's UID: the API server fills a Scale's metadata from its object's."""
    meta = scale.get("metadata")
    uid = meta.get("uid") if isinstance(meta, dict) else None
    return str(uid) if uid else None


def read_replicas(api: Api, namespace: str, target: Target) -> int:
    """GET the scale: the target's replicas now (raises ApiError)."""
    return _replicas(api.get_json(scale_path(namespace, target)))


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
    uid: str | None = None
    try:
        for attempt in range(2):
            scale = api.get_json(path)
            previous, uid = _replicas(scale), _uid(scale)
            if shape is not None:
                replicas = shape(previous)
            if previous == replicas:
                return ScaleResult(target, previous, replicas, False, uid=uid)
            scale.setdefault("spec", {})["replicas"] = replicas
            scale.pop("status", None)
            try:
                api.send_json("PUT", path, scale)
                return ScaleResult(target, previous, replicas, True, uid=uid)
            except ApiError as exc:
                if not exc.conflict or attempt == 1:
                    raise
        raise AssertionError("unreachable")
    except ApiError as exc:
        return ScaleResult(target, previous, replicas, False,
                           f"{target}: cannot scale to {replicas}: {exc}", uid)
