"""Kubernetes Events (events.k8s.io/v1) about what the autoscaler did: opt-in (``--events``).

Why opt-in: upstream never created Events, and the RBAC real clusters grant it has no
``events create``; with ``--events`` but without that right, the daemon logs one clear line
and carries on (it tries again an hour later, in case the right was granted meanwhile).
Every Event goes through :meth:`EventRecorder.emit`, which truncates, swallows and logs
failures: an Event is a side effect and must never fail or slow a poll by more than one
request.

What is recorded:

* ``Normal``/``Scaled`` regarding the target, on every replica change: old -> new, the mode
  and the counts;
* ``Warning``/``InvalidParameters`` regarding the ConfigMap, once per resourceVersion whose
  parameters are invalid (with ``--config-dir`` and no ``--configmap``, none: there is no
  object to regard);
* ``Normal``/``DefaultsApplied`` regarding the ConfigMap, when
  ``--update-configmap-from-defaults`` replaced its data with new defaults.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from cpa import logs
from cpa.kube.api import Api, ApiError
from cpa.kube.writers import writer_for

if TYPE_CHECKING:
    from cpa.daemon.loop import PollResult

__all__ = ["REPORTING_CONTROLLER", "EventRecorder"]

REPORTING_CONTROLLER = "cluster-proportional-autoscaler"
NOTE_LIMIT = 1024  # the API refuses longer notes
RETRY_FORBIDDEN_SECONDS = 3600.0


class EventRecorder:
    """Posts Events to ``namespace``; ``instance`` names this process (the Pod name)."""

    def __init__(self, api: Api, namespace: str, configmap: str, instance: str, *,
                 mounted: bool = False,
                 clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        """``mounted`` (``--config-dir``): the parameters' versions are the directory's, not
        the ConfigMap's resourceVersions, so the Events regard the ConfigMap without one
        (and none at all when ``configmap`` is empty)."""
        self._api = api
        self._mounted = mounted
        self._namespace = namespace
        self._configmap = configmap
        self._instance = instance[:128]
        self._clock = clock
        self._wall = wall
        self._log = logs.get_logger("events")
        self._forbidden_until: float | None = None
        self._warned_versions: set[str] = set()
        self.sent = 0
        self.failed = 0

    # --- the observer ------------------------------------------------------------------
    def observe(self, result: PollResult) -> None:
        decision, counts = result.decision, result.counts
        for scale in result.scales:
            if not scale.changed or decision is None or counts is None:
                continue
            kind = scale.target.api
            what = writer_for(scale.target).change_note(scale.target, scale.previous,
                                                        scale.replicas)
            note = (f"{what} ({decision.mode} mode: {decision.nodes} nodes and "
                    f"{decision.cores} cores counted; the cluster has {counts.total_nodes} "
                    f"nodes and {counts.total_cores} cores, {counts.schedulable_nodes} and "
                    f"{counts.schedulable_cores} of them schedulable)")
            outcome = result.behavior.get(scale.target)
            if outcome is not None and outcome.shaped:
                note += (f"; the parameters gave {outcome.desired}, the behavior wrote "
                         f"{outcome.replicas}: {outcome.reason}")
            self.emit("Normal", "Scaled", "Scale", {
                "apiVersion": kind.api_version, "kind": kind.name,
                "name": scale.target.name, "namespace": self._namespace}, note)
        defaults = result.configmap_defaults
        if defaults is not None and defaults.replaced is not None:
            self.emit("Normal", "DefaultsApplied", "UpdateConfigMap", {
                "apiVersion": "v1", "kind": "ConfigMap", "name": self._configmap,
                "namespace": self._namespace},
                f"Replaced the data of ConfigMap {self._namespace}/{self._configmap} with the "
                "new --default-params: nobody had edited what the autoscaler wrote "
                f"(keys before: {', '.join(sorted(defaults.replaced)) or 'none'})")
        invalid, version = result.params_invalid, result.params_version
        if invalid is not None and version is not None and self._configmap \
                and version not in self._warned_versions:
            self._warned_versions.add(version)
            regarding = {"apiVersion": "v1", "kind": "ConfigMap", "name": self._configmap,
                         "namespace": self._namespace}
            if not self._mounted:
                regarding["resourceVersion"] = version
            self.emit("Warning", "InvalidParameters", "LoadParameters", regarding, invalid)

    # --- the one way out ---------------------------------------------------------------
    def emit(self, type_: str, reason: str, action: str, regarding: dict[str, str],
             note: str) -> bool:
        """Post one Event; never raises. Returns whether it was created."""
        now = self._clock()
        if self._forbidden_until is not None and now < self._forbidden_until:
            return False
        stamp = self._wall()
        body: dict[str, Any] = {
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": f"{regarding['name']}.{secrets.token_hex(8)}",
                         "namespace": self._namespace},
            "eventTime": stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "reportingController": REPORTING_CONTROLLER,
            "reportingInstance": self._instance,
            "action": action, "reason": reason, "type": type_,
            "regarding": regarding,
            "note": note if len(note) <= NOTE_LIMIT else note[:NOTE_LIMIT - 3] + "...",
        }
        try:
            self._api.send_json(
                "POST", f"/apis/events.k8s.io/v1/namespaces/{self._namespace}/events", body)
        except ApiError as exc:
            self.failed += 1
            if exc.forbidden:
                if self._forbidden_until is None:
                    self._log.warning(
                        "events.forbidden", namespace=self._namespace, error=exc.message[:300],
                        hint="grant create on events.k8s.io events in this namespace (see "
                             "manifests/examples/events-rbac.yaml), or drop --events; "
                             "scaling goes on without Events")
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
            self._log.info("events.allowed", namespace=self._namespace)
            self._forbidden_until = None
        self.sent += 1
        return True
