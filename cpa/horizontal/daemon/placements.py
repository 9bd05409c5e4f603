"""``targetPlacement`` (ours, opt-in) in the poll: each target's Pod template, its placement,
and the node store's totals for it.

Why a room of its own: the placements are state across polls (which ones the store keeps
totals for, which template each target had), and without the key the poll must not pay for
any of it. Each poll with the key makes one GET per target's workload
(:func:`cpa.kube.template.pod_template_spec`); the store keeps one set of running totals
per distinct placement, so an unchanged placement costs nothing more and a changed one one
pass over the Nodes (:meth:`cpa.nodes.store.NodeStore.set_placements`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

from cpa import logs
from cpa.horizontal.daemon.paramscache import InvalidParams
from cpa.horizontal.decide.modes.mode import Params
from cpa.kube.api import Api
from cpa.kube.targets import Target
from cpa.kube.template import NoTemplate, pod_template_spec
from cpa.nodes.counts import ClusterCounts
from cpa.nodes.placement import placement_of

if TYPE_CHECKING:
    from cpa.nodes.placement import Placement

__all__ = ["PlacementCounts", "TargetPlacements"]


class PlacementCounts(Protocol):
    """What of the node store this room needs (:class:`cpa.nodes.store.NodeStore`)."""

    def set_placements(self, placements: Iterable[Placement], wait: float = 0.0) -> bool: ...

    def counts_for(self, placement: Placement) -> ClusterCounts | None: ...


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
        self._active = False
        self._log = logs.get_logger("placement")

    @property
    def placements(self) -> dict[Target, Placement]:
        """Each target's placement as the last poll read it (``cpa explain``, tests)."""
        return dict(self._last)

    def counts(self, params: Params, targets: Sequence[Target]
               ) -> dict[Target, ClusterCounts | None]:
        """Each target's counts (None: the store's list with every label is not complete
        yet); empty without the key, when the store is told to keep no placement."""
        if not params.shared.target_placement:
            if self._active:
                self._store.set_placements(())
                self._active = False
                self._last.clear()
                self._log.info("placement.off", reason="the parameters have no "
                                                       "targetPlacement")
            return {}
        placements: dict[Target, Placement] = {}
        for target in targets:
            try:
                spec = pod_template_spec(self._api, self._namespace, target)
            except NoTemplate as exc:
                raise InvalidParams(f'{self._source} key "targetPlacement": {exc}') from None
            placement = placements[target] = placement_of(spec)
            if self._last.get(target) != placement:
                self._log.info("placement.changed", target=str(target),
                               node_selector=dict(placement.node_selector),
                               affinity_terms=(None if placement.required is None
                                               else len(placement.required)),
                               tolerations=len(placement.tolerations))
        self._store.set_placements(placements.values(), self._wait)
        self._last = placements
        self._active = True
        return {target: self._store.counts_for(p) for target, p in placements.items()}
