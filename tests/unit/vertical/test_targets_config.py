"""Several targets per instance (issue 32): ``--target``'s comma list, the per-target
config blocks, and the per-target state -- with CPVA's single-target format unchanged."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpa.vertical import cpvpa_flags as options
from cpa.vertical.decide.cpva_config import ConfigError, decode_config
from cpa.vertical.decide.patch import PatchTarget, TargetError, parse_targets, target_key
from cpa.vertical.decide.state import FileRead, VerticalState

A, B = "deployment/a", "daemonset/b"
TARGETS = (A, B)


def cfg(base: str, container: str = "c") -> dict[str, Any]:
    return {container: {"requests": {"cpu": {"base": base}}}}


def cpu(config: Any, container: str = "c") -> str:
    assert config is not None
    return str(config[container].requests["cpu"].base)


# --- the format ---------------------------------------------------------------------------


@pytest.mark.parametrize(("doc", "target", "want"), [
    # CPVA's format: every target alike.
    (cfg("10m"), A, "10m"),
    (cfg("10m"), B, "10m"),
    # Blocks: each target its own; keys read as --target reads a target (any case).
    ({A: cfg("1m"), B: cfg("2m")}, A, "1m"),
    ({A: cfg("1m"), "DaemonSet/B": cfg("2m")}, B, "2m"),
    # A target named twice: the blocks apply in document order, the later over the earlier.
    ({A: cfg("1m"), B: cfg("2m"), "Deployment/A": cfg("3m")}, A, "3m"),
])
def test_which_block_a_target_gets(doc: dict[str, Any], target: str, want: str) -> None:
    assert cpu(decode_config(json.dumps(doc), target=target, targets=TARGETS)) == want


def test_a_block_decodes_over_the_default_and_a_target_without_one_keeps_the_default() -> None:
    default = decode_config(json.dumps({**cfg("5m"), **cfg("6m", "side")}))
    got = decode_config(json.dumps({A: cfg("1m")}), default, target=A, targets=TARGETS)
    assert cpu(got) == "1m" and cpu(got, "side") == "6m"  # containers merge as CPVA's file
    assert decode_config(json.dumps({A: cfg("1m")}), default, target=B,
                         targets=TARGETS) == default


def test_a_null_block_is_cpvas_null_config() -> None:
    assert decode_config(json.dumps({A: None, B: cfg("1m")}), target=A, targets=TARGETS) is None


@pytest.mark.parametrize(("doc", "fragment"), [
    ({A: cfg("1m"), "c": {"requests": {}}}, "mixes per-target blocks"),
    ({A: cfg("1m"), "deployment/typo": cfg("1m")}, "'deployment/typo', which is not one of"),
    ({A: cfg("1K")}, "deployment/a ['c'].requests['cpu'].base"),  # where, inside a block
    ({A: {"c": 1}}, "container deployment/a ['c']"),
])
def test_refused_block_documents_say_why(doc: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        decode_config(json.dumps(doc), target=A, targets=TARGETS)
    assert fragment in str(info.value)


def test_an_escape_is_found_in_the_right_block() -> None:
    """The raw-text escape rule (Go hands a Quantity its raw text) still holds: escapes in
    another target's block (its key, its values) do not shift what this block reads."""
    text = ('{"daemonset/\\u0062": {"c": {"requests": {"cpu": {"base": "1\\u006d"}}}}, '
            '"deployment/a": {"c": {"requests": {"cpu": {"base": "7m"}}}}}')
    assert cpu(decode_config(text, target=A, targets=TARGETS)) == "7m"
    with pytest.raises(ConfigError, match="JSON escape"):
        decode_config(text, target=B, targets=TARGETS)


def test_without_a_target_the_decoder_is_cpvas() -> None:
    """A key with a slash is, for CPVA's decoder, a (hopeless) container name."""
    config = decode_config(json.dumps({A: cfg("1m")}))
    assert config is not None and set(config) == {A}


NAMES = st.from_regex(r"[a-z][a-z0-9-]{0,8}", fullmatch=True)
BASES = st.integers(min_value=0, max_value=10**6).map(lambda m: f"{m}m")
CONFIGS = st.dictionaries(NAMES, BASES.map(lambda b: {"requests": {"cpu": {"base": b}}}),
                          max_size=4)


@settings(max_examples=150, deadline=None)
@given(CONFIGS, st.lists(CONFIGS, min_size=2, max_size=4))
def test_blocks_read_as_each_targets_own_cpva_config(shared: dict[str, Any],
                                                     each: list[dict[str, Any]]) -> None:
    keys = tuple(f"deployment/t{i}" for i in range(len(each)))
    # CPVA's format: the same config for every target as without one.
    for key in keys:
        assert decode_config(json.dumps(shared), target=key, targets=keys) == (
            decode_config(json.dumps(shared)))
    # Blocks: each target reads its block as CPVA reads a config of its own.
    doc = json.dumps(dict(zip(keys, each, strict=True)))
    for key, alone in zip(keys, each, strict=True):
        assert decode_config(doc, target=key, targets=keys) == decode_config(json.dumps(alone))


