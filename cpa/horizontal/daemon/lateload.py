"""The load axis (:class:`cpa.horizontal.daemon.loadstage.LoadStage`), made at the first poll whose
parameters have a ``load`` key: without one the daemon imports nothing of it (nor of
:mod:`cpa.horizontal.scrape`) and starts no scraper."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cpa.horizontal.daemon.loadstage import LoadStage, TargetLoad
    from cpa.horizontal.decide.load import Load
    from cpa.horizontal.decide.windows import LoadAxis
    from cpa.kube.api import Api
    from cpa.kube.targets import Target

__all__ = ["LateLoad"]


class LateLoad:
    """Stands for :class:`~cpa.horizontal.daemon.loadstage.LoadStage` until it is made (a
    :class:`~cpa.horizontal.daemon.cpa_loop.LoadAxes`)."""

    def __init__(self, api: Callable[[], Api], namespace: str) -> None:
        """``api`` makes each scraper's own API client."""
        self._api = api
        self._namespace = namespace
        self._real: LoadStage | None = None
        self.wake: Callable[[], None] | None = None
        """The poll loop's ``wake``: a scrape that makes a panic likely calls it."""

    def axis(self, target: Target, load: Load, now: float) -> LoadAxis:
        if self._real is None:
            from cpa.horizontal.daemon.loadstage import LoadStage

            self._real = LoadStage(self._api, self._namespace, wake=self.wake)
        return self._real.axis(target, load, now)

    def retire(self) -> None:
        if self._real is not None:
            self._real.retire()

    def view(self) -> list[TargetLoad]:
        """Every scraped target's axis and scrape status, for ``/metrics``."""
        return [] if self._real is None else self._real.view()
