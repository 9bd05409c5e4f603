"""The autoscaler daemon after its Node watch started (:mod:`cpa_main
<cpa.horizontal.daemon.cpa_main>`): the health server, the first Node list waited for
(and ``RESOURCE.GROUP`` targets found), the poll loop and its observers, the polls until
told to stop.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable

from cpa import __version__, logs
from cpa.go.pflag import EXIT_INVALID
from cpa.horizontal import cpa_flags as flags
from cpa.horizontal.daemon.contention import Contention
from cpa.horizontal.daemon.cpa_events import EventRecorder
from cpa.horizontal.daemon.cpa_loop import Autoscaler, PollResult
from cpa.horizontal.daemon.latemetrics import LateMetrics
from cpa.horizontal.daemon.loadstage import LoadStage
from cpa.horizontal.daemon.loopconfig import LoopConfig
from cpa.horizontal.daemon.targetwatch import TargetWatches
from cpa.kube.api import Api, ApiError, RawApi
from cpa.kube.client import KubeApi
from cpa.kube.clientconfig import Connection
from cpa.kube.discovery import ResolveError, resolve_all
from cpa.kube.targets import Target
from cpa.nodes.store import NodeStore
from cpa.nodes.watch import NodeReflector
from cpa.objects.counters import ObjectCounters
from cpa.runtime.election import Election
from cpa.runtime.health import HealthState
from cpa.runtime.process import Stopper
from cpa.runtime.startup import StartupError, serve_health

__all__ = ["LABEL_LIST_WAIT", "WAITING", "run"]

LABEL_LIST_WAIT = 30.0
"""Seconds a poll waits for the Node list that a new zones topologyKey needs (the records
keep only the label they were listed with); a longer list fails that poll, and the next
poll decides once it is done."""


def run(prog: str, instance: str, opts: flags.Options, config: LoopConfig, stopper: Stopper,
        conn: Connection, api: KubeApi, store: NodeStore, watch: NodeReflector) -> int:
    """Serve health, wait for the first Node list (and the targets' discovery), poll
    until told to stop; the watch is stopped whatever happens. ``instance``: this
    process's name in its Events."""
    try:
        return _run(prog, instance, opts, config, stopper, conn, api, store, watch)
    finally:
        watch.stop()


def _run(prog: str, instance: str, opts: flags.Options, config: LoopConfig,
         stopper: Stopper, conn: Connection, api: KubeApi, store: NodeStore,
         watch: NodeReflector) -> int:
    try:
        # The health server answers while the first list is read (ours: upstream serves
        # nothing until its informer synced): /healthz 200, /last-poll 500 saying why we
        # wait, /metrics counting it.
        health = HealthState(WAITING)
        load = LoadStage(_api_maker(conn), opts.namespace)  # ours: scrapers at a load key
        metrics = LateMetrics(opts.targets, watch.status, opts.dry_run, load.view,
                              opts.update_configmap_from_defaults,
                              leader_elect=opts.leader_elect and not opts.dry_run,
                              watch_targets=opts.watch_targets)
        server = serve_health(health, opts.health_port, metrics.exposition)
    except StartupError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return EXIT_INVALID
    # Events until the first poll is done are held and written after it (cpa.logs): the
    # logging library is not imported before the first write.
    logs.hold()
    _log_start(opts, conn)
    if opts.dry_run:
        _dry_run(opts)
    ready = _ready(config, api, watch, stopper.event, health, metrics)
    if isinstance(ready, str):
        if ready:
            print(f"{prog}: {ready}", file=sys.stderr)
        server.shutdown()
        return EXIT_INVALID if ready else 0
    election = None
    if opts.leader_elect:
        election = Election(api, opts, opts.namespace, opts.lease_name)
        metrics.watch_lease(election.status)
        health.record(None)  # a follower has no poll of its own to report
    watches = (TargetWatches(api, opts.namespace, Contention(time.monotonic))
               if opts.watch_targets else None)  # ours: --watch-targets
    autoscaler = _autoscaler(opts, instance, ready, election.writer if election else api,
                             store, watch, health, metrics, election, load, api, watches)
    stopper.also_interrupt(autoscaler.interrupt)
    try:
        code = _poll(autoscaler, stopper.event, health, metrics, election, load)
    finally:
        if watches is not None:
            watches.stop()
    server.shutdown()
    logs.get_logger("main").info("stopped", exit_code=code, signal=stopper.signal_name)
    return code


def _poll(autoscaler: Autoscaler, stop: threading.Event, health: HealthState,
          metrics: LateMetrics, election: Election | None, load: LoadStage) -> int:
    """Campaign for the Lease (with ``--leader-elect``) and poll until ``stop``; then stop
    the load's scrapers (if a load key started any) and give the Lease up."""
    if election is not None:
        def on_change(leading: bool) -> None:
            if leading:
                autoscaler.wake()
            else:
                health.record(None)  # a follower has no poll of its own to report

        election.start(on_change, metrics.set_leader)
    code = autoscaler.run(stop)
    autoscaler.stop_counting_objects()
    load.retire()
    if election is not None:
        election.stop()
    return code


def _log_start(opts: flags.Options, conn: Connection) -> None:
    logs.get_logger("main").info(
        "starting", version=__version__, server=conn.server, config=conn.source,
        namespace=opts.namespace, configmap=opts.configmap,
        targets=[str(t) for t in opts.targets], nodelabels=opts.nodelabels or None,
        poll_period_seconds=opts.poll_period_seconds, events=opts.events,
        leader_elect=opts.leader_elect, react_to_node_changes=opts.react_to_node_changes,
        **({"watch_targets": True} if opts.watch_targets else {}),
        **({"config_dir": opts.config_dir} if opts.config_dir else {}),
        **({"update_configmap_from_defaults": True}
           if opts.update_configmap_from_defaults else {}),
        **({"target_selectors": [str(s) for s in opts.target_selectors]}
           if opts.target_selectors else {}))


def _ready(config: LoopConfig, api: Api, watch: NodeReflector, stop: threading.Event,
           health: HealthState, metrics: LateMetrics) -> LoopConfig | str:
    """Wait for what the first poll needs: the ``RESOURCE.GROUP`` targets resolved (the
    config comes back with them), the first Node list. Else why not ("" when told to stop
    meanwhile)."""
    if any(target.custom for target in config.targets):
        targets = _resolve_targets(config.targets, api, stop)
        if isinstance(targets, str):
            return targets
        config = config._replace(targets=targets)
    if not _wait_for_the_first_list(watch, stop, health, metrics, config.poll_period_seconds):
        return ""
    return config


def _autoscaler(opts: flags.Options, instance: str, config: LoopConfig,
                writer: RawApi, store: NodeStore, watch: NodeReflector, health: HealthState,
                metrics: LateMetrics, election: Election | None, load: LoadStage,
                api: KubeApi, watches: TargetWatches | None) -> Autoscaler:
    """The poll loop, its observers, the node store's changes and the load's scrapes
    handed to it; the Pods and Services counted (ours) while the parameters name them."""
    objects = ObjectCounters(api, first_list_wait=float(opts.poll_period_seconds))
    loop = Autoscaler(config, writer, store.counts,
                      observers=[_written_after_the_first_poll, health.observe,
                                 metrics.observe],
                      watch_status=watch.status,
                      may_write=election.is_leader if election is not None else None,
                      on_follower=(lambda: election.follower_report(
                          health.record, metrics.failed_lease)) if election else None,
                      count_by=lambda policy: store.set_policy(policy, LABEL_LIST_WAIT),
                      load=load, placements=store, placement_wait=LABEL_LIST_WAIT,
                      objects=objects, target_watch=watches)
    if watches is not None:
        watches.answer = loop.wake  # another writer's count: a poll at once
    load.wake = loop.wake  # a scrape that makes a panic likely polls now
    store.on_change = loop.node_listener
    if opts.events:
        loop.add_observer(
            EventRecorder(writer, opts.namespace, opts.configmap, instance,
                          mounted=bool(opts.config_dir)).observe)
    return loop


def _written_after_the_first_poll(_result: PollResult) -> None:
    """The first observer: the log events held until the first poll is done are written
    once it is (:func:`cpa.logs.release`; nothing after that)."""
    logs.release()


WAITING = "waiting for the first Node list"


def _api_maker(conn: Connection) -> Callable[[], Api]:
    """Each load scraper's own API client (its own connection: the scrapes never queue
    behind a poll's requests)."""
    return lambda: KubeApi(conn)


def _wait_for_the_first_list(watch: NodeReflector, stop: threading.Event,
                             health: HealthState, metrics: LateMetrics,
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


def _resolve_targets(targets: tuple[Target, ...], api: Api,
                     stop: threading.Event) -> tuple[Target, ...] | str:
    """``RESOURCE.GROUP`` targets through API discovery: the targets resolved (as given
    when stopped first), else the problem (no such resource, no scale subresource). An API
    server that does not answer is retried, as the Node list is."""
    log = logs.get_logger("main")
    while not stop.is_set():
        try:
            resolved = resolve_all(api, targets)
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
            for t in resolved if t.custom})
        return resolved
    return targets


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


