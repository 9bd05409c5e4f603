"""The DNS benchmark's load: the profiles, dnsperf run one second at a time, its output read.

Why one dnsperf a second rather than one for the whole run: kube-proxy balances a UDP
Service per flow (a conntrack entry per client socket), and a long-running dnsperf keeps
its sockets, so every query of the run would go to the Pods that existed when it started
and a new CoreDNS Pod would never get any. A real resolver (glibc, musl) opens a socket
per lookup, so its queries spread over the Ready Pods at once. A fresh dnsperf each second,
with ``CLIENTS`` sockets, is near that: every second's flows are balanced anew over the
Ready Pods kube-proxy has programmed by then. Each second is also a slice of its own:
what was sent in it, lost in it and how long its answers took come from its own process.

Lost is dnsperf's: no answer within ``TIMEOUT`` seconds. Late is an answer dnsperf saw
after it had given the query up ("received a response with an unexpected (maybe timed out)
id"), which it can see only while that second's process still waits for others: a lower
bound.
"""

from __future__ import annotations

import re
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

CLIENTS = 50    # sockets (flows) a second
TIMEOUT = 2     # seconds before dnsperf counts a query lost
QUERY_NAMES = 100


class Phase(NamedTuple):
    """``seconds`` long, the rate going linearly from ``start`` to ``end`` (multiples of
    the base rate)."""

    seconds: int
    start: float
    end: float


class Profile(NamedTuple):
    name: str
    phases: tuple[Phase, ...]
    jump: int | None  # the second of a step up, for "seconds to capacity"

    @property
    def seconds(self) -> int:
        return sum(p.seconds for p in self.phases)

    @property
    def jump_until(self) -> int | None:
        """The end of the phase that begins at the jump (None without a jump)."""
        begin = 0
        for phase in self.phases:
            if begin == self.jump:
                return begin + phase.seconds
            begin += phase.seconds
        return None


# The seed's simulator's spike (steady, five times the traffic, then back), at real time
# and shortened so that the four runs of one profile take about twenty minutes; the ramp
# reaches the same peak slowly.
SPIKE = Profile("spike", (Phase(60, 1, 1), Phase(180, 5, 5), Phase(60, 1, 1)), jump=60)
RAMP = Profile("ramp", (Phase(30, 1, 1), Phase(150, 1, 5), Phase(60, 5, 5), Phase(60, 1, 1)),
               jump=None)
# The spike in two minutes: to try the setups out, not for figures.
SHORT = Profile("short", (Phase(20, 1, 1), Phase(60, 5, 5), Phase(20, 1, 1)), jump=20)
PROFILES = {p.name: p for p in (SPIKE, RAMP, SHORT)}


def multiple_at(profile: Profile, second: int) -> float:
    """The base rate's multiple in the profile's second ``second`` (0-based)."""
    offset = second
    for phase in profile.phases:
        if offset < phase.seconds:
            return phase.start + (phase.end - phase.start) * offset / phase.seconds
        offset -= phase.seconds
    raise ValueError(f"second {second} is past the profile's {profile.seconds} s")


def rates(profile: Profile, base: float) -> list[int]:
    """Queries to send in each second of the profile."""
    return [round(base * multiple_at(profile, s)) for s in range(profile.seconds)]


# --- one second of dnsperf ----------------------------------------------------------
class Slice(NamedTuple):
    """What one second's dnsperf sent and saw."""

    second: int
    offered: int
    sent: int
    completed: int
    lost: int
    late: int
    latencies: tuple[float, ...]  # seconds, one per answered query


_STAT = re.compile(r"^\s*Queries (sent|completed|lost):\s+(\d+)", re.M)
_ANSWER = re.compile(r"^> [A-Z]+ \S+ \S+ (\d+\.\d+)$", re.M)
_LATE = re.compile(r"unexpected \(maybe timed out\) id")


def parse(second: int, offered: int, output: str) -> Slice:
    """A slice from dnsperf's ``-v -W`` output (per-query lines, warnings, statistics)."""
    stats = {k: int(v) for k, v in _STAT.findall(output)}
    if "sent" not in stats:
        raise ValueError(f"dnsperf gave no statistics for second {second}: {output[-500:]!r}")
    completed, lost = stats.get("completed", 0), stats.get("lost", 0)
    if completed + lost > stats["sent"]:
        raise ValueError(f"dnsperf counted more answered and lost than sent in second "
                         f"{second}: {stats}")
    latencies = tuple(float(x) for x in _ANSWER.findall(output))
    return Slice(second, offered, stats["sent"], completed, lost,
                 len(_LATE.findall(output)), latencies)


def dnsperf_argv(server: str, queries: Path, rate: int) -> list[str]:
    """One second at ``rate`` queries a second, every answer's latency printed (-v), with
    room for every query of the second to be outstanding (-q) so that a slow server lowers
    the answers, never the queries sent."""
    outstanding = max(100, rate * (TIMEOUT + 1))
    return ["dnsperf", "-s", server, "-p", "53", "-d", str(queries), "-l", "1",
            "-Q", str(rate), "-c", str(CLIENTS), "-t", str(TIMEOUT), "-q", str(outstanding),
            "-v", "-W"]


def write_queries(path: Path, zone: str) -> Path:
    path.write_text("".join(f"host{i}.{zone} A\n" for i in range(QUERY_NAMES)))
    return path


class Driver:
    """Starts one dnsperf at each second of the profile, on the second (from ``t0``), and
    collects each one's slice when it ends."""

    def __init__(self, server: str, queries: Path, per_second: Sequence[int],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.server = server
        self.queries = queries
        self.per_second = list(per_second)
        self.slices: list[Slice] = []
        self.errors: list[str] = []
        self.t0 = 0.0
        self._clock = clock
        self._lock = threading.Lock()
        self._waiters: list[threading.Thread] = []
        self._procs: list[subprocess.Popen[str]] = []
        self._stop = threading.Event()

    def run(self, t0: float) -> None:
        """Blocks until every second's dnsperf has been started and has ended."""
        self.t0 = t0
        for second, rate in enumerate(self.per_second):
            if self._stop.wait(max(0.0, t0 + second - self._clock())):
                break
            proc = subprocess.Popen(dnsperf_argv(self.server, self.queries, rate),
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, start_new_session=True)
            self._procs.append(proc)
            waiter = threading.Thread(target=self._collect, args=(second, rate, proc),
                                      daemon=True)
            waiter.start()
            self._waiters.append(waiter)
        for waiter in self._waiters:
            waiter.join()
        self.slices.sort()

    def _collect(self, second: int, rate: int, proc: subprocess.Popen[str]) -> None:
        output, _ = proc.communicate()
        try:
            piece = parse(second, rate, output)
        except ValueError as exc:
            with self._lock:
                self.errors.append(str(exc))
            return
        with self._lock:
            self.slices.append(piece)

    def stop(self) -> None:
        """Start no more seconds and end the running ones (by their PIDs)."""
        self._stop.set()
        for proc in self._procs:
            if proc.poll() is None:
                proc.terminate()
