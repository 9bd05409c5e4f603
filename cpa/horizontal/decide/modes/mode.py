"""What a mode is: a ConfigMap key whose value holds parameters and a formula to use them.

Upstream keeps one mode in one short file (its parameters, their parsing and the formula)
behind one small interface, and a plugin picks the mode by the ConfigMap key. Here each
mode is one module of :mod:`cpa.horizontal.decide.modes` exporting one :class:`Mode` entry, generic
over its parameters: mypy checks that the entry's decoder makes the parameters its formula
takes. The registry (:mod:`cpa.horizontal.decide.modes.registry`) maps keys to entries; adding a
mode
is its module and one line there.

What a parse gives back is a :class:`Configured`: the mode paired with its parameters and
the keys every mode has (:class:`~cpa.horizontal.decide.params.SharedParams`). The rest of the
program
holds it as :class:`Params` and never needs to know which mode it is: the one place that
applies a formula to its parameters is :meth:`Configured.replicas`, type-checked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, NamedTuple, Protocol, TypeVar

from cpa.go.json import GoJsonError, JsonValue, members_by_field
from cpa.horizontal.decide.params import (
    SHARED_KEYS,
    ParamsError,
    SharedDecoder,
    SharedParams,
    decode_error,
    document,
)
from cpa.horizontal.decide.steps import Step, show

__all__ = ["NO_OBJECTS", "Axes", "Configured", "Decoder", "Mode", "ModeParams", "Params",
           "larger_reading"]


class Axes(NamedTuple):
    """The counts a formula reads: the Nodes and cores upstream reads, and (ours, opt-in)
    the Pods and Services in the cluster, 0 when not counted."""

    nodes: int
    cores: int
    pods: int = 0
    services: int = 0


NO_OBJECTS: frozenset[str] = frozenset()


class ModeParams(Protocol):
    """A mode's own parameters (a NamedTuple)."""

    def fields(self) -> dict[str, object]:
        """The parameters as the ConfigMap spells them, for logs and ``explain``."""
        ...


P = TypeVar("P", bound=ModeParams)
P_co = TypeVar("P_co", bound=ModeParams, covariant=True)


class Decoder(Protocol[P_co]):
    """A mode's own keys of one value, being decoded as Go's ``json.Unmarshal`` fills a
    struct: zero values until a member sets them, members in document order."""

    def decode(self, key: str, value: JsonValue, where: str) -> None:
        """One member (``key`` is the field's spelling in the mode's ``keys``); type errors
        raise :class:`~cpa.go.json.GoJsonError`."""
        ...

    def finish(self) -> tuple[P_co, list[str]]:
        """The parameters, and every validation problem (none: the parameters are valid)."""
        ...


class Mode(NamedTuple, Generic[P]):
    """One way to compute replicas, named by its ConfigMap key."""

    name: str
    keys: tuple[str, ...]
    """The mode's own keys, as Go's struct names them (matched case-insensitively)."""
    example: str
    """A minimal value, shown when the key is empty."""
    decoder: Callable[[], Decoder[P]]
    replicas: Callable[[P, Axes, list[Step]], int]
    """(params, counts, steps) -> replicas, appending the reasoning to ``steps``."""
    ceiling: Callable[[P], int] = lambda _params: 0
    """The mode's cap on any count (linear's ``max``; 0: none), which also caps the load
    axis (ours) before it meets the formula's count."""
    objects: Callable[[P], frozenset[str]] = lambda _params: NO_OBJECTS
    """Ours: the kinds of object the parameters count (``"pods"``, ``"services"``): the
    daemon watches those, and only while some parameters in force use them."""

    def parse(self, text: str) -> Configured[P]:
        """The key's JSON value -> validated parameters; :class:`ParamsError` lists every
        problem (the shared keys' first, then the mode's own)."""
        obj = document(self.name, text, self.example)
        own = self.decoder()
        shared = SharedDecoder()
        try:
            for key, value in members_by_field(obj, self.keys + SHARED_KEYS) if obj else ():
                where = f"{self.name}.{key}"
                if key in SHARED_KEYS:
                    shared.decode(key, value, where)
                else:
                    own.decode(key, value, where)
        except GoJsonError as error:
            raise decode_error(self.name, error) from None
        common, problems = shared.finish()
        params, own_problems = own.finish()
        problems += own_problems
        if problems:
            raise ParamsError(f'ConfigMap key "{self.name}": ' + "; ".join(problems))
        return Configured(self, params, common)


class Configured(NamedTuple, Generic[P]):
    """A mode with its parameters and the keys every mode has: what a ConfigMap says."""

    mode: Mode[P]
    params: P
    shared: SharedParams = SharedParams()

    @property
    def name(self) -> str:
        return self.mode.name

    def replicas(self, axes: Axes, steps: list[Step]) -> int:
        """The mode's formula on its own parameters: the one dispatch site."""
        return self.mode.replicas(self.params, axes, steps)

    def object_kinds(self) -> frozenset[str]:
        """Ours: the kinds of object (``"pods"``, ``"services"``) these parameters count."""
        return self.mode.objects(self.params)

    def ceiling(self) -> int:
        """The mode's cap (linear's ``max``), 0 for none."""
        return self.mode.ceiling(self.params)

    def fields(self) -> dict[str, object]:
        """Every key as the ConfigMap spells it: the mode's own, then the shared ones."""
        return {**self.params.fields(), **self.shared.fields()}


class Params(Protocol):
    """The parameters in force, of whichever mode: a :class:`Configured` seen from outside."""

    @property
    def name(self) -> str:
        """The mode's name (its ConfigMap key)."""
        ...

    @property
    def shared(self) -> SharedParams:
        """The keys every mode has: which Nodes count, and the behavior."""
        ...

    def replicas(self, axes: Axes, steps: list[Step]) -> int:
        """The mode's formula for these counts, its reasoning appended to ``steps``."""
        ...

    def object_kinds(self) -> frozenset[str]:
        """Ours: the kinds of object (``"pods"``, ``"services"``) these parameters count."""
        ...

    def ceiling(self) -> int:
        """The mode's cap on any count (linear's ``max``), 0 for none."""
        ...

    def fields(self) -> dict[str, object]:
        """Every key as the ConfigMap spells it, for logs and ``explain``."""
        ...


# --- what the modes share -------------------------------------------------------------------

def larger_reading(from_cores: int, from_nodes: int, reading: str, readings: str,
                   lead: str) -> tuple[int, Step]:
    """Upstream keeps the larger of the cores reading and the Nodes reading (cores win only
    if strictly larger). ``reading``/``readings`` name what a count was read from (an axis,
    a table) and ``lead`` opens the sentence when the two differ."""
    winner = max(from_cores, from_nodes)
    if from_cores == from_nodes:
        text = (f"Both {readings} give {show(winner)}, so the expected replica count is "
                f"{show(winner)}.")
    else:
        text = (f"{lead} wins: {show(from_cores)} from the cores {reading} against "
                f"{show(from_nodes)} from the Nodes {reading}, so the expected replica count "
                f"is {show(winner)}.")
    return winner, Step("winner", text)
