"""Entry points: the daemon (``cluster-proportional-autoscaler``, ``cpa run``) and ``cpa``.

Thin shells: parse flags, wire the pieces, map outcomes to upstream's exit codes
(2 usage error, 1 invalid flags or too many failed polls, 0 on SIGTERM/SIGINT).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from cpa import VERSION_TEXT, __version__, flags, logs

if TYPE_CHECKING:  # imported for real only on the daemon's path, below
    from cpa.daemon.health import HealthState
    from cpa.daemon.leaderelection import LeaderElector
    from cpa.daemon.loadstage import LoadStage, TargetLoad
    from cpa.daemon.loop import LoopConfig, PollResult
    from cpa.daemon.metrics import Metrics
    from cpa.decide.load import Load
    from cpa.decide.windows import LoadAxis
    from cpa.kube.api import Api, RawApi
    from cpa.kube.scale import Target
    from cpa.nodes.watch import NodeReflector, WatchStatus

DAEMON_NAME = "cluster-proportional-autoscaler"
LABEL_LIST_WAIT = 30.0
"""Seconds a poll waits for the Node list that a new zones topologyKey needs (the records
keep only the label they were listed with); a longer list fails that poll, and the next
poll decides once it is done."""


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
        print(VERSION_TEXT)
        return 0
    logs.configure(opts.v, opts.log_format)
    log = logs.get_logger("main")
    problems = flags.validate(opts)
    if problems:
        for problem in problems:
            print(f"{prog}: {problem}", file=sys.stderr)
        print(f"{prog}: failed to validate all input parameters", file=sys.stderr)
        return flags.EXIT_INVALID

    # Imported here so --help/--version and flag errors stay instant; only what starting
    # the health server and the Node list needs comes first (the rest is imported while the
    # list is in flight).
    from cpa.daemon.process import Stopper, raise_open_files_limit, require_modules
    from cpa.kube.client import KubeApi
    from cpa.kube.config import ConfigError, load
    from cpa.nodes.store import NodeStore
    from cpa.nodes.watch import NodeReflector

    require_modules()
    raise_open_files_limit()
    stopper = Stopper()
    stop = stopper.event

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
    metrics = _LateMetrics(opts.targets, watch.status, opts.dry_run)
    try:
        server = serve(health, opts.health_port, metrics=metrics.exposition)
    except OSError as exc:
        print(f"{prog}: cannot serve health on port {opts.health_port}: {exc} "
              "(choose another with --health-port)", file=sys.stderr)
        return flags.EXIT_INVALID
    watch.start()
    stopper.abort_on_stop(api)
    # Events until the first poll is done are held and written after it (cpa.logs): the
    # logging library is not imported before the first write. While the API server answers
    # the Node list, the first poll's code is imported.
    logs.hold()
    log.info("starting", version=__version__, server=conn.server, config=conn.source,
             namespace=opts.namespace, configmap=opts.configmap,
             targets=[str(t) for t in opts.targets], nodelabels=opts.nodelabels or None,
             poll_period_seconds=opts.poll_period_seconds, events=opts.events,
             leader_elect=opts.leader_elect,
             react_to_node_changes=opts.react_to_node_changes)
    if opts.dry_run:
        _dry_run(opts)
    from cpa.daemon.loop import Autoscaler

    if any(target.custom for target in opts.targets):
        unresolved = _resolve_targets(opts, api, stop)
        if unresolved is not None:
            print(f"{prog}: {unresolved}", file=sys.stderr)
            watch.stop()
            server.shutdown()
            return flags.EXIT_INVALID
    if not _wait_for_the_first_list(watch, stop, health, metrics, opts.poll_period_seconds):
        watch.stop()
        server.shutdown()
        return 0
    elector = _leader_elector(opts, api) if opts.leader_elect else None
    writer: RawApi = api
    if elector is not None:
        from cpa.daemon.leaderelection import GuardedApi

        writer = GuardedApi(api, elector)  # every write checks the Lease just before it
        health.record(None)  # a follower has no poll of its own to report
    load_axes = _LateLoad(lambda: KubeApi(conn), opts.namespace)
    metrics.load_view = load_axes.view
    autoscaler = Autoscaler(loop_config(opts), writer, store.counts,
                            observers=[_ReleaseLogs(), health.observe, metrics.observe],
                            watch_status=watch.status,
                            may_write=elector.is_leader if elector is not None else None,
                            count_by=lambda policy: store.set_policy(policy, LABEL_LIST_WAIT),
                            load=load_axes)
    load_axes.wake = autoscaler.wake
    stopper.also_interrupt(autoscaler.interrupt)
    if opts.react_to_node_changes:
        store.on_change = autoscaler.nodes_changed
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
    load_axes.retire()
    if elector is not None:
        elector.stop(release=True)
    watch.stop()
    server.shutdown()
    log.info("stopped", exit_code=code, signal=stopper.signal_name)
    return code


WAITING = "waiting for the first Node list"


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


def _resolve_targets(opts: flags.Options, api: Api, stop: threading.Event) -> str | None:
    """``RESOURCE.GROUP`` targets through API discovery, into ``opts.targets``: None when
    done (or stopped), else the problem (no such resource, no scale subresource). An API
    server that does not answer is retried, as the Node list is."""
    from cpa.kube.api import ApiError
    from cpa.kube.discovery import ResolveError, resolve_all

    log = logs.get_logger("main")
    while not stop.is_set():
        try:
            opts.targets = resolve_all(api, opts.targets)
        except ResolveError as exc:
            return str(exc)
        except ApiError as exc:
            if exc.forbidden or exc.status == 401:
                return f"--target: API discovery was refused: {exc}"
            log.warning("targets.discovery_failed", error=str(exc)[:300], retry_in=2)
            stop.wait(2.0)
            continue
        log.info("targets.resolved", targets={
            str(t): f"{t.api.api_version} {t.api.name} ({t.api.plural}/scale)"
            for t in opts.targets if t.custom})
        return None
    return None


def _dry_run(opts: flags.Options) -> None:
    """``--dry-run`` writes nothing at all: the flags that would write (Events, a Lease)
    are switched off here, and said so once."""
    suppressed = [flag for flag, on in (("--events", opts.events),
                                        ("--leader-elect", opts.leader_elect)) if on]
    opts.events = opts.leader_elect = False
    logs.get_logger("main").info(
        "dry_run", suppressed=suppressed or None,
        note="computing everything and writing nothing: no scale or HPA write, no "
             "ConfigMap creation, no Event, no Lease; see dry_run.would_scale and "
             "cpa_dry_run_replicas")


def loop_config(opts: flags.Options) -> LoopConfig:
    """What the poll loop needs of the validated flags (``flags.validate`` filled
    ``opts.targets``)."""
    from cpa.daemon.loop import LoopConfig

    return LoopConfig(namespace=opts.namespace, configmap=opts.configmap, targets=opts.targets,
                      poll_period_seconds=opts.poll_period_seconds,
                      default_params=opts.default_params,
                      max_sync_failures=opts.max_sync_failures, dry_run=opts.dry_run,
                      react_to_node_changes=opts.react_to_node_changes)


class _ReleaseLogs:
    """An observer that writes the held log events once the first poll is done."""

    def __init__(self) -> None:
        self._done = False

    def __call__(self, _result: PollResult) -> None:
        if not self._done:
            self._done = True
            logs.release()


class _LateLoad:
    """The load axis (:class:`cpa.daemon.loadstage.LoadStage`), imported and made at the
    first poll whose parameters have a ``load`` key: without one the daemon imports
    nothing of it and starts no scraper."""

    def __init__(self, api: Callable[[], Api], namespace: str) -> None:
        self._api = api
        self._namespace = namespace
        self._real: LoadStage | None = None
        self.wake: Callable[[], None] | None = None

    def axis(self, target: Target, load: Load, now: float) -> LoadAxis:
        if self._real is None:
            from cpa.daemon.loadstage import LoadStage

            self._real = LoadStage(self._api, self._namespace, wake=self.wake)
        return self._real.axis(target, load, now)

    def retire(self) -> None:
        if self._real is not None:
            self._real.retire()

    def view(self) -> list[TargetLoad]:
        return [] if self._real is None else self._real.view()


class _LateMetrics:
    """``/metrics`` with prometheus_client imported when first needed: after the first
    poll's writes (observers run then), or at the first scrape. The library costs ~35 ms
    to import, of a ~0.3 s start to the first write at 1,000 nodes; the first poll does
    not need it."""

    def __init__(self, targets: Sequence[Target], watch_status: Callable[[], WatchStatus],
                 dry_run: bool = False) -> None:
        self._targets = targets
        self._watch_status = watch_status
        self._dry_run = dry_run
        self._lock = threading.Lock()
        self._real: Metrics | None = None
        self._leading = True
        self.load_view: Callable[[], list[TargetLoad]] | None = None

    def _get(self) -> Metrics:
        with self._lock:
            if self._real is None:
                from cpa.daemon.metrics import Metrics

                self._real = Metrics(self._targets, self._watch_status,
                                     dry_run=self._dry_run, load_view=self.load_view)
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
    """Console script ``cluster-proportional-autoscaler``: upstream's binary name.

    A CPVA command line (``--default-config`` or ``--config-file``, no ``--configmap``)
    is handed to ``/cpvpa``: a CPVA manifest that gives only ``args:`` and relied on
    CPVA's image entrypoint starts this one. The autoscaler has neither flag (it would exit
    2), so no autoscaler command line changes meaning."""
    args = sys.argv[1:]
    if _is_cpva_command_line(args):
        print(f"{DAEMON_NAME}: a cluster-proportional-vertical-autoscaler command line; "
              "running /cpvpa", file=sys.stderr)
        vertical_main()
    prog = os.path.basename(sys.argv[0]) or DAEMON_NAME
    sys.exit(guarded(prog, lambda: run_daemon(args, prog)))


def _is_cpva_command_line(args: Sequence[str]) -> bool:
    names = set()
    for arg in args:
        if arg == "--":
            break
        if arg.startswith("--"):
            names.add(arg[2:].partition("=")[0].replace("_", "-"))
    return bool(names & {"default-config", "config-file"}) and "configmap" not in names


def vertical_main() -> None:
    """Console script ``cpvpa`` (the image's ``/cpvpa``): the vertical autoscaler,
    CPVA v0.8.9's drop-in (:mod:`cpa.vertical`)."""
    from cpa.vertical.daemon.main import run_vertical

    prog = os.path.basename(sys.argv[0]) or "cpvpa"
    sys.exit(guarded(prog, lambda: run_vertical(sys.argv[1:], prog)))


def guarded(prog: str, command: Callable[[], int]) -> int:
    """Run a command as a user meets it: never a traceback.

    * A reader that goes away (``cpa explain ... | head -1``) is not an error: the rest of
      the output is dropped quietly and the exit code is 0 (the output was cut by request).
    * Ctrl-C ends a one-shot command with 130, as a shell expects.
    * A module that is not installed is the installation's problem: one line naming the
      package and how to install it, exit 1.
    * Anything unexpected is a bug of ours: one line saying where, asking for a report,
      exit 1 (never the raw exception).
    """
    try:
        code = command()
        sys.stdout.flush()  # a closed pipe shows here, not at exit where it would print
        return code
    except BrokenPipeError:
        _drop_output()
        return 0
    except KeyboardInterrupt:
        return 130
    except (RecursionError, MemoryError):
        _say(prog, "the input is too large or nested too deeply to handle")
        return flags.EXIT_INVALID
    except ModuleNotFoundError as exc:  # an installation's problem: say how to fix it
        from cpa.tools.inputs import missing_module

        _say(prog, missing_module(exc))
        return flags.EXIT_INVALID
    except Exception as exc:
        from cpa.tools.inputs import internal_error

        _say(prog, internal_error(exc))
        return flags.EXIT_INVALID


def _drop_output() -> None:
    """Point stdout and stderr at /dev/null: the interpreter flushes them at exit, which
    would fail again on the closed pipe and print a warning."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # not a real file (a test's capture)
            os.dup2(devnull, stream.fileno())
    os.close(devnull)


def _say(prog: str, message: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        print(f"{prog}: {message}", file=sys.stderr)


_CPA_USAGE = """usage: cpa [--version] <command> [flags]

commands:
  run       run the autoscaler daemon (same flags as cluster-proportional-autoscaler)
  explain   show what the autoscaler would do, and why, without writing anything
            (--vertical: what /cpvpa, the vertical autoscaler, would write)
  simulate  replay a timeline of node/core counts (and load) through the formula and its behavior
  advise    the load axis's targetPerReplica and windows a recorded load would have needed

`cpa <command> --help` (or `cpa help <command>`) describes a command's flags."""

_COMMANDS = ("run", "explain", "simulate", "advise")


def main(argv: Sequence[str] | None = None) -> int:
    """Console script ``cpa`` (and ``python -m cpa``)."""
    args = list(sys.argv[1:] if argv is None else argv)
    return guarded("cpa", lambda: _main(args))


def _main(args: list[str]) -> int:
    if args[:1] == ["help"] and args[1:2] and args[1] in _COMMANDS:
        args = [args[1], "--help"]
    if not args or args[0] in ("-h", "--help", "help"):
        if args:
            print(_CPA_USAGE)
            return 0
        print(_CPA_USAGE, file=sys.stderr)
        return flags.EXIT_USAGE
    if args[0] in ("--version", "-version", "version"):
        print(VERSION_TEXT)
        return 0
    command, rest = args[0], args[1:]
    if command == "run":
        return run_daemon(rest, "cpa run")
    if command == "explain" and "--vertical" in rest:
        from cpa.tools.vertical import explain_vertical_main

        return explain_vertical_main([a for a in rest if a != "--vertical"])
    if command == "explain":
        from cpa.tools.explain import explain_main

        return explain_main(rest)
    if command == "simulate":
        from cpa.tools.simulate import simulate_main

        return simulate_main(rest)
    if command == "advise":
        from cpa.tools.advise import advise_main

        return advise_main(rest)
    return _usage_exit("cpa", f"unknown command {command[:40]!r}: use run, explain, "
                              "simulate or advise")
