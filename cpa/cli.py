"""Entry points: the daemon (``cluster-proportional-autoscaler``, ``cpa run``) and ``cpa``.

Thin shells: parse flags, wire the pieces, map outcomes to upstream's exit codes
(2 usage error, 1 invalid flags or too many failed polls, 0 on SIGTERM/SIGINT).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from types import FrameType
from typing import TYPE_CHECKING

from cpa import __version__, flags, logs

if TYPE_CHECKING:  # imported for real only on the daemon's path, below
    from cpa.daemon.health import HealthState
    from cpa.daemon.leaderelection import LeaderElector
    from cpa.daemon.loop import LoopConfig, PollResult
    from cpa.daemon.metrics import Metrics
    from cpa.kube.api import Api
    from cpa.kube.client import KubeApi
    from cpa.kube.scale import Target
    from cpa.nodes.watch import NodeReflector, WatchStatus

DAEMON_NAME = "cluster-proportional-autoscaler"


def _usage_exit(prog: str, message: str) -> int:
    print(f"{prog}: {message} (see --help)", file=sys.stderr)
    return flags.EXIT_USAGE


def run_daemon(argv: Sequence[str], prog: str = DAEMON_NAME) -> int:
    """Parse flags, sync the node cache, serve health, poll until told to stop."""
    try:
        return _run_daemon(argv, prog)
    finally:
        logs.release()  # events still held (an early exit) are written before we go


def _run_daemon(argv: Sequence[str], prog: str) -> int:
    try:
        opts = flags.parse_args(argv)
    except flags.UsageError as exc:
        return _usage_exit(prog, str(exc))
    if opts.help:
        print(flags.usage(prog))
        return 0
    if opts.version:
        print(__version__)
        return 0
    logs.configure(opts.v, opts.log_format)
    log = logs.get_logger("main")
    problems = flags.validate(opts)
    if problems:
        for problem in problems:
            print(f"{prog}: {problem}", file=sys.stderr)
        print(f"{prog}: failed to validate all input parameters", file=sys.stderr)
        return flags.EXIT_INVALID

    raise_open_files_limit()
    # Imported here so --help/--version and flag errors stay instant; only what starting
    # the health server and the Node list needs comes first (the rest is imported while the
    # list is in flight).
    from cpa.kube.client import KubeApi
    from cpa.kube.config import ConfigError, load
    from cpa.nodes.store import NodeStore
    from cpa.nodes.watch import NodeReflector

    stop = threading.Event()
    received: list[str] = []

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        # Only record and set: logging here could deadlock on the log lock that the
        # interrupted main thread may hold.
        received.append(signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    try:
        conn = load(opts.kubeconfig)
    except ConfigError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return flags.EXIT_INVALID
    api = KubeApi(conn)
    store = NodeStore()
    watch = NodeReflector(api, store, opts.nodelabels)
    # The health server answers before anything touches the API (ours: upstream serves
    # nothing until its informer synced): /healthz 200, /last-poll 500 saying why we wait,
    # /metrics counting it. It is a few sockets and one thread, ~1 ms before the list.
    from cpa.daemon.health import HealthState, serve

    health = HealthState(WAITING)
    metrics = _LateMetrics(opts.targets, watch.status)
    try:
        server = serve(health, opts.health_port, metrics=metrics.exposition)
    except OSError as exc:
        print(f"{prog}: cannot serve health on port {opts.health_port}: {exc} "
              "(choose another with --health-port)", file=sys.stderr)
        return flags.EXIT_INVALID
    watch.start()
    # SIGTERM cuts the requests in flight: a hung request must not hold the exit.
    threading.Thread(target=_abort_on_stop, args=(stop, api), name="stop", daemon=True).start()
    # Events until the first poll is done are held and written after it (cpa.logs): the
    # logging library is not imported before the first write. While the API server answers
    # the Node list, the first poll's code is imported.
    logs.hold()
    log.info("starting", version=__version__, server=conn.server, config=conn.source,
             namespace=opts.namespace, configmap=opts.configmap,
             targets=[str(t) for t in opts.targets], nodelabels=opts.nodelabels or None,
             poll_period_seconds=opts.poll_period_seconds, events=opts.events,
             leader_elect=opts.leader_elect)
    from cpa.daemon.loop import Autoscaler

    if not _wait_for_the_first_list(watch, stop, health, metrics, opts.poll_period_seconds):
        watch.stop()
        server.shutdown()
        return 0
    elector = _leader_elector(opts, api) if opts.leader_elect else None
    writer: Api = api
    if elector is not None:
        from cpa.daemon.leaderelection import GuardedApi

        writer = GuardedApi(api, elector)  # every write checks the Lease just before it
        health.record(None)  # a follower has no poll of its own to report
    autoscaler = Autoscaler(loop_config(opts), writer, store.counts,
                            observers=[_ReleaseLogs(), health.observe, metrics.observe],
                            watch_status=watch.status,
                            may_write=elector.is_leader if elector is not None else None,
                            count_by=store.set_policy)
    if opts.events:
        from cpa.daemon.events import EventRecorder

        instance = os.environ.get("HOSTNAME") or DAEMON_NAME
        autoscaler.add_observer(
            EventRecorder(writer, opts.namespace, opts.configmap, instance).observe)
    if elector is not None:
        def on_change(leading: bool) -> None:
            metrics.set_leader(leading)
            if leading:
                autoscaler.wake()
            else:
                health.record(None)  # a follower has no poll of its own to report

        elector.on_change = on_change
        metrics.set_leader(False)
        elector.start()
    code = autoscaler.run(stop)
    if elector is not None:
        elector.stop(release=True)
    watch.stop()
    server.shutdown()
    log.info("stopped", exit_code=code, signal=received[0] if received else None)
    return code


WAITING = "waiting for the first Node list"


def raise_open_files_limit() -> None:
    """Raise the soft limit of open files to the hard one, as Go programs do at start
    (since Go 1.19; upstream is one). containerd 2.x gives a container a soft limit of
    1,024 under a hard one of ~500,000; CPython leaves it at 1,024."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ImportError, ValueError, OSError):
        pass  # not permitted or not POSIX: keep the limit we were given


