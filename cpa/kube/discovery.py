"""API discovery for ``--target=RESOURCE.GROUP/NAME``: which version serves the resource,
its kind, whether it is namespaced, and whether it has a ``scale`` subresource.

Why at start-up, once: a typo or a resource without ``/scale`` should stop the daemon with
one clear line (exit 1), not fail every poll; and a poll should make no discovery requests.
The group's preferred version is tried first, then the others in the server's order, as
kubectl does when no version is given. Discovery is readable by every authenticated user
(the ``system:discovery`` ClusterRole), so it needs no RBAC beyond the target's
``RESOURCE/scale get, update``.
"""

from __future__ import annotations

from typing import Any

from cpa.kube.api import Api, ApiError
from cpa.kube.objects import check_discovery
from cpa.kube.targets import Kind, Target

__all__ = ["ResolveError", "resolve", "resolve_all"]


class ResolveError(Exception):
    """The target cannot be scaled: no such group or resource, or no ``scale`` subresource.
    The message says which, and how to check."""


def _versions(group_doc: dict[str, Any]) -> list[str]:
    preferred = (group_doc.get("preferredVersion") or {}).get("version")
    versions = [v.get("version") for v in group_doc.get("versions") or ()
                if isinstance(v, dict) and v.get("version")]
    return ([preferred] if preferred else []) + [v for v in versions if v != preferred]


def resolve(api: Api, target: Target) -> Target:
    """The target with its API (``resolved``); built-in kinds come back as they are.

    Raises :class:`ResolveError` for what will not change by waiting, and
    :class:`~cpa.kube.api.ApiError` for what might (the API server unreachable)."""
    if not target.custom:
        return target
    resource, _, group = target.kind.partition(".")
    hint = f"kubectl api-resources --api-group={group}"
    try:
        group_doc = api.get_json(f"/apis/{group}")
        check_discovery(group_doc, "APIGroup", f"GET /apis/{group}")
    except ApiError as exc:
        if exc.not_found:
            raise ResolveError(
                f"--target {target}: the API server serves no API group {group!r} (is the "
                f"CustomResourceDefinition installed? see {hint})") from exc
        raise
    without_scale: list[str] = []
    known: set[str] = set()
    for version in _versions(group_doc):
        listing = api.get_json(f"/apis/{group}/{version}")
        check_discovery(listing, "APIResourceList", f"GET /apis/{group}/{version}")
        by_name = {r.get("name"): r for r in listing.get("resources") or ()
                   if isinstance(r, dict)}
        known.update(str(n) for n in by_name if n and "/" not in str(n))
        found = by_name.get(resource)
        if found is None:
            continue
        if f"{resource}/scale" not in by_name:
            without_scale.append(f"{group}/{version}")
            continue
        kind = Kind(str(found.get("kind") or resource), f"/apis/{group}/{version}", resource,
                    False, namespaced=bool(found.get("namespaced", True)))
        return Target(target.kind, target.name, kind)
    if without_scale:
        raise ResolveError(
            f"--target {target}: {resource}.{group} ({', '.join(without_scale)}) has no scale "
            "subresource, so its replicas cannot be set through /scale (a "
            "CustomResourceDefinition needs spec.versions[].subresources.scale)")
    others = ", ".join(sorted(known)) or "none"
    raise ResolveError(f"--target {target}: the API group {group!r} has no resource "
                       f"{resource!r} (it has: {others}; see {hint})")


def resolve_all(api: Api, targets: tuple[Target, ...]) -> tuple[Target, ...]:
    """Every target resolved (built-in kinds unchanged)."""
    return tuple(resolve(api, target) for target in targets)
