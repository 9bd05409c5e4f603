"""Leader election on a coordination.k8s.io/v1 Lease, with client-go's algorithm.

Why: upstream runs as one replica (issue #112 asked for more); with ``--leader-elect``
several replicas can run and only the Lease holder writes, while the followers keep their
node watch warm so that a takeover costs one Lease duration, not a cold sync.

The algorithm is client-go's ``tryAcquireOrRenew``: a follower takes the Lease only when
its record has not changed for ``lease_duration`` by the follower's own clock (never the
server's timestamps, so clock skew cannot cause two leaders). The leader's loop is
client-go's ``renew``: ``retry_period`` after each renewal a round begins, which tries every
``retry_period`` until one renewal succeeds; a round that has not succeeded
``renew_deadline`` after it began ends the leadership, at that moment, even while a request
hangs (each Lease request's deadline is the round's, as client-go's context). On a clean
shutdown the leader releases the Lease (empty holder, 1 s) so that a follower takes over at
once.

Writes. Being the leader is checked before each poll, and :class:`GuardedApi` checks again
just before every write (each scale PUT, the 409 retry, a ConfigMap create, an Event): it
is sent only if it can be complete, connect to last byte, before ``renew_deadline`` after
the START of the last successful renewal, and its deadline is cut to that moment. A
follower cannot take over before ``lease_duration`` after that same renewal reached the API
server (it must see the record unchanged that long), so the old leader's last write ends at
least ``lease_duration - renew_deadline`` (5 s by default) before a new leader can begin:
no write after losing the Lease, whatever the network does to a single request.

Three departures from client-go, to keep that bound when someone else edits the Lease.
A record that names no holder is free at once only when it was never held (no
``renewTime``) or was released (``leaseDurationSeconds`` of 1, as client-go and we release);
a holder emptied by hand (``holderIdentity: ""``, the duration left as it was) is waited
out like any other holder, so the old leader's last write ends before anyone takes over.
A Lease deleted by hand is waited out the same way by a follower that last saw another
holder in it (client-go creates a new one at once, and both replicas lead until the old
leader's next renewal finds it); the old leader creates it again at its next renewal.
And a leader that reads a record naming someone else (or no one) stops leading at once
instead of at its renew deadline: the Lease is not its own any more.

Being unable to take part is never silent: :meth:`LeaderElector.status` says why the last
attempt failed (a 403 names the RBAC rule), how long the Lease record has gone unchanged
(no replica renewing it), and what duration its holder claims (a "ghost" holder claiming
more than :data:`SANE_LEASE_SECONDS` is logged once as ``leader.lease_ghost``).
"""

from __future__ import annotations

import json
import math
import os
import random
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from cpa import logs
from cpa.kube.api import Api, ApiError, RawApi, get_decoded
from cpa.kube.objects import MalformedObject, decode_lease

__all__ = ["SANE_LEASE_SECONDS", "GuardedApi", "LeaderElector", "LeaseConfig", "LeaseStatus",
           "default_identity", "lease_problem"]

T = TypeVar("T")
RELEASE_SECONDS = 1.0  # the Lease release at exit: SIGTERM is honoured within 2 s
SANE_LEASE_SECONDS = 3600.0
"""A holder claiming the Lease for longer than an hour is no leader election anyone runs
(client-go's users claim seconds): most likely a "ghost" left by a tool or a hand edit,
which followers would wait out for that long."""
MIN_WRITE_SECONDS = 0.5
"""A write is not sent with less time than this left before the renew deadline: it could
not be complete in time anyway."""


def default_identity() -> str:
    """The Pod name (HOSTNAME) plus a random suffix, as client-go's users do."""
    host = os.environ.get("HOSTNAME") or socket.gethostname() or "cpa"
    return f"{host}_{os.urandom(4).hex()}"


@dataclass(frozen=True, slots=True)
class LeaseConfig:
    namespace: str
    name: str
    identity: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


