"""The write CPVA makes, and when it makes it.

CPVA sends one strategic-merge PATCH (``application/strategic-merge-patch+json``) to the
target (cpva pkg/autoscaler/k8sclient/k8sclient.go:329-366)::

    {"apiVersion": <discovered group/version>, "kind": "Deployment"|"DaemonSet"|"ReplicaSet",
     "metadata": {"name": <target>},
     "spec": {"template": {"spec": {"containers": [
         {"name": <container>, "resources": {"limits": {...}, "requests": {...}}}, ...]}}}}

``containers`` merges by ``name``, so other containers and other resources of a container
are left alone, though not their order (see :func:`patch_body`); an empty ``requests`` or
``limits`` is omitted (``omitempty``), so CPVA never removes a value it stopped
configuring. A configured container the template lacks is *added* by the merge with only a
name, which the API server rejects (no image): the PATCH fails every poll.

When: CPVA never reads the target. It compares the requirements it computed with the
ones it last wrote successfully, kept in memory (``reflect.DeepEqual``,
autoscaler_server.go:143), so it writes on its first poll after every start, whenever the
result changes, and after a failed write; it does *not* notice a template edited by
someone else. :func:`cpva_patch` is that decision. :func:`differences` compares a pod
template (or a Pod) with the computed values, for what CPVA does not do: explaining,
metrics, and in-place resize.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from cpa.go.json import JsonObject, JsonValue, go_marshal
from cpa.go.quantity import Quantity, QuantityError
from cpa.vertical.decide.formula import ContainerRequirements, Requirements

__all__ = [
    "KINDS",
    "PLURALS",
    "Difference",
    "PatchTarget",
    "TargetError",
    "cpva_patch",
    "differences",
    "parse_target",
    "parse_targets",
    "patch_body",
    "should_write",
    "target_key",
    "target_path",
    "template_containers",
]

KINDS: Final = {"deployment": ("Deployment", "deployments"),
                "daemonset": ("DaemonSet", "daemonsets"),
                "replicaset": ("ReplicaSet", "replicasets")}
"""``--target`` prefixes (lower case) -> (kind, plural), as CPVA's ``discoverAPI``."""
EXTRA_KINDS: Final = {"statefulset": ("StatefulSet", "statefulsets")}
"""Ours, opt-in (``--allow-statefulset``): CPVA refuses these prefixes."""
PLURALS: Final = {kind: plural for kind, plural in (*KINDS.values(), *EXTRA_KINDS.values())}


@dataclass(frozen=True, slots=True)
class PatchTarget:
    """The object CPVA patches: its kind, the group/version discovery chose, its name."""

    kind: str  # "Deployment", "DaemonSet" or "ReplicaSet"
    name: str
    api_version: str = "apps/v1"


class TargetError(ValueError):
    """A ``--target`` CPVA refuses (at flag validation, exit 1, or at start-up)."""


def parse_target(text: str, api_version: str = "apps/v1", *,
                 statefulsets: bool = False) -> PatchTarget:
    """``--target`` as CPVA reads it: lower-cased whole (the name too: options.go:84), a
    ``deployment/``, ``daemonset/`` or ``replicaset/`` prefix (:108-123), then exactly one
    ``/`` (k8sclient.go:100-103). An empty name passes, as in CPVA (its PATCH then fails
    every poll); refusing it is the caller's choice. ``statefulsets`` (ours) also accepts
    ``statefulset/NAME``, which CPVA refuses."""
    lowered = text.lower()
    if not lowered:
        raise TargetError("--target parameter cannot be empty")
    kind, slash, name = lowered.partition("/")
    kinds = {**KINDS, **EXTRA_KINDS} if statefulsets else KINDS
    if not slash or kind not in kinds:
        raise TargetError("Unknown target format: must be one of deployment/*, daemonset/*, "
                          "or replicaset/* (not case sensitive).")
    if "/" in name:
        raise TargetError(f"target format error: {lowered}")
    return PatchTarget(kinds[kind][0], name, api_version)


def parse_targets(text: str, *, statefulsets: bool = False) -> list[PatchTarget]:
    """``--target`` with several targets (ours): a comma list, each item as
    :func:`parse_target` reads one (spaces around an item are dropped). A value without a
    comma is CPVA's single target, read exactly as CPVA reads it (CPVA refuses a comma:
    ``target format error``). A target named twice is refused: it would be written twice
    per poll, by two states that disagree."""
    if "," not in text:
        return [parse_target(text, statefulsets=statefulsets)]
    found: list[PatchTarget] = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            raise TargetError(f"--target {text!r} has an empty item: list targets as "
                              "deployment/a,daemonset/b")
        target = parse_target(item, statefulsets=statefulsets)
        if target in found:
            raise TargetError(f"--target names {target_key(target)} twice")
        found.append(target)
    return found


