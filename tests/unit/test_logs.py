"""The daemons' log lines: their formats, events held until the daemon's first poll is
done (cpa.logs.hold: written later, exactly as they would have been), and a stderr that
does not take them.

Each case runs in a fresh interpreter: holding only happens before structlog is loaded.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[2]


def run(script: str) -> tuple[list[str], str]:
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=True, timeout=60, cwd=REPO)
    return done.stderr.splitlines(), done.stdout


PRELUDE = """
import sys, time
from cpa import logs
logs.configure(0, "json")
"""


def test_a_json_line_starts_with_its_stamp_level_event_and_component() -> None:
    before = datetime.now(UTC)
    lines, _ = run(PRELUDE + """
logs.get_logger("main").info("first", n=1)
logs.get_logger("watch").warning("second", n=2)
""")
    events = [json.loads(line) for line in lines]
    assert [list(e)[:4] for e in events] == [["timestamp", "level", "event", "component"]] * 2
    assert [(e["event"], e["component"], e["level"], e["n"]) for e in events] == [
        ("first", "main", "info", 1), ("second", "watch", "warning", 2)]
    for e in events:  # UTC, written with a Z
        assert e["timestamp"].endswith("Z")
        stamp = datetime.fromisoformat(e["timestamp"].replace("Z", "+00:00"))
        assert stamp.tzinfo is not None and stamp >= before - timedelta(seconds=1)


def test_a_text_line_starts_with_its_stamp() -> None:
    lines, _ = run("""
from cpa import logs
logs.configure(0, "text")
logs.get_logger("main").info("starting", version="1")
""")
    assert len(lines) == 1
    assert "starting" in lines[0] and "component=main" in lines[0] and "version=1" in lines[0]
    assert lines[0].startswith("timestamp=") and lines[0].split()[0].endswith("Z")


def test_held_events_come_out_on_release_in_order_with_their_own_time() -> None:
    lines, out = run(PRELUDE + """
logs.hold()
log = logs.get_logger("main")
log.info("first", n=1)
logs.get_logger("watch").warning("second", n=2)
print("structlog loaded while held:", "structlog" in sys.modules)
time.sleep(0.3)
released = time.time()
logs.release()
log.info("third", n=3)
print(released)
""")
    assert "structlog loaded while held: False" in out
    released = float(out.split()[-1])
    events = [json.loads(line) for line in lines]
    assert [(e["event"], e["component"], e["level"], e["n"]) for e in events] == [
        ("first", "main", "info", 1), ("second", "watch", "warning", 2),
        ("third", "main", "info", 3)]
    stamps = [datetime.fromisoformat(e["timestamp"].replace("Z", "+00:00")).timestamp()
              for e in events]
    assert stamps[0] <= stamps[1] < released - 0.25  # the time of the call, not the write
    assert stamps[2] >= released
    assert all(e["timestamp"].endswith("Z") for e in events)


def test_a_held_event_renders_like_a_live_one() -> None:
    held, _ = run(PRELUDE + """
logs.hold()
logs.get_logger("main").info("same", a=1, b="x")
logs.release()
""")
    live, _ = run(PRELUDE + """
logs.get_logger("main").info("same", a=1, b="x")
""")
    h, li = json.loads(held[0]), json.loads(live[0])
    assert list(h) == list(li)
    h.pop("timestamp")
    li.pop("timestamp")
    assert h == li


def test_an_exception_ends_the_holding_and_keeps_order_and_traceback() -> None:
    lines, _ = run(PRELUDE + """
logs.hold()
log = logs.get_logger("main")
log.info("before")
try:
    raise ValueError("boom")
except ValueError:
    log.exception("failed")
log.info("after")
""")
    events = [json.loads(line) for line in lines]
    assert [e["event"] for e in events] == ["before", "failed", "after"]
    assert "ValueError: boom" in events[1]["exception"]


def test_the_timer_releases_held_events_without_a_poll() -> None:
    lines, _ = run(PRELUDE + """
logs.HOLD_SECONDS = 0.2
logs.hold()
logs.get_logger("main").info("waiting for a sync that takes long")
time.sleep(1.0)
print("done")
""")
    assert [json.loads(line)["event"] for line in lines] == [
        "waiting for a sync that takes long"]


def test_release_with_nothing_held_does_not_load_the_logging_library() -> None:
    _, out = run("""
import sys
from cpa import logs
logs.release()
print("structlog" in sys.modules)
""")
    assert out.strip() == "False"


def test_text_format_is_unchanged_by_holding() -> None:
    lines, _ = run("""
