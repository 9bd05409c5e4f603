"""One step of an explanation, shared by the formulas and the behavior stage.

Its own module so that :mod:`cpa.decide.behavior` (imported by :mod:`cpa.decide.params`) can explain
itself without importing :mod:`cpa.decide.decision`, which imports the parameters.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Step"]


@dataclass(frozen=True, slots=True)
class Step:
    """One step of the reasoning: a stable greppable ``key`` and a full sentence."""

    key: str
    text: str