def _abort_on_stop(stop: threading.Event, api: KubeApi) -> None:
    stop.wait()
    api.abort()


def _wait_for_the_first_list(watch: NodeReflector, stop: threading.Event,
                             health: HealthState, metrics: _LateMetrics,
                             period: float) -> bool:
    """Wait until the node store is synced (as upstream waits for its informer); False when
    told to stop first. Meanwhile ``/last-poll`` says why, and each poll period that passes
    with the list failing counts as a failed poll in ``/metrics`` (not towards
    ``--max-sync-failures``: upstream polls only after the sync)."""
    next_count: float | None = None
    while not watch.wait_synced(0.5):
        if stop.is_set():
            return False
        error = watch.status().error
        health.record(WAITING if error is None else f"{WAITING}: {error}")
        now = time.monotonic()
        if error is not None and (next_count is None or now >= next_count):
            metrics.failed_before_sync()
            next_count = now + period
    return True


def loop_config(opts: flags.Options) -> LoopConfig:
    """What the poll loop needs of the validated flags (``flags.validate`` filled
    ``opts.targets``)."""
    from cpa.daemon.loop import LoopConfig

    return LoopConfig(namespace=opts.namespace, configmap=opts.configmap, targets=opts.targets,
                      poll_period_seconds=opts.poll_period_seconds,
                      default_params=opts.default_params,
                      max_sync_failures=opts.max_sync_failures)


class _ReleaseLogs:
    """An observer that writes the held log events once the first poll is done."""

    def __init__(self) -> None:
        self._done = False

    def __call__(self, _result: PollResult) -> None:
        if not self._done:
            self._done = True
            logs.release()


class _LateMetrics:
    """``/metrics`` with prometheus_client imported when first needed: after the first
    poll's writes (observers run then), or at the first scrape. The library costs ~35 ms
    to import, of a ~0.3 s start to the first write at 1,000 nodes; the first poll does
    not need it."""

    def __init__(self, targets: Sequence[Target], watch_status: Callable[[], WatchStatus]
                 ) -> None:
        self._targets = targets
        self._watch_status = watch_status
        self._lock = threading.Lock()
        self._real: Metrics | None = None
        self._leading = True

    def _get(self) -> Metrics:
        with self._lock:
            if self._real is None:
                from cpa.daemon.metrics import Metrics

                self._real = Metrics(self._targets, self._watch_status)
                self._real.set_leader(self._leading)
            return self._real

    def observe(self, result: PollResult) -> None:
        self._get().observe(result)

    def set_leader(self, leading: bool) -> None:
        with self._lock:
            self._leading = leading
            real = self._real
        if real is not None:
            real.set_leader(leading)

    def failed_before_sync(self) -> None:
        self._get().failed_before_sync()

    def exposition(self) -> bytes:
        return self._get().exposition()


def _leader_elector(opts: flags.Options, api: Api) -> LeaderElector:
    from cpa.daemon.leaderelection import LeaderElector, LeaseConfig, default_identity

    config = LeaseConfig(namespace=opts.leader_elect_namespace or opts.namespace,
                         name=opts.leader_elect_lease_name or opts.configmap,
                         identity=default_identity(),
                         lease_duration=opts.leader_elect_lease_duration,
                         renew_deadline=opts.leader_elect_renew_deadline,
                         retry_period=opts.leader_elect_retry_period)
    logs.get_logger("main").info("leader.election", lease=f"{config.namespace}/{config.name}",
                                 identity=config.identity)
    return LeaderElector(api, config)


def daemon_main() -> None:
    """Console script ``cluster-proportional-autoscaler``: upstream's binary name."""
    sys.exit(run_daemon(sys.argv[1:], os.path.basename(sys.argv[0]) or DAEMON_NAME))


_CPA_USAGE = """usage: cpa [--version] <command> [flags]

commands:
  run       run the autoscaler daemon (same flags as cluster-proportional-autoscaler)
  explain   show what the autoscaler would do, and why, without writing anything
  simulate  replay a timeline of node/core counts through the formula and its behavior

`cpa <command> --help` describes a command's flags."""


def main(argv: Sequence[str] | None = None) -> int:
    """Console script ``cpa`` (and ``python -m cpa``)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(_CPA_USAGE)
        return 0 if args else flags.EXIT_USAGE
    if args[0] == "--version":
        print(__version__)
        return 0
    command, rest = args[0], args[1:]
    if command == "run":
        return run_daemon(rest, "cpa run")
    if command == "explain":
        from cpa.tools.explain import explain_main

        return explain_main(rest)
    if command == "simulate":
        from cpa.tools.simulate import simulate_main

        return simulate_main(rest)
    return _usage_exit("cpa", f"unknown command {command!r}: use run, explain or simulate")
