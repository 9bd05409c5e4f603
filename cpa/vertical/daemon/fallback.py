"""The bounded fallback's one request: evict a refused Pod so that its controller
recreates it from the (patched) template -- at most ``--resize-fallback-max-pods-per-cycle``
per poll, as :class:`cpa.vertical.decide.budget.FallbackBudget` chooses them.

Why eviction and not a DELETE: the Eviction API honours the workload's
PodDisruptionBudgets (a 429 says one forbids it now: the Pod is tried again at the next
poll), which a DELETE would ignore. RBAC: ``create`` on ``pods/eviction``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cpa import logs
from cpa.kube.api import ApiError, RawApi

__all__ = ["Evictions", "evict"]


@dataclass(slots=True)
class Evictions:
    """What one poll's evictions did."""

    evicted: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)  # a PodDisruptionBudget said no (429)
    errors: list[str] = field(default_factory=list)  # each with what to do


def evict(api: RawApi, namespace: str, pods: list[str]) -> Evictions:
    """Evict ``pods`` (names, in order); never raises."""
    out = Evictions()
    log = logs.get_logger("resize")
    for name in pods:
        body = {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": name, "namespace": namespace}}
        try:
            api.send_json("POST", f"/api/v1/namespaces/{namespace}/pods/{name}/eviction",
                          body)
        except ApiError as exc:
            if exc.status == 404:  # gone already: nothing left to restart
                out.evicted.append(name)
            elif exc.status == 429:
                out.blocked.append(name)
            elif exc.forbidden:
                out.errors.append(f"cannot evict Pod {name}: {exc.message}; grant create on "
                                  "pods/eviction to this ServiceAccount")
            else:
                out.errors.append(f"cannot evict Pod {name}: {exc}")
            continue
        out.evicted.append(name)
        log.info("resize.fallback_evicted", pod=name,
                 reason="its resize is refused; its controller recreates it from the "
                        "patched template")
    return out
