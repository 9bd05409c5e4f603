"""``--resize-mode=in-place``: resize the target's running Pods through ``pods/resize``.

Each poll (not only when the computed values change: a Pod created from an old template,
or rescheduled, must be found too): GET the target (its selector, its update strategy and
its template), list its Pods (by the selector, then by owner: a DaemonSet or ReplicaSet
owns its Pods, a Deployment through its ReplicaSets), and for every running Pod whose
resources differ send the resize that :func:`cpa.vertical.decide.resize.plan_pod` plans.

The template. Patching the template of a RollingUpdate DaemonSet or of a Deployment makes
its controller replace every Pod -- the restart in-place resize is there to avoid. So with
``--in-place-template=when-safe`` (the default) the template is patched only where that
restarts nothing (a DaemonSet with ``updateStrategy: OnDelete``, a bare ReplicaSet);
elsewhere it keeps its old values, Pods created later start with them and are resized at
the next poll. ``always`` accepts the rollout, ``never`` leaves every template alone.

Refusals (see :mod:`cpa.vertical.decide.resize`, plus the API's answers that will be the same
next time: 404 no ``resize`` subresource, 403 RBAC, 422 validation, and a resize deferred
for longer than ``--resize-deferred-timeout``) make the poll fall back to CPVA's write: the
template is patched even where that rolls the Pods, so the values do get applied. The loop
logs each fallback once per change of the computed values and counts it by reason.

Any other failed resize (5xx, 409, 429, no answer: :mod:`cpa.vertical.decide.resize_errors`) is
no refusal: the Pod is tried again at a later poll, after a per-Pod backoff
(:mod:`cpa.vertical.decide.backoff`), logged as ``resize.retry``; the template is left as the
policy says, as if the Pod had been resized. A transient error on reading the target or
listing its Pods is the poll's error (nothing is patched that poll), never a fallback.

RBAC beyond CPVA's: ``get`` on the target's kind, ``list`` on pods, ``patch`` on
``pods/resize``, and for a Deployment ``list`` on replicasets.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from cpa import logs
from cpa.kube.api import ApiError, RawApi
from cpa.kube.objects import MalformedObject, check_pod, check_workload, list_items
from cpa.vertical.daemon.writer import STRATEGIC_MERGE
from cpa.vertical.decide.backoff import DEFAULT_POLICY, Backoff, BackoffPolicy
from cpa.vertical.decide.formula import Requirements
from cpa.vertical.decide.patch import PatchTarget, target_path
from cpa.vertical.decide.resize import (
    PodPlan,
    controller_uid,
    label_selector,
    plan_pod,
    resize_status,
    template_is_safe,
)
from cpa.vertical.decide.resize_errors import classify

__all__ = ["InPlaceOutcome", "InPlaceResizer", "Refusal", "Retry"]


@dataclass(frozen=True, slots=True)
class Refusal:
    """A Pod (or the whole target: ``pod`` empty) that cannot be resized in place."""

    pod: str
    reason: str  # resource, container, qos, infeasible, error, deferred, unsupported,
    #              forbidden, invalid, target
    message: str

    def __str__(self) -> str:
        where = f"Pod {self.pod}" if self.pod else "the target"
        return f"{where}: {self.reason}: {self.message}"


@dataclass(frozen=True, slots=True)
class Retry:
    """A Pod whose resize failed transiently (this poll, or earlier and not due yet): it is
    tried again at a later poll, and nothing falls back for it."""

    pod: str
    reason: str  # one of cpa.vertical.decide.resize_errors.RETRY_REASONS
    message: str
    failures: int  # in a row
    retry_in: float  # seconds from this poll
    failed_now: bool  # False: not tried this poll, its backoff is still running

    def __str__(self) -> str:
        when = "failed" if self.failed_now else "waits after failing"
        return (f"Pod {self.pod}: resize {when} ({self.reason}, {self.failures} in a row: "
                f"{self.message}); retried in {self.retry_in:.0f}s")


@dataclass(slots=True)
class InPlaceOutcome:
    """What one poll's in-place step saw and did."""

    patch_template: bool = False  # the template may be patched this poll (without rolling)
    template_reason: str = ""
    target: Mapping[str, Any] | None = None  # the target as read this poll
    pods: int = 0  # running Pods of the target looked at
    resized: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)  # deferred or in progress, in time
    refusals: list[Refusal] = field(default_factory=list)
    retries: list[Retry] = field(default_factory=list)  # transient failures, retried later
    error: str | None = None  # a failure that is no refusal (the API is unreachable)


