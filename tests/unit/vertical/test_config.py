"""cpa.vertical.decide.cpva_config: CPVA's config read with Go encoding/json's rules."""

from __future__ import annotations

import pytest

from cpa.go.quantity import Quantity
from cpa.vertical.decide.cpva_config import (
    ConfigError,
    ContainerScaleConfig,
    ResourceScaleConfig,
    config_string,
    decode_config,
)
from cpa.vertical.decide.formula import compute

README = """{"containerA": {"requests": {
    "cpu": {"base": "10m", "step": "1m", "coresPerStep": 1},
    "memory": {"base": "8Mi", "step": "1Mi", "coresPerStep": 1}}},
  "containerB": {"requests": {"cpu": {"base": "250m", "step": "100m", "coresPerStep": 10}}}}"""


def one(text: str, container: str = "c", kind: str = "requests",
        resource: str = "cpu") -> ResourceScaleConfig:
    config = decode_config(text)
    assert config is not None
    resources = getattr(config[container], kind)
    assert resources is not None
    found: ResourceScaleConfig = resources[resource]
    return found


def test_readme_config() -> None:
    config = decode_config(README)
    assert config is not None and sorted(config) == ["containerA", "containerB"]
    cpu = one(README, "containerA")
    assert cpu == ResourceScaleConfig(base=Quantity.parse("10m"), step=Quantity.parse("1m"),
                                      cores_per_step=1)
    assert config["containerA"].limits is None


@pytest.mark.parametrize("key", ["base", "Base", "BASE", "bAsE", "ba\u017fe"])
def test_field_names_match_case_insensitively_with_gos_fold(key: str) -> None:
    """U+017F LONG S folds to s in Go, so it matches too."""
    assert one(f'{{"c":{{"requests":{{"cpu":{{"{key}":"5m"}}}}}}}}').base == Quantity.parse("5m")


def test_other_unicode_look_alikes_do_not_match() -> None:
    """Go's fold maps only U+017F (to s) and U+212A (to k) onto ASCII; U+0131 DOTLESS I
    is not i. (No CPVA field name has a k.)"""
    text = '{"c":{"li\u0131mits":{"cpu":{}},"re\u212aquests":{},"reque\u017ft\u017f":{"cpu":{}}}}'
    config = decode_config(text)
    assert config is not None
    assert config["c"] == ContainerScaleConfig(requests={"cpu": ResourceScaleConfig()})


def test_unknown_keys_are_ignored_whatever_their_value() -> None:
    text = ('{"c":{"image":[1,{"x":"\\n"}],"requests":{"cpu":{"incr":"bogus","base":"1",'
            '"extra":{"deep":[[["\\u0041"]]]}}}}}')
    assert one(text) == ResourceScaleConfig(base=Quantity.parse("1"))


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ('"100m"', "100m"),
        ("100", "100"),  # a JSON number reaches ParseQuantity as its literal
        ("1e3", "1e3"),
        ("0.5", "500m"),
        ('" 10m "', "10m"),  # white space is trimmed
        ('"\u00a010m"', "10m"),  # raw NBSP too (strings.TrimSpace is Unicode-aware)
    ],
)
def test_quantities_accept_what_unmarshal_json_accepts(value: str, expected: str) -> None:
    base = one(f'{{"c":{{"requests":{{"cpu":{{"base":{value}}}}}}}}}').base
    assert base is not None and str(base) == expected


@pytest.mark.parametrize(
    "value",
    ["true", "{}", "[]", '""', '" "', '"1 m"', '"10\\u006d"', '"\\u0031"', '"\\n10m"',
     '"10m\\t"'],
)
def test_quantities_refuse_what_unmarshal_json_refuses(value: str) -> None:
    """Booleans and containers reach ParseQuantity raw; any escape leaves a backslash."""
    with pytest.raises(ConfigError, match="base"):
        decode_config(f'{{"c":{{"requests":{{"cpu":{{"base":{value}}}}}}}}}')


def test_an_escape_elsewhere_does_not_taint_a_plain_quantity() -> None:
    """The raw-token bookkeeping must stay aligned across skipped members and keys."""
    text = ('{"c\\u0031":{"x":["\\t",{"\\u0042":"\\n"}],"requests":{"c\\u0070u":'
            '{"y":"\\"","base":"10m"}}}}')
    assert one(text, container="c1", resource="cpu").base == Quantity.parse("10m")


@pytest.mark.parametrize("value", ["1.0", "1e2", '"4"', "true", "9223372036854775808"])
def test_per_step_takes_only_integer_literals(value: str) -> None:
    with pytest.raises(ConfigError, match="coresPerStep"):
        decode_config(f'{{"c":{{"requests":{{"cpu":{{"coresPerStep":{value}}}}}}}}}')


