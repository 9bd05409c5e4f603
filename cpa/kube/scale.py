"""The scale targets: which kinds there are, how ``--target`` names them, and reading and
writing the replica count each kind takes.

The one table of target kinds lives here, beside the code that turns a kind into an API
path and the parsing of ``kind/name`` (the daemon's ``--target`` and ``cpa explain
--target``); the RBAC docs follow it. Three ways to write (ours beyond the first):

* upstream's kinds (and StatefulSet): GET/PUT the ``scale`` subresource;
* ``horizontalpodautoscaler/NAME`` (``hpa/NAME``): the count becomes the HPA's
  ``spec.minReplicas`` (autoscaling/v2), a floor the HPA scales above, so the two no longer
  fight over ``spec.replicas`` (upstream #99). Never below 1 (the API's minimum without the
  HPAScaleToZero gate) and never above ``spec.maxReplicas`` (clamped; the result says so);
* ``RESOURCE.GROUP/NAME``: any resource with a ``scale`` subresource (an Argo Rollout, a
  custom resource), resolved through API discovery at start-up
  (:mod:`cpa.kube.discovery`), then written like upstream's kinds.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from cpa.kube.api import Api, ApiError, RawApi

MERGE_PATCH: Final = "application/merge-patch+json"


@dataclass(frozen=True, slots=True)
class Kind:
    """A kind ``--target`` accepts, and where its replicas live."""

    name: str  # as in an object's "kind"
    api_prefix: str
    plural: str
    upstream: bool  # False: ours (upstream's flag validation refuses it)
    floor: bool = False
    """True for the HPA: the count is written to ``spec.minReplicas`` of the object itself."""
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return self.api_prefix.removeprefix("/apis/").removeprefix("/api/")


HPA: Final = Kind("HorizontalPodAutoscaler", "/apis/autoscaling/v2", "horizontalpodautoscalers",
                  False, floor=True)
KINDS: Final = {
    "deployment": Kind("Deployment", "/apis/apps/v1", "deployments", True),
    "replicationcontroller": Kind("ReplicationController", "/api/v1", "replicationcontrollers",
                                  True),
    "replicaset": Kind("ReplicaSet", "/apis/apps/v1", "replicasets", True),
    "statefulset": Kind("StatefulSet", "/apis/apps/v1", "statefulsets", False),
    "horizontalpodautoscaler": HPA,
}
ALIASES: Final = {"hpa": "horizontalpodautoscaler"}
TARGET_KINDS: Final = tuple(KINDS)


@dataclass(frozen=True, slots=True)
class Target:
    """One target: ``kind/name`` after lower-casing, as upstream normalises it. ``kind`` is
    a key of :data:`KINDS`, or ``RESOURCE.GROUP`` (then ``resolved`` once discovery found
    it; two targets are the same target whether resolved or not)."""

    kind: str
    name: str
    resolved: Kind | None = field(default=None, compare=False)

    def __str__(self) -> str:
        return f"{self.kind}/{self.name}"

    @property
    def custom(self) -> bool:
        """``RESOURCE.GROUP``: found through API discovery, not in the table."""
        return self.kind not in KINDS

    @property
    def api(self) -> Kind:
        """Where this target lives; a custom target must have been resolved."""
        kind = self.resolved or KINDS.get(self.kind)
        if kind is None:
            raise ValueError(f"{self}: {self.kind} has not been resolved through API "
                             "discovery yet")
        return kind


_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_DNS1123_SUBDOMAIN = re.compile(_SUBDOMAIN)
_RESOURCE_GROUP = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?\." + _SUBDOMAIN)


def parse_targets(text: str) -> tuple[tuple[Target, ...], list[str]]:
    """Split ``--target`` as upstream does (lower-case all, split on commas, trim each)."""
    problems: list[str] = []
    targets: list[Target] = []
    if text.strip() == "":
        return (), ["--target parameter cannot be empty: pass e.g. --target=deployment/coredns"]
    for raw in text.lower().split(","):
        item = raw.strip()
        kind, slash, name = item.partition("/")
        kind = ALIASES.get(kind, kind)
        custom = (kind not in KINDS and _RESOURCE_GROUP.fullmatch(kind) is not None
                  and len(kind) <= 253)
        if not slash or (kind not in KINDS and not custom):
            problems.append(
                f"--target: {item!r} is not kind/name with kind one of "
                f"{', '.join(TARGET_KINDS)} (or hpa), or RESOURCE.GROUP of a resource with a "
                "scale subresource such as rollouts.argoproj.io (separate several targets "
                "with commas)")
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


def object_path(namespace: str, target: Target) -> str:
    """The target object itself (the HPA's, for a floor)."""
    kind = target.api
    where = f"/namespaces/{namespace}" if kind.namespaced else ""
    return f"{kind.api_prefix}{where}/{kind.plural}/{target.name}"


def scale_path(namespace: str, target: Target) -> str:
    return object_path(namespace, target) + "/scale"


@dataclass(frozen=True, slots=True)
class ScaleResult:
    """What happened to one target during a poll."""

    target: Target
    previous: int | None
    replicas: int
    changed: bool
    error: str | None = None
    clamped_from: int | None = None
    """An HPA floor: the count asked for, when the HPA's bounds (1..maxReplicas) changed it
    into ``replicas``; else None."""
    max_replicas: int | None = None
    """An HPA floor: the HPA's ``spec.maxReplicas`` as read."""
    dry_run: bool = False
    """Nothing was written: ``replicas`` is what would have been (``changed`` is False)."""


def _replicas(scale: dict[str, Any]) -> int:
    spec = scale.get("spec") or {}
    value = spec.get("replicas", 0) if isinstance(spec, dict) else 0
    return int(value or 0)


def _hpa_bounds(hpa: dict[str, Any]) -> tuple[int, int | None]:
    """(minReplicas, maxReplicas) of an HPA object; the API defaults minReplicas to 1."""
    spec = hpa.get("spec") or {}
    if not isinstance(spec, dict):
        return 1, None
    low, high = spec.get("minReplicas"), spec.get("maxReplicas")
    return (int(low) if isinstance(low, int) else 1,
            int(high) if isinstance(high, int) else None)


def hpa_floor(replicas: int, max_replicas: int | None) -> int:
    """The ``spec.minReplicas`` to write for ``replicas``: at least 1 (the API refuses 0
    without the HPAScaleToZero feature gate), at most the HPA's ``maxReplicas``."""
    floor = max(1, replicas)
    if max_replicas is not None and max_replicas >= 1:
        floor = min(floor, max_replicas)
    return floor


class Current(NamedTuple):
    """A target's replicas now, as the poll would read them; for an HPA floor its
    ``minReplicas`` and ``maxReplicas``. (A NamedTuple: this module is on the daemon's
    start-up path, where a frozen dataclass costs ~1.5 ms to make.)"""

    replicas: int
    max_replicas: int | None = None


def read_current(api: Api, namespace: str, target: Target) -> Current:
    """GET the scale (or the HPA): the target's replicas now (raises ApiError)."""
    if target.api.floor:
        low, high = _hpa_bounds(api.get_json(object_path(namespace, target)))
        return Current(low, high)
    return Current(_replicas(api.get_json(scale_path(namespace, target))))


def read_replicas(api: Api, namespace: str, target: Target) -> int:
    """GET the scale: the target's replicas now (an HPA's minReplicas; raises ApiError)."""
    return read_current(api, namespace, target).replicas


def ensure_replicas(api: RawApi, namespace: str, target: Target, replicas: int,
                    shape: Callable[[int], int] | None = None,
                    dry_run: bool = False) -> ScaleResult:
    """GET the scale; PUT it back with ``replicas`` if it differs (an HPA: PATCH its
    ``minReplicas``, see :func:`ensure_floor`).

    The PUT carries the GET's resourceVersion, so it fails with 409 when someone changed the
    target in between; we then GET again and retry once within the same poll (ours: upstream
    fails the poll and waits a whole period). ``shape`` (ours, for ``behavior``) turns the
    replicas the GET found into the count to write instead of ``replicas``. ``dry_run``
    (ours): the GET only; the result says what would have been written.
    """
    if target.api.floor:
        return ensure_floor(api, namespace, target, replicas, shape, dry_run)
    path = scale_path(namespace, target)
    previous: int | None = None
    try:
        for attempt in range(2):
            scale = api.get_json(path)
            previous = _replicas(scale)
            if shape is not None:
                replicas = shape(previous)
            if previous == replicas or dry_run:
                return ScaleResult(target, previous, replicas, False, dry_run=dry_run)
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


def ensure_floor(api: RawApi, namespace: str, target: Target, replicas: int,
                 shape: Callable[[int], int] | None = None,
                 dry_run: bool = False) -> ScaleResult:
    """GET the HPA; PATCH its ``spec.minReplicas`` to ``replicas`` (within 1..maxReplicas)
    if it differs.

    A JSON merge patch carrying the GET's resourceVersion: the API server refuses it with
    409 when the HPA changed in between (its maxReplicas may have), and we retry once with
    a fresh GET, as for a scale. RBAC: ``autoscaling horizontalpodautoscalers get, patch``.
    ``shape`` sees the current ``minReplicas`` (the count this target holds).
    """
    path = object_path(namespace, target)
    previous: int | None = None
    wanted = replicas
    try:
        for attempt in range(2):
            hpa = api.get_json(path)
            previous, maximum = _hpa_bounds(hpa)
            if shape is not None:
                wanted = shape(previous)
            floor = hpa_floor(wanted, maximum)
            clamped = wanted if floor != wanted else None
            if previous == floor or dry_run:
                return ScaleResult(target, previous, floor, False, clamped_from=clamped,
                                   max_replicas=maximum, dry_run=dry_run)
            meta = hpa.get("metadata") or {}
            patch = {"metadata": {"resourceVersion": meta.get("resourceVersion")},
                     "spec": {"minReplicas": floor}}
            try:
                api.send_raw("PATCH", path, json.dumps(patch).encode(), MERGE_PATCH)
                return ScaleResult(target, previous, floor, True, clamped_from=clamped,
                                   max_replicas=maximum)
            except ApiError as exc:
                if not exc.conflict or attempt == 1:
                    raise
        raise AssertionError("unreachable")
    except ApiError as exc:
        return ScaleResult(target, previous, wanted, False,
                           f"{target}: cannot set minReplicas to {hpa_floor(wanted, None)}: "
                           f"{exc}")