@dataclass(frozen=True, slots=True)
class LeaseStatus:
    """What this replica knows of the election, for ``/last-poll`` and ``/metrics``."""

    problem: str | None
    """Why the last Lease attempt failed (None when it got an answer it could act on)."""
    unchanged_seconds: float
    """How long the Lease record has gone unchanged as this replica saw it (since the
    election began when never seen): a few lease durations means no replica renews it."""
    holder_duration: float
    """The ``leaseDurationSeconds`` of the record last seen (0 before any)."""
    lease_duration: float
    """Ours: ``--leader-elect-lease-duration``."""
    errors: int
    """Lease attempts that failed, since start."""


def lease_problem(exc: Exception, namespace: str, name: str) -> str:
    """The operator's sentence for a failed Lease request: what failed and what to do."""
    lease = f"{namespace}/{name}"
    if isinstance(exc, ApiError) and exc.forbidden:
        return (f"cannot take part in leader election: the Lease {lease} is forbidden "
                f"({str(exc)[:600]}); add an RBAC Role rule in namespace {namespace}: "
                '{apiGroups: ["coordination.k8s.io"], resources: ["leases"], '
                'verbs: ["get", "create", "update"]} (manifests/examples/leader-election.yaml)')
    if isinstance(exc, ApiError) and exc.status == 401:
        return (f"cannot take part in leader election: the Lease {lease}: {str(exc)[:300]} "
                "(the credentials were refused)")
    text = str(exc) if isinstance(exc, ApiError) else f"{type(exc).__name__}: {exc}"
    return f"cannot take part in leader election: the Lease {lease}: {text[:300]}"


def spec_of(lease: dict[str, Any]) -> dict[str, Any]:
    spec = lease.get("spec")
    return spec if isinstance(spec, dict) else {}


