"""``ladder``: replicas looked up in step tables of cores and Nodes (upstream's ladder
controller).

``{"coresToReplicas": [[1, 1], [64, 3]], "nodesToReplicas": [[1, 1], [2, 2]]}``: each
count is looked up in its table (the last step whose threshold is <= the count; the FIRST
step when the count is below every threshold; 0 for an empty table) and the larger wins.
No min, max or floor: a ladder may give 0 (``[[0, 0], [6, 1]]`` scales from zero). Ours,
opt-in: ``podsToReplicas`` and ``servicesToReplicas`` are two more tables of the same
lookup, on the cluster's Pods and Services (absent, null or empty: off); the largest
lookup wins.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from typing import Final, NamedTuple, overload

from cpa.go.json import GoJsonError, JsonValue, describe, go_int
from cpa.horizontal.decide.modes.mode import NO_OBJECTS, Axes, Mode, larger_reading
from cpa.horizontal.decide.steps import Step, plural

__all__ = ["MODE", "LadderParams", "Table", "replicas"]


class Table(Sequence[tuple[int, int]]):
    """A ladder's ``(threshold, replicas)`` pairs, as given (the decoder sorts them), held
    in two arrays of int64 (Go's int) rather than a tuple of tuples.

    Why: a ConfigMap may hold tens of thousands of steps. As tuples of Python ints they
    take ~90 bytes a step, spread over the small-object allocator's arenas, and whatever
    the daemon allocates while they are in force lands in those arenas and keeps them
    resident after the table is replaced (a very large ladder left megabytes behind). Two
    arrays take 16 bytes a step in two blocks that go back to the system with the table,
    and the lookup bisects the thresholds in place instead of copying them every poll."""

    __slots__ = ("_at", "_replicas")

    def __init__(self, pairs: Iterable[tuple[int, int]] = ()) -> None:
        self._at = array("q")
        self._replicas = array("q")
        for threshold, count in pairs:
            self._at.append(threshold)
            self._replicas.append(count)

    @property
    def thresholds(self) -> Sequence[int]:
        return self._at

    def __len__(self) -> int:
        return len(self._at)

    @overload
    def __getitem__(self, index: int) -> tuple[int, int]: ...

    @overload
    def __getitem__(self, index: slice) -> Table: ...

    def __getitem__(self, index: int | slice) -> tuple[int, int] | Table:
        if isinstance(index, slice):
            return Table(zip(self._at[index], self._replicas[index], strict=True))
        return self._at[index], self._replicas[index]

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return zip(self._at, self._replicas, strict=True)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Table):
            return self._at == other._at and self._replicas == other._replicas
        if isinstance(other, tuple | list):
            return list(self) == [tuple(pair) for pair in other]
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self._at.tobytes(), self._replicas.tobytes()))

    def __repr__(self) -> str:
        return f"Table({list(self)!r})"


_EMPTY: Final = Table()


class LadderParams(NamedTuple):
    """Ladder mode's own keys; each table is ``(threshold, replicas)`` pairs, stably sorted."""

    cores_to_replicas: Table = _EMPTY
    nodes_to_replicas: Table = _EMPTY
    pods_to_replicas: Table = _EMPTY
    """Ours, opt-in: the Pods table (empty: off)."""
    services_to_replicas: Table = _EMPTY
    """Ours, opt-in: the Services table (empty: off)."""

    def fields(self) -> dict[str, object]:
        """The parameters as the ConfigMap spells them, for logs and ``explain``."""
        out: dict[str, object] = {
            "coresToReplicas": [list(p) for p in self.cores_to_replicas],
            "nodesToReplicas": [list(p) for p in self.nodes_to_replicas]}
        for key, table in (("podsToReplicas", self.pods_to_replicas),
                           ("servicesToReplicas", self.services_to_replicas)):
            if table:
                out[key] = [list(p) for p in table]
        return out


KEYS: Final = ("coresToReplicas", "nodesToReplicas", "podsToReplicas", "servicesToReplicas")


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



class _Decoder:
    """ladder's keys of one value: two Go ``[][2]int`` slices."""

    __slots__ = ("tables",)

    def __init__(self) -> None:
        self.tables = {key: _GoPairSlice() for key in KEYS}

    def decode(self, key: str, value: JsonValue, where: str) -> None:
        self.tables[key].decode(value, where)

    def finish(self) -> tuple[LadderParams, list[str]]:
        """Upstream's validation, every problem at once; the tables come back sorted."""
        problems: list[str] = []
        tables: list[Table] = []
        for key, table in self.tables.items():
            pairs = table.pairs()
            problems.extend(
                f"{key} has the pair [{threshold},{replicas}]; thresholds and replica "
                "counts must be 0 or more"
                for threshold, replicas in pairs
                if threshold < 0 or replicas < 0
            )
            # sorted() is stable: among equal thresholds the later pair stays later and so
            # wins the lookup, as Go's insertion sort does for tables of up to 12 pairs.
            tables.append(Table(sorted(pairs, key=lambda pair: pair[0])))
        return LadderParams(*tables), problems


# --- the formula ------------------------------------------------------------------------------


def _lookup(axis: str, noun: str, count: int, table: Table, steps: list[Step]) -> int:
    """upstream ``getExpectedReplicasFromEntries``: binary search on the sorted table."""
    field = f"{axis}ToReplicas"
    label = f"{noun}s"
    if not table:
        steps.append(Step(
            f"{axis}.lookup", f"{field} is empty, so the {label} table gives 0 replicas."
        ))
        return 0
    position = bisect_right(table.thresholds, count)
    if position == 0:
        threshold, replicas = table[0]
        steps.append(Step(
            f"{axis}.lookup",
            f"With {plural(count, noun)} the count is below the first {field} threshold, "
            f"{threshold}, and a ladder then uses its first step anyway, so the {label} table "
            f"gives {replicas}.",
        ))
        return replicas
    threshold, replicas = table[position - 1]
    after = (
        f" (the next starts at {table[position][0]})" if position < len(table) else
        " (the last one)"
    )
    steps.append(Step(
        f"{axis}.lookup",
        f"With {plural(count, noun)} the {field} step at {threshold} applies{after}, so "
        f"the {label} table gives {replicas}.",
    ))
    return replicas


def _object_tables(params: LadderParams, axes: Axes, upstream: int, steps: list[Step]) -> int:
    """Ours: the Pods and Services tables that are on, each looked up as upstream's, and
    the largest of them and upstream's count."""
    result = upstream
    for axis, noun, count, table in (("pods", "Pod", axes.pods, params.pods_to_replicas),
                                     ("services", "Service", axes.services,
                                      params.services_to_replicas)):
        if not table:
            continue
        reading = _lookup(axis, noun, count, table, steps)
        verdict = (f"is more than the {result} so far, so the expected replica count is "
                   f"{reading}." if reading > result else
                   f"is not more than the {result} so far, so the expected replica count "
                   f"stays {result}.")
        steps.append(Step(f"{axis}.winner", f"The {noun}s table's {reading} {verdict}"))
        result = max(result, reading)
    return result


def object_kinds(params: LadderParams) -> frozenset[str]:
    """Ours: the kinds of object whose table is on."""
    if not params.pods_to_replicas and not params.services_to_replicas:
        return NO_OBJECTS
    return frozenset(kind for kind, table in (("pods", params.pods_to_replicas),
                                              ("services", params.services_to_replicas))
                     if table)


def replicas(params: LadderParams, axes: Axes, steps: list[Step]) -> int:
    """upstream's ladder controller: one lookup per table, the larger; then (ours) the Pods
    and Services tables that are on."""
    nodes, cores = axes.nodes, axes.cores
    from_cores = _lookup("cores", "core", cores, params.cores_to_replicas, steps)
    from_nodes = _lookup("nodes", "Node", nodes, params.nodes_to_replicas, steps)
    replicas, winner = larger_reading(from_cores, from_nodes, "table", "tables",
                                      "The lookup yielding more replicas")
    if replicas == 0:
        winner = Step(winner.key, winner.text + " A ladder may name 0 replicas, which linear "
                                                "may not.")
    steps.append(winner)
    if not params.pods_to_replicas and not params.services_to_replicas:
        return replicas
    return _object_tables(params, axes, replicas, steps)


MODE: Final[Mode[LadderParams]] = Mode(
    name="ladder", keys=KEYS, example='{"nodesToReplicas":[[1,1],[2,2]]}',
    decoder=_Decoder, replicas=replicas, objects=object_kinds)
