"""``/metrics`` with prometheus_client imported when first needed: after the first poll's
writes (observers run then), or at the first scrape. The first poll does not need the
library, and importing it before would delay the first write (docs/architecture.md,
"Measured exceptions")."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cpa.horizontal.daemon.cpa_loop import PollResult
    from cpa.horizontal.daemon.cpa_metrics import Metrics
    from cpa.horizontal.daemon.loadstage import TargetLoad
    from cpa.kube.targets import Target
    from cpa.nodes.watch import WatchStatus
    from cpa.runtime.leaderelection import LeaseStatus

__all__ = ["LateMetrics"]


class LateMetrics:
    """Stands for :class:`~cpa.horizontal.daemon.cpa_metrics.Metrics` until it is made."""

    def __init__(self, targets: Sequence[Target], watch_status: Callable[[], WatchStatus],
                 dry_run: bool = False,
                 load_view: Callable[[], list[TargetLoad]] | None = None,
                 follow_defaults: bool = False, leader_elect: bool = False,
                 watch_targets: bool = False) -> None:
        """``load_view``: the load axis's (:meth:`cpa.horizontal.daemon.loadstage.LoadStage.view`);
        ``follow_defaults``: ``--update-configmap-from-defaults``'s series;
        ``leader_elect``: ``cpa_leader`` is 0 until the Lease is acquired, even in a scrape
        before the election began (made after the first Node list)."""
        self._targets = targets
        self._watch_status = watch_status
        self._dry_run = dry_run
        self._lock = threading.Lock()
        self._real: Metrics | None = None
        self._leader_elect = leader_elect
        self._leading = not leader_elect
        self._load_view = load_view
        self._follow_defaults = follow_defaults
        self._watch_targets = watch_targets
        self._lease: Callable[[], LeaseStatus] | None = None

    def _get(self) -> Metrics:
        with self._lock:
            if self._real is None:
                from cpa.horizontal.daemon.cpa_metrics import Metrics

                self._real = Metrics(self._targets, self._watch_status,
                                     dry_run=self._dry_run, load_view=self._load_view,
                                     follow_defaults=self._follow_defaults,
                                     leader_elect=self._leader_elect,
                                     watch_targets=self._watch_targets)
                self._real.set_leader(self._leading)
                if self._lease is not None:
                    self._real.watch_lease(self._lease)
            return self._real

    def observe(self, result: PollResult) -> None:
        self._get().observe(result)

    def set_leader(self, leading: bool) -> None:
        with self._lock:
            self._leading = leading
            real = self._real
        if real is not None:
            real.set_leader(leading)

    def watch_lease(self, status: Callable[[], LeaseStatus]) -> None:
        with self._lock:
            self._lease = status
            real = self._real
        if real is not None:
            real.watch_lease(status)

    def failed_lease(self) -> None:
        self._get().failed_lease()

    def failed_before_sync(self) -> None:
        self._get().failed_before_sync()

    def exposition(self) -> bytes:
        return self._get().exposition()
