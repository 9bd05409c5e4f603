"""``/cpvpa``: parse CPVA's command line, wire the pieces, poll until told to stop.

Exit codes as CPVA's: 2 for a command line that cannot be parsed, 1 for invalid flags
(every problem is printed first), 0 for ``--version`` and ``--help`` -- and 0 on SIGTERM
or SIGINT, where CPVA is killed by the signal. Unlike CPVA, an unreachable API server at
start is no exit: the first poll fails and the next one tries again.

The pieces reused from the autoscaler: the kubeconfig/in-cluster connection and client
(:mod:`cpa.kube`), the Node reflector (:mod:`cpa.nodes.watch`), the health server, the
stale-counts watchdog and leader election (:mod:`cpa.daemon`).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from cpa import VERTICAL_VERSION_TEXT, __version__, logs
from cpa.flags import EXIT_INVALID, EXIT_USAGE, UsageError
from cpa.vertical import options

if TYPE_CHECKING:
    from cpa.kube.api import RawApi

__all__ = ["run_vertical"]

PROG = "cpvpa"


def run_vertical(argv: list[str], prog: str = PROG) -> int:
    try:
        return _run(argv, prog)
    finally:
        logs.release()


def _run(argv: list[str], prog: str) -> int:
    try:
        opts = options.parse(argv)
    except UsageError as exc:
        print(f"{prog}: {exc} (see --help)", file=sys.stderr)
        return EXIT_USAGE
    if opts.help:
        print(options.usage(prog))
        return 0
    if opts.version:
        print(VERTICAL_VERSION_TEXT)
        return 0
    logs.configure(opts.v, opts.log_format)
    problems = options.validate(opts)
    if problems:
        for problem in problems:
            print(f"{prog}: {problem}", file=sys.stderr)
        print(f"{prog}: failed to validate config parameters", file=sys.stderr)
        return EXIT_INVALID
    target = opts.patch_target
    assert target is not None

    from cpa.daemon.health import HealthState, serve
    from cpa.daemon.process import Stopper, raise_open_files_limit, require_modules
    from cpa.daemon.watchdogs import StaleCounts
    from cpa.kube.client import KubeApi
    from cpa.kube.config import ConfigError, load
    from cpa.vertical.daemon.configfile import ConfigFile
    from cpa.vertical.daemon.inplace import InPlaceResizer
    from cpa.vertical.daemon.loop import (
        VerticalAutoscaler,
        VerticalLoopConfig,
        VerticalPollResult,
    )
    from cpa.vertical.daemon.nodes import NodeCounts
    from cpa.vertical.daemon.writer import TemplateWriter
    from cpa.vertical.state import VerticalState

    require_modules()
    raise_open_files_limit()
    stopper = Stopper()

    try:
        conn = load(opts.kubeconfig)
    except ConfigError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return EXIT_INVALID
    api = KubeApi(conn)
    stopper.abort_on_stop(api)
    log = logs.get_logger("main")
    in_place = opts.resize_mode == "in-place"
    log.info("starting", version=__version__, server=conn.server, config=conn.source,
             namespace=opts.namespace, target=f"{target.kind}/{target.name}",
             config_file=opts.config_file or None, default_config=bool(opts.default_config),
             poll_period_seconds=opts.poll_period_seconds, dry_run=opts.dry_run,
             resize_mode=opts.resize_mode, invalid_config=opts.invalid_config,
             leader_elect=opts.leader_elect)

    nodes = NodeCounts(api)
    period = float(opts.poll_period_seconds)
    watchdog = StaleCounts(nodes.status, time.monotonic, period)
    health = HealthState()
    observers: list[Callable[[VerticalPollResult], None]] = [
        lambda result: health.record(result.health_error)]
    metrics = None
    server = None
    if opts.health_port:
        from cpa.vertical.daemon.metrics import VerticalMetrics

        metrics = VerticalMetrics(nodes.status, lambda: nodes.mode)
        try:
            server = serve(health, opts.health_port, metrics=metrics.exposition)
        except OSError as exc:
            print(f"{prog}: cannot serve health on port {opts.health_port}: {exc} "
                  "(choose another with --health-port)", file=sys.stderr)
            return EXIT_INVALID
        observers.append(metrics.observe)

    def stale() -> str | None:
        return watchdog.check() if nodes.mode == "watch" else None

    elector = None
    if opts.leader_elect:
        from cpa.daemon.leaderelection import LeaderElector, LeaseConfig, default_identity

        lease = LeaseConfig(namespace=opts.leader_elect_namespace or opts.namespace,
                            name=opts.lease_name, identity=default_identity(),
                            lease_duration=opts.leader_elect_lease_duration,
                            renew_deadline=opts.leader_elect_renew_deadline,
                            retry_period=opts.leader_elect_retry_period)
        log.info("leader.election", lease=f"{lease.namespace}/{lease.name}",
                 identity=lease.identity)
        elector = LeaderElector(api, lease)
    writer: RawApi = api
    if elector is not None:
        from cpa.daemon.leaderelection import GuardedApi

        writer = GuardedApi(api, elector)  # every write checks the Lease just before it
    resizer = (InPlaceResizer(writer, opts.namespace, target,
                              template=opts.in_place_template,
                              deferred_timeout=opts.resize_deferred_timeout)
               if in_place else None)

    autoscaler = VerticalAutoscaler(
        VerticalLoopConfig(period, in_place), nodes.counts, ConfigFile(opts.config_file),
        VerticalState(opts.default_scale_config, opts.policy),
        TemplateWriter(writer, opts.namespace, target, dry_run=opts.dry_run),
        resizer=resizer, observers=observers, stale=stale,
        may_write=elector.is_leader if elector is not None else None, warm=nodes.warm)

    if elector is not None:
        def on_change(leading: bool) -> None:
            if metrics is not None:
                metrics.set_leader(leading)
            if leading:
                autoscaler.wake()
            else:
                autoscaler.forget_written()
                health.record(None)  # a follower has no poll of its own to report

        elector.on_change = on_change
        if metrics is not None:
            metrics.set_leader(False)
        elector.start()
    code = autoscaler.run(stopper.event)
    if elector is not None:
        elector.stop(release=True)
    nodes.stop()
    if server is not None:
        server.shutdown()
    log.info("stopped", exit_code=code, signal=stopper.signal_name)
    return code
