"""What happens every poll period: counts -> parameters -> replicas -> scale writes.

The order is upstream's: cluster status from the node cache (no API call), GET (or lazily
create) the ConfigMap, re-parse it only when its resourceVersion changed, compute, then
GET/PUT each target's scale. Time and the API are injected so the loop can be tested.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from cpa import configmap, logs
from cpa.flags import Options
from cpa.formulas import ClusterCounts, Decision, decide
from cpa.health import HealthState
from cpa.kubeapi import ApiError, KubeApi
from cpa.params import LadderParams, LinearParams, Params, ParamsError, parse_configmap_data
from cpa.scale import ScaleResult, ensure_replicas


class PollError(Exception):
    """A poll that could not do its job; the message is what /last-poll reports."""


@dataclass(slots=True)
class PollResult:
    error: str | None
    decision: Decision | None = None
    scales: list[ScaleResult] = field(default_factory=list)


def _mode(params: Params) -> str:
    return "linear" if isinstance(params, LinearParams) else "ladder"


def params_fields(params: Params) -> dict[str, object]:
    """The parameters as the ConfigMap spells them, for logs and ``explain``."""
    if isinstance(params, LadderParams):
        return {"coresToReplicas": [list(p) for p in params.cores_to_replicas],
                "nodesToReplicas": [list(p) for p in params.nodes_to_replicas],
                "includeUnschedulableNodes": params.include_unschedulable_nodes}
    return {"coresPerReplica": params.cores_per_replica,
            "nodesPerReplica": params.nodes_per_replica, "min": params.min, "max": params.max,
            "preventSinglePointFailure": params.prevent_single_point_failure,
            "includeUnschedulableNodes": params.include_unschedulable_nodes}


class Autoscaler:
    """Joins the node cache, the ConfigMap and the targets, once per poll."""

    def __init__(self, opts: Options, api: KubeApi, counts: Callable[[], ClusterCounts],
                 health: HealthState | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._opts = opts
        self._api = api
        self._counts = counts
        self._health = health or HealthState()
        self._clock = clock
        self._log = logs.get_logger("autoscaler")
        self._params_rv: str | None = None
        self._params: Params | None = None
        self._params_error: str | None = None
        self.consecutive_failures = 0
        self.polls = 0

    # --- one poll ------------------------------------------------------------------
    def _load_params(self) -> Params:
        cm = configmap.get_or_create(self._api, self._opts.namespace, self._opts.configmap,
                                     self._opts.default_params)
        if cm.resource_version == self._params_rv:
            if self._params_error is not None:
                raise PollError(self._params_error)
            assert self._params is not None
            return self._params
        old = self._params
        self._params_rv = cm.resource_version
        try:
            params = parse_configmap_data(cm.data)
        except Exception as exc:
            # Fail closed on ANY error, unexpected ones included: this version is invalid
            # on every poll until it changes, and older parameters never stay in force.
            reason = str(exc) if isinstance(exc, ParamsError) else (
                f"unexpected {type(exc).__name__} while parsing it: {exc}")
            self._params, self._params_error = None, (
                f"invalid ConfigMap {self._opts.namespace}/{self._opts.configmap} "
                f"(resourceVersion {cm.resource_version}): {reason}")
            self._log.error("params.invalid", configmap=self._opts.configmap,
                            resource_version=cm.resource_version, error=reason,
                            hint="fix the ConfigMap; nothing is scaled until then")
            raise PollError(self._params_error) from exc
        self._params, self._params_error = params, None
        if (old is None or _mode(old) != _mode(params)) and logs.v(1):
            self._log.info("mode.changed", mode=_mode(params),
                           previous=_mode(old) if old else None)
        if logs.v(2):  # once per resourceVersion, not once per poll
            self._log.info("params.loaded", mode=_mode(params), changed=params != old,
                           resource_version=cm.resource_version, **params_fields(params))
        return params

    def poll_once(self) -> PollResult:
        """Run one poll; never raises: the outcome (and /last-poll) carries the error."""
        self.polls += 1
        result = PollResult(error=None)
        try:
            counts = self._counts()
            if logs.v(4):
                self._log.info("poll.counts", nodes=counts.total_nodes,
                               cores=counts.total_cores,
                               schedulable_nodes=counts.schedulable_nodes,
                               schedulable_cores=counts.schedulable_cores)
            params = self._load_params()
            decision = decide(params, counts)
            result.decision = decision
            if decision.error is not None:
                raise PollError(decision.error)
            failures: list[str] = []
            for target in self._opts.targets:  # ours: every target is attempted
                res = ensure_replicas(self._api, self._opts.namespace, target,
                                      decision.replicas)
                result.scales.append(res)
                if res.error:
                    failures.append(res.error)
                elif res.changed:
                    self._log.info("scale.changed", target=str(target), old=res.previous,
                                   new=res.replicas, mode=decision.mode,
                                   nodes=decision.nodes, cores=decision.cores,
                                   total_nodes=counts.total_nodes,
                                   total_cores=counts.total_cores,
                                   schedulable_nodes=counts.schedulable_nodes,
                                   schedulable_cores=counts.schedulable_cores)
            if failures:
                raise PollError("; ".join(failures))
        except (PollError, ApiError) as exc:
            result.error = str(exc)
        except Exception as exc:
            result.error = f"unexpected {type(exc).__name__}: {exc}"
        if result.error is None:
            self.consecutive_failures = 0
        else:
            self.consecutive_failures += 1
            self._log.error("poll.failed", error=result.error,
                            consecutive_failures=self.consecutive_failures)
        self._health.record(result.error)
        return result

    # --- the loop ------------------------------------------------------------------
    def run(self, stop: threading.Event) -> int:
        """Poll now, then on every period boundary until ``stop``; return the exit code.

        A poll that overruns the period skips the boundaries it missed instead of
        firing them back to back, so slow polls never pile up.
        """
        period = float(self._opts.poll_period_seconds)
        limit = self._opts.max_sync_failures
        next_at = self._clock()
        while not stop.is_set():
            self.poll_once()
            if limit > 0 and self.consecutive_failures >= limit:
                self._log.error("exit.max_sync_failures", failures=self.consecutive_failures,
                                limit=limit)
                return 1
            now = self._clock()
            next_at += period
            if next_at <= now:
                next_at += period * ((now - next_at) // period + 1)
            if stop.wait(next_at - now):
                break
        return 0
