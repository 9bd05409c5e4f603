"""Ours, opt-in: ``podsPerStep`` and ``servicesPerStep`` in /cpvpa's config: parsed, computed
beside cores and Nodes (the largest wins), and the state's poll asking for the counts."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from cpa.vertical.decide.cpva_config import (
    ConfigError,
    config_string,
    decode_config,
    object_kinds,
)
from cpa.vertical.decide.formula import CountsUnavailable, compute, steps
from cpa.vertical.decide.state import VerticalState

MEMORY = ('{"coredns": {"requests": {"memory": {"base": "54M", "step": "2M", '
          '"podsPerStep": 1000, "servicesPerStep": 1000, "nodesPerStep": 10}}}}')


def memory(config: str, nodes: int, pods: int, services: int) -> str:
    decoded = decode_config(config)
    computed = compute(decoded, nodes, 0, {"pods": pods, "services": services})
    return str(computed["coredns"].requests["memory"])


@pytest.mark.parametrize(("nodes", "pods", "services", "expected"), [
    (0, 0, 0, "54M"),
    (100, 0, 0, "74M"),  # the Nodes win: 10 steps
    (100, 150000, 20000, "354M"),  # the Pods: 150 steps
    (10, 500, 20001, "96M"),  # the Services: 21 steps
])
def test_the_largest_count_wins(nodes: int, pods: int, services: int, expected: str) -> None:
    assert memory(MEMORY, nodes, pods, services) == expected


def test_max_caps_the_counts_as_the_others() -> None:
    config = MEMORY.replace('"step": "2M"', '"step": "2M", "max": "100M"')
    assert memory(config, 0, 10**6, 0) == "100M"
    rc = decode_config(config)["coredns"].requests["memory"]  # type: ignore[index]
    s = steps(rc, 0, 0, {"pods": 10**6, "services": 0})
    assert [(o.kind, o.increments, o.capped) for o in s.by_objects] == [
        ("pods", 1000, True), ("services", 0, False)]


def test_kinds_and_the_log_line() -> None:
    config = decode_config(MEMORY)
    assert object_kinds(config) == {"pods", "services"}
    assert "pods_incr=1000 services_incr=1000" in config_string(config)
    plain = decode_config('{"c": {"requests": {"cpu": {"base": "10m", "coresPerStep": 1}}}}')
    assert object_kinds(plain) == frozenset()
    assert "pods_incr" not in config_string(plain)
    # Go matches the field case-insensitively; null leaves the count off
    assert object_kinds(decode_config('{"c": {"limits": {"memory": {"PODSPERSTEP": 5}}}}')
                        ) == {"pods"}
    assert object_kinds(decode_config('{"c": {"limits": {"memory": {"podsPerStep": null}}}}')
                        ) == frozenset()


@pytest.mark.parametrize(("value", "message"), [
    ("0", "greater than 0"),
    ("-5", "greater than 0"),
    ('"1000"', "expected an integer"),
    ("1.5", "expected an integer"),
    ("1e3", "expected an integer"),
    ("true", "expected an integer"),
    ("99999999999999999999", "out of range"),
])
def test_hostile_values_are_refused(value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        decode_config('{"c": {"requests": {"memory": {"podsPerStep": ' + value + "}}}}")


def test_a_count_not_there_is_an_error_not_a_zero() -> None:
    with pytest.raises(CountsUnavailable, match="pods are not counted yet"):
        compute(decode_config(MEMORY), 0, 0, {"services": 3})


def test_the_state_asks_for_the_kinds_its_config_counts() -> None:
    asked: list[frozenset[str]] = []

    def objects(kinds: frozenset[str]) -> Mapping[str, int]:
        asked.append(kinds)
        return {"pods": 2500, "services": 10}

    state = VerticalState(decode_config(MEMORY))
    plan = state.plan(0, 0, objects=objects)
    assert plan.error is None and plan.computed is not None
    assert str(plan.computed["coredns"].requests["memory"]) == "60M"
    assert asked == [frozenset({"pods", "services"})]

    def missing(kinds: frozenset[str]) -> Mapping[str, int]:
        raise CountsUnavailable("the pods are not counted yet: 403, grant it")

    failed = VerticalState(decode_config(MEMORY)).plan(0, 0, objects=missing)
    assert failed.computed is None and failed.error is not None and "grant" in failed.error
    assert VerticalState(decode_config(MEMORY)).plan(0, 0).error is not None
