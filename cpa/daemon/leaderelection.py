"""Leader election on a coordination.k8s.io/v1 Lease, with client-go's algorithm.

Why: upstream runs as one replica (issue #112 asked for more); with ``--leader-elect``
several replicas can run and only the Lease holder writes, while the followers keep their
node watch warm so that a takeover costs one Lease duration, not a cold sync.

The algorithm is client-go's ``tryAcquireOrRenew``: a follower takes the Lease only when
its record has not changed for ``lease_duration`` by the follower's own clock (never the
server's timestamps, so clock skew cannot cause two leaders); the leader renews every
``retry_period`` and stops writing when it has not renewed for ``renew_deadline``, which is
shorter than ``lease_duration``. :meth:`LeaderElector.is_leader` is checked before each
poll and also turns false on its own once the deadline passes, even while a renewal request
hangs. On a clean shutdown the leader releases the Lease (empty holder, 1 s) so that a
follower takes over at once.
"""

from __future__ import annotations

import json
import os
import random
import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from cpa import logs
from cpa.kube.api import Api, ApiError

__all__ = ["LeaderElector", "LeaseConfig", "default_identity"]


def default_identity() -> str:
    """The Pod name (HOSTNAME) plus a random suffix, as client-go's users do."""
    host = os.environ.get("HOSTNAME") or socket.gethostname() or "cpa"
    return f"{host}_{secrets.token_hex(4)}"


@dataclass(frozen=True, slots=True)
class LeaseConfig:
    namespace: str
    name: str
    identity: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


def spec_of(lease: dict[str, Any]) -> dict[str, Any]:
    spec = lease.get("spec")
    return spec if isinstance(spec, dict) else {}


