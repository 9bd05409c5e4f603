"""``/cpvpa``'s poll: counts -> config file -> computation -> template PATCH (and resizes).

CPVA's ``pollAPIServer`` (autoscaler_server.go:95-156) in CPVA's order: the cluster size
first (a failure ends the poll before the config file is looked at), then the config file,
then :meth:`cpa.vertical.state.VerticalState.plan`, then the write when the computed
requirements differ from the last ones written (or it was never written since the start).
A failed write is retried by the next poll; a dry run counts as written, as in CPVA.

Log events mirror CPVA's lines one to one, structured: ``config.set`` (CPVA's "setting
config"), ``update`` ("Updating resource for nodes: %d, cores: %d"), ``setting`` (one per
value), ``update.failed`` and ``dry_run``; ``poll.counts`` and ``poll.computed`` at ``--v=4``.

With ``--resize-mode=in-place`` each poll also runs :class:`InPlaceResizer`, before the
template, which is then patched only where that restarts no Pod, or as the fallback.
The whole outcome (:class:`VerticalPollResult`) goes to observers: health, metrics.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from cpa import logs
from cpa.kube.api import ApiError
from cpa.runtime.polls import PollRecord, report
from cpa.runtime.ticker import Ticker
from cpa.vertical.config import config_string
from cpa.vertical.daemon.configfile import ConfigFile
from cpa.vertical.daemon.inplace import InPlaceOutcome, InPlaceResizer
from cpa.vertical.daemon.writer import TemplateWriter, WriteError
from cpa.vertical.formula import CoresError, Requirements
from cpa.vertical.patch import Difference, differences, template_containers
from cpa.vertical.state import Plan, VerticalState

__all__ = ["VerticalAutoscaler", "VerticalLoopConfig", "VerticalPollResult"]


class VerticalLoopConfig(NamedTuple):
    poll_period_seconds: float = 10.0
    in_place: bool = False


@dataclass(slots=True)
class VerticalPollResult(PollRecord):
    """Everything one poll saw and did."""

    nodes: int | None = None
    cores: int | None = None
    plan: Plan | None = None
    written: Requirements | None = None  # what this poll wrote (or logged, in a dry run)
    dry_run: bool = False
    write_failed: bool = False
    inplace: InPlaceOutcome | None = None
    template_skipped: str | None = None  # in-place: why the template was left alone
    drift: list[Difference] = field(default_factory=list)  # template vs computed, in-place
    fallbacks: list[str] = field(default_factory=list)  # reasons newly falling back


Observer = Callable[[VerticalPollResult], None]


class VerticalAutoscaler:
    """The poll loop of ``/cpvpa``."""

    def __init__(self, config: VerticalLoopConfig, counts: Callable[[], tuple[int, int]],
                 config_file: ConfigFile, state: VerticalState, writer: TemplateWriter, *,
                 resizer: InPlaceResizer | None = None, observers: Sequence[Observer] = (),
                 stale: Callable[[], str | None] | None = None,
                 may_write: Callable[[], bool] | None = None,
                 warm: Callable[[], None] | None = None,
                 on_follower: Callable[[], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """``may_write`` (leader election) is asked before every poll: a follower does not
        poll, it calls ``warm`` instead (the Node counts get ready for a takeover) and
        ``on_follower`` (to report a Lease it cannot read)."""
        self._config = config
        self._warm = warm
        self._on_follower = on_follower
        self._counts = counts
        self._file = config_file
        self.state = state
        self._writer = writer
        self._resizer = resizer
        self._observers = list(observers)
        self._stale = stale
        self._may_write = may_write
        self._clock = clock
        self._ticker = Ticker(float(config.poll_period_seconds), clock)
        self._log = logs.get_logger("cpvpa")
        self._skipped_for: Requirements | None = None  # template skip logged for these
        self._fallen_back: dict[str, Requirements] = {}  # reason -> logged for these
        self.polls = 0

    def add_observer(self, observer: Observer) -> None:
        self._observers.append(observer)

    def wake(self) -> None:
        self._ticker.wake()

    def forget_written(self) -> None:
        """Leadership lost: the next leadership writes at once, as CPVA after a restart."""
        self.state.last_written = None

    # --- one poll ---------------------------------------------------------------------
    def poll_once(self) -> VerticalPollResult:
        """One poll; never raises: the result carries the error."""
        self.polls += 1
        result = VerticalPollResult(started=self._clock(), dry_run=self._writer.dry_run)
        try:
            self._poll(result)
        except Exception as exc:  # an unexpected error must not end the loop
            result.error = f"unexpected {type(exc).__name__}: {exc}"
        if result.error is not None:
            self._log.error("poll.failed", error=result.error)
        result.duration = self._clock() - result.started
        report(self._observers, result, self._log)
        return result

    def _poll(self, result: VerticalPollResult) -> None:
        result.stale = self._stale() if self._stale is not None else None
        try:
            nodes, cores = self._counts()
        except (ApiError, CoresError) as exc:
            result.error = f"Error getting cluster size: {exc}"
            return
        result.nodes, result.cores = nodes, cores
        if logs.v(4):
            self._log.info("poll.counts", nodes=nodes, cores=cores)
        plan = result.plan = self.state.plan(nodes, cores, self._file.poll())
        if plan.config_set:
            self._log.info("config.set", config=config_string(plan.config))
        if plan.error is not None or plan.computed is None:
            result.error = plan.error or "nothing computed"
            return
        computed = plan.computed
        if logs.v(4):
            self._log.info("poll.computed", values=_values(computed))
        write = plan.write
        if self._resizer is not None and not self._writer.dry_run:
            write = self._in_place(result, computed, write)
        if write:
            self._write(result, computed)

    def _in_place(self, result: VerticalPollResult, computed: Requirements,
                  write: bool) -> bool:
        """Resize the Pods; whether the template is to be written this poll."""
        assert self._resizer is not None
        outcome = result.inplace = self._resizer.poll(computed)
        if outcome.target is not None:
            self._writer.learn(outcome.target)
            result.drift = differences(template_containers(outcome.target), computed)
        if outcome.error is not None:
            result.error = outcome.error
            return False
        if outcome.retries:  # transient: the Pods are tried again later, nothing falls back
            result.error = ("in-place resize failed transiently, retried at a later poll "
                            "(no fallback): " + "; ".join(str(r) for r in outcome.retries[:3]))
        if outcome.refusals:
            fresh = sorted({r.reason for r in outcome.refusals
                            if self._fallen_back.get(r.reason) != computed})
            for reason in fresh:
                self._fallen_back[reason] = computed
            result.fallbacks = fresh
            if fresh:
                self._log.warning(
                    "resize.fallback", reasons=fresh,
                    refusals=[str(r) for r in outcome.refusals][:10],
                    action="patching the pod template instead (its controller may replace "
                           "the Pods)")
            refused = ("in-place resize refused, the template is patched instead: "
                       + "; ".join(str(r) for r in outcome.refusals[:3]))
            result.error = refused if result.error is None else f"{refused}; {result.error}"
            return write or bool(result.drift)
        if outcome.patch_template:
            return write
        if write or result.drift:
            result.template_skipped = outcome.template_reason
            if self._skipped_for != computed:
                self._skipped_for = computed
                self._log.info(
                    "resize.template_skipped", reason=outcome.template_reason,
                    pods_resized=outcome.resized,
                    hint="Pods created later start with the template's old values and are "
                         "resized at the next poll; set updateStrategy OnDelete, or "
                         "--in-place-template=always to accept a rollout")
        return False

    def _write(self, result: VerticalPollResult, computed: Requirements) -> None:
        plan = result.plan
        assert plan is not None
        self._log.info("update", nodes=result.nodes, cores=result.cores)
        for name, requirements in computed.items():
            for kind, values in (("requests", requirements.requests),
                                 ("limits", requirements.limits)):
                for resource, quantity in values.items():
                    self._log.info("setting", container=name, kind=kind, resource=resource,
                                   value=str(quantity))
        try:
            self._writer.write(computed)
        except WriteError as exc:
            result.write_failed = True
            self._log.error("update.failed", error=str(exc))
            result.error = f"Update failure: {exc}" if result.error is None else (
                f"{result.error}; Update failure: {exc}")
            return
        self.state.written(computed)
        result.written = computed

    # --- the loop -----------------------------------------------------------------------
    def run(self, stop: threading.Event) -> int:
        """Poll now, then once per period (a ticker: an overrun skips the ticks it missed,
        as Go's ``time.Ticker`` drops them), until ``stop``."""
        return self._ticker.run(stop, self._tick)

    def _tick(self) -> None:
        """The leader polls; a follower keeps its Node counts ready for a takeover."""
        if self._may_write is None or self._may_write():
            self.poll_once()
            return
        if self._on_follower is not None:
            self._on_follower()
        if self._warm is not None:
            try:
                self._warm()
            except Exception as exc:  # the leader's polls report such errors
                if logs.v(4):
                    self._log.info("follower.warm_failed", error=str(exc))


def _values(computed: Requirements) -> dict[str, str]:
    return {f"{name} {kind}[{res}]": str(q)
            for name, req in computed.items()
            for kind, values in (("requests", req.requests), ("limits", req.limits))
            for res, q in values.items()}
