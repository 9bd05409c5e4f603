"""The ``scale`` subresource: how upstream's kinds, StatefulSets and any ``RESOURCE.GROUP``
with ``/scale`` get their replicas (GET the Scale, PUT it back changed).

The PUT carries the GET's resourceVersion, so it fails with 409 when someone changed the
target in between; we then GET again and retry once within the same poll (ours: upstream
fails the poll and waits a whole period).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Final

from cpa.kube.api import Api, ApiError, RawApi, get_decoded, once_more_on_conflict
from cpa.kube.objects import ScaleObject, decode_scale
from cpa.kube.targets import Current, ScaleResult, Shape, Target, scale_path

__all__ = ["SCALE", "ScaleWriter", "ensure_scale"]


@functools.lru_cache(maxsize=64)
def _decoder(path: str) -> Callable[[dict[str, Any]], tuple[dict[str, Any], ScaleObject]]:
    """One decoder per path (the client keeps a decoded answer for the same decoder): the
    object and what it says."""
    return lambda doc: (doc, decode_scale(doc, f"GET {path}"))


def ensure_scale(api: RawApi, namespace: str, target: Target, replicas: int,
                 shape: Shape | None = None, dry_run: bool = False) -> ScaleResult:
    """GET the scale; PUT it back with ``replicas`` if it differs. ``shape`` (ours, for
    ``behavior``) turns the replicas the GET found into the count to write instead of
    ``replicas``. ``dry_run`` (ours): the GET only; the result says what would have been
    written."""
    path = scale_path(namespace, target)

    def attempt(last: list[Read]) -> ScaleResult:
        # The object is shared with the client's kept answer (the same bytes are not parsed
        # again): the PUT's body is a copy. A malformed one is this target's error.
        scale, read = get_decoded(api, path, _decoder(path))
        wanted = shape(read.replicas) if shape is not None else replicas
        last[:] = [(read.replicas, read.uid, wanted)]
        if read.replicas == wanted or dry_run:
            return ScaleResult(target, read.replicas, wanted, False, uid=read.uid,
                               dry_run=dry_run)
        body = {key: value for key, value in scale.items() if key != "status"}
        spec = scale.get("spec")
        body["spec"] = {**spec, "replicas": wanted} if isinstance(spec, dict) \
            else {"replicas": wanted}  # null: decoded as the empty spec
        api.send_json("PUT", path, body)
        return ScaleResult(target, read.replicas, wanted, True, uid=read.uid)

    return write_once_more(target, replicas, attempt, lambda wanted: f"cannot scale to {wanted}")


Read = tuple[int, str | None, int]
"""What a write's GET found: the count now and the object's uid; and the count to write."""


def write_once_more(target: Target, replicas: int,
                    attempt: Callable[[list[Read]], ScaleResult],
                    cannot: Callable[[int], str]) -> ScaleResult:
    """``attempt`` (a GET, then the write if the count differs), once more after a 409; an
    API error is this target's, in the result with what the last GET found. ``attempt``
    puts what its GET found in the list it is given; ``cannot(count)`` says what failed."""
    last: list[Read] = []
    try:
        return once_more_on_conflict(lambda: attempt(last))
    except ApiError as exc:
        previous, uid, wanted = last[0] if last else (None, None, replicas)
        return ScaleResult(target, previous, wanted, False,
                           f"{target}: {cannot(wanted)}: {exc}", uid)


class ScaleWriter:
    """A target written through its ``scale`` subresource (a :class:`~cpa.kube.writers.
    TargetWriter`)."""

    writes: Final = "scale"
    unit: Final = "replicas"
    bounded: Final = False
    has_pods: Final = True

    def read(self, api: Api, namespace: str, target: Target) -> Current:
        """GET the scale: the target's replicas now (raises ApiError)."""
        path = scale_path(namespace, target)
        return Current(decode_scale(api.get_json(path), f"GET {path}").replicas)

    def ensure(self, api: RawApi, namespace: str, target: Target, replicas: int,
               shape: Shape | None = None, dry_run: bool = False) -> ScaleResult:
        return ensure_scale(api, namespace, target, replicas, shape, dry_run)

    def explain(self, target: Target, current: Current,
                replicas: int) -> tuple[int, tuple[str, str] | None]:
        """What ``cpa explain`` says of the write: nothing for a kind of the table; for a
        ``RESOURCE.GROUP`` target, what discovery found."""
        if not target.custom:
            return replicas, None
        kind = target.api
        return replicas, ("target.resolved", (
            f"API discovery finds {target.kind} as {kind.name} in {kind.api_version}; its "
            f"replicas are set through its scale subresource, which has {current.replicas} "
            "now."))

    def change_note(self, target: Target, previous: int | None, replicas: int) -> str:
        """How a ``Scaled`` Event begins."""
        return f"Scaled {target} from {previous} to {replicas} replicas"


SCALE: Final = ScaleWriter()
