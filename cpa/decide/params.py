"""Scaling parameters: the ConfigMap's ``linear`` or ``ladder`` value, decoded like Go.

Why so careful: upstream decodes these values with ``json.Unmarshal`` into typed structs,
and a drop-in replacement must accept and reject exactly the same text.  The quirks are
kept on purpose: a ``null`` member leaves the field alone; a duplicate key overwrites the
earlier one, yet the earlier one's type error still fails the decode; a JSON ``null``
document gives all-zero parameters.  Validation follows upstream, but every problem is
reported at once, each naming the ConfigMap key, the field and the value, and saying how
to fix it.
"""

from __future__ import annotations

from dataclasses import dataclass

from cpa.decide.behavior import Behavior, behavior_problems, decode_behavior
from cpa.decide.counting import FIELDS as COUNTING_FIELDS
from cpa.decide.counting import (
    NO_COUNTING,
    Counting,
    CountingDoc,
    counting_problems,
    decode_counting_field,
)
from cpa.decide.gojson import (
    GoJsonError,
    JsonObject,
    JsonValue,
    as_object,
    describe,
    format_go_float,
    go_bool,
    go_float,
    go_int,
    members_by_field,
    parse,
)

__all__ = [
    "LadderParams",
    "LinearParams",
    "Params",
    "ParamsError",
    "parse_ladder",
    "parse_linear",
]


class ParamsError(ValueError):
    """Parameters that upstream would refuse; the message says what to change."""


@dataclass(frozen=True, slots=True)
class LinearParams:
    """Linear mode; ``min`` is already lifted from 0 to 1, ``max`` 0 means no cap."""

    cores_per_replica: float
    nodes_per_replica: float
    min: int
    max: int
    prevent_single_point_failure: bool
    include_unschedulable_nodes: bool
    behavior: Behavior | None = None
    """Ours, opt-in: windows and rate policies (:mod:`cpa.decide.behavior`); None = upstream's."""
    counting: Counting = NO_COUNTING
    """Ours, opt-in: which Nodes and cores count (:mod:`cpa.decide.counting`); default
    upstream's."""

    def fields(self) -> dict[str, object]:
        """The parameters as the ConfigMap spells them, for logs and ``explain``."""
        out: dict[str, object] = {
            "coresPerReplica": self.cores_per_replica,
            "nodesPerReplica": self.nodes_per_replica, "min": self.min, "max": self.max,
            "preventSinglePointFailure": self.prevent_single_point_failure,
            "includeUnschedulableNodes": self.include_unschedulable_nodes}
        out.update(self.counting.fields())
        if self.behavior is not None:
            out["behavior"] = self.behavior.fields()
        return out


@dataclass(frozen=True, slots=True)
class LadderParams:
    """Ladder mode; each table is ``(threshold, replicas)`` pairs, stably sorted."""

    cores_to_replicas: tuple[tuple[int, int], ...]
    nodes_to_replicas: tuple[tuple[int, int], ...]
    include_unschedulable_nodes: bool
    behavior: Behavior | None = None
    """Ours, opt-in: windows and rate policies (:mod:`cpa.decide.behavior`); None = upstream's."""
    counting: Counting = NO_COUNTING
    """Ours, opt-in: which Nodes and cores count (:mod:`cpa.decide.counting`); default
    upstream's."""

    def fields(self) -> dict[str, object]:
        """The parameters as the ConfigMap spells them, for logs and ``explain``."""
        out: dict[str, object] = {
            "coresToReplicas": [list(p) for p in self.cores_to_replicas],
            "nodesToReplicas": [list(p) for p in self.nodes_to_replicas],
            "includeUnschedulableNodes": self.include_unschedulable_nodes}
        out.update(self.counting.fields())
        if self.behavior is not None:
            out["behavior"] = self.behavior.fields()
        return out


Params = LinearParams | LadderParams

_LINEAR_FIELDS = (
    "coresPerReplica",
    "nodesPerReplica",
    "min",
    "max",
    "preventSinglePointFailure",
    "includeUnschedulableNodes",
    "behavior",
    *COUNTING_FIELDS,
)
_LADDER_FIELDS = ("coresToReplicas", "nodesToReplicas", "includeUnschedulableNodes", "behavior",
                  *COUNTING_FIELDS)

_HINTS = {
    "out of range": "use a smaller number",
    "invalid JSON": "fix the JSON syntax: no comments, trailing commas or extra text",
    "expected an integer": "write a whole number such as 2, without quotes, "
    "decimal point or exponent",
    "expected a number": "write a number such as 16 or 0.5, without quotes",
    "expected true or false": "write true or false, without quotes",
    "expected a string": 'write the name in double quotes, e.g. "Percent"',
    "expected a JSON object": "the value must be one JSON object",
    "expected an array of policies": 'write a list of policies such as '
    '[{"type":"Percent","value":33,"periodSeconds":180}]',
    "expected an array": "write a list of [threshold, replicas] pairs such as [[1,1],[64,3]]",
    "expected a [threshold": "write each pair as [threshold, replicas], e.g. [64,3]",
}


def _fail(mode: str, error: GoJsonError) -> ParamsError:
    message = str(error)
    hint = next((h for marker, h in _HINTS.items() if marker in message), None)
    suffix = f" ({hint})" if hint else ""
    return ParamsError(f'ConfigMap key "{mode}": {message}{suffix}')


def _document(mode: str, text: str) -> JsonObject | None:
    if not text.strip():
        raise ParamsError(
            f'ConfigMap key "{mode}" is empty; set it to a JSON object such as '
            + (
                '{"coresPerReplica":256,"nodesPerReplica":16}'
                if mode == "linear"
                else '{"nodesToReplicas":[[1,1],[2,2]]}'
            )
        )
    try:
        return as_object(parse(text), mode)
    except GoJsonError as error:
        raise _fail(mode, error) from None


