"""``--leader-elect`` as a daemon wires it: one Lease, every write guarded by it, and the
daemon told when leadership comes and goes (both daemons the same way; the algorithm is
:mod:`cpa.runtime.leaderelection`)."""

from __future__ import annotations

from collections.abc import Callable

from cpa import logs
from cpa.kube.api import RawApi
from cpa.runtime.common_flags import LeaderElectionOptions
from cpa.runtime.leaderelection import (
    GuardedApi,
    LeaderElector,
    LeaseConfig,
    LeaseStatus,
    default_identity,
)

__all__ = ["Election"]


class Election:
    """The Lease ``name`` (in ``--leader-elect-namespace``, else ``namespace``) and the API
    as a leader may write through it (:attr:`writer`)."""

    def __init__(self, api: RawApi, opts: LeaderElectionOptions, namespace: str,
                 name: str) -> None:
        config = LeaseConfig(namespace=opts.leader_elect_namespace or namespace, name=name,
                             identity=default_identity(),
                             lease_duration=opts.leader_elect_lease_duration,
                             renew_deadline=opts.leader_elect_renew_deadline,
                             retry_period=opts.leader_elect_retry_period)
        logs.get_logger("main").info("leader.election",
                                     lease=f"{config.namespace}/{config.name}",
                                     identity=config.identity)
        self.elector = LeaderElector(api, config)
        self.writer: RawApi = GuardedApi(api, self.elector)
        """Every write checks the Lease just before it is sent."""

    def is_leader(self) -> bool:
        return self.elector.is_leader()

    def status(self) -> LeaseStatus:
        return self.elector.status()

    def follower_report(self, record: Callable[[str | None], None],
                        count_error: Callable[[], None] | None) -> None:
        """What a follower reports each poll period instead of a poll of its own: nothing
        wrong (``record(None)``), or that it cannot even read or write the Lease, which
        ``/last-poll`` says (``record``) and counts as a failed poll (``count_error``), as
        a poll period without the first Node list does."""
        problem = self.elector.problem
        record(problem)
        if problem is not None and count_error is not None:
            count_error()

    def start(self, on_change: Callable[[bool], None],
              set_leader: Callable[[bool], None] | None = None) -> None:
        """Campaign from now on; ``set_leader`` (the ``*_leader`` gauge) hears first, 0
        until the Lease is held, then ``on_change`` (poll at once; a follower reports no
        poll of its own)."""
        def changed(leading: bool) -> None:
            if set_leader is not None:
                set_leader(leading)
            on_change(leading)

        self.elector.on_change = changed
        if set_leader is not None:
            set_leader(False)
        self.elector.start()

    def stop(self) -> None:
        """Stop campaigning and release the Lease, so that a follower takes over at once."""
        self.elector.stop(release=True)