def _micro_time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Holds (or waits for) the Lease in a thread; tells the poll loop whether it may write."""

    def __init__(self, api: Api, config: LeaseConfig, *,
                 on_change: Callable[[bool], None] | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], datetime] = lambda: datetime.now(UTC),
                 rng: random.Random | None = None) -> None:
        self._api = api
        self._cfg = config
        self.on_change = on_change
        self._clock = clock
        self._wall = wall
        self._rng = rng or random.Random()
        self._log = logs.get_logger("leaderelection")
        self._path = (f"/apis/coordination.k8s.io/v1/namespaces/{config.namespace}"
                      f"/leases/{config.name}")
        self._lock = threading.Lock()
        self._leading = False
        self._renewed_at = 0.0
        self._observed: str | None = None  # the last Lease spec we saw, as JSON text
        self._observed_at = 0.0
        self._observed_holder = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.transitions = 0

    # --- what the rest of the daemon asks ------------------------------------------------
    def is_leader(self) -> bool:
        with self._lock:
            return self._leading and self._clock() - self._renewed_at < self._cfg.renew_deadline

    @property
    def holder(self) -> str:
        return self._observed_holder

    # --- lifecycle ---------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name="leader-election", daemon=True)
        self._thread.start()

    def stop(self, release: bool = True, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        if release:
            self.release()

    def run(self) -> None:
        """Try to acquire, then renew, until stopped; leadership can be lost and regained."""
        while not self._stop.is_set():
            self._stop.wait(self.tick())

    def tick(self) -> float:
        """One attempt and its consequences; returns how long to wait before the next."""
        ok = self.try_acquire_or_renew()
        now = self._clock()
        with self._lock:
            was = self._leading
            if ok:
                self._leading, self._renewed_at = True, now
            elif was and now - self._renewed_at >= self._cfg.renew_deadline:
                self._leading = False
            leading = self._leading
        if leading != was:
            self._changed(leading)
        pause = self._cfg.retry_period
        if not leading:
            pause *= 1.0 + self._rng.uniform(0.0, 1.2)  # client-go's JitterFactor
        return pause

    def _changed(self, leading: bool) -> None:
        if leading:
            self.transitions += 1
            self._log.info("leader.started", lease=f"{self._cfg.namespace}/{self._cfg.name}",
                           identity=self._cfg.identity)
        else:
            self._log.warning("leader.stopped", lease=f"{self._cfg.namespace}/{self._cfg.name}",
                              identity=self._cfg.identity,
                              hint="could not renew the Lease in time; not writing until "
                                   "it is acquired again")
        if self.on_change is not None:
            self.on_change(leading)

    # --- client-go's tryAcquireOrRenew ---------------------------------------------------
    def _spec(self, now: datetime, acquire: str | None, transitions: int) -> dict[str, Any]:
        return {"holderIdentity": self._cfg.identity,
                "leaseDurationSeconds": max(1, round(self._cfg.lease_duration)),
                "acquireTime": acquire or _micro_time(now), "renewTime": _micro_time(now),
                "leaseTransitions": transitions}

    def try_acquire_or_renew(self) -> bool:
        """One attempt; True when we hold the Lease afterwards. Never raises."""
        try:
            return self._try()
        except ApiError as exc:
            self._log.warning("leader.lease_failed", error=str(exc)[:300],
                              hint="the Lease needs get, create and update in "
                                   f"{self._cfg.namespace} (see manifests/examples)")
            return False
        except Exception as exc:
            self._log.warning("leader.lease_failed", error=f"{type(exc).__name__}: {exc}"[:300])
            return False

    def _try(self) -> bool:
        now_wall, now = self._wall(), self._clock()
        try:
            lease = self._api.get_json(self._path)
        except ApiError as exc:
            if not exc.not_found:
                raise
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": self._cfg.name, "namespace": self._cfg.namespace},
                    "spec": self._spec(now_wall, None, 0)}
            try:
                created = self._api.send_json(
                    "POST", self._path.rsplit("/", 1)[0], body)
            except ApiError as create_exc:
                if create_exc.conflict:  # someone else created it first
                    return False
                raise
            self._observe(created.get("spec") or spec_of(body), now)
            return True
        spec = lease.get("spec") or {}
        self._observe(spec, now)
        holder = str(spec.get("holderIdentity") or "")
        mine = holder == self._cfg.identity
        duration = float(spec.get("leaseDurationSeconds") or self._cfg.lease_duration)
        if holder and not mine and self._observed_at + duration > now:
            return False  # held by someone else and not expired by our clock
        transitions = int(spec.get("leaseTransitions") or 0)
        acquire = str(spec.get("acquireTime")) if mine and spec.get("acquireTime") else None
        lease["spec"] = self._spec(now_wall, acquire, transitions if mine else transitions + 1)
        try:
            updated = self._api.send_json("PUT", self._path, lease)
        except ApiError as exc:
            if exc.conflict:  # changed since our GET: look again next time
                return False
            raise
        self._observe(updated.get("spec") or spec_of(lease), now)
        return True

    def _observe(self, spec: dict[str, Any], now: float) -> None:
        text = json.dumps(spec, sort_keys=True)
        if text != self._observed:
            self._observed, self._observed_at = text, now
            self._observed_holder = str(spec.get("holderIdentity") or "")

    def release(self) -> bool:
        """Give the Lease up (if we hold it) so that a follower takes over at once."""
        with self._lock:
            was = self._leading
            self._leading = False
        if not was:
            return False
        try:
            lease = self._api.get_json(self._path)
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != self._cfg.identity:
                return False
            now = _micro_time(self._wall())
            lease["spec"] = {"leaseDurationSeconds": 1, "acquireTime": now, "renewTime": now,
                             "leaseTransitions": int(spec.get("leaseTransitions") or 0)}
            self._api.send_json("PUT", self._path, lease)
        except Exception as exc:
            self._log.warning("leader.release_failed", error=f"{type(exc).__name__}: {exc}"[:300])
            return False
        self._log.info("leader.released", lease=f"{self._cfg.namespace}/{self._cfg.name}")
        return True