def target_key(target: PatchTarget) -> str:
    """How ``--target``, logs, metrics and per-target config blocks name a target."""
    return f"{target.kind.lower()}/{target.name}"


def target_path(namespace: str, target: PatchTarget) -> str:
    """Where the target is: apps/v1, the only group/version of the three kinds (and of
    StatefulSets) since Kubernetes 1.16 (CPVA discovers it)."""
    return f"/apis/apps/v1/namespaces/{namespace}/{PLURALS[target.kind]}/{target.name}"


def template_containers(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """``spec.template.spec.containers`` of a workload object (empty when absent)."""
    spec = obj.get("spec")
    template = spec.get("template") if isinstance(spec, Mapping) else None
    pod = template.get("spec") if isinstance(template, Mapping) else None
    containers = pod.get("containers") if isinstance(pod, Mapping) else None
    return [c for c in containers or () if isinstance(c, Mapping)]


def should_write(last_written: Requirements | None, computed: Requirements) -> bool:
    """CPVA's ``!reflect.DeepEqual(s.lastReqs, newReqs)``.

    ``last_written`` is None until the first successful write; a nil map is never equal to
    a computed one, even an empty one, so the first poll always writes.
    """
    return last_written is None or dict(last_written) != dict(computed)


def _resources(requirements: ContainerRequirements) -> JsonObject:
    members: list[tuple[str, JsonValue]] = []
    for key, values in (("limits", requirements.limits), ("requests", requirements.requests)):
        if values:  # omitempty
            members.append((key, JsonObject(tuple((res, str(q)) for res, q in values.items()))))
    return JsonObject(tuple(members))


def patch_body(target: PatchTarget, computed: Requirements,
               order: Sequence[str] = ()) -> str:
    """The PATCH body, byte for byte as Go's ``json.Marshal`` writes it, except for the
    order of the containers, which in CPVA is Go's random map order.

    The order matters: the API server's strategic merge puts the patched containers in
    the patch's order (``normalizeElementOrder``), so a patch naming two containers in the
    opposite order of the template *reorders the template's containers* (and the first
    container is ``kubectl``'s default one). ``order`` is the template's container order
    when the caller knows it (from a GET, or the last PATCH response); containers it does
    not name follow, sorted by name.
    """
    position = {name: i for i, name in enumerate(order)}
    names = sorted(computed, key=lambda name: (position.get(name, len(position)), name))
    containers = tuple(
        JsonObject((("name", name), ("resources", _resources(computed[name]))))
        for name in names
    )
    body = JsonObject((
        ("apiVersion", target.api_version),
        ("kind", target.kind),
        ("metadata", JsonObject((("name", target.name),))),
        ("spec", JsonObject((("template", JsonObject((
            ("spec", JsonObject((("containers", containers),))),))),))),
    ))
    return go_marshal(body)


def cpva_patch(target: PatchTarget, computed: Requirements,
               last_written: Requirements | None) -> str | None:
    """The PATCH body CPVA sends this poll, or None when it would not write."""
    return patch_body(target, computed) if should_write(last_written, computed) else None


@dataclass(frozen=True, slots=True)
class Difference:
    """One computed value that a container (in a template or a Pod) does not have yet."""

    container: str
    kind: Literal["requests", "limits"]
    resource: str
    current: str | None  # as the object has it; None: absent (or the container is)
    wanted: Quantity
    container_missing: bool = False


def _same_value(current: object, wanted: Quantity) -> bool:
    if not isinstance(current, str):
        return False
    try:
        return Quantity.parse(current).normalized() == wanted.normalized()
    except QuantityError:
        return False


def differences(containers: Sequence[Mapping[str, Any]] | None,
                computed: Requirements) -> list[Difference]:
    """Where ``containers`` (``spec.containers`` of a pod template or a Pod, as decoded
    JSON) differ in value from ``computed``: the values a PATCH would change.

    Values compare as numbers (``1Ki`` equals ``1024``), as the API server stores the text
    it was sent. Resources CPVA does not configure are not compared.
    """
    by_name: dict[str, Mapping[str, Any]] = {}
    for container in containers or ():
        name = container.get("name")
        if isinstance(name, str):
            by_name[name] = container
    found: list[Difference] = []
    for name in sorted(computed):
        wanted = computed[name]
        template = by_name.get(name)
        found_resources = template.get("resources") if template is not None else None
        resources: Mapping[str, Any] = (
            found_resources if isinstance(found_resources, Mapping) else {})
        kinds: Iterable[tuple[Literal["requests", "limits"], Mapping[str, Quantity]]] = (
            ("requests", wanted.requests), ("limits", wanted.limits))
        for kind, values in kinds:
            have = resources.get(kind)
            if not isinstance(have, Mapping):
                have = {}
            for res in sorted(values):
                current = have.get(res)
                if not _same_value(current, values[res]):
                    found.append(Difference(name, kind, res,
                                            current if isinstance(current, str) else None,
                                            values[res], container_missing=template is None))
    return found
