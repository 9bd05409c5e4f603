"""cpa.vertical against vectors recorded from CPVA v0.8.9's own code.

``fixtures/cpva_vectors.json`` says how they were recorded. Each section is checked in one
test that collects every mismatch (a few thousand cases run in about a second, and a
failure lists the first ones with their inputs).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from cpa.go.quantity import Format, Quantity, QuantityError
from cpa.vertical.decide.cpva_config import ConfigError, ScaleConfig, decode_config
from cpa.vertical.decide.formula import (
    CoresError,
    MilliRangeError,
    calculate,
    cluster_cores,
    compute,
    guess_format,
    increments,
    milli_units,
)
from cpa.vertical.decide.patch import PatchTarget, TargetError, parse_target, patch_body
from cpa.vertical.decide.state import FileRead, InvalidConfigPolicy, VerticalState

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "cpva_vectors.json"


@cache
def vectors() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(FIXTURE.read_text(encoding="utf-8"))
    return data


def check_all(cases: list[dict[str, Any]], check: Callable[[dict[str, Any]], None]) -> None:
    """Run ``check`` on every case; fail with the first mismatches, not just one."""
    failures: list[str] = []
    for case in cases:
        try:
            check(case)
        except AssertionError as exc:
            failures.append(f"{json.dumps(case, ensure_ascii=False)[:300]}\n    {exc}")
        except Exception as exc:  # an unexpected exception is a mismatch too
            failures.append(f"{json.dumps(case, ensure_ascii=False)[:300]}\n    raised {exc!r}")
    assert not failures, f"{len(failures)} of {len(cases)} cases differ:\n" + "\n".join(
        failures[:10])


def test_the_fixture_has_every_section_and_enough_cases() -> None:
    data = vectors()
    sizes = {name: len(data[name]) for name in ("quantities", "milli", "sums", "increments",
                                                  "calcs", "polls")}
    assert sizes["quantities"] >= 1000 and sizes["calcs"] >= 1500 and sizes["polls"] >= 200
    assert "v0.8.9" in data["about"]


def test_quantities_parse_and_print_as_apimachinery() -> None:
    def check(case: dict[str, Any]) -> None:
        if "error" in case:
            with pytest.raises(QuantityError) as caught:
                Quantity.parse(case["in"])
            assert caught.value.go_error == case["error"]
            return
        q = Quantity.parse(case["in"])
        assert str(q) == case["string"], "String()"
        assert q.canonical() == case["canonical"], "canonical"
        assert q.to_json() == case["json"], "MarshalJSON"
        assert q.format == case["format"], "Format"
        assert q.value() == case["value"], "Value()"
        assert q.milli_value() == case["milli"], "MilliValue()"
        if case["as_int64_milli"] == "panic":
            with pytest.raises(MilliRangeError):
                milli_units(q)
        else:
            assert milli_units(q) == case["as_int64_milli"], "asInt64"
        kind, unscaled, scale = case["repr"]
        if kind == "int64":
            assert (q.dec, q.unscaled, q.exponent) == (False, unscaled, scale), "int64Amount"
        else:
            assert (q.dec, q.unscaled, q.exponent) == (True, unscaled, -scale), "inf.Dec"
        if "exact" in case:
            m, e = q.normalized()
            assert Fraction(m) * Fraction(10) ** e == Fraction(Decimal(case["exact"]))

    check_all(vectors()["quantities"], check)


def test_results_print_as_set_milli_prints_them() -> None:
    def check(case: dict[str, Any]) -> None:
        assert str(Quantity.from_milli(case["milli"], Format(case["format"]))) == case["string"]

    check_all(vectors()["milli"], check)


def test_cores_are_summed_capacities_as_get_cluster_size_sums_them() -> None:
    def check(case: dict[str, Any]) -> None:
        if "error" in case:
            with pytest.raises(CoresError):
                cluster_cores(case["capacities"])
            return
        assert cluster_cores(case["capacities"]) == case["cores"]
        assert len(case["capacities"]) == case["nodes"]

    check_all(vectors()["sums"], check)


def test_increments() -> None:
    def check(case: dict[str, Any]) -> None:
        assert increments(case["count"], case["per"]) == case["increments"]

    check_all(vectors()["increments"], check)


def _expected_containers(config: ScaleConfig | None, case: dict[str, Any]) -> None:
    """Every resource of the decoded config against the recorded result."""
    containers = case["containers"]
    assert sorted(config or {}) == sorted(containers), "container names"
    for name, recorded in containers.items():
        container = (config or {})[name]
        for kind, configured in (("requests", container.requests),
                                 ("limits", container.limits)):
            assert sorted(configured or {}) == sorted(recorded[kind]), f"{name} {kind}"
            for res, want in recorded[kind].items():
                rc = (configured or {})[res]
                if "panic" in want:
                    with pytest.raises(MilliRangeError):
                        calculate(rc, case["nodes"], case["cores"])
                    continue
                milli = calculate(rc, case["nodes"], case["cores"])
                assert milli == want["milli"], f"{name} {kind}[{res}] milli"
                printed = str(Quantity.from_milli(milli, guess_format(res)))
                assert printed == want["q"], f"{name} {kind}[{res}] printed"


def _refused_as_recorded(case: dict[str, Any], error: str, config: str) -> bool:
    """Whether CPVA failed on the case's config (its ``error`` key); ours then refuses it
    too (checked here)."""
    if error not in case:
        return False
    with pytest.raises(ConfigError):
        decode_config(case[config], onto={})
    return True


def test_configs_decode_and_compute_as_cpva() -> None:
    def check(case: dict[str, Any]) -> None:
        if _refused_as_recorded(case, "error", "config"):
            return
        config = decode_config(case["config"], onto={})
        _expected_containers(config, case)
        panics = any("panic" in want for recorded in case["containers"].values()
                     for kind in recorded.values() for want in kind.values())
        if panics:
            with pytest.raises(MilliRangeError):
                compute(config, case["nodes"], case["cores"])
        else:
            computed = compute(config, case["nodes"], case["cores"])
            for name, recorded in case["containers"].items():
                for kind in ("requests", "limits"):
                    got = getattr(computed[name], kind)
                    assert {res: str(q) for res, q in got.items()} == {
                        res: want["q"] for res, want in recorded[kind].items()}

    check_all(vectors()["calcs"], check)


# --- poll sequences ----------------------------------------------------------------------


@dataclass
class FakeFile:
    """The config file as the oracle changed it, and CPVA's SameFile bookkeeping."""

    configured: bool
    exists: bool = False
    content: str = ""
    identity: int = 0
    last_seen: int | None = None

    def apply(self, step: dict[str, Any]) -> None:
        if "write" in step:
            self.exists, self.content, self.identity = True, step["write"], self.identity + 1
        elif "inplace" in step:
            if not self.exists:  # O_CREATE makes a new file
                self.identity += 1
            self.exists, self.content = True, step["inplace"]
        elif step.get("delete"):
            self.exists = False

    def read_if_changed(self) -> FileRead:
        """readConfigFileIfChanged: only another file (a new inode) is read."""
        if not self.configured:
            return FileRead()
        if not self.exists:
            return FileRead(error="can't stat file: no such file or directory")
        if self.identity == self.last_seen:
            return FileRead()
        self.last_seen = self.identity
        return FileRead(content=self.content)


