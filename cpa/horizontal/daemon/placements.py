"""``targetPlacement`` (ours, opt-in) in the poll: each target's Pod template, its placement,
and the node store's totals for it.

Why a room of its own: the placements are state across polls (which ones the store keeps
totals for, which template each target had), and without the key the poll must not pay for
any of it. Each poll with the key makes one GET per target's workload
(:func:`cpa.kube.template.pod_template_spec`); the store keeps one set of running totals
per distinct placement, so an unchanged placement costs nothing more and a changed one one
pass over the Nodes (:meth:`cpa.nodes.store.NodeStore.set_placements`).

``capToPlaceable`` (ours, opt-in) reads the same templates the same way, with or without
``targetPlacement``: each target's room is the topology domains of its required self
anti-affinity that its placement reaches (:meth:`TargetPlacements.rooms`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

from cpa import logs
from cpa.horizontal.daemon.paramscache import InvalidParams
from cpa.horizontal.decide.modes.mode import Params
from cpa.horizontal.decide.params import CAP_KEY, PLACEMENT_KEY
from cpa.horizontal.decide.placeable import Room
from cpa.kube.api import Api
from cpa.kube.targets import Target
from cpa.kube.template import NoTemplate, pod_template
from cpa.nodes.counts import ClusterCounts
from cpa.nodes.placement import placement_of, self_anti_affinity_keys

if TYPE_CHECKING:
    from cpa.nodes.placement import Domains, Placement

__all__ = ["PlacementCounts", "TargetPlacements"]


class PlacementCounts(Protocol):
    """What of the node store this room needs (:class:`cpa.nodes.store.NodeStore`)."""

    def set_placements(self, placements: Iterable[Placement], wait: float = 0.0) -> bool: ...

    def counts_for(self, placement: Placement) -> ClusterCounts | None: ...

    def domains(self, placement: Placement, key: str) -> Domains | None: ...


class TargetPlacements:
    """Per poll with ``targetPlacement``: every target's placement and counts."""

    def __init__(self, api: Api, namespace: str, source: str, store: PlacementCounts,
                 wait: float) -> None:
        """``source``: where the parameters come from, as the invalid-parameters message
        names it (``ConfigMap NS/NAME``, ``--config-dir DIR``)."""
        self._api = api
        self._namespace = namespace
        self._source = source
        self._store = store
        self._wait = wait
        self._last: dict[Target, Placement] = {}
        self._keys: dict[Target, tuple[str, ...]] = {}  # self anti-affinity topology keys
        self._active = False
        self._log = logs.get_logger("placement")

    @property
    def placements(self) -> dict[Target, Placement]:
        """Each target's placement as the last poll read it (``cpa explain``, tests)."""
        return dict(self._last)

    def counts(self, params: Params, targets: Sequence[Target]
               ) -> dict[Target, ClusterCounts | None]:
        """Each target's counts (None: the store's list with every label is not complete
        yet); empty without the key, when the store is told to keep no placement. With
        ``capToPlaceable`` alone the templates are read all the same (for :meth:`rooms`)
        and no target's counts change."""
        shared = params.shared
        if not shared.target_placement and shared.cap_to_placeable is None:
            if self._active:
                self._store.set_placements(())
                self._active = False
                self._last.clear()
                self._keys.clear()
                self._log.info("placement.off", reason="the parameters have no "
                                                       "targetPlacement or capToPlaceable")
            return {}
        key = PLACEMENT_KEY if shared.target_placement else CAP_KEY
        placements: dict[Target, Placement] = {}
        keys: dict[Target, tuple[str, ...]] = {}
        for target in targets:
            try:
                template = pod_template(self._api, self._namespace, target, key)
            except NoTemplate as exc:
                raise InvalidParams(f'{self._source} key "{key}": {exc}') from None
            spec = template.get("spec")
            placement = placements[target] = placement_of(spec if isinstance(spec, dict)
                                                          else {})
            keys[target] = self_anti_affinity_keys(template, self._namespace)
            if self._last.get(target) != placement:
                self._log.info("placement.changed", target=str(target),
                               node_selector=dict(placement.node_selector),
                               affinity_terms=(None if placement.required is None
                                               else len(placement.required)),
                               tolerations=len(placement.tolerations))
        self._store.set_placements(placements.values(), self._wait)
        self._last, self._keys = placements, keys
        self._active = True
        if not shared.target_placement:
            return {}
        return {target: self._store.counts_for(p) for target, p in placements.items()}

    def rooms(self) -> dict[Target, Room | None]:
        """``capToPlaceable``, after :meth:`counts`: per target of that poll, the fewest
        domains among its self anti-affinity keys (None: no such term, or a Node it can go
        to lacks the key). Raises :class:`LookupError` while the store's list with every
        label is not complete."""
        out: dict[Target, Room | None] = {}
        for target, placement in self._last.items():
            found: list[Room] = []
            for key in self._keys.get(target, ()):
                domains = self._store.domains(placement, key)
                if domains is None:
                    raise LookupError("the Node list with every label is not complete yet")
                if domains.bounded:
                    found.append(Room(key, domains.distinct))
            out[target] = min(found, key=lambda r: r.domains) if found else None
        return out
