"""Ours, ``managePodDisruptionBudget``: each target's PodDisruptionBudget kept in step with
the replicas the poll left it at (:mod:`cpa.kube.pdb`), and removed when the key goes.

Why the daemon remembers which targets it kept a budget for: removing the key must remove
our budgets, yet a ConfigMap without the key must cost no request and no RBAC beyond
upstream's. So the budgets are deleted when a version without the key follows one with it
in this process; a budget left by a process that stopped before that stays until its
workload is deleted (its ownerReference) or someone deletes it by its label.
"""

from __future__ import annotations

from collections.abc import Iterable

from cpa import logs
from cpa.kube.api import Api, ApiError
from cpa.kube.pdb import BudgetError, ensure_budget, remove_budget
from cpa.kube.targets import ScaleResult, Target

__all__ = ["Budgets"]


class Budgets:
    """The targets whose budget this process keeps, poll after poll."""

    def __init__(self, api: Api, namespace: str) -> None:
        self._api = api
        self._namespace = namespace
        self._kept: set[Target] = set()
        self._log = logs.get_logger("autoscaler")

    def sync(self, manage: bool, scales: Iterable[ScaleResult]) -> list[str]:
        """Each written target's budget in step (``manage``), or ours removed (the key
        went); the problems, each naming its target. A dry run's targets are left alone."""
        if not manage:
            return self._remove_all()
        problems: list[str] = []
        for res in scales:
            if res.error is not None or res.dry_run:
                continue
            try:
                done = ensure_budget(self._api, self._namespace, res.target, res.replicas)
            except (ApiError, BudgetError) as exc:
                problems.append(str(exc))
                continue
            self._kept.add(res.target)
            if done is not None:
                self._log.info("budget.changed", target=str(res.target), action=done,
                               replicas=res.replicas)
        return problems

    def _remove_all(self) -> list[str]:
        problems: list[str] = []
        for target in sorted(self._kept, key=str):
            try:
                done = remove_budget(self._api, self._namespace, target)
            except (ApiError, BudgetError) as exc:
                problems.append(str(exc))
                continue
            self._kept.discard(target)
            if done is not None:
                self._log.info("budget.changed", target=str(target), action=done,
                               replicas=None)
        return problems
