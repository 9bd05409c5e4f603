"""The HPA floor (ours): ``--target=horizontalpodautoscaler/NAME`` (``hpa/NAME``) writes the
count to the HPA's ``spec.minReplicas`` (autoscaling/v2), a floor the HPA scales above, so
the two no longer fight over ``spec.replicas`` (upstream #99).

Never below 1 (the API's minimum without the HPAScaleToZero gate) and never above
``spec.maxReplicas`` (clamped; the result says so). RBAC: ``autoscaling
horizontalpodautoscalers get, patch``.
"""

from __future__ import annotations

import json
from typing import Final

from cpa.kube.api import Api, RawApi
from cpa.kube.objects import decode_hpa
from cpa.kube.scale import Read, write_once_more
from cpa.kube.targets import Current, ScaleResult, Shape, Target, object_path

__all__ = ["HPA_FLOOR", "MERGE_PATCH", "HpaFloorWriter", "ensure_floor", "hpa_floor"]

MERGE_PATCH: Final = "application/merge-patch+json"


def hpa_floor(replicas: int, max_replicas: int | None) -> int:
    """The ``spec.minReplicas`` to write for ``replicas``: at least 1 (the API refuses 0
    without the HPAScaleToZero feature gate), at most the HPA's ``maxReplicas``."""
    floor = max(1, replicas)
    if max_replicas is not None and max_replicas >= 1:
        floor = min(floor, max_replicas)
    return floor


def ensure_floor(api: RawApi, namespace: str, target: Target, replicas: int,
                 shape: Shape | None = None,
                 dry_run: bool = False) -> ScaleResult:
    """GET the HPA; PATCH its ``spec.minReplicas`` to ``replicas`` (within 1..maxReplicas)
    if it differs.

    A JSON merge patch carrying the GET's resourceVersion: the API server refuses it with
    409 when the HPA changed in between (its maxReplicas may have), and we retry once with
    a fresh GET, as for a scale. RBAC: ``autoscaling horizontalpodautoscalers get, patch``.
    ``shape`` sees the current ``minReplicas`` (the count this target holds).
    """
    path = object_path(namespace, target)

    def attempt(last: list[Read]) -> ScaleResult:
        read = decode_hpa(api.get_json(path), f"GET {path}")
        wanted = shape(read.min_replicas) if shape is not None else replicas
        last[:] = [(read.min_replicas, read.uid, wanted)]
        floor = hpa_floor(wanted, read.max_replicas)
        clamped = wanted if floor != wanted else None
        if read.min_replicas == floor or dry_run:
            return ScaleResult(target, read.min_replicas, floor, False, clamped_from=clamped,
                               max_replicas=read.max_replicas, dry_run=dry_run, uid=read.uid)
        patch = {"metadata": {"resourceVersion": read.resource_version or None},
                 "spec": {"minReplicas": floor}}
        api.send_raw("PATCH", path, json.dumps(patch).encode(), MERGE_PATCH)
        return ScaleResult(target, read.min_replicas, floor, True, clamped_from=clamped,
                           max_replicas=read.max_replicas, uid=read.uid)

    return write_once_more(target, replicas, attempt,
                           lambda wanted: f"cannot set minReplicas to {hpa_floor(wanted, None)}")


class HpaFloorWriter:
    """A target whose count is an HPA's ``spec.minReplicas`` (a :class:`~cpa.kube.writers.
    TargetWriter`)."""

    writes: Final = "spec.minReplicas"
    unit: Final = "as minReplicas"
    bounded: Final = True
    has_pods: Final = False

    def read(self, api: Api, namespace: str, target: Target) -> Current:
        """GET the HPA: its minReplicas and maxReplicas now (raises ApiError)."""
        path = object_path(namespace, target)
        read = decode_hpa(api.get_json(path), f"GET {path}")
        return Current(read.min_replicas, read.max_replicas)

    def ensure(self, api: RawApi, namespace: str, target: Target, replicas: int,
               shape: Shape | None = None, dry_run: bool = False) -> ScaleResult:
        return ensure_floor(api, namespace, target, replicas, shape, dry_run)

    def explain(self, target: Target, current: Current,
                replicas: int) -> tuple[int, tuple[str, str] | None]:
        """What ``cpa explain`` says of the write: the floor within the HPA's bounds."""
        floor = hpa_floor(replicas, current.max_replicas)
        bound = (f"its maxReplicas {current.max_replicas}" if current.max_replicas is not None
                 else "no maxReplicas")
        text = (f"{target} is a HorizontalPodAutoscaler: the count is written to its "
                f"spec.minReplicas (now {current.replicas}), a floor the HPA scales above. ")
        if floor == replicas:
            text += f"{replicas} lies between 1 and {bound}, so it is written as it is."
        elif replicas > floor:
            text += (f"{replicas} is above {bound}, so {floor} is written (clamped; the "
                     "daemon warns with hpa.floor_clamped and cpa_hpa_floor_clamped).")
        else:
            text += (f"minReplicas cannot be below 1, so 1 is written instead of {replicas} "
                     "(the daemon warns with hpa.floor_clamped).")
        return floor, ("target.hpa_floor", text)

    def change_note(self, target: Target, previous: int | None, replicas: int) -> str:
        """How a ``Scaled`` Event begins."""
        return f"Set the floor (spec.minReplicas) of {target} from {previous} to {replicas}"


HPA_FLOOR: Final = HpaFloorWriter()
