"""``linear``: replicas in proportion to the cluster's cores and Nodes (upstream's linear
controller).

``{"coresPerReplica": 256, "nodesPerReplica": 16, "min": 1, "max": 100,
"preventSinglePointFailure": true}``: each axis is ``ceil(count / perReplica)``, clamped
to ``max`` then ``min``, and the larger wins. Ours, opt-in: ``podsPerReplica`` and
``servicesPerReplica`` (numbers > 0; absent or null: the axis is off) are two more axes of
the same arithmetic, on the cluster's Pods and Services, and the largest axis wins.
The arithmetic mirrors upstream exactly, quirks included: it divides in float64 and takes
IEEE ``ceil``; an axis whose per-replica value is 0/absent yields 1 (not ``min``); the
single-point-failure floor of 2 comes AFTER the ``max`` clamp, so it can exceed ``max``.
``min`` 0 means 1, ``max`` 0 means no cap.
"""

from __future__ import annotations

import math
from typing import Final, NamedTuple

from cpa.go.json import JsonValue, format_go_float, go_bool, go_float, go_int
from cpa.horizontal.decide.modes.mode import NO_OBJECTS, Axes, Mode, larger_reading
from cpa.horizontal.decide.steps import INFINITE, Step, plural, show

__all__ = ["MODE", "LinearParams", "replicas"]


class LinearParams(NamedTuple):
    """Linear mode's own keys; ``min`` is already lifted from 0 to 1, ``max`` 0 means no cap."""

    cores_per_replica: float
    nodes_per_replica: float
    min: int = 1
    max: int = 0
    prevent_single_point_failure: bool = False
    pods_per_replica: float | None = None
    """Ours, opt-in: the Pods axis (None: off)."""
    services_per_replica: float | None = None
    """Ours, opt-in: the Services axis (None: off)."""

    def fields(self) -> dict[str, object]:
        """The parameters as the ConfigMap spells them, for logs and ``explain``."""
        out: dict[str, object] = {
            "coresPerReplica": self.cores_per_replica,
            "nodesPerReplica": self.nodes_per_replica, "min": self.min, "max": self.max,
            "preventSinglePointFailure": self.prevent_single_point_failure}
        for key, value in ((PODS_KEY, self.pods_per_replica),
                           (SERVICES_KEY, self.services_per_replica)):
            if value is not None:
                out[key] = value
        return out


PODS_KEY: Final = "podsPerReplica"
SERVICES_KEY: Final = "servicesPerReplica"
KEYS: Final = ("coresPerReplica", "nodesPerReplica", "min", "max", "preventSinglePointFailure",
               PODS_KEY, SERVICES_KEY)


class _Decoder:
    """linear's keys of one value, as Go fills the struct (null leaves a field alone)."""

    __slots__ = ("cores", "maximum", "minimum", "nodes", "objects", "spof")

    def __init__(self) -> None:
        self.cores = self.nodes = 0.0
        self.minimum = self.maximum = 0
        self.spof = False
        self.objects: dict[str, float | None] = {PODS_KEY: None, SERVICES_KEY: None}

    def decode(self, key: str, value: JsonValue, where: str) -> None:
        if key in self.objects:  # ours: a Go *float64, so null turns the axis off again
            self.objects[key] = None if value is None else go_float(value, where)
            return
        if value is None:
            return  # Go leaves the field as it was
        if key == "coresPerReplica":
            self.cores = go_float(value, where)
        elif key == "nodesPerReplica":
            self.nodes = go_float(value, where)
        elif key == "min":
            self.minimum = go_int(value, where)
        elif key == "max":
            self.maximum = go_int(value, where)
        else:
            self.spof = go_bool(value, where)

    def finish(self) -> tuple[LinearParams, list[str]]:
        """Upstream's validation, every problem at once."""
        cores, nodes, minimum, maximum = self.cores, self.nodes, self.minimum, self.maximum
        pods, services = self.objects[PODS_KEY], self.objects[SERVICES_KEY]
        problems: list[str] = []
        if cores == 0 and nodes == 0 and pods is None and services is None:
            problems.append(
                "coresPerReplica and nodesPerReplica are both 0 or absent; set at least one "
                "of them to a positive number, e.g. \"nodesPerReplica\":16"
            )
        problems.extend(
            f"{name} is {format_go_float(number)}; it must be a number greater than 0 "
            "(remove the key to leave that axis out)"
            for name, number in self.objects.items()
            if number is not None and not number > 0
        )
        for name, number in (("coresPerReplica", cores), ("nodesPerReplica", nodes)):
            if number < 0:
                problems.append(
                    f"{name} is {format_go_float(number)}; it must be positive "
                    "(or 0/absent to leave that axis out)"
                )
        if minimum < 0:
            problems.append(f"min is {minimum}; it must be 0 or more (0 or absent means 1)")
        if maximum != 0 and maximum < minimum:
            problems.append(
                f"max is {maximum} but min is {minimum}; max must be at least min "
                "(or 0/absent for no cap)"
            )
        return (LinearParams(cores, nodes, minimum or 1, maximum, self.spof, pods, services),
                problems)


# --- the formula ------------------------------------------------------------------------------