def _micro_time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Holds (or waits for) the Lease in a thread; tells the poll loop whether it may write.

    Long because it is client-go's LeaderElector: acquiring, renewing, releasing and
    observing the Lease share one record of who holds it and since when."""

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
        self._renewed_at = -math.inf  # when the last successful renewal began
        self._renewed_end = -math.inf  # ... and when it was done
        self._round_start = 0.0
        self._round_deadline: float | None = None  # of the renewal round under way
        self._observed: str | None = None  # the last Lease spec we saw, as JSON text
        self._observed_at = 0.0
        self._observed_holder = ""
        self._observed_duration = 0.0
        self._began = clock()  # for unchanged_seconds before the first record seen
        self._problem: str | None = None
        self._errors = 0
        self._foreign = False  # the last record read was not this replica's own
        self._ghost: str | None = None  # the ghost record warned of (holder and duration)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.transitions = 0

    # --- what the rest of the daemon asks ------------------------------------------------
    def is_leader(self) -> bool:
        """Leading, as client-go counts it: until a renewal round fails (its deadline), and
        never beyond ``retry_period + renew_deadline`` after the last renewal ended (the
        latest a round that began on time can end), even if this thread were stuck."""
        with self._lock:
            return self._leading_at(self._clock())

    def _leading_at(self, now: float) -> bool:
        if not self._leading:
            return False
        cfg = self._cfg
        if self._round_deadline is not None and now >= self._round_deadline:
            return False
        return now - self._renewed_end < cfg.retry_period + cfg.renew_deadline

    def write_deadline(self) -> float | None:
        """When a write must be complete to be sent under this leadership: the start of the
        last successful renewal plus ``renew_deadline``; None when not leading."""
        with self._lock:
            if not self._leading_at(self._clock()):
                return None
            return self._renewed_at + self._cfg.renew_deadline

    def last_renewal_age(self) -> float:
        with self._lock:
            return self._clock() - self._renewed_at

    @property
    def holder(self) -> str:
        return self._observed_holder

    @property
    def problem(self) -> str | None:
        """Why the last Lease attempt failed; None when it was answered."""
        return self._problem

    def status(self) -> LeaseStatus:
        with self._lock:
            now = self._clock()
            seen = self._observed_at if self._observed is not None else self._began
            return LeaseStatus(self._problem, max(0.0, now - seen), self._observed_duration,
                               self._cfg.lease_duration, self._errors)

    @property
    def renew_deadline(self) -> float:
        return self._cfg.renew_deadline

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
        """One step of client-go's acquire or renew loop; returns how long to wait before
        the next."""
        cfg = self._cfg
        now = self._clock()
        with self._lock:
            leading = self._leading
            if leading and self._round_deadline is None:  # a renewal round begins
                self._round_start, self._round_deadline = now, now + cfg.renew_deadline
            round_deadline = self._round_deadline
        if leading:
            assert round_deadline is not None
            if now >= round_deadline:
                self._step_down()
                return cfg.retry_period * (1.0 + self._rng.uniform(0.0, 1.2))
            if self.try_acquire_or_renew(deadline=round_deadline, started=now):
                with self._lock:
                    self._round_deadline = None
                return cfg.retry_period  # the next round, as client-go's wait.Until
            after = self._clock()
            if after >= round_deadline or self._foreign:  # too late, or not ours any more
                self._step_down(foreign=after < round_deadline)
                return cfg.retry_period * (1.0 + self._rng.uniform(0.0, 1.2))
            # The next try of this round, on its retry_period tick, or the deadline.
            with self._lock:
                start = self._round_start
            ticks = (after - start) // cfg.retry_period + 1
            return max(0.0, min(start + ticks * cfg.retry_period, round_deadline) - after)
        # Acquiring: client-go's acquire bounds each try by nothing but the client's timeout;
        # we bound it by renew_deadline, which is shorter.
        if self.try_acquire_or_renew(deadline=now + cfg.renew_deadline, started=now):
            with self._lock:
                self._leading, self._round_deadline = True, None
            self._changed(True)
            return 0.0  # the renew loop begins at once, as client-go's
        return cfg.retry_period * (1.0 + self._rng.uniform(0.0, 1.2))  # JitterFactor 1.2

    def _step_down(self, foreign: bool = False) -> None:
        with self._lock:
            was = self._leading
            self._leading, self._round_deadline = False, None
        if was:
            self._changed(False, foreign)

    def _changed(self, leading: bool, foreign: bool = False) -> None:
        if leading:
            self.transitions += 1
            self._log.info("leader.started", lease=f"{self._cfg.namespace}/{self._cfg.name}",
                           identity=self._cfg.identity)
        else:
            self._log.warning("leader.stopped", lease=f"{self._cfg.namespace}/{self._cfg.name}",
                              identity=self._cfg.identity,
                              renewed_seconds_ago=round(self.last_renewal_age(), 1),
                              holder=self._observed_holder if foreign else None,
                              hint=("the Lease names another holder (or none): it is not "
                                    "ours any more" if foreign else
                                    "could not renew the Lease within the renew deadline")
                              + "; not writing until it is acquired again")
        if self.on_change is not None:
            self.on_change(leading)

    # --- client-go's tryAcquireOrRenew ---------------------------------------------------
    def _spec(self, now: datetime, acquire: str | None, transitions: int) -> dict[str, Any]:
        return {"holderIdentity": self._cfg.identity,
                "leaseDurationSeconds": max(1, round(self._cfg.lease_duration)),
                "acquireTime": acquire or _micro_time(now), "renewTime": _micro_time(now),
                "leaseTransitions": transitions}

    def try_acquire_or_renew(self, deadline: float | None = None,
                             started: float | None = None) -> bool:
        """One attempt, its requests complete by ``deadline``; True when we hold the Lease
        afterwards (then it counts as renewed when the attempt ``started``). Never
        raises."""
        started = self._clock() if started is None else started
        self._foreign = False
        try:
            ok = self._try(deadline)
        except Exception as exc:
            problem = lease_problem(exc, self._cfg.namespace, self._cfg.name)
            with self._lock:
                self._problem = problem
                self._errors += 1
            error = str(exc) if isinstance(exc, ApiError) else f"{type(exc).__name__}: {exc}"
            hint = ("the Lease object does not decode: fix it, or delete it (kubectl delete "
                    f"lease -n {self._cfg.namespace} {self._cfg.name}) for a new one"
                    if isinstance(exc, MalformedObject) else
                    f"the Lease needs get, create and update in {self._cfg.namespace} (see "
                    "manifests/examples)")
            self._log.warning("leader.lease_failed", error=error[:300], hint=hint)
            return False
        self._problem = None
        if ok:
            with self._lock:
                self._renewed_at, self._renewed_end = started, self._clock()
        return ok

    def _try(self, deadline: float | None) -> bool:
        now_wall, now = self._wall(), self._clock()
        try:
            lease = self._api.get_json(self._path, deadline=deadline)
        except ApiError as exc:
            if not exc.not_found:
                raise
            if self._held_elsewhere(now):
                return False  # deleted under a leader that may still be writing: wait it out
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": self._cfg.name, "namespace": self._cfg.namespace},
                    "spec": self._spec(now_wall, None, 0)}
            try:
                created = self._api.send_json(
                    "POST", self._path.rsplit("/", 1)[0], body, deadline=deadline)
            except ApiError as create_exc:
                if create_exc.conflict:  # someone else created it first
                    return False
                raise
            self._observe(created.get("spec") or spec_of(body), now)
            self._observed_duration = self._cfg.lease_duration
            return True
        read = decode_lease(lease, f"GET {self._path}")  # by type, as client-go's
        self._observe(lease.get("spec") or {}, now)
        holder = read.holder
        mine = holder == self._cfg.identity
        duration = float(read.duration or self._cfg.lease_duration)
        self._observed_duration = duration
        self._foreign = not mine
        self._check_ghost(holder, duration, mine)
        # client-go takes a record without a holder at once; we do so only for one never
        # held or released (duration 1): a holder emptied by hand is waited out, as the
        # old leader may still be writing (see the module doc).
        free = not holder and (not read.renew_time or duration <= RELEASE_SECONDS)
        if not mine and not free and self._observed_at + duration > now:
            return False  # held (or emptied) by someone else, not expired by our clock
        transitions = read.transitions
        acquire = read.acquire_time if mine and read.acquire_time else None
        lease["spec"] = self._spec(now_wall, acquire, transitions if mine else transitions + 1)
        try:
            updated = self._api.send_json("PUT", self._path, lease, deadline=deadline)
        except ApiError as exc:
            if exc.conflict:  # changed since our GET: look again next time
                return False
            raise
        self._observe(updated.get("spec") or spec_of(lease), now)
        self._foreign = False
        self._observed_duration = max(1, round(self._cfg.lease_duration))
        return True

    def _held_elsewhere(self, now: float) -> bool:
        """The last record seen named another holder and has not expired by our clock: a
        Lease deleted under that leader is waited out as an emptied one is. At most our own
        lease duration: deleting a ghost's Lease (a holder claiming hours) is the way to
        be rid of it."""
        holder = self._observed_holder
        wait = min(self._observed_duration, self._cfg.lease_duration)
        return bool(holder) and holder != self._cfg.identity and self._observed_at + wait > now

    def _check_ghost(self, holder: str, duration: float, mine: bool) -> None:
        """Warn once per ghost record: another holder claiming more than any sane duration."""
        ghost = f"{holder}/{duration:g}" if not mine and duration > SANE_LEASE_SECONDS else None
        if ghost == self._ghost:
            return
        lease = f"{self._cfg.namespace}/{self._cfg.name}"
        if ghost is not None:
            self._log.warning(
                "leader.lease_ghost", lease=lease, holder=holder,
                lease_duration_seconds=duration,
                hint=f"the Lease is claimed for {duration:g}s, longer than any leader "
                     "election uses: no replica of ours will lead until it expires. If that "
                     f"holder is gone, delete the Lease (kubectl delete lease -n "
                     f"{self._cfg.namespace} {self._cfg.name})")
        else:
            self._log.info("leader.lease_ghost_gone", lease=lease, holder=holder)
        self._ghost = ghost

    def _observe(self, spec: dict[str, Any], now: float) -> None:
        text = json.dumps(spec, sort_keys=True)
        if text != self._observed:
            self._observed, self._observed_at = text, now
            self._observed_holder = str(spec.get("holderIdentity") or "")

    def release(self, timeout: float = RELEASE_SECONDS) -> bool:
        """Give the Lease up (if we hold it) so that a follower takes over at once; within
        ``timeout`` (a stopping process does not wait on a hung API server)."""
        with self._lock:
            was = self._leading
            self._leading = False
        if not was:
            return False
        deadline = self._clock() + timeout
        try:
            lease = self._api.get_json(self._path, deadline=deadline)
            read = decode_lease(lease, f"GET {self._path}")
            if read.holder != self._cfg.identity:
                return False
            now = _micro_time(self._wall())
            lease["spec"] = {"leaseDurationSeconds": 1, "acquireTime": now, "renewTime": now,
                             "leaseTransitions": read.transitions}
            self._api.send_json("PUT", self._path, lease, deadline=deadline)
        except Exception as exc:
            self._log.warning("leader.release_failed", error=f"{type(exc).__name__}: {exc}"[:300])
            return False
        self._log.info("leader.released", lease=f"{self._cfg.namespace}/{self._cfg.name}")
        return True


class GuardedApi:
    """The API as the poll, the ConfigMap create and the Events see it under
    ``--leader-elect``: reads pass through; each write is checked just before it is sent
    (:meth:`LeaderElector.write_deadline`) and carries that deadline, so it is complete, or
    abandoned, before the renew deadline of the last renewal. A write refused here fails
    with :class:`ApiError` saying why (the poll reports it)."""

    def __init__(self, api: RawApi, elector: LeaderElector,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._api = api
        self._elector = elector
        self._clock = clock

    def get_json(self, path: str, query: Mapping[str, str] | None = None, *,
                 deadline: float | None = None) -> dict[str, Any]:
        return self._api.get_json(path, query, deadline=deadline)

    def get_decoded(self, path: str, decode: Callable[[dict[str, Any]], T]) -> T:
        """A read the client may answer from its kept value (:func:`get_decoded`)."""
        return get_decoded(self._api, path, decode)

    def _until(self, method: str, path: str, deadline: float | None) -> float:
        """The write's deadline, or ApiError when this replica may have lost the Lease."""
        until = self._elector.write_deadline()
        now = self._clock()
        if until is None or until - now < MIN_WRITE_SECONDS:
            age = self._elector.last_renewal_age()
            ago = f"{age:.1f}s ago" if math.isfinite(age) else "never"
            raise ApiError(0, "NotLeader",
                           f"{method} {path}: not sent: this replica may no longer hold the "
                           f"Lease (last renewed {ago}; writes stop "
                           f"{self._elector.renew_deadline:g}s after a renewal)")
        return until if deadline is None else min(until, deadline)

    def send_json(self, method: str, path: str, body: Any, *,
                  deadline: float | None = None) -> dict[str, Any]:
        return self._api.send_json(method, path, body,
                                   deadline=self._until(method, path, deadline))

    def send_raw(self, method: str, path: str, data: bytes, content_type: str, *,
                 deadline: float | None = None) -> dict[str, Any]:
        return self._api.send_raw(method, path, data, content_type,
                                  deadline=self._until(method, path, deadline))
