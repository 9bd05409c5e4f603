"""``/cpvpa``: parse CPVA's command line, wire the pieces, poll until told to stop.

Exit codes as CPVA's: 2 for a command line that cannot be parsed, 1 for invalid flags
(every problem is printed first), 0 for ``--version`` and ``--help`` -- and 0 on SIGTERM
or SIGINT, where CPVA is killed by the signal. Unlike CPVA, an unreachable API server at
start is no exit: the first poll fails and the next one tries again.

What every daemon of ours needs comes from :mod:`cpa.runtime` (the start-up, signals,
health server, stale-counts watchdog, leader election); the connection and client from
:mod:`cpa.kube`, the Node reflector from :mod:`cpa.nodes.watch`.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable

from cpa import VERTICAL_VERSION_TEXT, __version__, logs
from cpa.go.pflag import EXIT_INVALID
from cpa.kube.api import RawApi
from cpa.kube.clientconfig import Connection
from cpa.objects.counters import ObjectCounters
from cpa.runtime.election import Election
from cpa.runtime.event_sink import EventSink
from cpa.runtime.health import HealthServer, HealthState
from cpa.runtime.stalecounts import StaleCounts
from cpa.runtime.startup import StartupError, connect, read_command_line, serve_health
from cpa.vertical import cpvpa_flags as options
from cpa.vertical.cpvpa_flags import VerticalOptions
from cpa.vertical.daemon.configfile import ConfigFile
from cpa.vertical.daemon.cpvpa_events import REPORTING_CONTROLLER, VerticalEvents
from cpa.vertical.daemon.cpvpa_loop import (
    VerticalAutoscaler,
    VerticalLoopConfig,
    VerticalPollResult,
)
from cpa.vertical.daemon.cpvpa_metrics import VerticalMetrics
from cpa.vertical.daemon.inplace import InPlaceResizer
from cpa.vertical.daemon.node_source import NodeCounts
from cpa.vertical.daemon.target import TargetLoop
from cpa.vertical.daemon.writer import TemplateWriter
from cpa.vertical.decide.budget import FallbackBudget
from cpa.vertical.decide.state import VerticalState

__all__ = ["run_vertical"]

PROG = "cpvpa"


def run_vertical(argv: list[str], prog: str = PROG) -> int:
    try:
        return _run(argv, prog)
    finally:
        logs.flush()  # the buffered lines are out before the process is


def _run(argv: list[str], prog: str) -> int:
    opts = read_command_line(argv, prog, options.parse, options.usage, VERTICAL_VERSION_TEXT,
                             options.validate, "failed to validate config parameters")
    if isinstance(opts, int):
        return opts
    try:
        stopper, conn, api = connect(opts.kubeconfig)
        stopper.abort_on_stop(api)
        _log_start(opts, conn)
        nodes = NodeCounts(api)
        health = HealthState()
        metrics, server = _serve(opts, health, nodes)
    except StartupError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return EXIT_INVALID
    election = None
    if opts.leader_elect:
        election = Election(api, opts, opts.namespace, opts.lease_name)
        if metrics is not None:
            metrics.watch_lease(election.status)
    # ours: only while a config counts Pods or Services
    objects = ObjectCounters(api, first_list_wait=float(opts.poll_period_seconds))
    autoscaler = _autoscaler(opts, election.writer if election else api, nodes, health,
                             metrics, election, objects)
    if election is not None:
        def on_change(leading: bool) -> None:
            if leading:
                autoscaler.wake()
            else:
                autoscaler.forget_written()
                health.record(None)  # a follower has no poll of its own to report

        election.start(on_change, metrics.set_leader if metrics is not None else None)
    code = autoscaler.run(stopper.event)
    if election is not None:
        election.stop()
    nodes.stop()
    objects.stop()
    if server is not None:
        server.shutdown()
    logs.get_logger("main").info("stopped", exit_code=code, signal=stopper.signal_name)
    return code


def _log_start(opts: VerticalOptions, conn: Connection) -> None:
    target = opts.patch_target
    assert target is not None
    many = {"targets": list(opts.target_keys)} if len(opts.patch_targets) > 1 else {}
    logs.get_logger("main").info(
        "starting", version=__version__, server=conn.server, config=conn.source,
        namespace=opts.namespace, target=f"{target.kind}/{target.name}", **many,
        config_file=opts.config_file or None, default_config=bool(opts.default_config),
        poll_period_seconds=opts.poll_period_seconds, dry_run=opts.dry_run,
        resize_mode=opts.resize_mode, invalid_config=opts.invalid_config,
        leader_elect=opts.leader_elect, events=opts.events)


def _serve(opts: VerticalOptions, health: HealthState, nodes: NodeCounts
           ) -> tuple[VerticalMetrics | None, HealthServer | None]:
    """``--health-port`` (CPVA serves nothing: off by default): the server and its
    ``/metrics``."""
    if not opts.health_port:
        return None, None
    metrics = VerticalMetrics(nodes.status, lambda: nodes.mode, leader_elect=opts.leader_elect,
                              targets=opts.target_keys)
    return metrics, serve_health(health, opts.health_port, metrics.exposition)


def _autoscaler(opts: VerticalOptions, writer: RawApi, nodes: NodeCounts,
                health: HealthState, metrics: VerticalMetrics | None,
                election: Election | None, objects: ObjectCounters) -> VerticalAutoscaler:
    """The poll loop and what it writes through (``writer``: guarded by the Lease)."""
    period = float(opts.poll_period_seconds)
    watchdog = StaleCounts(nodes.status, time.monotonic, period)

    def stale() -> str | None:
        return watchdog.check() if nodes.mode == "watch" else None

    observers: list[Callable[[VerticalPollResult], None]] = [health.observe]
    if metrics is not None:
        observers.append(metrics.observe)
    if opts.events:
        instance = os.environ.get("HOSTNAME") or PROG
        observers.append(VerticalEvents(EventSink(
            writer, opts.namespace, REPORTING_CONTROLLER, instance, doing="sizing")).observe)
    return VerticalAutoscaler(
        VerticalLoopConfig(period, opts.resize_mode == "in-place"), nodes.counts,
        ConfigFile(opts.config_file),
        [_target_loop(opts, writer, i) for i in range(len(opts.patch_targets))],
        objects=objects, observers=observers, stale=stale,
        may_write=election.is_leader if election is not None else None, warm=nodes.warm,
        on_follower=(lambda: election.follower_report(
            health.record, metrics.failed_lease if metrics is not None else None))
        if election is not None else None)


def _target_loop(opts: VerticalOptions, writer: RawApi, index: int) -> TargetLoop:
    """The ``index``-th target's state, template writer, resizer and fallback budget."""
    target = opts.patch_targets[index]
    defaults = opts.default_scale_configs[index] if opts.default_scale_configs else None
    resizer = (InPlaceResizer(writer, opts.namespace, target,
                              template=opts.in_place_template,
                              deferred_timeout=opts.resize_deferred_timeout)
               if opts.resize_mode == "in-place" else None)
    budget = (FallbackBudget(opts.resize_fallback_max_pods_per_cycle,
                             opts.resize_fallback_grace_period)
              if opts.resize_fallback_max_pods_per_cycle
              or opts.resize_fallback_grace_period else None)
    keys = opts.target_keys
    return TargetLoop(
        VerticalState(defaults, opts.policy, target=keys[index], targets=keys),
        TemplateWriter(writer, opts.namespace, target, dry_run=opts.dry_run),
        resizer=resizer, budget=budget)
