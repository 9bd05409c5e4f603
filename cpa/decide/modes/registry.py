"""The scaling modes: one registry entry per ConfigMap key, and the decision built on it.

Why a registry: the mode's name, its parser, its formula and its fields for logs and
``explain`` used to be dispatched in four places; upstream's plugin package has the same
shape. A new mode is one :class:`Mode` entry (plus its parser and formula).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from cpa.decide.decision import (
    ClusterCounts,
    Decision,
    Step,
    counts_step,
    ladder,
    linear,
    range_error,
)
from cpa.decide.params import (
    LadderParams,
    LinearParams,
    Params,
    ParamsError,
    parse_ladder,
    parse_linear,
)

__all__ = ["MODES", "Mode", "decide", "mode_of", "parse_configmap_data"]


@dataclass(frozen=True, slots=True)
class Mode:
    """One way to compute replicas, named by its ConfigMap key."""

    name: str
    params_type: type[Any]
    parse: Callable[[str], Params]
    """The key's JSON value -> validated parameters (raises ParamsError)."""
    replicas: Callable[[Any, int, int, list[Step]], int]
    """(params, nodes, cores, steps) -> replicas, appending the reasoning to ``steps``."""


MODES: Final[Mapping[str, Mode]] = {
    "linear": Mode("linear", LinearParams, parse_linear, linear),
    "ladder": Mode("ladder", LadderParams, parse_ladder, ladder),
}
_BY_TYPE: Final = {mode.params_type: mode for mode in MODES.values()}


def mode_of(params: Params) -> Mode:
    return _BY_TYPE[type(params)]


def parse_configmap_data(data: Mapping[str, str] | None) -> Params:
    """Pick the mode from the ConfigMap's single key and parse its value."""
    keys = sorted(data or {})
    if len(keys) != 1 or keys[0] not in MODES:
        found = ", ".join(f'"{key}"' for key in keys) if keys else "no keys"
        names = " or ".join(f'"{name}"' for name in MODES)
        raise ParamsError(
            f"the ConfigMap data must have exactly one key, {names}; "
            f"found {found}. Keep only the key for the mode you want"
        )
    assert data is not None
    return MODES[keys[0]].parse(data[keys[0]])


def decide(params: Params, counts: ClusterCounts) -> Decision:
    """The replica count upstream would write for these parameters and counts, and why.

    One function that always records its steps: the number written to the scale
    subresource and the explanation shown to the operator must never disagree.
    """
    mode = mode_of(params)
    steps: list[Step] = []
    nodes, cores, first = counts_step(params.include_unschedulable_nodes, counts)
    steps.append(first)
    steps.extend(params.counting.count_steps(counts.excluded_nodes, counts.capped_nodes))
    replicas = mode.replicas(params, nodes, cores, steps)
    replicas = params.counting.cap_replicas(replicas, nodes, steps)
    error = range_error(replicas, steps)
    return Decision(mode=mode.name, replicas=replicas, nodes=nodes, cores=cores,
                    steps=tuple(steps), error=error)
