"""The records on the daemon's way to its first write, without dataclasses.

Importing ``dataclasses`` costs ~10 ms and creating each dataclass ~1 ms, on the CPU the
first Node list's decoding needs: so the modules the first poll imports make their frozen
records NamedTuples and their mutable ones plain classes with ``__slots__``. The plain
classes write ``__init__``, ``__eq__`` and ``__repr__`` by hand; these tests hold them to
what the dataclasses generated (the same arguments and defaults, a fresh list per object,
equal only to the same class with equal fields, unhashable, the same repr).
"""

from __future__ import annotations

import ast
import dataclasses
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cpa.horizontal.daemon.configmapsource import DefaultsReport
from cpa.horizontal.daemon.cpa_loop import PollResult
from cpa.horizontal.daemon.watchdogs import Overwrite
from cpa.horizontal.decide.behavior import Behavior, BehaviorState, Outcome, Policy, Rules
from cpa.horizontal.decide.counting import Counting, CountingDoc
from cpa.horizontal.decide.decision import Decision
from cpa.horizontal.decide.load import Load, Prometheus
from cpa.horizontal.decide.modes.ladder import LadderParams
from cpa.horizontal.decide.modes.linear import LinearParams
from cpa.horizontal.decide.modes.mode import Mode
from cpa.horizontal.decide.steps import Step
from cpa.horizontal.decide.windows import PanicState
from cpa.horizontal.decide.zones import Zones
from cpa.kube.configmap import ConfigMapData
from cpa.runtime.polls import PollRecord
from cpa.vertical.daemon.cpvpa_loop import VerticalPollResult

REPO = Path(__file__).resolve().parents[2]
MODULES = (
    # before the Node list goes out
    "cpa/go/json.py",
    "cpa/go/quantity.py",
    "cpa/kube/clientconfig.py",
    "cpa/kube/selector.py",
    "cpa/kube/targets.py",
    "cpa/nodes/watch.py",
    # while it is read, and at the first poll
    "cpa/horizontal/daemon/configmapsource.py",
    "cpa/horizontal/daemon/cpa_loop.py",
    "cpa/horizontal/daemon/watchdogs.py",
    "cpa/horizontal/decide/behavior.py",
    "cpa/horizontal/decide/counting.py",
    "cpa/horizontal/decide/decision.py",
    "cpa/horizontal/decide/load.py",
    "cpa/horizontal/decide/modes/ladder.py",
    "cpa/horizontal/decide/modes/linear.py",
    "cpa/horizontal/decide/modes/mode.py",
    "cpa/horizontal/decide/steps.py",
    "cpa/horizontal/decide/windows.py",
    "cpa/horizontal/decide/zones.py",
    "cpa/kube/configmap.py",
    "cpa/runtime/polls.py",
)
NAMED_TUPLES = (ConfigMapData, DefaultsReport, Step, Policy, Rules, Behavior, Outcome,
                Counting, Prometheus, Load, Zones, Decision, Mode, LadderParams,
                LinearParams, Overwrite)


