"""What every mode's parameters share: the keys every mode has, and how a value is read.

A ConfigMap value (``linear`` or ``ladder``) is one JSON object, decoded like Go's
``json.Unmarshal`` into a typed struct, because a drop-in replacement must accept and
reject exactly the same text as upstream. Each mode (:mod:`cpa.horizontal.decide.modes`) reads its
own keys; the keys every mode has are read here, once:

* ``includeUnschedulableNodes`` (upstream's, in both of its modes): which counts the
  formula gets;
* ``behavior`` (ours, opt-in): windows and rate policies (:mod:`cpa.horizontal.decide.behavior`);
* ``excludeNodesWithTaints``, ``maxCoresPerNode``, ``maxReplicasPerNode`` (ours, opt-in):
  which Nodes and cores count (:mod:`cpa.horizontal.decide.counting`);
* ``zones`` (ours, opt-in): enough replicas for every zone (:mod:`cpa.horizontal.decide.zones`);
* ``load`` (ours, opt-in): a load axis with stable and panic windows
  (:mod:`cpa.horizontal.decide.load`, :mod:`cpa.horizontal.decide.windows`);
* ``targetPlacement`` (ours, opt-in): each target counts only the Nodes its Pod template
  could be scheduled on (:mod:`cpa.nodes.placement`; the daemon reads the templates);
* ``managePodDisruptionBudget`` (ours, opt-in): a PodDisruptionBudget per target in step
  with its replicas (:mod:`cpa.kube.pdb`; no effect on the decision);
* ``capToPlaceable`` (ours, opt-in): ``true`` caps a target with a required self pod
  anti-affinity at the Nodes (or zones) its Pods can be placed on, ``"report"`` only says
  so (:mod:`cpa.horizontal.decide.placeable`; applied by the daemon after every other step).

The quirks are kept on purpose: a ``null`` member leaves the field alone; a duplicate key
overwrites the earlier one, yet the earlier one's type error still fails the decode; a JSON
``null`` document gives all-zero parameters. Every validation problem is reported at once,
each naming the ConfigMap key, the field and the value, and saying how to fix it
(:class:`ParamsError`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, NamedTuple

from cpa.go.json import (
    GoJsonError,
    JsonObject,
    JsonValue,
    as_object,
    describe,
    go_bool,
    parse,
)
from cpa.horizontal.decide.behavior import behavior_problems, decode_behavior
from cpa.horizontal.decide.counting import FIELDS as COUNTING_KEYS
from cpa.horizontal.decide.counting import (
    NO_COUNTING,
    Counting,
    CountingDoc,
    counting_problems,
    decode_counting_field,
)
from cpa.horizontal.decide.load import decode_load, load_problems
from cpa.horizontal.decide.zones import decode_zones, zones_problems
from cpa.nodes.counts import CountingPolicy

if TYPE_CHECKING:  # opt-in keys: their modules load with the first value that has one
    from cpa.horizontal.decide.behavior import Behavior, BehaviorDoc
    from cpa.horizontal.decide.load import Load, LoadDoc
    from cpa.horizontal.decide.zones import Zones, ZonesDoc

__all__ = ["BUDGET_KEY", "CAP_KEY", "PLACEMENT_KEY", "SHARED_KEYS", "ParamsError", "SharedDecoder",
           "SharedParams", "decode_error", "document"]


class ParamsError(ValueError):
    """Parameters that upstream would refuse; the message says what to change."""


class SharedParams(NamedTuple):
    """The keys every mode has; the defaults are upstream's (no behavior, every Node)."""

    include_unschedulable_nodes: bool = False
    behavior: Behavior | None = None
    """Ours, opt-in: windows and rate policies (:mod:`cpa.horizontal.decide.behavior`); None =
    upstream's."""
    counting: Counting = NO_COUNTING
    """Ours, opt-in: which Nodes and cores count (:mod:`cpa.horizontal.decide.counting`); default
    upstream's."""
    zones: Zones | None = None
    """Ours, opt-in: replicas for every zone (:mod:`cpa.horizontal.decide.zones`); None =
    upstream's."""
    load: Load | None = None
    """Ours, opt-in: the load axis (:mod:`cpa.horizontal.decide.load`); None = upstream's."""
    target_placement: bool = False
    """Ours, opt-in: count per target only the Nodes its Pod template fits on."""
    manage_budgets: bool = False
    """Ours, opt-in: keep a PodDisruptionBudget per target (maxUnavailable 1 above one
    replica, none at one)."""
    cap_to_placeable: str | None = None
    """Ours, opt-in: ``"cap"`` (the key's ``true``) or ``"report"``; None = upstream's."""

    def fields(self) -> dict[str, object]:
        """The keys as the ConfigMap spells them, for logs and ``explain`` (after the
        mode's own)."""
        out: dict[str, object] = {"includeUnschedulableNodes": self.include_unschedulable_nodes}
        out.update(self.counting.fields())
        if self.zones is not None:
            out["zones"] = self.zones.fields()
        if self.load is not None:
            out["load"] = self.load.fields()
        if self.behavior is not None:
            out["behavior"] = self.behavior.fields()
        if self.target_placement:
            out[PLACEMENT_KEY] = True
        if self.manage_budgets:
            out[BUDGET_KEY] = True
        if self.cap_to_placeable is not None:
            out[CAP_KEY] = True if self.cap_to_placeable == CAP else REPORT
        return out

    def policy(self) -> CountingPolicy:
        """What the node store counts for these parameters: the counting keys' policy, and
        the zones' label when there is a ``zones`` key."""
        policy = self.counting.policy()
        if self.zones is None:
            return policy
        return policy._replace(zone_key=self.zones.topology_key)


