"""``capToPlaceable`` (ours, opt-in): replicas no more than the Nodes (or zones) they can be
placed on, when the target's Pods forbid two of them in one.

Why: DNS manifests often carry a required pod anti-affinity against their own Pods on
``kubernetes.io/hostname`` (one replica per Node). When the formula asks for more replicas
than there are Nodes they fit on, the extra ones stay Pending for good, and nothing says
why. With the key, the count written is capped, after every other step (the formula, the
bounds, ``behavior``), at the topology domains the daemon found the Pods can go to
(:func:`cpa.nodes.placement.count_domains`); ``"report"`` writes the uncapped count and only
reports the shortfall. The cap never takes a target below one replica: no placeable Node
at all (every Node NotReady for a moment) must not scale the service to zero.

Pure: the daemon finds the domains and hands them in; this module decides and explains.
"""

from __future__ import annotations

from typing import Final, NamedTuple

from cpa.horizontal.decide.params import CAP
from cpa.horizontal.decide.steps import Step, plural

__all__ = ["CapOutcome", "Room", "cap_replicas"]

_HOSTNAME: Final = "kubernetes.io/hostname"


class Room(NamedTuple):
    """How many of a target's Pods can be placed: one per value of ``key`` (its required
    self anti-affinity's topology key) among the Nodes they fit, ``domains`` of them."""

    key: str
    domains: int

    def where(self) -> str:
        """``3 Nodes``, or ``2 values of topology.kubernetes.io/zone``."""
        if self.key == _HOSTNAME:
            return plural(self.domains, "Node")
        return f"{plural(self.domains, 'value')} of {self.key}"


class CapOutcome(NamedTuple):
    """What the cap made of one target's count."""

    wanted: int  # after every other step
    room: Room
    replicas: int  # what is written: capped, or ``wanted`` when only reporting
    mode: str  # "cap" or "report"

    @property
    def unplaceable(self) -> int:
        """Replicas wanted beyond the room (0 when they all fit)."""
        return max(0, self.wanted - self.room.domains)

    @property
    def step(self) -> Step:
        where = self.room.where()
        if not self.unplaceable:
            return Step("placeable.fits", f"capToPlaceable: {self.wanted} fit on the "
                        f"{where} the Pods can be placed on (one per {self.room.key}).")
        if self.mode == CAP:
            floor = " (never below 1)" if self.replicas > self.room.domains else ""
            return Step("placeable.capped", f"capToPlaceable: {self.wanted} wanted, but a "
                        f"required self anti-affinity on {self.room.key} places them on "
                        f"{where} only: capped to {self.replicas}{floor}.")
        return Step("placeable.reported", f'capToPlaceable "report": {self.wanted} wanted, '
                    f"but a required self anti-affinity on {self.room.key} places them on "
                    f"{where} only: {self.unplaceable} would stay Pending (not capped).")


def cap_replicas(wanted: int, mode: str, room: Room | None) -> CapOutcome | None:
    """The count to write for ``wanted`` (``mode``: ``"cap"`` or ``"report"``); None when
    there is no room to judge (no required self anti-affinity, or a Node the Pods can go
    to lacks the topology key, so nothing bounds them)."""
    if room is None:
        return None
    capped = max(min(wanted, room.domains), min(wanted, 1)) if mode == CAP else wanted
    return CapOutcome(wanted, room, capped, mode)
