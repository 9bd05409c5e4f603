"""A target's Pod template, read from the workload itself (``targetPlacement``, ours, opt-in).

Why a GET of the workload every poll: the ``/scale`` subresource the writers read carries no
template, and a rollout changes the template's selector or tolerations at any time. One GET
of the object per target (for ``hpa/NAME``: the HPA, then its ``scaleTargetRef``'s
workload); RBAC ``get`` on that resource (a 403 names the rule to add). ``capToPlaceable``
(ours, opt-in) reads the same template, its labels too (:func:`pod_template`).

A target whose object has no ``spec.template.spec`` (a custom resource with ``/scale``
only, an HPA pointing at one) cannot be counted by placement: :class:`NoTemplate`, which
the poll reports as an invalid ConfigMap naming the target, never a whole-cluster count.
"""

from __future__ import annotations

from typing import Any

from cpa.kube.api import Api, ApiError
from cpa.kube.targets import KINDS, Kind, Target, object_path

__all__ = ["NoTemplate", "pod_template", "pod_template_spec"]


class NoTemplate(ValueError):
    """The target has no Pod template to count its placement by; the message says which."""


def _kind_of(ref: dict[str, Any]) -> Kind | None:
    """The table's kind for an HPA's ``scaleTargetRef`` (kind and apiVersion)."""
    kind, version = ref.get("kind"), ref.get("apiVersion")
    for known in KINDS.values():
        if not known.floor and known.name == kind and known.api_version == version:
            return known
    return None


def _forbidden(exc: ApiError, kind: Kind, namespace: str, name: str, key: str) -> ApiError:
    return ApiError(exc.status, exc.reason,
                    f"{key} reads the Pod template of {kind.name} {namespace}/{name}"
                    f" and may not: {kind.rbac_rule('get')} to the autoscaler's Role "
                    f"(manifests/examples/target-placement.yaml; {exc.message})")


def _get(api: Api, path: str, kind: Kind, namespace: str, name: str,
         key: str) -> dict[str, Any]:
    try:
        return api.get_json(path)
    except ApiError as exc:
        if exc.forbidden:
            raise _forbidden(exc, kind, namespace, name, key) from None
        raise


def _template(obj: dict[str, Any], what: str, key: str) -> dict[str, Any]:
    spec = obj.get("spec")
    template = spec.get("template") if isinstance(spec, dict) else None
    pod = template.get("spec") if isinstance(template, dict) else None
    if not isinstance(template, dict) or not isinstance(pod, dict):
        raise NoTemplate(f"{what} has no Pod template (spec.template.spec), so its Nodes "
                         f"cannot be counted by placement: remove {key}, or point "
                         "--target at the workload that has the Pods")
    return template


def pod_template_spec(api: Api, namespace: str, target: Target) -> dict[str, Any]:
    """The target's ``spec.template.spec`` (an HPA's: its ``scaleTargetRef``'s); raises
    :class:`ApiError` (a 403 naming the RBAC rule) or :class:`NoTemplate`."""
    spec: dict[str, Any] = pod_template(api, namespace, target)["spec"]
    return spec


def pod_template(api: Api, namespace: str, target: Target,
                 key: str = "targetPlacement") -> dict[str, Any]:
    """The target's ``spec.template`` (its ``metadata`` and ``spec``; an HPA's: its
    ``scaleTargetRef``'s), as :func:`pod_template_spec`; ``key`` is the parameter that
    reads it, as the messages name it."""
    kind = target.api
    obj = _get(api, object_path(namespace, target), kind, namespace, target.name, key)
    if not kind.floor:
        return _template(obj, f"target {target}", key)
    spec = obj.get("spec")
    ref = spec.get("scaleTargetRef") if isinstance(spec, dict) else None
    if not isinstance(ref, dict) or not ref.get("name"):
        raise NoTemplate(f"target {target}: the HPA has no spec.scaleTargetRef")
    workload = _kind_of(ref)
    what = (f"target {target}: its scaleTargetRef {ref.get('kind')}/{ref.get('name')} "
            f"({ref.get('apiVersion')})")
    if workload is None:
        raise NoTemplate(f"{what}: {key} reads the Pod template of a Deployment, "
                         "StatefulSet, ReplicaSet or ReplicationController only; remove "
                         f"{key}, or point the HPA at such a workload")
    name = str(ref["name"])
    path = f"{workload.api_prefix}/namespaces/{namespace}/{workload.plural}/{name}"
    return _template(_get(api, path, workload, namespace, name, key), what, key)