from cpa import logs
logs.configure(0, "text")
logs.hold()
logs.get_logger("main").info("starting", version="1")
logs.release()
""")
    assert len(lines) == 1
    assert "starting" in lines[0] and "component=main" in lines[0] and "version=1" in lines[0]
    assert lines[0].startswith("timestamp=") and lines[0].split()[0].endswith("Z")


def test_text_logs_are_logfmt() -> None:
    """--log-format=text: the keys of the JSON format, values written as values."""
    lines, _ = run("""
from cpa import logs
logs.configure(0, "text")
logs.get_logger("main").info("starting", targets=["deployment/a", "statefulset/b"],
    nodelabels=None, server="https://h:6443", events=False, poll_period_seconds=10,
    ratio=1.5, table=[[1, 2], [64, 3]], error='bad "x"\\nnext', empty="")
""")
    assert len(lines) == 1
    line = lines[0]
    head, rest = line.split(" level=", 1)
    assert head.startswith("timestamp=") and head.endswith("Z")
    assert rest.startswith("info event=starting component=main targets=deployment/a,"
                           "statefulset/b nodelabels= server=https://h:6443 events=false "
                           "poll_period_seconds=10 ratio=1.5 table=[[1,2],[64,3]] "
                           'error="bad \\"x\\"\\nnext" empty=')
    assert "None" not in line and "[\\'" not in line and "'" not in line


def test_logfmt_lines_parse_back() -> None:
    """Every value survives a logfmt reader (quoted values are JSON strings)."""
    import re

    from cpa.logs import logfmt

    event = {"timestamp": "t", "level": "warning", "event": "x.y", "component": "c",
             "a": "with space", "b": "k=v", "c": "", "d": None, "e": ["p", None, 3],
             "f": {"k": [1]}, "g": True, "h": "tab\there", "i": "ünï"}
    line = logfmt(None, "info", dict(event))
    pairs = re.findall(r'(\S+?)=("(?:[^"\\]|\\.)*"|\S*)', line)
    parsed = {k: json.loads(v) if v.startswith('"') else v for k, v in pairs}
    assert list(parsed) == list(event)
    assert parsed["a"] == "with space" and parsed["b"] == "k=v" and parsed["h"] == "tab\there"
    assert parsed["c"] == parsed["d"] == "" and parsed["e"] == "p,,3"
    assert json.loads(parsed["f"]) == {"k": [1]} and parsed["g"] == "true"
    assert parsed["i"] == "ünï"


def test_a_stderr_nobody_reads_never_blocks_the_caller_and_every_drop_is_said() -> None:
    """Issue 27 #7: stderr a pipe nobody reads. Logging goes on at once (bounded buffer,
    lines dropped and counted), and once the pipe is read the logs.dropped lines say how
    many were lost (one per time the buffer drained after drops; the integration test
    shows it is one for a pipe that stayed full)."""
    _, out = run("""
import fcntl, json, os, sys, time
r, w = os.pipe()
fcntl.fcntl(w, 1031, 4096)  # F_SETPIPE_SZ: one page
os.dup2(w, 2)
from cpa import logs
logs.configure(0, "json")
logs.buffer_stderr(10)
log = logs.get_logger("main")
began = time.monotonic()
for i in range(500):
    log.info("line", i=i, pad="x" * 100)
took = time.monotonic() - began
dropped = logs.dropped()
data = b""
os.set_blocking(r, False)
quiet_since = time.monotonic()
while time.monotonic() - quiet_since < 1.0:
    try:
        data += os.read(r, 65536)
        quiet_since = time.monotonic()
    except BlockingIOError:
        time.sleep(0.01)
lines = [json.loads(x) for x in data.decode().splitlines()]
said = [x for x in lines if x["event"] == "logs.dropped"]
print(json.dumps({"took": took, "dropped": dropped, "said": said,
                  "written": sum(x["event"] == "line" for x in lines)}))
""")
    result = json.loads(out.splitlines()[-1])
    assert result["took"] < 5, "the caller waited for stderr"
    assert result["dropped"] > 400
    said = result["said"]
    assert said and sum(line["dropped"] for line in said) == result["dropped"]
    assert said[-1]["dropped_total"] == result["dropped"]
    assert said[-1]["level"] == "warning" and "CPA_LOG_BUFFER_LINES" in said[-1]["hint"]
    assert result["written"] + result["dropped"] == 500


def test_buffered_lines_are_written_out_at_exit_in_order() -> None:
    lines, _ = run("""
import os
from cpa import logs
logs.configure(0, "json")
logs.buffer_stderr(1000)
for i in range(200):
    logs.get_logger("main").info("line", i=i)