def run_polls(case: dict[str, Any], policy: InvalidConfigPolicy
              ) -> Iterator[tuple[dict[str, Any], dict[str, Any], str | None, bool]]:
    """Drive :class:`VerticalState` as the oracle drove pollAPIServer; yield per step
    (step, recorded result, our patch body or None, whether the file was invalid)."""
    default = decode_config(case["default"], onto={}) if case["default"] else {}
    state = VerticalState(default, policy)
    file = FakeFile(configured=case["file"])
    target = PatchTarget(case["kind"], "target", "apps/v1")
    for step, result in zip(case["steps"], case["results"], strict=True):
        file.apply(step)
        if step.get("list_error"):
            yield step, result, None, False
            continue
        read = file.read_if_changed()
        plan = state.plan(step["nodes"], step["cores"], read)
        invalid = bool(plan.error and "invalid config file" in plan.error)
        if "panic" in result:
            assert plan.computed is None and plan.error and "milli-units" in plan.error
            yield step, result, None, invalid
            return
        body = None
        if plan.write:
            assert plan.computed is not None
            body = patch_body(target, plan.computed)
            if not step.get("patch_error"):
                state.written(plan.computed)
        yield step, result, body, invalid


def test_poll_sequences_write_what_cpva_writes() -> None:
    def check(case: dict[str, Any]) -> None:
        if _refused_as_recorded(case, "startup_error", "default"):
            return
        for i, (_, result, body, _) in enumerate(
                run_polls(case, InvalidConfigPolicy.KEEP_PREVIOUS)):
            if "panic" in result:
                continue
            assert (body is not None) == result["tried"], f"step {i}: write or not"
            assert body == result["patch"], f"step {i}: body"

    check_all(vectors()["polls"], check)


def test_refuse_policy_matches_cpva_until_an_invalid_file_then_writes_nothing() -> None:
    """Ours (issue 23): after an invalid file, nothing is written until the file changes."""
    def check(case: dict[str, Any]) -> None:
        if "startup_error" in case:
            return
        refused = False
        for i, (step, result, body, invalid) in enumerate(
                run_polls(case, InvalidConfigPolicy.REFUSE)):
            if invalid:
                refused = True
            elif refused and ("write" in step or ("inplace" in step and i == 0)):
                return  # the file changed: from here on the two may differ by design
            if refused:
                assert body is None, f"step {i}: wrote while the config was invalid"
            elif "panic" not in result:
                assert body == result["patch"], f"step {i}: body"

    check_all(vectors()["polls"], check)


# --- CPVA's own test tables ----------------------------------------------------------------


def test_ported_calculate_tables() -> None:
    """autoscaler_test.go TestCalculatePerCores / TestCalculatePerNodes."""
    def check(case: dict[str, Any]) -> None:
        config = decode_config(case["config"], onto={})
        assert config is not None
        rc = config["fake-agent"].requests
        assert rc is not None
        assert calculate(rc["cpu"], case["nodes"], case["cores"]) == case["milli"]

    cases = vectors()["ported"]["calculate"]
    assert len(cases) == 12
    check_all(cases, check)


def test_ported_target_format_table() -> None:
    """options_test.go TestIsTargetFormatValid (and the split makeTarget adds)."""
    def check(case: dict[str, Any]) -> None:
        if case["valid"]:
            parse_target(case["target"])
        else:
            with pytest.raises(TargetError):
                parse_target(case["target"])

    check_all(vectors()["ported"]["target_format"], check)


def test_ported_run_example() -> None:
    """TestRun's config at 4 nodes and 7 cores: 17m of CPU, 15Mi (printed in bytes)."""
    case = vectors()["ported"]["run"]
    computed = compute(decode_config(case["config"], onto={}), case["nodes"], case["cores"])
    got = {res: str(q) for res, q in computed["fake-agent"].requests.items()}
    assert got == {"cpu": "17m", "memory": "15728640"}
    assert got == {res: want["q"] for res, want in
                   case["containers"]["fake-agent"]["requests"].items()}
