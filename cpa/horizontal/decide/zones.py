"""``zones`` (ours, opt-in): enough replicas for every zone the counted Nodes are in.

Why: CoreDNS behind topology-aware routing needs endpoints in every zone, and a
proportional count knows nothing of zones: a small cluster spread over three zones gets 2
replicas and one zone has no DNS of its own (kops#16695; Gardener sets ``max`` to
``max(5, 2 x zones)``, gardener#15541; kubernetes#114215 quotes the docs' advice of 3
endpoints per zone). A ``zones`` object inside the ``linear`` or ``ladder`` value opts in::

    "zones": {"topologyKey": "topology.kubernetes.io/zone", "minPerZone": 1,
              "roundUpToZones": true}

* Z is the number of distinct values of the ``topologyKey`` label among the Nodes the mode
  counts (all of them with ``includeUnschedulableNodes``, else the schedulable ones; never
  those ``excludeNodesWithTaints`` leaves out). A Node without the label is in the zone
  named "" (so a cluster with no zone labels is one zone). The node store keeps Z in its
  running totals (:mod:`cpa.nodes.store`): no poll ever scans the Nodes.
* ``minPerZone`` (default 1): the count is raised to at least ``minPerZone x Z``, the zone
  floor.
* ``roundUpToZones`` (default false): then up to the next multiple of Z, so each zone can
  hold the same number of replicas.

Where the steps sit (decided here, explained in ``docs/zones.md``): after the mode's formula,
so its ``min`` and ``max`` (linear) are applied first and the zone steps may go above
``max``, as upstream's preventSinglePointFailure floor may; before ``maxReplicasPerNode``,
which still caps everything (replicas no Node could run are never asked for). With a
``behavior``, the zone floor is enforced at once, as the HPA raises a target below
``minReplicas`` without waiting for its behavior (:func:`cpa.horizontal.decide.behavior.apply`'s
``floor``); the round-up is part of the count the behavior shapes.

Decoded as Go would decode a pointer to a struct of these fields, with the same rules as
upstream's keys (case-insensitive keys, ``null`` resets, a repeated key decodes over the
earlier one).
"""

from __future__ import annotations

import re
from typing import Final, NamedTuple

from cpa.go.json import (
    Field,
    JsonValue,
    decode_struct,
    describe,
    go_bool,
    go_int,
    go_string,
)
from cpa.horizontal.decide.steps import Step, plural

__all__ = ["DEFAULT_TOPOLOGY_KEY", "FIELD", "Zones", "ZonesDoc", "decode_zones",
           "zones_problems"]

FIELD: Final = "zones"
DEFAULT_TOPOLOGY_KEY: Final = "topology.kubernetes.io/zone"
MAX_PER_ZONE: Final = 1000
_FIELDS: Final = {"topologyKey": Field("topology_key", go_string, pointer=True),
                   "minPerZone": Field("min_per_zone", go_int, pointer=True),
                   "roundUpToZones": Field("round_up", go_bool)}
# A label key: an optional DNS-subdomain prefix (up to 253 characters) and "/", then a name
# of up to 63 characters.
_PREFIX = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")


def _label_key(key: str) -> bool:
    prefix, slash, name = key.rpartition("/")
    return (len(name) <= 63 and _NAME.fullmatch(name) is not None
            and (not slash or (len(prefix) <= 253 and _PREFIX.fullmatch(prefix) is not None)))


class Zones(NamedTuple):
    """The ``zones`` key of one parameters value."""

    topology_key: str = DEFAULT_TOPOLOGY_KEY
    min_per_zone: int = 1
    round_up: bool = False

    def fields(self) -> dict[str, object]:
        """The key as the ConfigMap spells it."""
        return {"topologyKey": self.topology_key, "minPerZone": self.min_per_zone,
                "roundUpToZones": self.round_up}

    def apply(self, replicas: int, zones: int | None, steps: list[Step]) -> tuple[int, int]:
        """The zone steps on the formula's count: (the count, the zone floor).

        ``zones`` None means the zones are not known (the node store is still reading the
        label): the count is left alone and the caller must not write it."""
        where = f'the label "{self.topology_key}"'
        if zones is None:
            steps.append(Step("zones.count", (
                f"The zones are not counted yet (the Nodes are being listed again to read "
                f"{where}), so nothing is written this poll.")))
            return replicas, 0
        steps.append(Step("zones.count", (
            f"The counted Nodes are in {plural(zones, 'zone')} by {where} (a Node without "
            'the label counts as the zone "").')))
        if zones == 0:
            steps.append(Step("zones.floor", "With no Node counted there is no zone to "
                                             "cover, so the zone keys change nothing."))
            return replicas, 0
        floor = self.min_per_zone * zones
        if replicas < floor:
            steps.append(Step("zones.floor", (
                f"minPerZone {self.min_per_zone} in {plural(zones, 'zone')} asks for at least "
                f"{floor}, so {replicas} is raised to {floor} (this comes after the formula's "
                "min and max).")))
            replicas = floor
        else:
            steps.append(Step("zones.floor", (
                f"minPerZone {self.min_per_zone} in {plural(zones, 'zone')} asks for at least "
                f"{floor}, and {replicas} is already that many.")))
        if self.round_up:
            rounded = -(-replicas // zones) * zones  # exact for any size
            if rounded != replicas:
                steps.append(Step("zones.round_up", (
                    f"roundUpToZones rounds {replicas} up to {rounded}, the next multiple of "
                    f"{zones}, so every zone can hold {rounded // zones}.")))
            else:
                steps.append(Step("zones.round_up", (
                    f"roundUpToZones: {replicas} is already a multiple of {zones}.")))
            replicas = rounded
        return replicas, floor


# --- parsing, with Go's encoding/json semantics ------------------------------------------


class ZonesDoc:
    """A ``zones`` being decoded: Go's zero values until a member sets them; ``None`` is
    Go's nil pointer (absent)."""

    __slots__ = ("min_per_zone", "round_up", "topology_key")

    def __init__(self) -> None:
        self.topology_key: str | None = None
        self.min_per_zone: int | None = None
        self.round_up = False


def decode_zones(value: JsonValue, where: str, into: ZonesDoc | None) -> ZonesDoc | None:
    """Decode one ``zones`` member (type errors raise :class:`GoJsonError`); ``into`` is what
    an earlier member of the same name decoded. ``None`` back: no zones (JSON null)."""
    return decode_struct(value, where, into, _FIELDS, ZonesDoc)


def zones_problems(doc: ZonesDoc | None) -> tuple[Zones | None, list[str]]:
    """Validate a decoded ``zones``: the value (None when absent or invalid) and every
    problem, each saying how to fix it."""
    if doc is None:
        return None, []
    problems: list[str] = []
    key = doc.topology_key if doc.topology_key is not None else DEFAULT_TOPOLOGY_KEY
    if not _label_key(key):
        problems.append(f"zones.topologyKey is {describe(key)}; it must be a Node label key "
                        f'such as "{DEFAULT_TOPOLOGY_KEY}" (or absent for that one)')
    per_zone = doc.min_per_zone if doc.min_per_zone is not None else 1
    if not 0 <= per_zone <= MAX_PER_ZONE:
        problems.append(f"zones.minPerZone is {per_zone}; it must be between 0 and "
                        f"{MAX_PER_ZONE} (or absent for 1)")
    if problems:
        return None, problems
    return Zones(key, per_zone, doc.round_up), []