# --- --target ------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "want"), [
    ("deployment/a", [PatchTarget("Deployment", "a")]),
    ("deployment/a, DaemonSet/B", [PatchTarget("Deployment", "a"),
                                   PatchTarget("DaemonSet", "b")]),
    ("statefulset/db,replicaset/r", [PatchTarget("StatefulSet", "db"),
                                     PatchTarget("ReplicaSet", "r")]),
])
def test_parse_targets(text: str, want: list[PatchTarget]) -> None:
    assert parse_targets(text, statefulsets=True) == want
    assert [target_key(t) for t in want] == [t.strip().lower() for t in text.split(",")]


@pytest.mark.parametrize(("text", "fragment"), [
    ("deployment/a,,daemonset/b", "empty item"),
    ("deployment/a,deployment/a", "names deployment/a twice"),
    ("deployment/a,statefulset/b", "Unknown target format"),  # not without the opt-in
    ("deployment/a,foo/b", "Unknown target format"),
])
def test_parse_targets_refuses(text: str, fragment: str) -> None:
    with pytest.raises(TargetError, match=fragment):
        parse_targets(text)


def opts_of(*args: str) -> tuple[options.VerticalOptions, list[str]]:
    opts = options.parse(["--namespace=ns", *args], environ={})
    return opts, options.validate(opts)


def test_statefulset_needs_the_opt_in_and_the_error_says_so() -> None:
    _, problems = opts_of("--target=statefulset/db", '--default-config={"c": {}}')
    [problem] = problems
    assert problem.startswith("Unknown target format") and "--allow-statefulset" in problem
    opts, problems = opts_of("--target=statefulset/db", "--allow-statefulset",
                             '--default-config={"c": {}}')
    assert problems == [] and opts.patch_target == PatchTarget("StatefulSet", "db")
    assert opts.lease_name == "cpvpa-statefulset-db"


def test_several_targets_one_lease_named_for_the_list() -> None:
    opts, problems = opts_of(f"--target={A},{B}", f"--default-config={json.dumps(cfg('1m'))}")
    assert problems == [] and opts.target_keys == TARGETS
    assert opts.lease_name.startswith("cpvpa-deployment-a-") and len(opts.lease_name) == 29
    other, _ = opts_of(f"--target={B},{A}", f"--default-config={json.dumps(cfg('1m'))}")
    assert other.lease_name != opts.lease_name  # another instance, another Lease
    named, _ = opts_of(f"--target={A},{B}", "--leader-elect-lease-name=mine",
                       f"--default-config={json.dumps(cfg('1m'))}")
    assert named.lease_name == "mine"


def test_default_config_blocks_are_split_per_target_at_validation() -> None:
    doc = json.dumps({A: cfg("1m"), B: cfg("2m")})
    opts, problems = opts_of(f"--target={A},{B}", f"--default-config={doc}")
    assert problems == []
    assert [cpu(c) for c in opts.default_scale_configs] == ["1m", "2m"]
    _, problems = opts_of(f"--target={A},{B}", f"--default-config={json.dumps({A: cfg('1m')})}")
    assert problems and "no config for daemonset/b" in problems[0]
    # With a config file the missing block may come from the file: checked at each poll.
    _, problems = opts_of(f"--target={A},{B}", f"--default-config={json.dumps({A: cfg('1m')})}",
                          "--config-file=/etc/cpvpa/config")
    assert problems == []


@pytest.mark.parametrize(("args", "fragment"), [
    (["--resize-fallback-max-pods-per-cycle=2"], "add --resize-mode=in-place"),
    (["--resize-mode=in-place", "--resize-fallback-max-pods-per-cycle=-1"], "0 (no bound)"),
    (["--resize-mode=in-place", "--resize-fallback-grace-period=-1s"], "must not be negative"),
])
def test_fallback_flags_are_checked(args: list[str], fragment: str) -> None:
    _, problems = opts_of("--target=daemonset/x", '--default-config={"c": {}}', *args)
    assert len(problems) == 1 and fragment in problems[0]


# --- the state per target -------------------------------------------------------------------


def test_each_target_state_reads_its_block_of_the_file() -> None:
    states = {key: VerticalState(None, target=key, targets=TARGETS) for key in TARGETS}
    file = FileRead(content=json.dumps({A: cfg("1m"), B: cfg("2m")}))
    plans = {key: state.plan(3, 24, file) for key, state in states.items()}
    assert {k: str(p.computed["c"].requests["cpu"]) for k, p in plans.items()
            if p.computed} == {A: "1m", B: "2m"}


def test_a_target_without_any_config_fails_alone() -> None:
    file = FileRead(content=json.dumps({A: cfg("1m")}))
    plan_a = VerticalState(None, target=A, targets=TARGETS).plan(3, 24, file)
    plan_b = VerticalState(None, target=B, targets=TARGETS).plan(3, 24, file)
    assert plan_a.error is None and plan_a.write
    assert plan_b.computed is None and plan_b.error is not None
    assert "no config for daemonset/b" in plan_b.error