class _ListError(Exception):
    def __init__(self, resource: str, error: ApiError) -> None:
        super().__init__(str(error))
        self.resource = resource
        self.error = error


@dataclass(eq=False, repr=False, slots=True)
class InPlaceResizer:
    """Resizes one target's Pods; remembers deferred resizes to time them out."""

    api: RawApi
    namespace: str
    target: PatchTarget
    _: KW_ONLY
    template: str = "when-safe"
    deferred_timeout: float = 300.0
    backoff: BackoffPolicy = DEFAULT_POLICY
    clock: Callable[[], float] = time.monotonic
    _deferred: dict[str, float] = field(init=False, default_factory=dict)
    """Pod uid -> when it was first seen deferred."""
    _retries: Backoff[str] = field(init=False)
    """Pod uid -> its retry schedule."""
    _last_error: dict[str, tuple[str, str]] = field(init=False, default_factory=dict)
    """Pod uid -> the reason and message last logged for it."""
    _log: Any = field(init=False)

    def __post_init__(self) -> None:
        self._retries = Backoff(self.backoff)
        self._log = logs.get_logger("resize")

    def poll(self, computed: Requirements) -> InPlaceOutcome:
        out = InPlaceOutcome()
        try:
            path = target_path(self.namespace, self.target)
            obj = self.api.get_json(path)
            check_workload(obj, self.target.kind, f"GET {path}")  # malformed: status 0
        except ApiError as exc:
            if not classify(exc.status).fallback:
                out.error = f"cannot read the target: {exc}"
                return out
            hint = (f"; grant get on {self.target.kind.lower()}s in group apps"
                    if exc.forbidden else "")
            out.refusals.append(Refusal("", "forbidden" if exc.forbidden else "target",
                                        f"cannot read the target: {exc.message}{hint}"))
            return out
        out.target = obj
        safe, why = template_is_safe(obj, self.target.kind)
        out.patch_template = self.template == "always" or (self.template == "when-safe"
                                                           and safe)
        out.template_reason = why if self.template == "when-safe" else (
            f"--in-place-template={self.template}")
        try:
            pods, malformed = self._pods(obj)
        except _ListError as failed:
            err = failed.error
            if not classify(err.status).fallback:
                out.error = f"cannot list the target's {failed.resource}: {err}"
                return out
            grant = f"; grant list on {failed.resource}" if err.forbidden else ""
            out.refusals.append(Refusal("", "forbidden" if err.forbidden else "target",
                                        f"cannot list the target's {failed.resource}: "
                                        f"{err.message}{grant}"))
            return out
        seen: set[str] = set()
        present: set[str] = set()
        for pod in pods:
            present.add(str((pod.get("metadata") or {}).get("uid")))
            self._one(pod, computed, out, seen)
        for uid in [u for u in self._deferred if u not in seen]:
            del self._deferred[uid]
        self._retries.keep_only(present)
        for uid in [u for u in self._last_error if u not in present]:
            del self._last_error[uid]
        if malformed:  # the poll's error, never a refusal: nothing falls back for it
            out.error = "; ".join([*malformed, *([out.error] if out.error else [])])
        return out

    # --- finding the Pods ---------------------------------------------------------------
    def _pods(self, obj: Mapping[str, Any]) -> tuple[list[Mapping[str, Any]], list[str]]:
        """The target's Pods, each checked by type, and what is wrong with those that are
        malformed (left out: the others are still resized)."""
        spec = obj.get("spec") or {}
        selector = label_selector(spec.get("selector") or {})
        owners = {str((obj.get("metadata") or {}).get("uid"))}
        if self.target.kind == "Deployment":
            try:
                sets = self.api.get_json(
                    f"/apis/apps/v1/namespaces/{self.namespace}/replicasets",
                    {"labelSelector": selector})
                owners = {str((rs.get("metadata") or {}).get("uid"))
                          for rs in self._items(sets, "ReplicaSet", "replicasets")
                          if controller_uid(rs) in owners}
            except ApiError as exc:
                raise _ListError("replicasets", exc) from exc
        path = f"/api/v1/namespaces/{self.namespace}/pods"
        try:
            listed = self.api.get_json(path, {"labelSelector": selector})
            items = list_items(listed, "Pod", f"GET {path}")
        except ApiError as exc:
            raise _ListError("pods", exc) from exc
        pods: list[Mapping[str, Any]] = []
        malformed: list[str] = []
        for i, pod in enumerate(items):
            meta = pod.get("metadata")
            name = meta.get("name") if isinstance(meta, dict) else None
            try:
                check_pod(pod, f"Pod {name}" if isinstance(name, str) else f"Pod items[{i}]")
            except MalformedObject as exc:
                malformed.append(exc.message)
                continue
            if controller_uid(pod) in owners:
                pods.append(pod)
        return pods, malformed

    @staticmethod
    def _items(listed: Mapping[str, Any], kind: str, resource: str) -> list[dict[str, Any]]:
        """A list's items, each checked as a workload (a malformed one fails the list)."""
        where = f"the {resource} list"
        items = list_items(listed, kind, where)
        for item in items:
            check_workload(item, kind, where)
        return items

    # --- one Pod ------------------------------------------------------------------------
    def _one(self, pod: Mapping[str, Any], computed: Requirements, out: InPlaceOutcome,
             seen: set[str]) -> None:
        meta = pod.get("metadata") or {}
        name, uid = str(meta.get("name")), str(meta.get("uid"))
        if meta.get("deletionTimestamp") or (pod.get("status") or {}).get("phase") != "Running":
            return
        out.pods += 1
        status = resize_status(pod)
        if status.state in ("infeasible", "error"):
            out.refusals.append(Refusal(name, status.state, status.message or
                                        "reported by the kubelet"))
            return
        if status.state == "deferred":
            seen.add(uid)
            since = self._deferred.setdefault(uid, self.clock())
            waited = self.clock() - since
            if waited > self.deferred_timeout:
                out.refusals.append(Refusal(
                    name, "deferred", f"deferred by the kubelet for {waited:.0f}s "
                    f"(--resize-deferred-timeout): {status.message}"))
            else:
                out.pending.append(name)
            return
        if status.state == "in-progress":
            out.pending.append(name)
        plan = plan_pod(pod, computed)
        if plan.refusal is not None:
            out.refusals.append(Refusal(name, plan.refusal, plan.message))
            return
        if plan.body is None:
            self._retries.succeeded(uid)  # resized since (by someone): nothing to retry
            self._last_error.pop(uid, None)
            return
        now = self.clock()
        if not self._retries.due(uid, now):
            waiting = self._retries.get(uid)
            assert waiting is not None
            reason, message = self._last_error.get(uid, ("other", ""))
            out.retries.append(Retry(name, reason, message, waiting.failures,
                                     max(0.0, waiting.next_at - now), failed_now=False))
            return
        self._resize(name, uid, plan, out)

    def _resize(self, name: str, uid: str, plan: PodPlan, out: InPlaceOutcome) -> None:
        """The Pod's pods/resize PATCH: resized; a refusal that falls back; or a transient
        failure, tried again after a backoff."""
        path = f"/api/v1/namespaces/{self.namespace}/pods/{name}/resize"
        assert plan.body is not None
        try:
            self.api.send_raw("PATCH", path, plan.body.encode(), STRATEGIC_MERGE)
        except ApiError as exc:
            verdict = classify(exc.status)
            if not verdict.fallback:
                # From when it failed: a request that timed out took its whole deadline.
                self._retry_later(name, uid, verdict.reason, exc, self.clock(), out)
                return
            hint = {"unsupported": "; the API server has no pods/resize (Kubernetes 1.33+ "
                                   "has it on by default)",
                    "forbidden": "; grant patch on pods/resize"}.get(verdict.reason, "")
            out.refusals.append(Refusal(name, verdict.reason, f"{exc.message}{hint}"))
            return
        self._retries.succeeded(uid)
        self._last_error.pop(uid, None)
        out.resized.append(name)
        self._log.info("resize.pod", pod=name, body=plan.body,
                       changes=[f"{d.container} {d.kind}[{d.resource}]: {d.current} -> "
                                f"{d.wanted}" for d in plan.differences])

    def _retry_later(self, name: str, uid: str, reason: str, exc: ApiError, now: float,
                     out: InPlaceOutcome) -> None:
        """A transient failure: back the Pod off, say when it is tried again."""
        attempt = self._retries.failed(uid, now)
        message = str(exc)
        self._last_error[uid] = (reason, message)
        out.retries.append(Retry(name, reason, message, attempt.failures, attempt.delay,
                                 failed_now=True))
        self._log.warning("resize.retry", pod=name, reason=reason, status=exc.status,
                          error=message, failures=attempt.failures,
                          retry_in=round(attempt.delay, 3),
                          action="retried at a later poll; the template is not patched "
                                 "for it")
