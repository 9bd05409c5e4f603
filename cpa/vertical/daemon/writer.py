"""The write CPVA makes: a strategic-merge PATCH of the target's pod template resources.

The body is :func:`cpa.vertical.decide.patch.patch_body`, byte for byte Go's, sent as
``application/strategic-merge-patch+json`` to ``/apis/apps/v1/namespaces/NS/<kind>/NAME``
(apps/v1 is the only group/version of the three kinds since Kubernetes 1.16; CPVA
discovers it, which is also why CPVA exits 1 at start when the API server is down).

Container order: the strategic merge puts the patched containers in the patch's order, so
a patch listing two containers in another order than the template *reorders the
template* (cpva-spec §6). CPVA's order is Go's random map order; ours is the template's,
learnt from each PATCH response (the whole object: CPVA's RBAC grants no ``get``), else
from a GET where RBAC allows one, else the config's document order.

Errors are the poll's (the next poll retries, as CPVA's does), each with what to do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cpa import logs
from cpa.kube.api import ApiError, RawApi
from cpa.kube.objects import MalformedObject, check_workload
from cpa.vertical.decide.formula import Requirements
from cpa.vertical.decide.patch import (
    PLURALS,
    PatchTarget,
    patch_body,
    target_path,
    template_containers,
)
from cpa.vertical.decide.resize import rollout_note

__all__ = ["STRATEGIC_MERGE", "TemplateWriter", "WriteError"]

STRATEGIC_MERGE = "application/strategic-merge-patch+json"


class WriteError(Exception):
    """A PATCH that failed; the message says what is wrong and what to do."""


def _names(containers: Sequence[Mapping[str, Any]]) -> list[str]:
    return [str(c.get("name")) for c in containers]


class TemplateWriter:
    """PATCHes one target's pod template; remembers its container order."""

    def __init__(self, api: RawApi, namespace: str, target: PatchTarget, *,
                 dry_run: bool = False) -> None:
        self._api = api
        self.api = api  # the bounded fallback's evictions go through the same guard
        self.namespace = namespace
        self.target = target
        self.dry_run = dry_run
        self.path = target_path(namespace, target)
        self.order: list[str] | None = None  # the template's containers, when known
        self.rollout: str | None = None  # what the controller does with the last write
        self._looked = False
        self._log = logs.get_logger("writer")

    def learn(self, obj: Mapping[str, Any]) -> None:
        """The target as read elsewhere (in-place mode GETs it every poll)."""
        containers = template_containers(obj)
        if containers:
            self.order = _names(containers)

    def _order(self, computed: Requirements) -> list[str]:
        if self.order is None and not self._looked:
            self._looked = True
            try:
                obj = self._api.get_json(self.path)
                check_workload(obj, self.target.kind, f"GET {self.path}")
                self.learn(obj)
            except ApiError as exc:  # CPVA's RBAC has no get (or malformed): the config's
                if logs.v(2):
                    self._log.info("patch.order_unknown", error=exc.message,
                                   using="the config's order")
        return self.order if self.order is not None else list(computed)

    def body(self, computed: Requirements) -> str:
        return patch_body(self.target, computed, self._order(computed))

    def write(self, computed: Requirements) -> str:
        """PATCH (or, with ``--dry-run``, only log) the template; return the body sent.
        Raises :class:`WriteError`."""
        body = self.body(computed)
        if self.dry_run:
            self._log.info("dry_run", target=f"{self.target.kind}/{self.target.name}",
                           body=body, note="no update is applied (--dry-run)")
            return body
        try:
            answer = self._api.send_raw("PATCH", self.path, body.encode(), STRATEGIC_MERGE)
        except ApiError as exc:
            raise WriteError(self._explain(exc, computed)) from exc
        try:
            check_workload(answer, self.target.kind, f"PATCH {self.path}")
        except MalformedObject as exc:  # written; only its container order is unknown
            self._log.warning("patch.answer_malformed", error=exc.message)
            return body
        self.rollout = rollout_note(answer, self.target.kind) if answer else None
        containers = template_containers(answer)
        if containers:
            names = _names(containers)
            if self.order is not None and names != self.order:
                self._log.warning("patch.reordered", before=self.order, after=names,
                                  hint="the template's containers were in another order "
                                       "than the patch listed them")
            self.order = names
        return body

    def _explain(self, exc: ApiError, computed: Requirements) -> str:
        what = f"patch failed: {exc}"
        kind = PLURALS[self.target.kind]
        if exc.status == 403:
            return (f"{what}; grant patch on {kind} in group apps (namespace "
                    f"{self.namespace}) to this ServiceAccount")
        if exc.status == 404:
            return (f"{what}; the target {self.target.kind}/{self.target.name} does not "
                    f"exist in namespace {self.namespace}: check --target and --namespace")
        if exc.status == 422:
            missing = sorted(set(computed) - set(self.order or ())) if self.order else []
            hint = (f"the target has no container {', '.join(map(repr, missing))}; the "
                    "merge adds one without an image, which the API server refuses: fix "
                    "the container names in the config" if missing else
                    "check the computed values (a negative or zero value, a request above "
                    "its limit) and the container names in the config")
            return f"{what}; {hint}"
        return what
