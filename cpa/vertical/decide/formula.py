"""CPVA's computation: cluster counts in, each container's requests and limits out.

A port of ``calculate``, ``increments``, ``asInt64`` and ``guessFormat`` (cpva
pkg/autoscaler/autoscaler_server.go:189-248), the loop of ``pollAPIServer`` that applies
them (:122-142) and ``GetClusterSize``'s core count (k8sclient.go:304-327). Why a literal
port: the outputs are compared with CPVA's, so the arithmetic is Go's -- int64 milli-units
with wrap-around, ``int`` division truncating toward zero (a negative ``coresPerStep``
gives a negative number of steps), a zero per-step adding nothing, a ``max`` that only caps
when positive -- and the result's format comes from the resource's *name* (``memory`` and
``storage`` DecimalSI, everything else BinarySI, so ``ephemeral-storage`` is BinarySI and a
CPU request of 2048 cores prints ``2Ki``).

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final, TypeAlias

from cpa.go.quantity import MAX_MILLI_VALUE, Format, Quantity, wrap_int64
from cpa.vertical.decide.cpva_config import ResourceScaleConfig, ScaleConfig

__all__ = [
    "ContainerRequirements",
    "CoresError",
    "CountsUnavailable",
    "MilliRangeError",
    "ObjectStep",
    "Requirements",
    "Steps",
    "calculate",
    "cluster_cores",
    "compute",
    "guess_format",
    "increments",
    "milli_units",
    "steps",
]

_DECIMAL_RESOURCES: Final = frozenset({"memory", "storage"})


class MilliRangeError(ValueError):
    """A config quantity too large for int64 milli-units; CPVA panics (the process
    exits 2, and restarts into the same panic)."""


class CoresError(ValueError):
    """The summed capacity CPU is not an int64 integer in Go's sense; CPVA fails the
    poll with "unable to compute integer values of cores in the cluster"."""


def guess_format(resource: str) -> Format:
    """``guessFormat``: DecimalSI for exactly ``memory`` and ``storage``, else BinarySI."""
    return Format.DECIMAL_SI if resource in _DECIMAL_RESOURCES else Format.BINARY_SI


def increments(count: int, per: int) -> int:
    """``increments``: steps for ``count`` at ``per`` each, rounded up for positive ``per``.

    Go ``int`` arithmetic (64-bit): ``(count + per - 1) / per`` wraps on overflow and
    truncates toward zero, so a negative ``per`` yields zero or negative steps.
    """
    if per == 0:
        return 0
    if per == 1:
        return count
    dividend = wrap_int64(count + (per - 1))
    quotient = abs(dividend) // abs(per)
    return wrap_int64(quotient if (dividend >= 0) == (per > 0) else -quotient)


def milli_units(quantity: Quantity) -> int:
    """``asInt64``: ``MilliValue()``, after refusing a ``Value()`` above MaxInt64/1000.

    The check misses what Go's own overflow hides: ``100E`` has a ``Value()`` of 0 and so
    passes, with 0 milli-units, exactly as in CPVA.
    """
    if quantity.value() > MAX_MILLI_VALUE:
        raise MilliRangeError(f"can't convert quantity {quantity} to int64 milli-units")
    return quantity.milli_value()


@dataclass(frozen=True, slots=True)
class Steps:
    """Every intermediate value of ``calculate``, for ``explain`` and for metrics."""

    base: int  # milli-units
    max: int
    step: int
    cores_per_step: int
    nodes_per_step: int
    cores_increments: int
    nodes_increments: int
    by_cores: int  # after the max cap
    by_nodes: int
    capped_by_cores: bool
    capped_by_nodes: bool
    want: int  # the larger of the two (or more, ours), milli-units
    by_objects: tuple[ObjectStep, ...] = ()
    """Ours: the Pods and Services counts' steps, for those the config counts."""


@dataclass(frozen=True, slots=True)
class ObjectStep:
    """Ours: what one count of objects gave (``podsPerStep``, ``servicesPerStep``)."""

    kind: str  # "pods" or "services"
    count: int
    per_step: int
    increments: int
    value: int  # milli-units, after the max cap
    capped: bool


class CountsUnavailable(ValueError):
    """Ours: a count the config needs is not there (not listed yet, or refused)."""


def _object_steps(config: ResourceScaleConfig, base: int, cap: int, step: int,
                  objects: Mapping[str, int]) -> tuple[ObjectStep, ...]:
    """Ours: ``base + step * ceil(count / perStep)`` for each count the config names,
    capped by ``max`` as the others."""
    out: list[ObjectStep] = []
    for kind, per in (("pods", config.pods_per_step), ("services", config.services_per_step)):
        if per is None:
            continue
        if kind not in objects:
            raise CountsUnavailable(f"the {kind} are not counted yet")
        inc = increments(objects[kind], per)
        value = wrap_int64(base + wrap_int64(step * inc))
        capped = cap > 0 and value > cap
        out.append(ObjectStep(kind, objects[kind], per, inc, cap if capped else value, capped))
    return tuple(out)


