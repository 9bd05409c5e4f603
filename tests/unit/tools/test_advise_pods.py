"""``cpa advise`` with a ``pods`` column (ours): the ``podsPerReplica`` that would have kept
the recorded rate under the bound with the fewest replica-hours; bad cells are one line."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from cpa import redact
from cpa.tools.advise import Series, advise_main, advise_pods, pods_bound, replay_pods


@pytest.fixture(autouse=True)
def _no_remembered_credentials() -> None:
    """Other tests in this process remember credentials (a token file holding "second"),
    which the tools scrub from what they print: this output is checked to the letter."""
    redact.forget_all()


def series(rates: list[float | None], pods: list[int | None], step: float = 10.0) -> Series:
    return Series([i * step for i in range(len(rates))], rates, pods)


@pytest.mark.parametrize(("rates", "pods", "bound", "minimum", "expected"), [
    # 3000/s over 1000/s needs 3 replicas: ceil(9000 / x) >= 3 while x < 4500.
    ([3000.0, 3000.0], [9000, 9000], 1000.0, 1, 4499),
    # The row that needs the most per Pod decides: 2 replicas for 1000 Pods.
    ([2000.0, 3000.0], [1000, 9000], 1000.0, 1, 999),
    # The floor covers every row: one replica for the largest count.
    ([500.0, 900.0], [100, 7000], 1000.0, 1, 7000),
    ([2500.0, 2500.0], [100, 100], 1000.0, 3, 100),
    # A row without a rate or a count constrains nothing.
    ([None, 3000.0], [1, 9000], 1000.0, 1, 4499),
    ([9000.0, 3000.0], [None, 9000], 1000.0, 1, 4499),
    # A row that needs replicas and has no Pods: no podsPerReplica can.
    ([3000.0], [0], 1000.0, 1, None),
    # More replicas needed than there are Pods: the smallest whole value.
    ([5000.0], [2], 1000.0, 1, 1),
    # Huge counts stay exact (no float in between).
    ([2000.0], [2**63 - 1], 1000.0, 1, 2**63 - 2),
])
def test_pods_bound(rates: list[float | None], pods: list[int | None], bound: float,
                    minimum: int, expected: int | None) -> None:
    assert pods_bound(series(rates, pods), bound, minimum) == expected


def test_the_bound_keeps_every_row_under_it_and_one_more_does_not() -> None:
    rates: list[float | None] = [float(q) for q in (800, 2500, 7000, 4100, 1200)]
    pods: list[int | None] = [1600, 5200, 13900, 8300, 2300]
    data = series(rates, pods)
    x = pods_bound(data, 1000.0, 1)
    assert x is not None
    at = replay_pods(data, x, 1000.0, 1, poll_period=0, startup=0)
    assert at.over_seconds == 0 and at.worst <= 1000
    assert replay_pods(data, x + 1, 1000.0, 1, 0, 0).over_seconds > 0
    for rate, count in zip(rates, pods, strict=True):
        assert rate is not None and count is not None
        assert math.ceil(count / x) * 1000 >= rate


def test_advise_pods_ranks_within_the_bound_then_replica_hours() -> None:
    pods: list[int | None] = [10_000 + (20_000 if 120 <= i < 240 else 0) for i in range(360)]
    rates: list[float | None] = [p / 2 if p is not None else None for p in pods]
    found = advise_pods(series(rates, pods), 2000.0, poll_period=10, startup=0)
    best = found[0]
    within = [c for c in found if c.over_seconds == 0]
    assert best.over_seconds == 0 and 4285 in [c.pods_per_replica for c in within]
    assert [c.replica_hours for c in within] == sorted(c.replica_hours for c in within)
    # Ties in replica-hours: the larger value first (the smaller ones are headroom).
    tied = [c.pods_per_replica for c in within if c.replica_hours == best.replica_hours]
    assert best.pods_per_replica == max(tied) == 4285
    assert all(c.over_seconds > 0 for c in found[len(within):])
    # A start-up after each write lets the step through: the ranking says how long.
    late = advise_pods(series(rates, pods), 2000.0, poll_period=10, startup=20)
    assert late[0].over_seconds > 0


def test_without_a_pods_column_nothing_is_advised_for_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert advise_pods(Series([0.0, 10.0], [1.0, 2.0]), 1.0) == []
    path = tmp_path / "t.csv"
    path.write_text("t,qps\n0,100\n10,3000\n20,100\n")
    assert advise_main(["--timeline", str(path), "--max-per-replica", "1000"]) == 0
    assert "podsPerReplica" not in capsys.readouterr().out
    assert advise_main(["--timeline", str(path), "--max-per-replica", "1000", "-o",
                        "json"]) == 0
    assert "pods_per_replica" not in json.loads(capsys.readouterr().out)


def test_the_command_advises_pods_per_replica(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.csv"
    path.write_text("t,qps,pods\n" + "".join(
        f"{i * 10},{3000 if 30 <= i < 60 else 600},{9000 if 30 <= i < 60 else 1800}\n"
        for i in range(90)))
    args = ["--timeline", str(path), "--max-per-replica", "1000", "--startup-seconds", "0"]
    assert advise_main(args) == 0
    out = capsys.readouterr().out
    # 4499 is the bound; 0.9 and 0.75 of it need as many replicas at both counts.
    assert "=> podsPerReplica 4499:" in out, out
    assert advise_main([*args, "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    ranked = [(c["podsPerReplica"], c["over_seconds"]) for c in doc["pods_per_replica"]]
    assert ranked[:3] == [(4499, 0), (4049, 0), (3374, 0)]
    assert all(over > 0 for value, over in ranked if value > 4499)


@pytest.mark.parametrize(("text", "fragment"), [
    ("t,qps,pods\n0,10,5\n10,10,-5\n", "row 3: pods is -5; it cannot be negative"),
    ("t,qps,pods\n0,10,five\n10,10,5\n", "row 2: pods is 'five', not a number"),
    ("t,qps,pods\n0,10,1.5\n10,10,5\n", "row 2: pods is 1.5; give a whole number"),
    ("t,qps,pods\n0,10,1e400\n10,10,5\n", "pods is 1e400, more than 9223372036854775807"),
    ("t,qps,pods\n0,10,inf\n10,10,5\n", "pods is inf; give a finite number"),
    ("t,qps,pods\n0,10,\n10,10,\n", "the pods column has no count at all"),
    ('[{"t":0,"qps":10,"pods":false},{"t":10,"qps":10,"pods":1}]',
     "row 2: pods is False; give a whole number"),
    ('[{"t":0,"qps":10,"pods":{"n":1}},{"t":10,"qps":10,"pods":1}]', "not a number"),
    ("t,qps,pods\n0,1e308,5\n10,10,5\n", "more replicas than can be counted"),
])
def test_bad_pods_cells_are_one_line(text: str, fragment: str, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.txt"
    path.write_text(text)
    bound = "1e-300" if "1e308" in text else "1000"
    assert advise_main(["--timeline", str(path), "--max-per-replica", bound]) == 1
    err = capsys.readouterr().err
    assert err.startswith("cpa advise: ") and fragment in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