def _linear_axis(
    axis: str, label: str, count: int, per_replica: float, params: LinearParams,
    steps: list[Step],
) -> int:
    """upstream ``getExpectedReplicasFromParam``: float division, ceil, max clamp, min clamp."""
    field = f"{axis}PerReplica"
    if per_replica == 0:
        steps.append(Step(
            f"{axis}.unset",
            f"{field} is 0 or absent, so the {label} axis gives 1 (not min: upstream does the "
            "same).",
        ))
        return 1
    quotient = count / per_replica  # Python true division is IEEE float64, as in Go
    result = math.ceil(quotient) if math.isfinite(quotient) else quotient
    steps.append(Step(
        f"{axis}.ceil",
        f"The {label} axis gives ceil of {count} over {show(per_replica)}, which is "
        f"{show(result)}.",
    ))
    # Go compares in float64: math.Min(float64(max), res), then math.Max(float64(min), res).
    value = float(result)
    if params.max == 0:
        steps.append(Step(f"{axis}.clamp.max", f"No max is set, so nothing caps the {label} axis."))
    elif float(params.max) < value:
        value = float(params.max)
        steps.append(Step(
            f"{axis}.clamp.max",
            f"max {params.max} caps the {label} axis from {show(result)} down to {params.max}.",
        ))
    else:
        steps.append(Step(
            f"{axis}.clamp.max",
            f"max {params.max} changes nothing on the {label} axis, which stays at "
            f"{show(result)}.",
        ))
    before = value
    value = max(float(params.min), value)
    if value > before:
        steps.append(Step(
            f"{axis}.clamp.min",
            f"min {params.min} lifts the {label} axis from {show(before)} to {params.min}.",
        ))
    else:
        steps.append(Step(
            f"{axis}.clamp.min",
            f"min {params.min} lifts nothing on the {label} axis, which stays at "
            f"{show(value)}.",
        ))
    return int(value) if math.isfinite(value) else INFINITE


def _spof_step(params: LinearParams, nodes: int, from_nodes: int) -> tuple[int, Step]:
    """The single-point-failure floor, applied to the Nodes axis after its clamps."""
    if not params.prevent_single_point_failure:
        return from_nodes, Step(
            "floor.spof", "preventSinglePointFailure is off, so no floor of 2 applies."
        )
    if nodes <= 1:
        return from_nodes, Step(
            "floor.spof",
            f"preventSinglePointFailure is on, but with {plural(nodes, 'Node')} there is no "
            "second Node to spread over, so no floor of 2 applies.",
        )
    if from_nodes >= 2:
        return from_nodes, Step(
            "floor.spof",
            "preventSinglePointFailure holds at least 2 replicas while the cluster has more "
            f"than one Node, and the Nodes axis already gives {show(from_nodes)}.",
        )
    beyond_max = (
        f" The floor comes after the max clamp, so it overrides max {params.max}."
        if 0 < params.max < 2
        else ""
    )
    return 2, Step(
        "floor.spof",
        "preventSinglePointFailure holds at least 2 replicas while the cluster has more "
        f"than one Node ({nodes} here), so the Nodes axis is lifted from {from_nodes} to 2."
        + beyond_max,
    )


def _object_axes(params: LinearParams, axes: Axes, upstream: int, steps: list[Step]) -> int:
    """Ours: the Pods and Services axes that are on, each as an upstream axis, and the
    largest of them and upstream's count."""
    result = upstream
    for axis, label, count, per_replica in (
            ("pods", "Pods", axes.pods, params.pods_per_replica),
            ("services", "Services", axes.services, params.services_per_replica)):
        if per_replica is None:
            continue
        reading = _linear_axis(axis, label, count, per_replica, params, steps)
        if reading > result:
            steps.append(Step(f"{axis}.winner", (
                f"The {label} axis's {show(reading)} is more than the {show(result)} so far, "
                f"so the expected replica count is {show(reading)}.")))
            result = reading
        else:
            steps.append(Step(f"{axis}.winner", (
                f"The {label} axis's {show(reading)} is not more than the {show(result)} so "
                f"far, so the expected replica count stays {show(result)}.")))
    return result


def object_kinds(params: LinearParams) -> frozenset[str]:
    """Ours: the kinds of object whose axis is on."""
    if params.pods_per_replica is None and params.services_per_replica is None:
        return NO_OBJECTS
    return frozenset(kind for kind, per in (("pods", params.pods_per_replica),
                                            ("services", params.services_per_replica))
                     if per is not None)


def replicas(params: LinearParams, axes: Axes, steps: list[Step]) -> int:
    """upstream's linear controller: both axes, the single-point-failure floor, the larger;
    then (ours) the Pods and Services axes that are on."""
    nodes, cores = axes.nodes, axes.cores
    from_cores = _linear_axis("cores", "cores", cores, params.cores_per_replica, params, steps)
    from_nodes = _linear_axis("nodes", "Nodes", nodes, params.nodes_per_replica, params, steps)
    from_nodes, spof = _spof_step(params, nodes, from_nodes)
    steps.append(spof)
    replicas, winner = larger_reading(from_cores, from_nodes, "axis", "axes",
                                      "The larger reading")
    steps.append(winner)
    if params.pods_per_replica is None and params.services_per_replica is None:
        return replicas
    return _object_axes(params, axes, replicas, steps)


MODE: Final[Mode[LinearParams]] = Mode(
    name="linear", keys=KEYS, example='{"coresPerReplica":256,"nodesPerReplica":16}',
    decoder=_Decoder, replicas=replicas, ceiling=lambda params: params.max,
    objects=object_kinds)
