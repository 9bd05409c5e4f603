"""A PodDisruptionBudget per target, in step with its replicas (``managePodDisruptionBudget``,
ours, opt-in).

Why: a target scaled to several replicas by us should survive a node drain with all but one
of them, and a target at one replica must never block a drain. So the budget is
``maxUnavailable: 1`` while the target has more than one replica, and absent at one.

Ours alone: the budget is named ``<target>-cpa``, carries the label
:data:`MANAGED_BY` and the annotation :data:`TARGET_ANNOTATION` naming its target, and an
ownerReference to the workload (so it goes with the workload). A budget of that name without
our label is someone else's: never changed, never deleted; the target's error says so.

RBAC (``manifests/examples/pod-disruption-budget-rbac.yaml``): ``policy
poddisruptionbudgets get,create,update,delete`` and ``get`` on the target's resource (its
selector and uid); a 403 names the rule.
"""

from __future__ import annotations

from typing import Any, Final

from cpa.kube.api import Api, ApiError
from cpa.kube.targets import Target, object_path

__all__ = ["MANAGED_BY", "TARGET_ANNOTATION", "BudgetError", "budget_name", "desired_budget",
           "ensure_budget", "remove_budget"]

MANAGED_BY: Final = ("app.kubernetes.io/managed-by", "cluster-proportional-autoscaler-py")
TARGET_ANNOTATION: Final = "cpa-py.github.io/budget-for"
_PREFIX: Final = "/apis/policy/v1"
_RULE: Final = ("add the RBAC rule apiGroups [policy] resources [poddisruptionbudgets] verbs "
                "[get, create, update, delete] (manifests/examples/"
                "pod-disruption-budget-rbac.yaml)")


class BudgetError(ValueError):
    """The target's budget cannot be kept; the message says why and what to change."""


def budget_name(target: Target) -> str:
    """``<name>-cpa``: beside the workload's own name, never one the workload's owner is
    likely to have chosen for a budget of their own."""
    name = f"{target.name}-cpa"
    if len(name) > 253:
        raise BudgetError(f"managePodDisruptionBudget: {target}: the name {name!r} is longer "
                          "than 253 characters; shorten the workload's name or remove the key")
    return name


def _path(namespace: str, name: str = "") -> str:
    tail = f"/{name}" if name else ""
    return f"{_PREFIX}/namespaces/{namespace}/poddisruptionbudgets{tail}"


def _selector(workload: dict[str, Any], target: Target) -> dict[str, Any]:
    """The workload's Pod selector as a LabelSelector (a ReplicationController's is a plain
    map of labels)."""
    spec = workload.get("spec")
    selector = spec.get("selector") if isinstance(spec, dict) else None
    if isinstance(selector, dict) and ("matchLabels" in selector
                                       or "matchExpressions" in selector):
        return {k: selector[k] for k in ("matchLabels", "matchExpressions") if k in selector}
    if (isinstance(selector, dict) and selector
            and all(isinstance(k, str) and isinstance(v, str) for k, v in selector.items())):
        return {"matchLabels": dict(selector)}
    raise BudgetError(f"managePodDisruptionBudget: {target} has no Pod selector "
                      "(spec.selector) to guard; remove the key or point --target at the "
                      "workload that has the Pods")


def desired_budget(namespace: str, target: Target, workload: dict[str, Any]
                   ) -> dict[str, Any]:
    """The budget we keep for ``target`` while it has more than one replica; pure."""
    meta = workload.get("metadata")
    uid = meta.get("uid") if isinstance(meta, dict) else None
    if not isinstance(uid, str) or not uid:
        raise BudgetError(f"managePodDisruptionBudget: {target}: the workload has no uid")
    kind = target.api
    return {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {
            "name": budget_name(target), "namespace": namespace,
            "labels": {MANAGED_BY[0]: MANAGED_BY[1]},
            "annotations": {TARGET_ANNOTATION: str(target)},
            "ownerReferences": [{"apiVersion": kind.api_version, "kind": kind.name,
                                 "name": target.name, "uid": uid}],
        },
        "spec": {"maxUnavailable": 1, "selector": _selector(workload, target)},
    }


