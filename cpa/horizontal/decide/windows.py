"""The load axis's arithmetic: Knative's stable and panic windows, as pure functions.

The samples come from the scraper (the daemon) or from a timeline (``cpa simulate``): one
per scrape, the estimated total rate at that moment and the Ready Pods it was read from.
Times are seconds on whatever clock the caller uses, as in :mod:`cpa.horizontal.decide.behavior`.

Each rule below is Knative Serving's, cited by file and line of
``pkg/autoscaler/scaling/autoscaler.go`` (``autoscaler.Scale``) or of the files named:

* the stable and panic rates are the averages of the samples inside each window; before a
  window has filled, over the part that has samples
  (``pkg/autoscaler/aggregation/bucketing.go`` ``TimedFloat64Buckets.WindowAverage``,
  lines 185-231). One difference: Knative counts a bucket with no sample as 0 (lines
  198-200); here a failed scrape is a gap that is left out, because a scrape that failed is
  not a moment without load;
* the Ready Pods count at least 1 (autoscaler.go line 161);
* desired stable and panic counts are ``ceil(rate / target)`` (lines 196-197);
* the panic test is ``desired panic / Ready >= threshold`` (line 220);
* panic begins when the test first holds (lines 222-226) and each poll that holds it again
  extends it (lines 227-229); it ends at the first poll that fails the test a whole stable
  window after the last one that held it (lines 230-236), and the ratchet is cleared then
  (line 234);
* in panic the count is the larger of stable and panic (lines 243-245), and it only goes
  up: it never drops below the highest count of the episode (lines 248-254);
* a new autoscaler that finds more than one Ready Pod starts in panic with that count, so a
  restart, which loses the windows, does not scale down before it has a stable window of
  its own (lines 95-114 and 127).

Knative's scale-up and scale-down rate limits (lines 189-194, 207-208) are not taken:
``behavior`` limits the rate of any change here, the proportional count's included.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from cpa.go.json import format_go_float
from cpa.horizontal.decide.load import Load
from cpa.horizontal.decide.steps import Step, plural

__all__ = ["LoadAxis", "LoadOutcome", "PanicState", "Reading", "Sample", "read_windows",
           "scale", "start", "unavailable"]


class Sample(NamedTuple):
    """One scrape: when, the total rate it estimated, the Ready Pods it read."""

    at: float
    rate: float
    ready: int


class Reading(NamedTuple):
    """What the windows say at one moment."""

    stable: float
    """The stable window's average rate."""
    panic: float | None
    """The panic window's average rate; None when the panic window holds no sample."""
    ready: int
    """The Ready Pods of the newest sample."""
    stable_samples: int
    panic_samples: int
    age: float
    """Seconds since the newest sample."""


def _rate(number: float) -> str:
    """A rate as an operator reads it: 12345.7/s."""
    if number == int(number) and abs(number) < 1e15:
        return f"{int(number)}/s"
    return f"{format_go_float(round(number, 1))}/s"


def read_windows(samples: Sequence[Sample], now: float, load: Load) -> Reading | None:
    """Average the samples of each window ending at ``now`` (a sample at exactly
    ``now - window`` is outside it, as Knative's buckets are). None: the stable window has
    no sample, so there is no rate to act on (a rate older than the stable window is never
    used)."""
    stable_from = now - load.stable_window_seconds
    panic_from = now - load.panic_window_seconds
    stable_sum = panic_sum = 0.0
    stable_n = panic_n = 0
    newest: Sample | None = None
    for sample in samples:
        if not stable_from < sample.at <= now:
            continue
        stable_sum += sample.rate
        stable_n += 1
        if sample.at > panic_from:
            panic_sum += sample.rate
            panic_n += 1
        if newest is None or sample.at >= newest.at:
            newest = sample
    if newest is None:
        return None
    return Reading(stable_sum / stable_n, panic_sum / panic_n if panic_n else None,
                   newest.ready, stable_n, panic_n, now - newest.at)


@dataclass(slots=True)
class PanicState:
    """What the panic rule remembers between polls, for one target (Knative's
    ``panicTime`` and ``maxPanicPods``)."""

    since: float | None = None
    """When the test last held (None: not in panic)."""
    max_pods: int = 0
    """The highest count of this panic episode."""
    begun: bool = False
    """A first decision has been made (the start-in-panic rule is applied once)."""


class LoadOutcome(NamedTuple):
    """One poll of the load axis."""

    replicas: int
    stable_replicas: int
    panic_replicas: int | None
    panicking: bool
    event: str | None
    """``started`` or ``ended`` on the poll that changed the panic mode, else None."""
    reading: Reading
    steps: tuple[Step, ...]


class LoadAxis(NamedTuple):
    """What :func:`cpa.horizontal.decide.decision.decide` gets: the load replicas (None when the
    axis
    is out this poll: the proportional count alone decides) and the reasoning."""

    replicas: int | None
    steps: tuple[Step, ...]
    outcome: LoadOutcome | None = None


def _ceil(rate: float, target: float) -> int:
    quotient = rate / target
    return math.ceil(quotient) if math.isfinite(quotient) else 2**31


