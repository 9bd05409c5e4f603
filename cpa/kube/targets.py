"""The scale targets: which kinds there are, how ``--target`` names them, where each lives,
and what a poll reads and writes of one (:class:`ScaleResult`, :class:`Current`).

The one table of target kinds lives here, beside the parsing of ``kind/name`` (the
daemon's ``--target`` and ``cpa explain --target``); the RBAC docs follow it. How a kind's
replicas are written is its writer's business (:mod:`cpa.kube.writers`):

* upstream's kinds (and StatefulSet): the ``scale`` subresource (:mod:`cpa.kube.scale`);
* ``horizontalpodautoscaler/NAME`` (``hpa/NAME``, ours): the HPA's ``spec.minReplicas``, a
  floor the HPA scales above (:mod:`cpa.kube.hpafloor`);
* ``RESOURCE.GROUP/NAME`` (ours): any resource with a ``scale`` subresource (an Argo
  Rollout, a custom resource), resolved through API discovery at start-up
  (:mod:`cpa.kube.discovery`), then written like upstream's kinds.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, NamedTuple

__all__ = ["ALIASES", "HPA", "KINDS", "TARGET_KINDS", "Current", "Kind", "ScaleResult", "Shape",
           "Target", "object_path", "parse_targets", "scale_path"]


class Kind(NamedTuple):
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

    def rbac_rule(self, verb: str) -> str:
        """What a 403 tells the operator to grant for ``verb`` on this kind."""
        group = self.api_version.rpartition("/")[0] or '""'
        return f"add the RBAC rule apiGroups [{group}] resources [{self.plural}] verbs [{verb}]"


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
_SUBDOMAIN_PATTERN = re.compile(_SUBDOMAIN)
_RESOURCE_GROUP = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?\." + _SUBDOMAIN)


def is_dns1123_subdomain(name: str) -> bool:
    """``name`` matches ``_SUBDOMAIN`` whole (the length limit is the caller's): labels of
    lower-case letters, digits and '-', neither first nor last, joined by dots."""
    return _SUBDOMAIN_PATTERN.fullmatch(name) is not None


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
        if len(name) > 253 or not is_dns1123_subdomain(name):
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


class ScaleResult(NamedTuple):
    """What happened to one target during a poll."""

    target: Target
    previous: int | None
    replicas: int
    changed: bool
    error: str | None = None
    uid: str | None = None  # the target object's (a deleted and recreated one has another)
    clamped_from: int | None = None
    """An HPA floor: the count asked for, when the HPA's bounds (1..maxReplicas) changed it
    into ``replicas``; else None."""
    max_replicas: int | None = None
    """An HPA floor: the HPA's ``spec.maxReplicas`` as read."""
    dry_run: bool = False
    """Nothing was written: ``replicas`` is what would have been (``changed`` is False)."""


class Current(NamedTuple):
    """A target's replicas now, as the poll would read them; for an HPA floor its
    ``minReplicas`` and ``maxReplicas``."""

    replicas: int
    max_replicas: int | None = None


Shape = Callable[[int], int]
"""Ours, for ``behavior``: the count to write, given the replicas the target holds now."""
