"""Posting Kubernetes Events (events.k8s.io/v1), for both daemons' ``--events``.

Why here: the autoscaler (:mod:`cpa.horizontal.daemon.cpa_events`) and ``/cpvpa``
(:mod:`cpa.vertical.daemon.cpvpa_events`) say different things about different objects, but
post them the same way: one request per Event, never failing or slowing a poll by more
than that request. Neither upstream creates Events and the RBAC real clusters grant them
has no ``events create``: with ``--events`` but without that right, :class:`EventSink`
logs one line naming the rule and tries again an hour later (the right may have been
granted meanwhile).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from cpa import logs, redact
from cpa.kube.api import Api, ApiError

__all__ = ["NOTE_LIMIT", "RETRY_FORBIDDEN_SECONDS", "EventSink"]

NOTE_LIMIT = 1024  # the API refuses longer notes


def _fit(note: str) -> str:
    return note if len(note) <= NOTE_LIMIT else note[:NOTE_LIMIT - 3] + "..."
RETRY_FORBIDDEN_SECONDS = 3600.0
RBAC_HINT = ("grant create on events.k8s.io events in this namespace (see "
             "manifests/examples/events-rbac.yaml), or drop --events; {what} goes on "
             "without Events")


class EventSink:
    """Posts Events to ``namespace`` as ``controller``; ``instance`` names this process
    (the Pod name)."""

    def __init__(self, api: Api, namespace: str, controller: str, instance: str, *,
                 doing: str = "scaling",
                 clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self._api = api
        self.namespace = namespace
        self._controller = controller
        self._instance = instance[:128]
        self._doing = doing
        self._clock = clock
        self._wall = wall
        self._log = logs.get_logger("events")
        self._forbidden_until: float | None = None
        self.sent = 0
        self.failed = 0

    def emit(self, type_: str, reason: str, action: str, regarding: Mapping[str, str],
             note: str) -> bool:
        """Post one Event; never raises. Returns whether it was created."""
        now = self._clock()
        if self._forbidden_until is not None and now < self._forbidden_until:
            return False
        stamp = self._wall()
        body: dict[str, Any] = {
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": f"{regarding['name']}.{os.urandom(8).hex()}",
                         "namespace": self.namespace},
            "eventTime": stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "reportingController": self._controller,
            "reportingInstance": self._instance,
            "action": action, "reason": reason, "type": type_,
            "regarding": dict(regarding),
            "note": _fit(redact.scrub(note)),
        }
        try:
            self._api.send_json(
                "POST", f"/apis/events.k8s.io/v1/namespaces/{self.namespace}/events", body)
        except ApiError as exc:
            self.failed += 1
            if exc.forbidden:
                if self._forbidden_until is None:
                    self._log.warning(
                        "events.forbidden", namespace=self.namespace,
                        error=exc.message[:300], hint=RBAC_HINT.format(what=self._doing))
                self._forbidden_until = now + RETRY_FORBIDDEN_SECONDS
            else:
                self._log.warning("events.failed", reason=reason, error=str(exc)[:300])
            return False
        except Exception as exc:  # a side effect: never let it reach the poll loop
            self.failed += 1
            self._log.warning("events.failed", reason=reason,
                              error=f"{type(exc).__name__}: {exc}"[:300])
            return False
        if self._forbidden_until is not None:
            self._log.info("events.allowed", namespace=self.namespace)
            self._forbidden_until = None
        self.sent += 1
        return True
