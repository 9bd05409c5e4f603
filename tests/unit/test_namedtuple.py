"""cpa.namedtuple.NamedTuple builds the class typing.NamedTuple builds, without checking the
annotations at run time (that check was two thirds of a record class's creation)."""

from __future__ import annotations

import ast
import collections
import inspect
import pickle
import typing
from pathlib import Path
from typing import Any, Generic, TypeVar

import pytest

from cpa import namedtuple as ours_module
from cpa.namedtuple import NamedTuple

REPO = Path(__file__).resolve().parents[2]
T = TypeVar("T")


class Ours(NamedTuple):
    """A record."""

    name: str
    number: int = 0
    tags: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return f"{self.name}/{self.number}"

    def more(self, n: int) -> Ours:
        return self._replace(number=self.number + n)


class Theirs(typing.NamedTuple):
    """A record."""

    name: str
    number: int = 0
    tags: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return f"{self.name}/{self.number}"

    def more(self, n: int) -> Theirs:
        return self._replace(number=self.number + n)


class OursGeneric(NamedTuple, Generic[T]):
    value: T
    note: str = ""


class TheirsGeneric(typing.NamedTuple, Generic[T]):
    value: T
    note: str = ""


def test_the_class_is_typings() -> None:
    for attr in ("_fields", "_field_defaults", "__doc__", "__module__"):
        assert getattr(Ours, attr) == getattr(Theirs, attr), attr
    assert Ours.__name__ == "Ours" and Ours.__qualname__ == "Ours"
    assert Ours.__bases__ == Theirs.__bases__ == (tuple,)
    assert type(Ours) is type and type(Theirs) is type
    assert list(Ours.__annotations__) == list(Theirs.__annotations__)
    assert typing.get_type_hints(Ours) == typing.get_type_hints(Theirs)


@pytest.mark.parametrize("args, kwargs", [
    (("a",), {}),
    (("a", 2), {}),
    (("a",), {"tags": ("x", "y")}),
    ((), {"name": "b", "number": 3}),
])
def test_instances_behave_as_typings(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    ours, theirs = Ours(*args, **kwargs), Theirs(*args, **kwargs)
    assert tuple(ours) == tuple(theirs)
    assert tuple.__eq__(ours, theirs) and hash(ours) == hash(theirs)
    assert repr(ours).replace("Ours", "X") == repr(theirs).replace("Theirs", "X")
    assert ours._asdict() == theirs._asdict()
    assert ours.label == theirs.label
    assert tuple(ours.more(2)) == tuple(theirs.more(2)) and type(ours.more(2)) is Ours
    assert Ours._make(tuple(ours)) == ours
    assert pickle.loads(pickle.dumps(ours)) == ours


def test_the_same_errors_as_typing() -> None:
    with pytest.raises(TypeError) as ours_error:
        class _A(NamedTuple):
            a: int = 0
            b: int  # type: ignore[misc]
    with pytest.raises(TypeError) as theirs_error:
        class _B(typing.NamedTuple):
            a: int = 0
            b: int  # type: ignore[misc]
    assert str(ours_error.value) == str(theirs_error.value)
    with pytest.raises(AttributeError, match="Cannot overwrite NamedTuple attribute _fields"):
        class _C(NamedTuple):
            a: int
            _fields = ("x",)  # type: ignore[misc]
    with pytest.raises(TypeError, match="can only inherit from a NamedTuple type and Generic"):
        class _D(NamedTuple, dict):  # type: ignore[misc,type-arg]
            a: int
    with pytest.raises(TypeError, match="class statements"):
        NamedTuple("E", [("a", int)])
    with pytest.raises(TypeError):
        Ours()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Ours("a", nope=1)  # type: ignore[call-arg]


def test_generic_records_as_typings() -> None:
    parameters = {cls: vars(cls)["__parameters__"] for cls in (OursGeneric, TheirsGeneric)}
    assert parameters == {OursGeneric: (T,), TheirsGeneric: (T,)}
    assert OursGeneric.__bases__ == TheirsGeneric.__bases__
    assert OursGeneric[int](1) == (1, "") and OursGeneric[int] is not OursGeneric
    assert repr(OursGeneric(1)) == "OursGeneric(value=1, note='')"


def test_annotations_are_not_checked_at_run_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the saving is: typing checks (and compiles) each annotation; ours does not."""
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("an annotation was checked")

    monkeypatch.setattr(typing, "_type_check", refuse)
    with pytest.raises(AssertionError):
        class _Checked(typing.NamedTuple):
            a: int

    class Unchecked(NamedTuple):
        a: int
        b: list[int] = []  # noqa: RUF012

    assert Unchecked(1) == (1, [])


def test_cpa_records_use_ours() -> None:
    """Every record class of the package: a typing.NamedTuple would cost its check again."""
    found = []
    for path in sorted((REPO / "cpa").rglob("*.py")):
        if path.name == "namedtuple.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "typing" and any(
                    alias.name == "NamedTuple" for alias in node.names):
                found.append(f"{path.relative_to(REPO)}:{node.lineno}")
            if isinstance(node, ast.Attribute) and node.attr == "NamedTuple" and isinstance(
                    node.value, ast.Name) and node.value.id == "typing":
                found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert found == [], "use cpa.namedtuple.NamedTuple"


@pytest.mark.parametrize("fields", [(), ("a",), ("a", "b"), ("name", "rv", "x", "y", "z")])
@pytest.mark.parametrize("defaults", [(), (1,), (1, 2)])
def test_the_class_builder_is_collections_namedtuple(fields: tuple[str, ...],
                                                     defaults: tuple[int, ...]) -> None:
    """Field by field, method by method: the ``__new__`` made from a code compiled once
    for the number of fields (not from source for each class) is collections'."""
    defaults = defaults[:len(fields)]
    built = ours_module._namedtuple("Rec", fields, defaults, __name__)  # type: ignore[attr-defined]
    make: Any = collections.namedtuple  # fields given at run time
    made = make("Rec", fields, defaults=list(defaults), module=__name__)
    for attr in ("_fields", "_field_defaults", "__doc__", "__module__", "__match_args__",
                 "__slots__", "__name__", "__qualname__"):
        assert getattr(built, attr) == getattr(made, attr), attr
    for name in ("__new__", "_replace", "__repr__", "_asdict", "__getnewargs__"):
        ours, theirs = getattr(built, name), getattr(made, name)
        for attr in ("__name__", "__qualname__", "__doc__", "__defaults__"):
            assert getattr(ours, attr) == getattr(theirs, attr), (name, attr)
    assert built.__new__.__module__ == made.__new__.__module__  # the others are defined here
    assert inspect.signature(built.__new__) == inspect.signature(made.__new__)
    assert built._make.__doc__ == made._make.__doc__
    for name in fields:
        assert vars(built)[name].__doc__ == vars(made)[name].__doc__
        assert type(vars(built)[name]) is type(vars(made)[name])
    values = tuple(range(10, 10 + len(fields)))
    assert built(*values) == made(*values) and repr(built(*values)) == repr(made(*values))
    assert built(**dict(zip(fields, values, strict=True))) == values
    if fields:
        with pytest.raises(TypeError) as ours_error:
            built(*values, 99)
        with pytest.raises(TypeError) as theirs_error:
            made(*values, 99)
        assert str(ours_error.value) == str(theirs_error.value)


def test_a_field_with_an_underscore_is_refused_as_collections_does() -> None:
    with pytest.raises(ValueError, match="cannot start with an underscore"):
        ours_module._namedtuple("Rec", ("_a",), (), __name__)  # type: ignore[attr-defined]
