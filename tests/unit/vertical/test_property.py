"""Property tests for cpa.vertical: a plain reference formula, monotonicity, caps, and
round trips of the quantity and config formats.

The reference below shares no code with ``cpa.vertical``: fractions and ``math.ceil``
written from CPVA's README, within bounds where Go's int64 cannot overflow.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from fractions import Fraction

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from cpa.go.quantity import INT64_MAX, INT64_MIN, Format, Quantity, cpu_millicores
from cpa.vertical.decide.cpva_config import ContainerScaleConfig, ResourceScaleConfig, decode_config
from cpa.vertical.decide.formula import CoresError, calculate, cluster_cores, compute
from cpa.vertical.decide.patch import PatchTarget, patch_body

MILLI = st.integers(min_value=0, max_value=10**12)  # up to 1G units: no int64 overflow
COUNT = st.integers(min_value=0, max_value=10**6)
PER = st.one_of(st.none(), st.integers(min_value=-50, max_value=2000))


def milli_quantity(milli: int) -> Quantity:
    return Quantity.parse(f"{milli}m")


@st.composite
def resource_configs(draw: st.DrawFn, per: st.SearchStrategy[int | None] = PER
                     ) -> ResourceScaleConfig:
    def maybe(value: int) -> Quantity | None:
        return None if draw(st.booleans()) and value == 0 else milli_quantity(value)
    return ResourceScaleConfig(maybe(draw(MILLI)), maybe(draw(MILLI)), maybe(draw(MILLI)),
                               draw(per), draw(per))


def reference(config: ResourceScaleConfig, nodes: int, cores: int) -> int:
    """base + step * steps(count), each side capped by a positive max; the larger wins."""
    def milli(q: Quantity | None) -> int:
        if q is None:
            return 0
        mantissa, exponent = q.normalized()
        return int(Fraction(mantissa) * Fraction(10) ** exponent * 1000)

    def steps(count: int, per: int | None) -> int:
        if not per:
            return 0
        if per > 0:
            return math.ceil(Fraction(count, per))
        return math.trunc(Fraction(count + per - 1, per))  # Go truncates toward zero

    base, cap, step = milli(config.base), milli(config.max), milli(config.step)
    sides = []
    for count, per in ((cores, config.cores_per_step), (nodes, config.nodes_per_step)):
        want = base + step * steps(count, per)
        sides.append(min(want, cap) if cap > 0 else want)
    return max(sides)


@settings(max_examples=500, deadline=None)
@given(resource_configs(), COUNT, COUNT)
def test_calculate_matches_the_reference(config: ResourceScaleConfig, nodes: int,
                                         cores: int) -> None:
    assert calculate(config, nodes, cores) == reference(config, nodes, cores)


@settings(max_examples=300, deadline=None)
@given(resource_configs(per=st.integers(min_value=0, max_value=2000)), COUNT, COUNT, COUNT,
       COUNT)
def test_monotonic_in_nodes_and_cores(config: ResourceScaleConfig, nodes: int, cores: int,
                                      more_nodes: int, more_cores: int) -> None:
    """With non-negative steps, a bigger cluster never gets less."""
    assert calculate(config, nodes, cores) <= calculate(config, nodes + more_nodes,
                                                        cores + more_cores)


@settings(max_examples=300, deadline=None)
@given(resource_configs(), st.integers(min_value=1, max_value=10**12), COUNT, COUNT)
def test_a_positive_max_caps_the_result(config: ResourceScaleConfig, cap: int, nodes: int,
                                        cores: int) -> None:
    capped = ResourceScaleConfig(config.base, milli_quantity(cap), config.step,
                                 config.cores_per_step, config.nodes_per_step)
    assert calculate(capped, nodes, cores) <= cap


INT64_MILLI = st.one_of(
    st.integers(min_value=INT64_MIN, max_value=INT64_MAX),
    st.integers(min_value=-10**6, max_value=10**6),
    st.builds(lambda k, e: k * 1024**e * 1000, st.integers(-2000, 2000), st.integers(0, 4)),
    st.builds(lambda k, e: k * 10**e, st.integers(-999, 999), st.integers(0, 16)),
).filter(lambda milli: INT64_MIN <= milli <= INT64_MAX)
FORMATS = st.sampled_from(list(Format))


@settings(max_examples=1000, deadline=None)
@given(INT64_MILLI, FORMATS)
def test_printed_results_parse_back_to_the_same_value_and_print_the_same(
        milli: int, fmt: Format) -> None:
    q = Quantity.from_milli(milli, fmt)
    again = Quantity.parse(str(q))
    assert again.normalized() == q.normalized()
    if not (again.dec and milli < 0):  # Go's scaledValue garbles big negative inf.Decs
        assert again.milli_value() == milli
    # The text may imply another format (BinarySI 5000 prints "5000", which reads back as
    # DecimalSI and would print "5k"); in the original format it prints the same again.
    assert Quantity(again.unscaled, again.exponent, fmt, again.dec).canonical() == str(q)
    if again.format == fmt:
        assert str(again) == str(q)


# A quantity grammar within sane magnitudes (no int32 exponent wrap, no BinarySI cap).
QUANTITY_TEXT = st.builds(
    lambda sign, whole, frac, suffix: f"{sign}{whole}{frac}{suffix}",
    st.sampled_from(["", "+", "-"]),
    st.integers(min_value=0, max_value=10**12).map(str),
    st.one_of(st.just(""), st.integers(min_value=0, max_value=10**9).map(lambda f: f".{f}")),
    st.sampled_from(["", "m", "u", "n", "k", "M", "G", "T", "Ki", "Mi", "Gi", "e3", "e-3",
                     "E6", "e-9", "e0"]),
)


@settings(max_examples=1000, deadline=None)
@given(QUANTITY_TEXT)
def test_canonical_forms_are_fixed_points(text: str) -> None:
    q = Quantity.parse(text)
    # DecimalSI from 10**21 up has no suffix and prints a bare mantissa (Go's bug).
    assume(q.cmp_int(10**20) < 0 and q.cmp_int(-(10**20)) > 0)
    canonical = Quantity.parse(q.canonical())
    assert canonical.normalized() == q.normalized()
    # From the second round on: a BinarySI whole number that is not a multiple of 1024
    # (139187.5Ki) prints bare, as Go's CanonicalizeBytes does, and reads back DecimalSI.
    again = Quantity.parse(canonical.canonical())
    assert again.normalized() == q.normalized()
    assert again.canonical() == canonical.canonical()
    if canonical.format == q.format:
        assert canonical.canonical() == q.canonical()


@settings(max_examples=1000, deadline=None)
@given(QUANTITY_TEXT)
def test_values_agree_with_the_horizontal_autoscalers_cpu_parser(text: str) -> None:
    """Two independent parsers of the same grammar: cpa.quantity (CPU millicores, exact)
    and this port of apimachinery must read every quantity as the same number."""
    q = Quantity.parse(text)
    # apimachinery caps BinarySI magnitudes at 2**63-1; cpa.quantity does not
    assume(q.cmp_int(INT64_MAX) < 0 and q.cmp_int(-INT64_MAX) > 0)
    mantissa, exponent = q.normalized()
    assert Fraction(mantissa) * Fraction(10) ** exponent * 1000 == cpu_millicores(text)


RESOURCE_NAMES = st.sampled_from(["cpu", "memory", "storage", "ephemeral-storage",
                                  "example.com/gpu"])
CASED: st.SearchStrategy[Callable[[str], str]] = st.sampled_from([str, str.upper, str.lower])
JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")


@st.composite
def configs(draw: st.DrawFn) -> tuple[str, dict[str, ContainerScaleConfig]]:
    """A config as JSON text (random key case, numbers or strings for quantities) and the
    model it must decode to."""
    model: dict[str, ContainerScaleConfig] = {}
    members = []
    for name in draw(st.lists(st.text(min_size=1, max_size=8), max_size=3, unique=True)):
        parts, maps = [], {}
        for kind in draw(st.lists(st.sampled_from(["requests", "limits"]), unique=True)):
            resources, texts = {}, []
            for res in draw(st.lists(RESOURCE_NAMES, max_size=3, unique=True)):
                fields: list[str] = []
                quantities: dict[str, Quantity] = {}
                per_step: dict[str, int] = {}
                for field in draw(st.lists(st.sampled_from(
                        ["base", "max", "step", "coresPerStep", "nodesPerStep"]), unique=True)):
                    key = draw(CASED)(field)
                    if field.endswith("PerStep"):
                        number = draw(st.integers(min_value=-10, max_value=10**6))
                        per_step[field] = number
                        fields.append(f'"{key}":{number}')
                    else:
                        text = draw(QUANTITY_TEXT)
                        quantities[field] = Quantity.parse(text)
                        as_number = JSON_NUMBER.fullmatch(text) and draw(st.booleans())
                        literal = text if as_number else json.dumps(text)
                        fields.append(f'"{key}":{literal}')
                resources[res] = ResourceScaleConfig(
                    quantities.get("base"), quantities.get("max"), quantities.get("step"),
                    per_step.get("coresPerStep"), per_step.get("nodesPerStep"))
                texts.append(f'{json.dumps(res)}:{{{",".join(fields)}}}')
            maps[kind] = resources
            parts.append(f'"{draw(CASED)(kind)}":{{{",".join(texts)}}}')
        model[name] = ContainerScaleConfig(maps.get("requests"), maps.get("limits"))
        members.append(f'{json.dumps(name)}:{{{",".join(parts)}}}')
    return "{" + ",".join(members) + "}", model


@settings(max_examples=300, deadline=None)
@given(configs())
def test_configs_decode_to_their_model(case: tuple[str, dict[str, ContainerScaleConfig]]
                                       ) -> None:
    text, model = case
    assert decode_config(text) == model


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=512), max_size=50),
       st.lists(st.integers(min_value=0, max_value=64), max_size=5))
def test_integer_capacities_sum_and_any_milli_spelling_fails(cores: list[int],
                                                             kilo: list[int]) -> None:
    capacities: list[str | None] = [*(str(c) for c in cores), *(f"{k}k" for k in kilo)]
    assert cluster_cores(capacities) == sum(cores) + 1000 * sum(kilo)
    for milli in (1, 500, 1000, 4000):
        try:
            cluster_cores([*capacities, f"{milli}m"])
        except CoresError:
            continue
        raise AssertionError(f"{milli}m must fail the sum")


@settings(max_examples=200, deadline=None)
@given(configs(), COUNT, COUNT)
def test_patch_bodies_carry_every_computed_value(
        case: tuple[str, dict[str, ContainerScaleConfig]], nodes: int, cores: int) -> None:
    _, model = case
    try:
        computed = compute(model, nodes, cores)
    except ValueError:
        assume(False)
        return
    body = json.loads(patch_body(PatchTarget("Deployment", "x"), computed))
    containers = body["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == sorted(computed)
    for container in containers:
        wanted = computed[container["name"]]
        for kind in ("requests", "limits"):
            written = container["resources"].get(kind, {})
            assert {res: Quantity.parse(v).normalized() for res, v in written.items()} == {
                res: q.normalized() for res, q in getattr(wanted, kind).items()}