def start(state: PanicState, ready: int, now: float) -> bool:
    """Knative's ``newAutoscaler`` (lines 95-114, 127): more than one Ready Pod starts the
    axis in panic at that count; the ratchet starts at the Ready count either way. True when
    it started in panic."""
    state.begun = True
    state.max_pods = ready  # line 127
    if ready > 1:
        state.since = now  # lines 108-111
        return True
    state.since = None
    return False


def scale(load: Load, state: PanicState, reading: Reading, now: float) -> LoadOutcome:
    """Knative's decider for one poll (``autoscaler.Scale``): updates ``state`` and returns
    the load replicas with the reasoning."""
    steps: list[Step] = []
    target = load.target_per_replica
    event: str | None = None
    if not state.begun and start(state, reading.ready, now):
        event = "started"
        steps.append(Step("load.start", (
            f"First decision since the start: {plural(reading.ready, 'Ready Pod')}, so "
            "the load axis starts in panic at that count and does not scale down before a "
            "stable window of its own has passed (Knative does the same).")))
    stable = _ceil(reading.stable, target)  # line 196
    steps.append(Step("load.stable", (
        f"The stable window ({load.stable_window_seconds} s, "
        f"{plural(reading.stable_samples, 'sample')}) averages {_rate(reading.stable)}: "
        f"ceil of that over targetPerReplica {format_go_float(target)} is {stable}.")))
    panic, over = _panic_window(load, reading, steps)
    event = _panic_mode(load, state, over, now, steps) or event
    replicas = _ratchet(state, stable, panic, steps)
    steps.append(Step("load.result", f"The load axis gives {plural(replicas, 'replica')}."))
    return LoadOutcome(replicas, stable, panic, state.since is not None, event, reading,
                       tuple(steps))


def _panic_window(load: Load, reading: Reading, steps: list[Step]) -> tuple[int | None, bool]:
    """The panic window's replicas (None without a sample) and whether they are over the
    panic threshold of the Ready Pods."""
    if reading.panic is None:
        steps.append(Step("load.panic", (
            f"The panic window ({format_go_float(load.panic_window_seconds)} s) holds no "
            "sample, so it cannot start or extend a panic.")))
        return None, False
    ready = max(1, reading.ready)  # line 161
    panic = _ceil(reading.panic, load.target_per_replica)  # line 197
    over = panic / ready >= load.panic_threshold  # line 220
    steps.append(Step("load.panic", (
        f"The panic window ({format_go_float(load.panic_window_seconds)} s, "
        f"{plural(reading.panic_samples, 'sample')}) averages {_rate(reading.panic)}: "
        f"{panic} replicas, {'at least' if over else 'under'} "
        f"{format_go_float(load.panic_threshold_percentage)} % of "
        f"{plural(reading.ready, 'Ready Pod')}.")))
    return panic, over


def _panic_mode(load: Load, state: PanicState, over: bool, now: float,
                steps: list[Step]) -> str | None:
    """A panic starts, is extended, ends or goes on (``state.since``); "started" or "ended"
    when this poll changed the mode."""
    if state.since is None and over:  # lines 222-226
        state.since = now
        steps.append(Step("load.mode", "So panic mode starts now: the count goes up at once "
                                       "and does not go down during the panic."))
        return "started"
    if over:  # lines 227-229
        state.since = now
        steps.append(Step("load.mode", "Still over the threshold, so the panic is extended "
                                       "by a stable window from now."))
    elif state.since is not None and state.since + load.stable_window_seconds < now:
        state.since, state.max_pods = None, 0  # lines 230-236
        steps.append(Step("load.mode", (
            f"Under the threshold for a whole stable window ({load.stable_window_seconds} s),"
            " so the panic ends: the stable count decides again.")))
        return "ended"
    elif state.since is not None:
        left = state.since + load.stable_window_seconds - now
        steps.append(Step("load.mode", (
            f"In panic until the load has stayed under the threshold for a stable window "
            f"({format_go_float(round(left, 1))} s more).")))
    return None


def _ratchet(state: PanicState, stable: int, panic: int | None, steps: list[Step]) -> int:
    """The load replicas: the stable count, or in panic the larger of it and the panic
    count, never below this episode's highest (panic never scales down)."""
    if state.since is None:
        return stable
    replicas = stable
    if panic is not None and replicas < panic:  # lines 243-245
        replicas = panic
    if replicas > state.max_pods:  # lines 248-254
        state.max_pods = replicas
    elif replicas < state.max_pods:
        steps.append(Step("load.ratchet", (
            f"Panic never scales down: {replicas} would be fewer than this episode's "
            f"{state.max_pods}, so the load axis stays at {state.max_pods}.")))
    return state.max_pods


def unavailable(reason: str) -> LoadAxis:
    """The axis is out this poll (no sample in the stable window): the proportional count
    decides alone."""
    return LoadAxis(None, (Step("load.unavailable", (
        f"The load axis is out ({reason}), so the proportional count decides alone: losing "
        "the metrics never shrinks the target below it.")),))