def ours(budget: dict[str, Any]) -> bool:
    """Whether a budget carries our label (we never touch any other)."""
    meta = budget.get("metadata")
    labels = meta.get("labels") if isinstance(meta, dict) else None
    return isinstance(labels, dict) and labels.get(MANAGED_BY[0]) == MANAGED_BY[1]


def _same(live: dict[str, Any], want: dict[str, Any]) -> bool:
    meta = live.get("metadata") or {}
    return (live.get("spec", {}).get("maxUnavailable") == 1
            and live.get("spec", {}).get("selector") == want["spec"]["selector"]
            and meta.get("ownerReferences") == want["metadata"]["ownerReferences"]
            and (meta.get("annotations") or {}).get(TARGET_ANNOTATION) == str(want["metadata"][
                "annotations"][TARGET_ANNOTATION]))


def _named(exc: ApiError, what: str) -> ApiError:
    if exc.forbidden:
        return ApiError(exc.status, exc.reason,
                        f"managePodDisruptionBudget: {what} and may not: {_RULE}; "
                        f"{exc.message}")
    return exc


def _live(api: Api, namespace: str, target: Target) -> dict[str, Any] | None:
    name = budget_name(target)
    try:
        return api.get_json(_path(namespace, name))
    except ApiError as exc:
        if exc.not_found:
            return None
        raise _named(exc, f"{target}: reading PodDisruptionBudget {namespace}/{name}") from None


def _not_ours(namespace: str, target: Target) -> BudgetError:
    return BudgetError(f"managePodDisruptionBudget: {target}: PodDisruptionBudget "
                       f"{namespace}/{budget_name(target)} exists and is not ours (no label "
                       f"{MANAGED_BY[0]}={MANAGED_BY[1]}); delete or rename it, or remove "
                       "the key")


def _workload(api: Api, namespace: str, target: Target) -> dict[str, Any]:
    try:
        return api.get_json(object_path(namespace, target))
    except ApiError as exc:
        if exc.forbidden:
            raise ApiError(exc.status, exc.reason,
                           f"managePodDisruptionBudget reads the selector of {target} and may "
                           f"not: {target.api.rbac_rule('get')}; {exc.message}") from None
        raise


def ensure_budget(api: Api, namespace: str, target: Target, replicas: int) -> str | None:
    """Bring the target's budget in step with ``replicas``; return what was done
    (``created``, ``updated``, ``deleted``) or None when it already was."""
    if target.api.floor:
        raise BudgetError(f"managePodDisruptionBudget: {target} is an HPA floor; the HPA's "
                          "workload keeps its own budget (remove the key)")
    live = _live(api, namespace, target)
    if live is not None and not ours(live):
        raise _not_ours(namespace, target)
    if replicas <= 1:
        return None if live is None else _delete(api, namespace, target)
    want = desired_budget(namespace, target, _workload(api, namespace, target))
    name = budget_name(target)
    try:
        if live is None:
            api.send_json("POST", _path(namespace), want)
            return "created"
        if _same(live, want):
            return None
        want["metadata"]["resourceVersion"] = (live.get("metadata") or {}).get(
            "resourceVersion")
        api.send_json("PUT", _path(namespace, name), want)
        return "updated"
    except ApiError as exc:
        raise _named(exc, f"{target}: writing PodDisruptionBudget {namespace}/{name}") from None


def remove_budget(api: Api, namespace: str, target: Target) -> str | None:
    """Delete the target's budget if it is ours (``deleted``); None when there is none or
    it is someone else's (the key was removed: nothing of ours may stay, nothing else goes)."""
    live = _live(api, namespace, target)
    if live is None or not ours(live):
        return None
    return _delete(api, namespace, target)


def _delete(api: Api, namespace: str, target: Target) -> str | None:
    name = budget_name(target)
    try:
        api.send_json("DELETE", _path(namespace, name), None)
    except ApiError as exc:
        if exc.not_found:
            return None
        raise _named(exc, f"{target}: deleting PodDisruptionBudget {namespace}/{name}") from None
    return "deleted"