def steps(config: ResourceScaleConfig, nodes: int, cores: int,
          objects: Mapping[str, int] | None = None) -> Steps:
    """``calculate``, showing its work. Raises :class:`MilliRangeError` where CPVA panics;
    ``objects`` (ours): the Pods and Services counted, for a config that names them."""
    base = milli_units(config.base) if config.base is not None else 0
    cap = milli_units(config.max) if config.max is not None else 0
    step = milli_units(config.step) if config.step is not None else 0
    cores_per = config.cores_per_step or 0
    nodes_per = config.nodes_per_step or 0
    cores_inc = increments(cores, cores_per)
    nodes_inc = increments(nodes, nodes_per)
    by_cores = wrap_int64(base + wrap_int64(step * cores_inc))
    capped_cores = cap > 0 and by_cores > cap
    if capped_cores:
        by_cores = cap
    by_nodes = wrap_int64(base + wrap_int64(step * nodes_inc))
    capped_nodes = cap > 0 and by_nodes > cap
    if capped_nodes:
        by_nodes = cap
    by_objects = _object_steps(config, base, cap, step, objects or {})
    want = max([by_cores, by_nodes, *(o.value for o in by_objects)])
    return Steps(base, cap, step, cores_per, nodes_per, cores_inc, nodes_inc, by_cores,
                 by_nodes, capped_cores, capped_nodes, want, by_objects)


def calculate(config: ResourceScaleConfig, nodes: int, cores: int,
              objects: Mapping[str, int] | None = None) -> int:
    """``calculate``: the wanted amount in milli-units (an int64)."""
    return steps(config, nodes, cores, objects).want


@dataclass(frozen=True, slots=True)
class ContainerRequirements:
    """What CPVA writes for one container: ``apiv1.ResourceRequirements`` without claims.

    Equality is Go's ``reflect.DeepEqual`` on freshly computed quantities: the same
    resource names with the same milli values and formats.
    """

    requests: Mapping[str, Quantity]
    limits: Mapping[str, Quantity]


Requirements: TypeAlias = Mapping[str, ContainerRequirements]


def compute(config: ScaleConfig | None, nodes: int, cores: int,
            objects: Mapping[str, int] | None = None) -> dict[str, ContainerRequirements]:
    """``pollAPIServer``'s loop: every configured container and resource, formatted by
    resource name. A resource configured with nothing computes to 0. ``objects`` (ours):
    the Pods and Services counted, for a config with ``podsPerStep``/``servicesPerStep``."""
    result: dict[str, ContainerRequirements] = {}
    for name, container in (config or {}).items():
        requests = {res: _quantity(res, rc, nodes, cores, name, "requests", objects)
                    for res, rc in (container.requests or {}).items()}
        limits = {res: _quantity(res, rc, nodes, cores, name, "limits", objects)
                  for res, rc in (container.limits or {}).items()}
        result[name] = ContainerRequirements(requests, limits)
    return result


def _quantity(resource: str, config: ResourceScaleConfig, nodes: int, cores: int,
              container: str, kind: str, objects: Mapping[str, int] | None) -> Quantity:
    try:
        want = calculate(config, nodes, cores, objects)
    except MilliRangeError as exc:
        raise MilliRangeError(
            f"container {container!r} {kind}[{resource!r}]: {exc}; keep base, max and step "
            f"below {MAX_MILLI_VALUE} units") from exc
    return Quantity.from_milli(want, guess_format(resource))


def cluster_cores(capacities: Iterable[str | Quantity | None]) -> int:
    """``GetClusterSize``'s cores: the Nodes' ``status.capacity`` cpu added with
    ``Quantity.Add``, then ``AsInt64``.

    Capacity, not allocatable; every Node, schedulable or not. A Node without a cpu
    capacity adds nothing. The sum only converts if every non-zero addend is held as an
    int64 at scale >= 0: one Node reporting ``1500m`` (or anything with a fraction, or
    nano precision) makes every poll fail with :class:`CoresError`. A string is parsed as
    ``ParseQuantity`` would (as the API server's protobuf carries it).
    """
    total = Quantity(0, 0, Format.DECIMAL_SI)
    for capacity in capacities:
        if capacity is None:
            continue
        total = total.add(capacity if isinstance(capacity, Quantity)
                          else Quantity.parse(capacity))
    value, ok = total.as_int64()
    if not ok:
        raise CoresError("unable to compute integer values of cores in the cluster")
    return value
