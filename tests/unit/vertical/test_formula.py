"""cpa.vertical.decide.formula: CPVA's calculate/increments, by hand."""

from __future__ import annotations

import pytest

from cpa.go.quantity import INT64_MAX, INT64_MIN, Format, Quantity
from cpa.vertical.decide.cpva_config import ResourceScaleConfig, decode_config
from cpa.vertical.decide.formula import (
    MilliRangeError,
    calculate,
    compute,
    guess_format,
    increments,
    steps,
)


def rc(base: str | None = None, max_: str | None = None, step: str | None = None,
       cores: int | None = None, nodes: int | None = None) -> ResourceScaleConfig:
    def q(text: str | None) -> Quantity | None:
        return None if text is None else Quantity.parse(text)
    return ResourceScaleConfig(q(base), q(max_), q(step), cores, nodes)


def test_readme_worked_example() -> None:
    """base 10, max 100, step 2, 4 cores and 2 nodes per step (README)."""
    config = rc("10", "100", "2", cores=4, nodes=2)
    worked = steps(config, nodes=4, cores=64)
    assert (worked.by_cores, worked.by_nodes, worked.want) == (42_000, 14_000, 42_000)
    assert calculate(config, nodes=3, cores=3) == 14_000  # 12 by cores, 14 by nodes


@pytest.mark.parametrize(
    ("count", "per", "expected"),
    [(7, 1, 7), (20, 2, 10), (21, 2, 11), (20, 0, 0), (0, 5, 0), (1, 5, 1),
     (20, -2, -8), (4, -2, 0), (3, -1, -1), (INT64_MAX, 2, -(2**62))],
)
def test_increments_is_go_int_arithmetic(count: int, per: int, expected: int) -> None:
    """Ceiling for positive per; truncation toward zero (and int64 wrap) otherwise."""
    assert increments(count, per) == expected


def test_max_caps_each_side_only_when_positive() -> None:
    assert calculate(rc("10m", "50m", "10m", cores=1), nodes=1, cores=100) == 50
    assert calculate(rc("10m", "0", "10m", cores=1), nodes=1, cores=100) == 1010
    assert calculate(rc("10m", "-5m", "10m", cores=1), nodes=1, cores=100) == 1010
    assert calculate(rc("100m", "50m"), nodes=1, cores=1) == 50  # base above max: max
    worked = steps(rc("10m", "50m", "10m", cores=1, nodes=1), nodes=2, cores=100)
    assert (worked.capped_by_cores, worked.capped_by_nodes) == (True, False)
    assert (worked.by_cores, worked.by_nodes) == (50, 30)


def test_the_larger_side_wins_and_a_negative_side_never_does() -> None:
    assert calculate(rc("10m", step="1m", cores=-2), nodes=4, cores=20) == 10  # -8 steps
    assert calculate(rc("10m", step="1m", cores=2, nodes=1), nodes=30, cores=20) == 40


def test_unset_config_is_zero() -> None:
    assert calculate(ResourceScaleConfig(), nodes=5, cores=20) == 0


def test_milli_arithmetic_wraps_like_int64() -> None:
    config = rc("0", step="9223372036854775", nodes=1)  # 9.2e18 milli per step
    worked = steps(config, nodes=2, cores=0)
    assert worked.by_nodes == (2 * 9223372036854775000) - 2**64 == -1616
    assert worked.want == 0  # the cores side (no steps) is larger


def test_fractions_round_up_to_milli() -> None:
    assert calculate(rc("0.1m"), nodes=1, cores=1) == 1
    assert calculate(rc("1.5"), nodes=1, cores=1) == 1500


def test_too_large_quantities_are_the_panic_cpva_dies_of() -> None:
    with pytest.raises(MilliRangeError):
        calculate(rc("10P"), nodes=1, cores=1)
    assert calculate(rc("9P"), nodes=1, cores=1) == 9 * 10**18  # just below the limit
    config = decode_config('{"c":{"limits":{"memory":{"base":"10E"}}},'
                           '"d":{"limits":{"memory":{"base":"9E"}}}}')
    with pytest.raises(MilliRangeError, match="'d' limits\\['memory'\\]"):
        compute(config, nodes=1, cores=1)


@pytest.mark.parametrize(
    ("resource", "fmt"),
    [("memory", Format.DECIMAL_SI), ("storage", Format.DECIMAL_SI),
     ("cpu", Format.BINARY_SI), ("ephemeral-storage", Format.BINARY_SI),
     ("Memory", Format.BINARY_SI), ("nvidia.com/gpu", Format.BINARY_SI),
     ("hugepages-2Mi", Format.BINARY_SI)],
)
def test_format_comes_from_the_resource_name(resource: str, fmt: Format) -> None:
    assert guess_format(resource) == fmt


def test_compute_formats_every_resource() -> None:
    config = decode_config('{"app":{"requests":{"cpu":{"base":"1","step":"1","nodesPerStep":1},'
                           '"memory":{"base":"64Mi","step":"8Mi","coresPerStep":4}},'
                           '"limits":{"ephemeral-storage":{"base":"1Gi"}}},"empty":{}}')
    computed = compute(config, nodes=1023, cores=16)
    assert {res: str(q) for res, q in computed["app"].requests.items()} == {
        "cpu": "1Ki", "memory": "100663296"}
    assert {res: str(q) for res, q in computed["app"].limits.items()} == {
        "ephemeral-storage": "1Gi"}
    assert computed["empty"].requests == {} and computed["empty"].limits == {}
    assert compute(None, 1, 1) == {}


def test_huge_counts() -> None:
    config = rc("10m", step="1m", cores=1, nodes=1)
    assert calculate(config, nodes=2**40, cores=2**40) == 10 + 2**40
    assert calculate(rc("0", step="1m", cores=1), nodes=0, cores=INT64_MAX) == INT64_MAX
    worked = steps(rc("1m", step="1m", cores=1), nodes=0, cores=INT64_MAX)
    assert (worked.by_cores, worked.by_nodes, worked.want) == (INT64_MIN, 1, 1)