PLACEMENT_KEY: Final = "targetPlacement"
BUDGET_KEY: Final = "managePodDisruptionBudget"
CAP_KEY: Final = "capToPlaceable"
CAP: Final = "cap"
REPORT: Final = "report"
ZONES_KEY: Final = "zones"  # cpa.horizontal.decide.zones.FIELD
LOAD_KEY: Final = "load"  # cpa.horizontal.decide.load.FIELD
SHARED_KEYS: Final = ("includeUnschedulableNodes", "behavior", *COUNTING_KEYS, ZONES_KEY,
                      LOAD_KEY, PLACEMENT_KEY, BUDGET_KEY, CAP_KEY)


class SharedDecoder:
    """The shared keys of one value as Go decodes them, member by member in document order
    (a repeated key decodes over the earlier value)."""

    __slots__ = ("_behavior", "_budgets", "_cap", "_counting", "_include", "_load",
                 "_placement", "_zones")

    def __init__(self) -> None:
        self._include = False
        self._behavior: BehaviorDoc | None = None  # None: Go's nil pointer
        self._counting = CountingDoc()
        self._zones: ZonesDoc | None = None
        self._load: LoadDoc | None = None
        self._placement = False
        self._budgets = False
        self._cap: bool | str = False  # as decoded: checked in finish()

    def decode(self, key: str, value: JsonValue, where: str) -> None:
        """One member of a shared key (type errors raise :class:`GoJsonError`)."""
        if key == "behavior":  # a pointer: null makes it nil
            self._behavior = decode_behavior(value, where, self._behavior)
        elif key == ZONES_KEY:  # a pointer too
            self._zones = decode_zones(value, where, self._zones)
        elif key == LOAD_KEY:  # a pointer too
            self._load = decode_load(value, where, self._load)
        elif key == "includeUnschedulableNodes":
            if value is not None:  # null leaves the field as it was
                self._include = go_bool(value, where)
        elif key == PLACEMENT_KEY:
            if value is not None:
                self._placement = go_bool(value, where)
        elif key == BUDGET_KEY:
            if value is not None:
                self._budgets = go_bool(value, where)
        elif key == CAP_KEY:
            if isinstance(value, bool | str):
                self._cap = value
            elif value is not None:
                raise GoJsonError(f'{where}: expected true, false or "report", got '
                                  f"{describe(value)}")
        else:
            decode_counting_field(self._counting, key, value, where)

    def finish(self) -> tuple[SharedParams, list[str]]:
        """The validated keys, and every problem found (behavior's first, then counting's,
        then the zones', then the load's)."""
        behavior: Behavior | None = None
        zones: Zones | None = None
        load: Load | None = None
        problems: list[str] = []
        zones_errors: list[str] = []
        load_errors: list[str] = []
        if self._behavior is not None:
            behavior, problems = behavior_problems(self._behavior)
        counting, counting_errors = counting_problems(self._counting)
        if self._zones is not None:
            zones, zones_errors = zones_problems(self._zones)
        if self._load is not None:
            load, load_errors = load_problems(self._load)
        cap, cap_errors = _cap_mode(self._cap)
        return (SharedParams(self._include, behavior, counting, zones, load, self._placement,
                             self._budgets, cap),
                problems + counting_errors + zones_errors + load_errors + cap_errors)


def _cap_mode(value: bool | str) -> tuple[str | None, list[str]]:
    """``capToPlaceable``: true caps, ``"report"`` only reports, false is upstream's."""
    if value is True:
        return CAP, []
    if value is False:
        return None, []
    if value == REPORT:
        return REPORT, []
    return None, [f"capToPlaceable is {describe(value)}; write true to cap the replicas at "
                  'the Nodes (or zones) they can be placed on, "report" to only report '
                  "when they exceed them, or false"]


_HINTS = {
    "out of range": "use a smaller number",
    "invalid JSON": "fix the JSON syntax: no comments, trailing commas or extra text",
    "expected an integer": "write a whole number such as 2, without quotes, "
    "decimal point or exponent",
    "expected a number": "write a number such as 16 or 0.5, without quotes",
    "expected true or false": "write true or false, without quotes",
    'expected true, false or "report"': 'write true, false or "report"',
    "expected a string": 'write the name in double quotes, e.g. "Percent"',
    "expected a JSON object": "the value must be one JSON object",
    "expected an array of policies": 'write a list of policies such as '
    '[{"type":"Percent","value":33,"periodSeconds":180}]',
    "expected an array": "write a list of [threshold, replicas] pairs such as [[1,1],[64,3]]",
    "expected a [threshold": "write each pair as [threshold, replicas], e.g. [64,3]",
}


def decode_error(key: str, error: GoJsonError) -> ParamsError:
    """What Go's decoder refused in the ConfigMap key ``key``, with a hint how to fix it."""
    message = str(error)
    hint = next((h for marker, h in _HINTS.items() if marker in message), None)
    suffix = f" ({hint})" if hint else ""
    return ParamsError(f'ConfigMap key "{key}": {message}{suffix}')


def document(key: str, text: str, example: str) -> JsonObject | None:
    """The value of the ConfigMap key ``key`` as a JSON object (None for a JSON ``null``);
    ``example`` is a minimal value of that mode, shown when the key is empty."""
    if not text.strip():
        raise ParamsError(
            f'ConfigMap key "{key}" is empty; set it to a JSON object such as {example}')
    try:
        return as_object(parse(text), key)
    except GoJsonError as error:
        raise decode_error(key, error) from None
