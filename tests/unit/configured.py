"""Parameters for the tests, built as a ConfigMap value would give them: one mode's own keys
and then the keys every mode has, in the order the ConfigMap's documentation lists them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from cpa.horizontal.decide.behavior import Behavior
from cpa.horizontal.decide.counting import NO_COUNTING, Counting
from cpa.horizontal.decide.modes import ladder, linear
from cpa.horizontal.decide.modes.ladder import LadderParams, Table
from cpa.horizontal.decide.modes.linear import LinearParams
from cpa.horizontal.decide.modes.mode import Configured
from cpa.horizontal.decide.params import SharedParams

__all__ = ["ladder_params", "linear_params", "parse_ladder", "parse_linear"]

parse_linear: Final = linear.MODE.parse
parse_ladder: Final = ladder.MODE.parse


def linear_params(cores: float = 0.0, nodes: float = 0.0, min: int = 1, max: int = 0,
                  spof: bool = False, include: bool = False, behavior: Behavior | None = None,
                  counting: Counting = NO_COUNTING) -> Configured[LinearParams]:
    return Configured(linear.MODE, LinearParams(cores, nodes, min, max, spof),
                      SharedParams(include, behavior, counting))


def ladder_params(cores: Sequence[tuple[int, int]] = (), nodes: Sequence[tuple[int, int]] = (),
                  include: bool = False, behavior: Behavior | None = None,
                  counting: Counting = NO_COUNTING) -> Configured[LadderParams]:
    return Configured(ladder.MODE, LadderParams(Table(cores), Table(nodes)),
                      SharedParams(include, behavior, counting))
