"""One target's share of a ``/cpvpa`` poll: plan, in-place resize, fallback, write.

Why a room of its own: an instance sizes one target (CPVA) or several (``--target`` a comma
list, ours). The Node count and the config file's stat are the instance's, once per poll
(:mod:`cpa.vertical.daemon.cpvpa_loop`); everything else is per target and kept here across
polls -- the config in force and the last write (:class:`~cpa.vertical.decide.state.VerticalState`),
the template writer, the resizer, what was logged once per change, and the fallback's
budget. One target's failure is its own result: the loop goes on to the next target.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from cpa import logs
from cpa.vertical.daemon.fallback import Evictions, evict
from cpa.vertical.daemon.inplace import InPlaceOutcome, InPlaceResizer
from cpa.vertical.daemon.writer import TemplateWriter, WriteError
from cpa.vertical.decide.budget import FallbackBudget, FallbackPlan
from cpa.vertical.decide.cpva_config import config_string
from cpa.vertical.decide.formula import Requirements
from cpa.vertical.decide.patch import Difference, differences, target_key, template_containers
from cpa.vertical.decide.resize import template_is_safe
from cpa.vertical.decide.state import FileRead, Plan, VerticalState

__all__ = ["TargetLoop", "TargetPollResult"]


@dataclass(slots=True)
class TargetPollResult:
    """What one poll saw and did for one target."""

    target: str  # kind/name
    kind: str = ""
    name: str = ""
    plan: Plan | None = None
    written: Requirements | None = None  # what this poll wrote (or logged, in a dry run)
    write_failed: bool = False
    rollout: str | None = None  # what the controller does with this write (StatefulSet...)
    inplace: InPlaceOutcome | None = None
    template_skipped: str | None = None  # in-place: why the template was left alone
    drift: list[Difference] = field(default_factory=list)  # template vs computed, in-place
    fallbacks: list[str] = field(default_factory=list)  # reasons newly falling back
    fallback: FallbackPlan | None = None  # the budget's plan (with a budget only)
    evictions: Evictions | None = None  # the bounded fallback's restarts
    error: str | None = None


@dataclass(eq=False, repr=False, slots=True)
class TargetLoop:
    """One target across polls: its state, writer, resizer and fallback budget, and what
    was logged once per change."""

    state: VerticalState
    writer: TemplateWriter
    _: KW_ONLY
    resizer: InPlaceResizer | None = None
    budget: FallbackBudget | None = None
    clock: Callable[[], float] = time.monotonic
    key: str = field(init=False)
    _log: Any = field(init=False)
    _skipped_for: Requirements | None = field(init=False, default=None)
    """The computed values the template skip was last logged for."""
    _fallen_back: dict[str, Requirements] = field(init=False, default_factory=dict)
    """Reason -> the computed values that fallback was last logged for."""

    def __post_init__(self) -> None:
        self.key = target_key(self.writer.target)
        self._log = logs.get_logger("cpvpa")

    def poll(self, nodes: int, cores: int, file: FileRead,
             result: TargetPollResult | None = None,
             objects: Callable[[frozenset[str]], Mapping[str, int]] | None = None
             ) -> TargetPollResult:
        """Plan, resize, write; the outcome carries any error (it raises only on a bug).
        ``objects`` (ours): the Pods and Services counts, for a config that names them."""
        result = result or TargetPollResult(self.key)
        result.kind, result.name = self.writer.target.kind, self.writer.target.name
        plan = result.plan = self.state.plan(nodes, cores, file, objects)
        if plan.config_set:
            self._log.info("config.set", config=config_string(plan.config),
                           **self._labels())
        if plan.error is not None or plan.computed is None:
            result.error = plan.error or "nothing computed"
            return result
        computed = plan.computed
        if logs.v(4):
            self._log.info("poll.computed", values=_values(computed), **self._labels())
        write = plan.write
        if self.resizer is not None and not self.writer.dry_run:
            write = self._in_place(result, computed, write)
        if write:
            self._write(result, nodes, cores, computed)
            if result.fallback is not None and not result.write_failed:
                self._restart(result)
        return result

    def _labels(self) -> dict[str, str]:
        """Log fields naming the target, with several targets only (CPVA's lines stay)."""
        return {"target": self.key} if len(self.state.targets) > 1 else {}

    # --- in place -----------------------------------------------------------------------
    def _in_place(self, result: TargetPollResult, computed: Requirements,
                  write: bool) -> bool:
        """Resize the Pods; whether the template is to be written this poll."""
        assert self.resizer is not None
        outcome = result.inplace = self.resizer.poll(computed)
        if outcome.target is not None:
            self.writer.learn(outcome.target)
            result.drift = differences(template_containers(outcome.target), computed)
        if outcome.error is not None:
            result.error = outcome.error
            return False
        if outcome.retries:  # transient: the Pods are tried again later, nothing falls back
            result.error = ("in-place resize failed transiently, retried at a later poll "
                            "(no fallback): " + "; ".join(str(r) for r in outcome.retries[:3]))
        if outcome.refusals:
            return self._fallback(result, outcome, computed, write)
        if self.budget is not None:
            self.budget.plan((), self.clock())  # nothing refused: forget the waits
        if outcome.patch_template:
            return write
        if write or result.drift:
            result.template_skipped = outcome.template_reason
            if self._skipped_for != computed:
                self._skipped_for = computed
                self._log.info(
                    "resize.template_skipped", reason=outcome.template_reason,
                    pods_resized=outcome.resized, **self._labels(),
                    hint="Pods created later start with the template's old values and are "
                         "resized at the next poll; set updateStrategy OnDelete, or "
                         "--in-place-template=always to accept a rollout")
        return False

    def _fallback(self, result: TargetPollResult, outcome: InPlaceOutcome,
                  computed: Requirements, write: bool) -> bool:
        """Refusals: patch the template instead (CPVA's write) -- at once, or, with a
        budget, once the grace period is over and only where the template rolls nothing."""
        reasons = "; ".join(str(r) for r in outcome.refusals[:3])
        refused = f"in-place resize refused: {reasons}"
        if self.budget is not None:
            plan = result.fallback = self.budget.plan(
                sorted({r.pod for r in outcome.refusals}), self.clock())
            if not plan.due:
                left = max(seconds for _, seconds in plan.waiting)
                self._add_error(result, f"{refused}; the fallback waits "
                                f"(--resize-fallback-grace-period): {len(plan.waiting)} "
                                f"Pod(s), at most {left:.0f}s left")
                return False
            if self.budget.bounded:
                safe, why = (template_is_safe(outcome.target, self.writer.target.kind)
                             if outcome.target is not None else
                             (False, "the target could not be read"))
                if not safe:
                    result.fallback = FallbackPlan(  # every due Pod waits: none restarted
                        over_budget=plan.restart + plan.over_budget, waiting=plan.waiting)
                    self._add_error(
                        result,
                        f"{refused}; the fallback is held: patching the template would "
                        f"restart Pods at the controller's pace ({why}), not at most "
                        f"{self.budget.max_pods} per poll "
                        "(--resize-fallback-max-pods-per-cycle): set updateStrategy "
                        "OnDelete (a StatefulSet: or a partition), or drop the flag")
                    return False
        fresh = sorted({r.reason for r in outcome.refusals
                        if self._fallen_back.get(r.reason) != computed})
        for reason in fresh:
            self._fallen_back[reason] = computed
        result.fallbacks = fresh
        if fresh:
            budget = self.budget.max_pods if self.budget is not None else 0
            self._log.warning(
                "resize.fallback", reasons=fresh, **self._labels(),
                refusals=[str(r) for r in outcome.refusals][:10],
                action=(f"patching the pod template and restarting at most {budget} refused "
                        "Pods per poll" if budget else
                        "patching the pod template instead (its controller may replace "
                        "the Pods)"))
        self._add_error(result, "in-place resize refused, the template is patched instead: "
                        f"{reasons}")
        if result.fallback is not None and not (write or result.drift):
            self._restart(result)  # the template has the values: restart the next Pods
        return write or bool(result.drift)

    @staticmethod
    def _add_error(result: TargetPollResult, refused: str) -> None:
        """The refusal first, then what was already said (transient retries)."""
        result.error = refused if result.error is None else f"{refused}; {result.error}"

    def _restart(self, result: TargetPollResult) -> None:
        """The bounded fallback's restarts, after the template has the values."""
        plan = result.fallback
        if plan is None or self.budget is None or not self.budget.bounded:
            return
        pods = [pod for pod in plan.restart if pod]  # "": the target itself, no Pod
        if not pods:
            return
        assert self.resizer is not None
        done = result.evictions = evict(self.writer.api, self.resizer.namespace, pods)
        self._log.info("resize.fallback_restart", pods=done.evicted, blocked=done.blocked,
                       left=len(plan.over_budget), budget=self.budget.max_pods,
                       **self._labels())
        if done.errors:
            result.error = f"{result.error}; " + "; ".join(done.errors[:3])

    # --- the write ----------------------------------------------------------------------
    def _write(self, result: TargetPollResult, nodes: int, cores: int,
               computed: Requirements) -> None:
        labels = self._labels()
        self._log.info("update", nodes=nodes, cores=cores, **labels)
        for name, requirements in computed.items():
            for kind, values in (("requests", requirements.requests),
                                 ("limits", requirements.limits)):
                for resource, quantity in values.items():
                    self._log.info("setting", container=name, kind=kind, resource=resource,
                                   value=str(quantity), **labels)
        try:
            self.writer.write(computed)
        except WriteError as exc:
            result.write_failed = True
            self._log.error("update.failed", error=str(exc), **labels)
            result.error = f"Update failure: {exc}" if result.error is None else (
                f"{result.error}; Update failure: {exc}")
            return
        self.state.written(computed)
        result.written = computed
        result.rollout = None if self.writer.dry_run else self.writer.rollout
        if result.rollout is not None:
            self._log.info("update.rollout", rollout=result.rollout, **labels)


def _values(computed: Requirements) -> dict[str, str]:
    return {f"{name} {kind}[{res}]": str(q)
            for name, req in computed.items()
            for kind, values in (("requests", req.requests), ("limits", req.limits))
            for res, q in values.items()}
