"""The package's record types (``typing.NamedTuple``) keep the tuple's own methods."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

import pytest

import cpa


def _named_tuples() -> list[type[tuple[Any, ...]]]:
    found: dict[str, type[tuple[Any, ...]]] = {}
    for info in pkgutil.walk_packages(cpa.__path__, "cpa."):
        if info.name.endswith("__main__"):  # runs the command line
            continue
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if (isinstance(value, type) and issubclass(value, tuple)
                    and hasattr(value, "_fields") and value.__module__ == info.name):
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return [found[name] for name in sorted(found)]


NAMED_TUPLES = _named_tuples()


def test_there_are_records_to_check() -> None:
    assert len(NAMED_TUPLES) > 20


@pytest.mark.parametrize("cls", NAMED_TUPLES, ids=lambda cls: cls.__qualname__)
def test_no_field_shadows_a_tuple_method(cls: type[tuple[Any, ...]]) -> None:
    """A field called ``count`` or ``index`` would hide tuple's method of that name."""
    fields: tuple[str, ...] = cls._fields  # type: ignore[attr-defined]
    assert not set(fields) & set(dir(tuple))
