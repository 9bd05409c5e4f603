"""``--target-selector=KIND:SELECTOR`` (ours, opt-in; upstream #9): every workload of KIND
in the namespace whose labels match SELECTOR is a target, listed again every poll.

Why every poll: a workload labelled later is a target at the next poll without a restart,
and one that stops matching is simply no longer written (left at its replicas). One list
request per selector per poll (RBAC ``list`` on that kind; a 403 names the rule). A
selector that matches nothing is the poll's error, naming it: a typo must not look like a
quiet cluster. KIND is one of the table's kinds (as ``--target`` spells them); an empty
selector (every workload of the kind) is refused.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from cpa.kube.api import Api, ApiError
from cpa.kube.selector import SelectorError, parse_selector
from cpa.kube.targets import ALIASES, KINDS, TARGET_KINDS, Target, is_dns1123_subdomain

__all__ = ["TargetSelector", "matching_targets", "parse_target_selector"]


class TargetSelector(NamedTuple):
    """One ``--target-selector``: a kind of the table and a label selector's text (sent to
    the API server as it was given, once checked)."""

    kind: str
    selector: str

    def __str__(self) -> str:
        return f"{self.kind}:{self.selector}"


def parse_target_selector(text: str) -> tuple[TargetSelector | None, str | None]:
    """``KIND:SELECTOR`` checked; (the selector, None) or (None, what is wrong)."""
    raw_kind, colon, selector = text.partition(":")
    kind = ALIASES.get(raw_kind.strip().lower(), raw_kind.strip().lower())
    if not colon or kind not in KINDS:
        return None, (f"--target-selector: {text[:200]!r} is not KIND:SELECTOR with KIND one "
                      f"of {', '.join(TARGET_KINDS)} (or hpa), e.g. "
                      "--target-selector=deployment:k8s-app=kube-dns")
    if not selector.strip():
        return None, (f"--target-selector: {text[:200]!r} has an empty selector, which would "
                      "make every " + KINDS[kind].name + " in the namespace a target; give "
                      "a label selector such as k8s-app=kube-dns")
    try:
        parse_selector(selector)
    except SelectorError as exc:
        return None, f"--target-selector: {text[:200]!r}: {str(exc)[:300]}"
    return TargetSelector(kind, selector.strip()), None


def _forbidden(exc: ApiError, sel: TargetSelector, namespace: str) -> ApiError:
    kind = KINDS[sel.kind]
    return ApiError(exc.status, exc.reason,
                    f"--target-selector={sel} lists the {kind.plural} of namespace "
                    f"{namespace} and may not: {kind.rbac_rule('list')} to the autoscaler's "
                    f"Role ({exc.message})")


def _names(answer: dict[str, Any], sel: TargetSelector) -> list[str]:
    """The listed workloads' names, those being deleted left out; a malformed answer is an
    error naming the selector, never a guess."""
    items = answer.get("items")
    if items is None:
        return []
    if not isinstance(items, list):
        raise ApiError(0, "Malformed", f"--target-selector={sel}: the list answered has no "
                                       "items array")
    names: list[str] = []
    for item in items:
        meta = item.get("metadata") if isinstance(item, dict) else None
        name = meta.get("name") if isinstance(meta, dict) else None
        if (not isinstance(meta, dict) or not isinstance(name, str) or len(name) > 253
                or not is_dns1123_subdomain(name)):
            raise ApiError(0, "Malformed", f"--target-selector={sel}: a listed object has no "
                                           "valid metadata.name")
        if not meta.get("deletionTimestamp"):
            names.append(name)
    return names


def matching_targets(api: Api, namespace: str, sel: TargetSelector) -> tuple[Target, ...]:
    """The workloads ``sel`` selects now, by name; raises :class:`ApiError` (a 403 naming the
    RBAC rule)."""
    kind = KINDS[sel.kind]
    path = f"{kind.api_prefix}/namespaces/{namespace}/{kind.plural}"
    try:
        answer = api.get_json(path, {"labelSelector": sel.selector})
    except ApiError as exc:
        if exc.forbidden:
            raise _forbidden(exc, sel, namespace) from None
        raise
    return tuple(Target(sel.kind, name) for name in sorted(set(_names(answer, sel))))