def parse_linear(text: str) -> LinearParams:
    """Decode and validate a ``linear`` value (see the contract for every rule)."""
    obj = _document("linear", text)
    cores = nodes = 0.0
    minimum = maximum = 0
    spof = include = False
    behavior_doc = None
    counting_doc = CountingDoc()
    try:
        for field, value in members_by_field(obj, _LINEAR_FIELDS) if obj else ():
            where = f"linear.{field}"
            if field == "behavior":  # a pointer: null makes it nil
                behavior_doc = decode_behavior(value, where, behavior_doc)
            elif field in COUNTING_FIELDS:
                decode_counting_field(counting_doc, field, value, where)
            elif value is None:
                continue  # Go leaves the field as it was
            elif field == "coresPerReplica":
                cores = go_float(value, where)
            elif field == "nodesPerReplica":
                nodes = go_float(value, where)
            elif field == "min":
                minimum = go_int(value, where)
            elif field == "max":
                maximum = go_int(value, where)
            elif field == "preventSinglePointFailure":
                spof = go_bool(value, where)
            else:
                include = go_bool(value, where)
    except GoJsonError as error:
        raise _fail("linear", error) from None

    behavior, problems = behavior_problems(behavior_doc)
    counting, counting_errors = counting_problems(counting_doc)
    problems.extend(counting_errors)
    if cores == 0 and nodes == 0:
        problems.append(
            "coresPerReplica and nodesPerReplica are both 0 or absent; set at least one "
            "of them to a positive number, e.g. \"nodesPerReplica\":16"
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
    if problems:
        raise ParamsError('ConfigMap key "linear": ' + "; ".join(problems))
    return LinearParams(
        cores_per_replica=cores,
        nodes_per_replica=nodes,
        min=minimum or 1,
        max=maximum,
        prevent_single_point_failure=spof,
        include_unschedulable_nodes=include,
        behavior=behavior,
        counting=counting,
    )


class _GoPairSlice:
    """A Go ``[][2]int`` being decoded, including the reuse of its backing array.

    Go decodes a repeated key into the slice it already holds: a ``null`` pair keeps the
    old pair at that index, and pairs hidden beyond the length by an earlier, shorter
    array come back into view.  Modelling the backing store keeps us byte-for-byte with
    upstream even for such odd documents.
    """

    def __init__(self) -> None:
        self.backing: list[list[int]] = []
        self.length = 0

    def pairs(self) -> list[tuple[int, int]]:
        return [(slot[0], slot[1]) for slot in self.backing[: self.length]]

    def decode(self, value: JsonValue, where: str) -> None:
        if value is None or value == ():
            # null makes the slice nil and [] makes a fresh empty one: old storage is gone.
            self.backing, self.length = [], 0
            return
        if not isinstance(value, tuple):
            raise GoJsonError(
                f"{where}: expected an array of [threshold, replicas] pairs, "
                f"got {describe(value)}"
            )
        for index, pair in enumerate(value):
            if index >= len(self.backing):
                self.backing.append([0, 0])
            if pair is None:
                continue  # null leaves a Go array element as it was
            if not isinstance(pair, tuple):
                raise GoJsonError(
                    f"{where}[{index}]: expected a [threshold, replicas] pair, "
                    f"got {describe(pair)}"
                )
            slot = self.backing[index]
            for position in range(2):
                if position >= len(pair):
                    slot[position] = 0  # a short array zero-fills the rest of a Go array
                elif pair[position] is not None:
                    slot[position] = go_int(pair[position], f"{where}[{index}][{position}]")
            # Elements past the second are skipped without a type check, as in Go.
        self.length = len(value)


def parse_ladder(text: str) -> LadderParams:
    """Decode and validate a ``ladder`` value; tables come back sorted by threshold."""
    obj = _document("ladder", text)
    tables = {"coresToReplicas": _GoPairSlice(), "nodesToReplicas": _GoPairSlice()}
    include = False
    behavior_doc = None
    counting_doc = CountingDoc()
    try:
        for field, value in members_by_field(obj, _LADDER_FIELDS) if obj else ():
            where = f"ladder.{field}"
            if field == "behavior":  # a pointer: null makes it nil
                behavior_doc = decode_behavior(value, where, behavior_doc)
            elif field in COUNTING_FIELDS:
                decode_counting_field(counting_doc, field, value, where)
            elif field in tables:
                tables[field].decode(value, where)
            elif value is not None:
                include = go_bool(value, where)
    except GoJsonError as error:
        raise _fail("ladder", error) from None

    sorted_tables: dict[str, tuple[tuple[int, int], ...]] = {}
    behavior, problems = behavior_problems(behavior_doc)
    counting, counting_errors = counting_problems(counting_doc)
    problems.extend(counting_errors)
    for field, table in tables.items():
        pairs = table.pairs()
        problems.extend(
            f"{field} has the pair [{threshold},{replicas}]; thresholds and replica "
            "counts must be 0 or more"
            for threshold, replicas in pairs
            if threshold < 0 or replicas < 0
        )
        # sorted() is stable: among equal thresholds the later pair stays later and so
        # wins the lookup, as Go's insertion sort does for tables of up to 12 pairs.
        sorted_tables[field] = tuple(sorted(pairs, key=lambda pair: pair[0]))
    if problems:
        raise ParamsError('ConfigMap key "ladder": ' + "; ".join(problems))
    return LadderParams(
        cores_to_replicas=sorted_tables["coresToReplicas"],
        nodes_to_replicas=sorted_tables["nodesToReplicas"],
        include_unschedulable_nodes=include,
        behavior=behavior,
        counting=counting,
    )