def test_per_step_accepts_negatives_and_null() -> None:
    text = '{"c":{"requests":{"cpu":{"coresPerStep":-2,"nodesPerStep":null}}}}'
    assert one(text) == ResourceScaleConfig(cores_per_step=-2)


def test_null_container_and_null_resource_still_create_entries() -> None:
    """A null resource is a zero config: CPVA then writes "0" for it."""
    config = decode_config('{"a":null,"b":{"requests":{"cpu":null},"limits":null}}')
    assert config is not None
    assert config["a"] == ContainerScaleConfig()
    assert config["b"].requests == {"cpu": ResourceScaleConfig()}
    assert config["b"].limits is None
    computed = compute(config, nodes=3, cores=12)
    assert {res: str(q) for res, q in computed["b"].requests.items()} == {"cpu": "0"}


def test_two_requests_members_merge_but_duplicate_containers_replace() -> None:
    text = ('{"c":{"requests":{"cpu":{"base":"1"}},"Requests":{"memory":{"base":"1Mi"}}},'
            '"d":{"requests":{"cpu":{"base":"1"}}},"d":{"limits":{"cpu":{"base":"2"}}}}')
    config = decode_config(text)
    assert config is not None
    assert sorted(config["c"].requests or {}) == ["cpu", "memory"]
    assert config["d"].requests is None and sorted(config["d"].limits or {}) == ["cpu"]


def test_duplicate_fields_last_wins_and_null_resets() -> None:
    text = '{"c":{"requests":{"cpu":{"base":"1","base":"2","max":"5","max":null}}}}'
    assert one(text) == ResourceScaleConfig(base=Quantity.parse("2"))


def test_an_earlier_invalid_duplicate_still_fails() -> None:
    """Go type-checks every member, even one a later duplicate overwrites."""
    with pytest.raises(ConfigError):
        decode_config('{"c":{"requests":{"cpu":{"coresPerStep":"1","coresPerStep":1}}}}')


def test_decoding_onto_the_default_replaces_whole_containers_and_keeps_others() -> None:
    default = decode_config(README)
    assert default is not None
    merged = decode_config('{"containerA":{"limits":{"memory":{"base":"1Gi"}}}}', onto=default)
    assert merged is not None
    assert merged["containerA"].requests is None  # replaced, not merged
    assert merged["containerB"] == default["containerB"]  # kept
    assert default["containerA"].requests is not None  # the default is untouched


@pytest.mark.parametrize("text", ["[]", '"x"', "1", "true", '[{"c":{}}]'])
def test_the_document_must_be_an_object(text: str) -> None:
    with pytest.raises(ConfigError, match="JSON object of container names"):
        decode_config(text)


@pytest.mark.parametrize("text", ["", "{", '{"a":}', "{}x", '{"a":1,}', "{'a':1}", "NaN"])
def test_invalid_json_is_an_error(text: str) -> None:
    with pytest.raises(ConfigError, match="not valid JSON"):
        decode_config(text)


def test_null_document_is_a_nil_map() -> None:
    assert decode_config("null") is None
    assert decode_config("null", onto=decode_config(README)) is None
    assert decode_config("{}") == {}


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('{"c":[]}', "container ['c']"),
        ('{"c":{"requests":[]}}', "['c'].requests"),
        ('{"c":{"limits":{"cpu":"1"}}}', "['c'].limits['cpu']"),
        ('{"c":{"requests":{"cpu":{"step":"1Kb"}}}}', "['c'].requests['cpu'].step"),
    ],
)
def test_errors_say_where(text: str, where: str) -> None:
    with pytest.raises(ConfigError) as caught:
        decode_config(text)
    assert where in str(caught.value)


def test_config_string_is_cpvas_log_rendering() -> None:
    text = ('{"b":{"limits":{"cpu":{"base":"1"},"memory":{"max":"1.500"}}},'
            '"a":{"requests":{"cpu":{"base":"10m","step":"1m","coresPerStep":1,'
            '"nodesPerStep":2,"max":"1"}}}}')
    assert config_string(decode_config(text)) == (
        "{ [a]: { requests: { [cpu]: { base=10m max=1 incr=1m cores_incr=1 nodes_incr=2 }, "
        "}, limits: { } }, [b]: { requests: { }, limits: { [cpu]: { base=1 }[memory]: "
        "{ max=1.500 }} }, }")
    assert config_string(None) == "{ }"
