"""Measuring a running autoscaler: /proc (RSS, CPU), the API server's /metrics, its log.

Every number comes from outside the process under test, so ours and upstream are measured
the same way: RSS and CPU from ``/proc/PID``, requests from ``apiserver_request_total``,
replicas from the API server.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import statistics
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from tests.integration.support import LoggedProcess

_CLK_TCK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


# --- /proc ---------------------------------------------------------------------------
def proc_status(pid: int) -> dict[str, int]:
    """VmRSS, VmHWM etc. from /proc/PID/status, in KiB."""
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("Vm") or line.startswith("Rss"):
                key, _, rest = line.partition(":")
                parts = rest.split()
                if parts and parts[0].isdigit():
                    out[key] = int(parts[0])
    return out


def cpu_seconds(pid: int) -> float:
    """utime + stime of the process (all its threads), in seconds."""
    with open(f"/proc/{pid}/stat") as fh:
        data = fh.read()
    fields = data[data.rindex(")") + 2:].split()
    # fields[0] is field 3 (state); utime is field 14, stime field 15.
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def cpu_ns(pid: int) -> int:
    """On-CPU time of all live threads in nanoseconds (/proc/PID/task/*/schedstat): far
    finer than utime+stime's clock ticks (10 ms), which a 1 ms poll cannot resolve."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{task}/schedstat") as fh:
            total += int(fh.read().split()[0])
    return total


def mem_available_mib() -> float:
    """MemAvailable of /proc/meminfo, in MiB."""
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024
    return 0.0


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/statm") as fh:
        return int(fh.read().split()[1]) * _PAGE // 1024


class RssSampler:
    """Samples VmRSS every ``interval`` seconds in a thread, from start until stop()."""

    def __init__(self, pid: int, interval: float = 0.2) -> None:
        self.pid = pid
        self.interval = interval
        self.samples: list[tuple[float, int]] = []  # (monotonic, KiB)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.samples.append((time.monotonic(), rss_kib(self.pid)))
            except (OSError, ValueError, IndexError):
                return
            self._stop.wait(self.interval)

    def median_mib(self, t0: float, t1: float) -> float | None:
        window = [kib for t, kib in self.samples if t0 <= t <= t1]
        return statistics.median(window) / 1024 if window else None

    def max_mib(self, t0: float | None = None, t1: float | None = None) -> float | None:
        window = [kib for t, kib in self.samples
                  if (t0 is None or t >= t0) and (t1 is None or t <= t1)]
        return max(window) / 1024 if window else None

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(2)


class PlaneMemory:
    """The API server's memory, sampled in a thread until stop(): its VmRSS (``/proc``, every
    ``rss_interval`` s) and its Go heap in use (``go_memstats_heap_inuse_bytes`` from its
    ``/metrics``, every ``heap_interval`` s: a GET of a few MB, so seldom).

    Both are shown because they say different things: the RSS is what the machine gives the
    API server, but a Go process keeps pages it freed, so a rise in one window hides the
    next; the heap in use rises and falls with what it holds for its clients (a list being
    encoded, a watcher's buffered events) whoever ran before."""

    def __init__(self, pid: int, metrics: Callable[[], str], rss_interval: float = 0.2,
                 heap_interval: float = 1.0) -> None:
        self.pid = pid
        self.rss: list[tuple[float, int]] = []  # (monotonic, KiB)
        self.heap: list[tuple[float, int]] = []  # (monotonic, bytes)
        self._metrics = metrics
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._sample_rss, args=(rss_interval,),
                             name="plane-rss", daemon=True),
            threading.Thread(target=self._sample_heap, args=(heap_interval,),
                             name="plane-heap", daemon=True)]
        for t in self._threads:
            t.start()

    def _sample_rss(self, interval: float) -> None:
        while not self._stop.is_set():
            try:
                self.rss.append((time.monotonic(), rss_kib(self.pid)))
            except (OSError, ValueError, IndexError):
                return
            self._stop.wait(interval)

    def _sample_heap(self, interval: float) -> None:
        while not self._stop.is_set():
            try:
                found = _HEAP_INUSE.search(self._metrics())
            except Exception:  # the API server busy or gone: the next sample may do
                found = None
            if found:
                self.heap.append((time.monotonic(), int(float(found.group(1)))))
            self._stop.wait(interval)

    def window(self, t0: float, t1: float) -> dict[str, float | None]:
        """Between ``t0`` and ``t1``: the max RSS and its rise over the last sample before
        ``t0``; the heap in use at most, median, and before ``t0`` (MiB)."""
        def mib(v: float | None, unit: int) -> float | None:
            return None if v is None else round(v / unit, 1)
        rss_in = [k for t, k in self.rss if t0 <= t <= t1]
        rss_before = [k for t, k in self.rss if t < t0]
        heap_in = [b for t, b in self.heap if t0 <= t <= t1]
        heap_before = [b for t, b in self.heap if t < t0]
        rss_max = max(rss_in) if rss_in else None
        return {
            "rss_max_mib": mib(rss_max, 1024),
            "rss_rise_mib": mib(rss_max - rss_before[-1], 1024)
            if rss_max is not None and rss_before else None,
            "heap_inuse_max_mib": mib(max(heap_in), 1 << 20) if heap_in else None,
            "heap_inuse_median_mib": mib(statistics.median(heap_in), 1 << 20)
            if heap_in else None,
            "heap_inuse_before_mib": mib(heap_before[-1], 1 << 20) if heap_before else None,
        }

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(5)


_HEAP_INUSE = re.compile(r"^go_memstats_heap_inuse_bytes\s+(\S+)", re.MULTILINE)


# --- apiserver metrics ---------------------------------------------------------------
_SAMPLE = re.compile(r"^apiserver_request_total\{([^}]*)\}\s+(\S+)", re.MULTILINE)
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')

RequestKey = tuple[str, str, str]  # (verb, resource, subresource)


def request_totals(metrics_text: str) -> dict[RequestKey, float]:
    """apiserver_request_total summed over code/scope/group/version/..., by
    (verb, resource, subresource). Non-resource requests (/metrics, /readyz) are skipped."""
    out: dict[RequestKey, float] = {}
    for match in _SAMPLE.finditer(metrics_text):
        labels = dict(_LABEL.findall(match.group(1)))
        resource = labels.get("resource", "")
        if not resource:
            continue
        key = (labels.get("verb", ""), resource, labels.get("subresource", ""))
        out[key] = out.get(key, 0.0) + float(match.group(2))
    return out


def delta(before: Mapping[RequestKey, float], after: Mapping[RequestKey, float]
          ) -> dict[RequestKey, float]:
    keys = set(before) | set(after)
    return {k: after.get(k, 0.0) - before.get(k, 0.0) for k in keys
            if after.get(k, 0.0) - before.get(k, 0.0) > 0}


_LONGRUNNING = re.compile(r"^apiserver_longrunning_requests\{([^}]*)\}\s+(\S+)", re.MULTILINE)


def open_node_watches(metrics_text: str) -> int:
    """Long-running WATCH requests on nodes currently open (a gauge)."""
    total = 0.0
    for match in _LONGRUNNING.finditer(metrics_text):
        labels = dict(_LABEL.findall(match.group(1)))
        if labels.get("resource") == "nodes" and labels.get("verb") == "WATCH":
            total += float(match.group(2))
    return int(total)


# The requests a poll makes, as ``apiserver_request_total`` labels them (deployment target).
POLL_CATEGORIES: dict[str, Callable[[RequestKey], bool]] = {
    "get_configmaps": lambda k: k == ("GET", "configmaps", ""),
    "create_configmaps": lambda k: k == ("POST", "configmaps", ""),
    "get_scale": lambda k: k[0] == "GET" and k[2] == "scale",
    "put_scale": lambda k: k[0] in ("PUT", "PATCH") and k[2] == "scale",
    "node_requests": lambda k: k[1] == "nodes",
}


def categorize(d: Mapping[RequestKey, float]) -> dict[str, float]:
    out = {name: 0.0 for name in POLL_CATEGORIES}
    for key, value in d.items():
        for name, match in POLL_CATEGORIES.items():
            if match(key):
                out[name] += value
    return out


# --- processes -----------------------------------------------------------------------
# One implementation of "a process with a log file, stopped by PID" for tests and bench.
Process = LoggedProcess


REPO = Path(__file__).resolve().parents[1]
SHIPPED_VENV = REPO / ".cache" / "bench-venv"
_shipped: Path | None = None  # set by install_as_shipped() for this run


SHIPPED_PYTHON = "python3.11"
"""The interpreter the image ships: Debian's package of that name (``image/ocibuild/debian.py``
``PYTHON``, from the ``SUITE`` it names); a unit test holds the two equal."""


def shipped_interpreter(candidates: tuple[str, ...] = (f"/usr/bin/{SHIPPED_PYTHON}",)
                        ) -> tuple[str, str]:
    """The interpreter to install ours with, and what it is (for the report).

    Why not this process's: the image runs Debian's ``python3.11``, whose executable links
    the interpreter in statically and is built with profile-guided optimisation; a
    development interpreter (pyenv's, here: libpython as a shared library, no PGO) spent
    1.1-1.2x the CPU on the same steady poll and ~1.3x on the daemon's imports, so a
    benchmark on it measured this machine's Python build, not what a node runs.
    ``CPA_BENCH_PYTHON=PATH`` chooses another; without Debian's, this process's interpreter
    is used and the report says so.
    """
    chosen = os.environ.get("CPA_BENCH_PYTHON")
    if chosen:
        return chosen, f"{chosen} (CPA_BENCH_PYTHON)"
    for path in candidates:
        if os.access(path, os.X_OK):
            return path, f"{path}, the image's interpreter (Debian's {SHIPPED_PYTHON})"
    return sys.executable, (f"{sys.executable}, this process's: no /usr/bin/{SHIPPED_PYTHON} "
                            "(the image's) on this machine")


def install_as_shipped() -> str:
    """Install this tree as the image does: the image's interpreter
    (:func:`shipped_interpreter`), a venv of its own (no system site-packages), the pinned
    runtime requirements of ``image/requirements.txt`` and a regular install of the
    package; :func:`our_command` then runs that. Returns what was done, for the report.

    Why: a development interpreter runs its site-packages' ``.pth`` hooks and the editable
    install's finder at every start (~30-40 ms on this machine, more than the interpreter
    itself), which the image never does; with them the first-write time measures this
    machine's Python set-up, not the daemon. Falls back to the development install when the
    package registry cannot be reached.
    """
    global _shipped
    problem = install_tree(REPO, SHIPPED_VENV)
    if problem:
        _shipped = None
        return f"development install (installing as shipped failed: {problem})"
    _shipped = SHIPPED_VENV / "bin" / "cluster-proportional-autoscaler"
    return (f"as shipped: venv {SHIPPED_VENV.relative_to(REPO)} on "
            f"{shipped_interpreter()[1]}, image/requirements.txt, no editable hooks")


def install_tree(tree: Path, venv: Path, interpreter: str | None = None) -> str:
    """Install the package at ``tree`` into a fresh ``venv`` as the image does (pinned
    runtime requirements, a regular install; on :func:`shipped_interpreter` unless told
    which); "" when done, else the reason it failed. Used for this tree
    (:func:`install_as_shipped`) and for another version of it that a benchmark compares
    against (``bench.pollcost --variant``)."""
    import subprocess
    python = venv / "bin" / "python"
    steps = [[interpreter or shipped_interpreter()[0], "-m", "venv", "--clear", str(venv)],
             [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
              "--no-deps", "-r", str(tree / "image" / "requirements.txt"), str(tree)]]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            return (done.stderr.strip().splitlines() or ["?"])[-1][:200]
    return ""


def our_python() -> str:
    """The interpreter :func:`our_command` runs (for timing our import path the same way)."""
    if _shipped is not None:
        return str(SHIPPED_VENV / "bin" / "python")
    return str(Path(sys.executable).parent / "python3")


def our_command() -> list[str]:
    """The daemon installed as shipped (:func:`install_as_shipped`) if done this run; else
    the installed console script, resolved past pyenv-style shims (a shim would add a shell
    start to every sync time); else ``python -c`` on the entry point."""
    if _shipped is not None:
        return [str(_shipped)]
    beside = Path(sys.executable).parent / "cluster-proportional-autoscaler"
    if os.access(beside, os.X_OK):
        return [str(beside)]
    exe = shutil.which("cluster-proportional-autoscaler")
    if exe:
        return [exe]
    return [sys.executable, "-c", "from cpa.cli import daemon_main; daemon_main()"]


def wait_for(what: str, fn: Callable[[], bool], timeout: float, interval: float = 0.1,
             alive: Callable[[], bool] | None = None) -> float:
    """Poll ``fn`` until true; return the monotonic time it first was. Raises on timeout
    or when ``alive`` says the process under test died."""
    deadline = time.monotonic() + timeout
    while True:
        now = time.monotonic()
        with contextlib.suppress(Exception):
            if fn():
                return now
        if alive is not None and not alive():
            raise RuntimeError(f"the process died while waiting for {what}")
        if now > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def wait_logged(proc: Process, event: str, timeout: float = 5.0) -> None:
    """Give our daemon's held start-up events (written just after its first poll) the moment
    they need to reach its log; returns quietly if ``event`` does not come."""
    with contextlib.suppress(TimeoutError):
        wait_for(f"the {event} event", lambda: f'"{event}"' in proc.logs(), timeout, 0.02)


# --- the target's replicas, as they are written ------------------------------------------
class ReplicaWatch:
    """Watches one Deployment and notes when each ``spec.replicas`` value first arrives.

    Why a watch: polling the Deployment every 0.1 s quantises a 0.2-0.3 s start to the first
    write by 0.1 s (too coarse to compare two implementations at 1,000 nodes), and polling
    faster adds API server load to a sync whose API server CPU is being measured. A watch
    event arrives within milliseconds of the write and costs the server nothing more."""

    def __init__(self, server: str, ca_file: Path, token: str, namespace: str, name: str
                 ) -> None:
        import urllib3
        self._http = urllib3.PoolManager(ca_certs=str(ca_file), cert_reqs="CERT_REQUIRED",
                                         retries=False)
        self._url = (f"{server}/apis/apps/v1/namespaces/{namespace}/deployments?watch=1"
                     f"&fieldSelector=metadata.name%3D{name}&timeoutSeconds=900")
        self._headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        self.first_seen: dict[int, float] = {}  # replicas -> monotonic time first seen
        self.seen: list[tuple[float, int]] = []  # every value as it arrived (monotonic)
        self._cond = threading.Condition()
        self._resp = self._http.request("GET", self._url, headers=self._headers,
                                        preload_content=False)
        self._thread = threading.Thread(target=self._run, name="replica-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import json
        pending = b""
        with contextlib.suppress(Exception):
            for data in self._resp.stream(65536):
                now = time.monotonic()
                pending += data
                *complete, pending = pending.split(b"\n")
                for line in complete:
                    if not line.strip():
                        continue
                    obj = json.loads(line).get("object") or {}
                    replicas = (obj.get("spec") or {}).get("replicas")
                    if isinstance(replicas, int):
                        with self._cond:
                            self.first_seen.setdefault(replicas, now)
                            if not self.seen or self.seen[-1][1] != replicas:
                                self.seen.append((now, replicas))
                            self._cond.notify_all()

    def wait(self, replicas: int, after: float, timeout: float,
             alive: Callable[[], bool] | None = None) -> float:
        """The first time ``replicas`` arrived at or after ``after`` (monotonic), or the
        value in force at ``after`` if it was that already."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                seen = self._arrived(replicas, after)
                if seen is not None:
                    return seen
                if alive is not None and not alive():
                    raise RuntimeError(f"the process died while waiting for {replicas} replicas")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for "
                                       f"{replicas} replicas")
                self._cond.wait(min(left, 0.5))

    def _arrived(self, replicas: int, after: float) -> float | None:
        current: tuple[float, int] | None = None
        for t, value in self.seen:
            if t < after:
                current = (t, value)
            elif value == replicas:
                return t
        if current is not None and current[1] == replicas:
            return after
        return None

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._resp.shutdown()
        with contextlib.suppress(Exception):
            self._resp.release_conn()
        self._thread.join(2)
        self._http.clear()