""")
    assert [json.loads(line)["i"] for line in lines] == list(range(200))


def test_a_stderr_with_room_is_written_by_the_caller_without_waking_the_writer() -> None:
    """A line that stderr can take at once is written by its caller (waking the writer
    thread for each line cost ~0.1 ms of CPU a poll): with the writer thread never
    writing, every short line is in the pipe as soon as the call returns, in order, and
    the thread was not woken; a line longer than PIPE_BUF (which a pipe may not take
    whole) is left to the thread, and so are the lines after it."""
    _, out = run("""
import json, os, select, time
r, w = os.pipe()
os.dup2(w, 2)
from cpa import logs
wakes = []
def never_writes(self):  # the writer thread, counting its wake-ups instead of writing
    with self._cond:
        while True:
            self._cond.wait()
            wakes.append(len(self._lines))
logs._BufferedStderr._run = never_writes
logs.configure(0, "json")
logs.buffer_stderr(10)
log = logs.get_logger("main")
for i in range(20):
    log.info("line", i=i)
os.set_blocking(r, False)
now = [json.loads(x)["i"] for x in os.read(r, 65536).decode().splitlines()]
woken = len(wakes)
log.info("long", pad="x" * select.PIPE_BUF)
log.info("after")
try:
    later = os.read(r, 65536)
except BlockingIOError:
    later = b""
for _ in range(500):  # the thread runs when the GIL comes to it
    if wakes:
        break
    time.sleep(0.01)
print(json.dumps({"now": now, "woken": woken, "later": later.decode(),
                  "queued": len(logs._buffer._lines), "wakes": wakes}))
""")
    result = json.loads(out.splitlines()[-1])
    assert result["now"] == list(range(20)) and result["woken"] == 0
    assert result["wakes"] and result["wakes"][-1] > 0  # woken for the queued lines
    assert result["later"] == "" and result["queued"] == 2  # behind the long line, in order


@pytest.mark.parametrize(("value", "expected"), [
    (None, 5000), ("", 5000), ("4", 4), ("0", 0), (" 12 ", 12)])
def test_the_buffer_size_from_the_environment(value: str | None, expected: int) -> None:
    from cpa import logs

    assert logs.buffer_lines({} if value is None else {"CPA_LOG_BUFFER_LINES": value}) == \
        expected


@pytest.mark.parametrize("value", ["-1", "many", "1.5"])
def test_a_bad_buffer_size_is_a_problem_naming_the_variable(value: str) -> None:
    from cpa import logs

    problem = logs.buffer_lines({"CPA_LOG_BUFFER_LINES": value})
    assert isinstance(problem, str) and "CPA_LOG_BUFFER_LINES" in problem


@given(st.lists(st.integers(min_value=0, max_value=2**62), min_size=1, max_size=5),
       st.integers(min_value=0, max_value=3))
def test_a_stamp_is_the_utc_isoformat_with_a_z(instants: list[int], repeat: int) -> None:
    """The same text as ``isoformat`` (microseconds only when not zero)."""

    from cpa.logs import utc_stamp

    for ns in instants + [instants[-1] + step * 1_000 for step in range(repeat)]:
        at = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=ns // 1000)
        assert utc_stamp(ns) == at.isoformat().replace("+00:00", "Z")


@pytest.mark.parametrize("seconds", [0, 59, 60, 3599, 3600, 3661, 86399, 86400,
                                     1_764_979_199, 1_764_979_200, 4_102_444_800])
def test_a_stamp_across_minute_hour_and_day_boundaries(seconds: int) -> None:
    """Either side of a minute, an hour, a day."""

    from cpa.logs import utc_stamp

    for ns in (seconds * 10**9 - 1000, seconds * 10**9, seconds * 10**9 + 1000,
               (seconds + 1) * 10**9):
        at = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=ns // 1000)
        assert utc_stamp(ns) == at.isoformat().replace("+00:00", "Z")


def test_an_exception_still_renders_its_traceback_in_both_formats() -> None:
    """An event that asks for a traceback gets it (``exception``)."""
    for fmt in ("json", "text"):
        out = subprocess.run([sys.executable, "-c", f"""
import sys
from cpa import logs
logs.configure(0, {fmt!r})
try:
    raise ValueError("boom")
except ValueError:
    logs.get_logger("t").error("x.failed", exc_info=True)
logs.get_logger("t").warning("x.warned", n=1)
"""], capture_output=True, text=True, check=True).stderr
        assert "ValueError: boom" in out and "Traceback" in out, out
        if fmt == "json":
            first, second = (json.loads(line) for line in out.splitlines())
            assert list(first)[:4] == ["timestamp", "level", "event", "component"]
            assert first["level"] == "error" and "exception" in first
            assert second["level"] == "warning" and second["n"] == 1