@pytest.mark.parametrize("path", MODULES)
def test_no_dataclasses_in_the_module(path: str) -> None:
    """Not even inside a function: a lazy import on the start-up path still runs (and
    neither inspect, which dataclasses would bring)."""
    found = []
    for node in ast.walk(ast.parse((REPO / path).read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        else:
            continue
        found += [f"{path}:{node.lineno}: {name}" for name in names
                  if name.split(".")[0] in ("dataclasses", "inspect")]
    assert found == []


def test_the_first_poll_imports_no_dataclasses() -> None:
    code = ("import sys, cpa.horizontal.daemon.cpa_loop, cpa.kube.scale, cpa.kube.writers, "
            "cpa.horizontal.daemon.configmapsource; print('dataclasses' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=REPO)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("cls", NAMED_TUPLES, ids=lambda cls: cls.__name__)
def test_no_field_shadows_a_tuple_method(cls: type[tuple[Any, ...]]) -> None:
    """A field called ``count`` or ``index`` would hide tuple's method of that name."""
    fields: tuple[str, ...] = cls._fields  # type: ignore[attr-defined]
    assert not set(fields) & set(dir(tuple))


# --- the plain classes: what the dataclasses were ------------------------------------------

ORIGINAL_FIELDS: dict[type, tuple[str, ...]] = {
    BehaviorState: ("recommendations", "scale_up_events", "scale_down_events"),
    CountingDoc: ("exclude_taints", "max_cores_per_node", "max_replicas_per_node"),
    PanicState: ("since", "max_pods", "begun"),
    PollRecord: ("started", "duration", "error", "stale"),
    PollResult: ("started", "duration", "error", "stale", "counts", "params",
                 "params_version", "params_invalid", "configmap_defaults", "decision",
                 "scales", "overwritten", "behavior", "early", "load", "decisions",
                 "target_counts"),
    VerticalPollResult: ("started", "duration", "error", "stale", "nodes", "cores",
                         "dry_run", "targets"),
}
"""Each class's fields as its dataclass declared them: the order of ``__init__``'s
arguments and of the repr."""

DEFAULTS: dict[type, dict[str, object]] = {
    BehaviorState: {"recommendations": [], "scale_up_events": [], "scale_down_events": []},
    CountingDoc: {"exclude_taints": None, "max_cores_per_node": None,
                  "max_replicas_per_node": None},
    PanicState: {"since": None, "max_pods": 0, "begun": False},
    PollRecord: {"duration": 0.0, "error": None, "stale": None},
    PollResult: {"duration": 0.0, "error": None, "stale": None, "counts": None,
                 "params": None, "params_version": None, "params_invalid": None,
                 "configmap_defaults": None, "decision": None, "scales": [],
                 "overwritten": [], "behavior": {}, "early": False, "load": {},
                 "decisions": {}, "target_counts": {}},
    VerticalPollResult: {"duration": 0.0, "error": None, "stale": None, "nodes": None,
                         "cores": None, "dry_run": False, "targets": []},
}
PLAIN = tuple(ORIGINAL_FIELDS)


def _values(cls: type) -> dict[str, object]:
    """A distinct value for every field, in the declared order."""
    return {name: f"value of {name}" for name in ORIGINAL_FIELDS[cls]}


def _required(cls: type) -> dict[str, object]:
    """The arguments without a default (a poll result's ``started``)."""
    return {name: 1.5 for name in ORIGINAL_FIELDS[cls] if name not in DEFAULTS[cls]}


@pytest.mark.parametrize("cls", PLAIN, ids=lambda cls: cls.__name__)
def test_arguments_and_defaults_as_the_dataclass(cls: type) -> None:
    names = ORIGINAL_FIELDS[cls]
    values = _values(cls)
    positional, by_name = cls(*values.values()), cls(**values)
    for name in names:
        assert getattr(positional, name) == getattr(by_name, name) == values[name]
    made = cls(**_required(cls))
    for name, default in DEFAULTS[cls].items():
        assert getattr(made, name) == default and type(getattr(made, name)) is type(default)
    with pytest.raises(AttributeError):
        made.not_a_field = 1  # slots: no other attribute, as the dataclasses had
    with pytest.raises(TypeError):
        cls(*values.values(), "one too many")


@pytest.mark.parametrize("cls", PLAIN, ids=lambda cls: cls.__name__)
def test_a_fresh_list_or_dict_for_each_object(cls: type) -> None:
    one, two = cls(**_required(cls)), cls(**_required(cls))
    for name, default in DEFAULTS[cls].items():
        if isinstance(default, list | dict):
            assert getattr(one, name) is not getattr(two, name), name


@pytest.mark.parametrize("cls", PLAIN, ids=lambda cls: cls.__name__)
def test_equal_as_the_dataclass(cls: type) -> None:
    values = _values(cls)
    assert cls(**values) == cls(**values)
    assert (cls(**values) != cls(**values)) is False
    for name in values:
        assert cls(**values) != cls(**{**values, name: "another"}), name
    nan = float("nan")  # compared as one tuple: the same object is equal to itself
    assert cls(**{**values, ORIGINAL_FIELDS[cls][0]: nan}) == cls(
        **{**values, ORIGINAL_FIELDS[cls][0]: nan})
    assert cls(**values).__eq__(tuple(values.values())) is NotImplemented
    assert cls(**values) != tuple(values.values())


def test_a_subclass_is_not_equal_to_its_base() -> None:
    """The dataclass compared only objects of the very same class."""
    base = PollRecord(1.0, 2.0, "e", "s")
    assert PollResult(1.0, 2.0, "e", "s") != base
    assert VerticalPollResult(1.0, 2.0, "e", "s") != base
    assert base.__eq__(PollResult(1.0, 2.0, "e", "s")) is NotImplemented


@pytest.mark.parametrize("cls", PLAIN, ids=lambda cls: cls.__name__)
def test_not_hashable_as_the_dataclass(cls: type) -> None:
    """A mutable dataclass with ``eq`` has ``__hash__`` None."""
    assert cls.__hash__ is None
    with pytest.raises(TypeError):
        hash(cls(**_required(cls)))


@pytest.mark.parametrize("cls", PLAIN, ids=lambda cls: cls.__name__)
def test_repr_as_the_dataclass(cls: type) -> None:
    reference = dataclasses.make_dataclass(cls.__name__, ORIGINAL_FIELDS[cls])
    values: dict[str, Any] = {**_values(cls), ORIGINAL_FIELDS[cls][-1]: [1, "two"]}
    assert repr(cls(**values)) == repr(reference(**values))


@pytest.mark.parametrize("cls", (PollResult, VerticalPollResult), ids=lambda c: c.__name__)
def test_a_poll_result_names_every_slot_of_its_classes(cls: type[PollRecord]) -> None:
    """``_FIELDS`` (what ``==`` compares and ``repr`` shows) holds every slot, the base's
    too, and ``__init__`` sets them all."""
    slots = {name for klass in cls.__mro__ for name in getattr(klass, "__slots__", ())}
    assert set(cls._FIELDS) == slots and len(cls._FIELDS) == len(slots)
    made = cls(started=0.0)
    for name in slots:
        getattr(made, name)  # set by __init__: no AttributeError
