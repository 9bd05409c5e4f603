"""The cluster size for ``/cpvpa``: a Node watch where RBAC allows it, else one list per poll.

CPVA lists every Node on every poll (one unpaginated list) and its RBAC example grants
``list`` on nodes and nothing more. We keep the capacity store current with the
autoscaler's reflector (a watch: no Node request per poll), but a CPVA Deployment whose
image is swapped for ours keeps CPVA's ClusterRole, and a watch answers 403 there. So the
first poll probes: one paginated list into the store (what ``list`` allows), then a
one-second watch from its resourceVersion. A 403 on that watch selects list mode --
CPVA's own behaviour, one paginated list per poll into the same store -- and says once
which rule to add to get the watch. Anything else selects watch mode and starts the
reflector. A probe that fails (the API server is down) is a failed poll, retried by the
next one, where CPVA exits 1 at start.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from cpa import logs
from cpa.kube.api import ApiError, StreamingApi
from cpa.kube.wire import ACCEPT_PROTOBUF
from cpa.nodes.listing import NODES_PATH
from cpa.nodes.watch import NodeReflector, WatchStatus
from cpa.vertical.daemon.capacity import CapacityStore

__all__ = ["NodeCounts"]

PROBE_TIMEOUT = 10.0


class NodeCounts:
    """(nodes, cores) for each poll, from the watch or from a list."""

    def __init__(self, api: StreamingApi, *,
                 reflector: Callable[[StreamingApi, CapacityStore], NodeReflector] | None = None
                 ) -> None:
        self._api = api
        self.store = CapacityStore()
        make = reflector or (lambda a, s: NodeReflector(a, s, capacity=True))
        self.reflector = make(api, self.store)
        self.mode = ""  # "" until the probe decided: "watch" or "list"
        self._log = logs.get_logger("nodes")

    def status(self) -> WatchStatus:
        return self.reflector.status()

    def counts(self) -> tuple[int, int]:
        """This poll's (nodes, cores); raises :class:`ApiError` when the Nodes cannot be
        listed and :class:`~cpa.vertical.decide.formula.CoresError` where CPVA's sum fails."""
        if self.mode == "list":
            self.reflector.list_once()
        elif not self.mode:
            self._probe()
        return self.store.counts()

    def warm(self) -> None:
        """A follower's: decide watch or list now, so a takeover's first poll is quick."""
        if not self.mode:
            self._probe()

    def _probe(self) -> None:
        self.reflector.list_once()
        query = {"watch": "1", "resourceVersion": self.reflector.resource_version,
                 "allowWatchBookmarks": "true", "timeoutSeconds": "1"}
        try:
            resp = self._api.stream(NODES_PATH, query, read_timeout=PROBE_TIMEOUT,
                                    accept=ACCEPT_PROTOBUF)
        except ApiError as exc:
            if not exc.forbidden:
                raise
            self.mode = "list"
            self._log.warning(
                "nodes.watch_forbidden", error=exc.message, fallback="one Node list per poll",
                hint="CPVA's RBAC grants only list on nodes; add watch to that rule "
                     "(apiGroups: [\"\"], resources: [nodes], verbs: [list, watch]) and "
                     "the counts follow a watch instead")
            return
        with contextlib.suppress(Exception):
            resp.close()
        with contextlib.suppress(Exception):
            resp.release_conn()
        self.mode = "watch"
        self.reflector.start()
        if logs.v(1):
            self._log.info("nodes.watching", nodes=len(self.store))

    def stop(self) -> None:
        if self.mode == "watch":
            self.reflector.stop()
