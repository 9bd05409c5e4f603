"""Who set a field of an object, read from its ``metadata.managedFields`` (server-side
apply's bookkeeping, kept by the API server for every write, ``Update`` or ``Apply``).

``--watch-targets`` (ours) names the writer of a target's replicas this way: the manager
whose ``fieldsV1`` owns ``f:spec`` -> ``f:replicas`` (``f:minReplicas`` for an HPA). A write
through the ``scale`` subresource is recorded against the object with ``subresource:
scale`` and the same field path. The manager is the writer's ``fieldManager``, or the
program name of its User-Agent when it sent none (how ours and client-go's binaries are
named: :data:`OUR_MANAGERS`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, NamedTuple

from cpa.kube.targets import Target

__all__ = ["OUR_MANAGERS", "Owner", "count_field", "field_owners", "foreign_owner",
           "last_foreign_writer", "latest_owner"]

OUR_MANAGERS: Final = frozenset({"cluster-proportional-autoscaler-py"})
"""The field managers of this program's writes: the API server names them after the
program of :data:`cpa.kube.client.USER_AGENT` (no request of ours sends a fieldManager)."""


class Owner(NamedTuple):
    """A manager that owns the field, and when it last wrote the object (RFC 3339 as the
    API server writes it; "" when the entry has none)."""

    manager: str
    time: str


def field_owners(managed_fields: object, path: Sequence[str]) -> list[Owner]:
    """The managers whose ``fieldsV1`` holds ``path`` (e.g. ``("f:spec", "f:replicas")``),
    most recent first; none when the entries are absent or not of the shape the API server
    writes (nobody can then be named)."""
    if not isinstance(managed_fields, list):
        return []
    owners: list[Owner] = []
    for entry in managed_fields:
        if not isinstance(entry, dict):
            continue
        manager = entry.get("manager")
        node: object = entry.get("fieldsV1")
        for step in path:
            node = node.get(step) if isinstance(node, dict) else None
        if node is not None and isinstance(manager, str):
            stamp = entry.get("time")
            owners.append(Owner(manager, stamp if isinstance(stamp, str) else ""))
    # RFC 3339 in UTC with a fixed width sorts as text; a stable sort keeps the API
    # server's order for equal times.
    return sorted(owners, key=lambda owner: owner.time, reverse=True)


def foreign_owner(managed_fields: object, path: Sequence[str],
                  ours: frozenset[str] = OUR_MANAGERS) -> str | None:
    """The most recent manager other than ours that owns ``path``; None when only ours
    (or nobody that can be named) does."""
    for owner in field_owners(managed_fields, path):
        if owner.manager not in ours:
            return owner.manager
    return None


def latest_owner(managed_fields: object, path: Sequence[str]) -> Owner | None:
    """The manager that wrote ``path`` last (of those that own it), or None."""
    owners = field_owners(managed_fields, path)
    return owners[0] if owners else None


def count_field(target: Target) -> tuple[str, str]:
    """Where ``target``'s count lives in ``fieldsV1``: an HPA floor's ``minReplicas``."""
    return ("f:spec", "f:minReplicas") if target.api.floor else ("f:spec", "f:replicas")


def last_foreign_writer(obj: Mapping[str, Any], target: Target) -> str | None:
    """The manager that wrote ``target``'s count last, read from the object ``obj``, when
    it is not ours (``cpa explain --from-cluster``); None when ours did, or nobody can be
    named."""
    meta = obj.get("metadata")
    owner = latest_owner(meta.get("managedFields") if isinstance(meta, Mapping) else None,
                         count_field(target))
    return owner.manager if owner is not None and owner.manager not in OUR_MANAGERS else None
