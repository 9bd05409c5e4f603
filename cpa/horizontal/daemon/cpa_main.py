"""The autoscaler daemon (``cluster-proportional-autoscaler``, ``cpa run``): parse the
flags, start the Node watch, then load the rest of the daemon (:mod:`cpa_run
<cpa.horizontal.daemon.cpa_run>`), which polls until told to stop.

Exit codes as upstream's: 2 for a usage error, 1 for invalid flags or too many failed
polls, 0 on SIGTERM/SIGINT. The Node watch starts as soon as the API server is known, and
the rest of the daemon is imported after it: the API server prepares the first Node list
while the rest loads (docs/architecture.md, "Measured exceptions").
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from cpa import VERSION_TEXT, logs
from cpa.go.pflag import EXIT_INVALID
from cpa.horizontal import cpa_flags as flags
from cpa.horizontal.daemon.loopconfig import LoopConfig
from cpa.nodes.listing import ONE_PAGE_NODES
from cpa.nodes.store import NodeStore
from cpa.nodes.watch import NodeReflector
from cpa.runtime.startup import StartupError, connect, read_command_line

__all__ = ["DAEMON_NAME", "loop_config", "run"]

DAEMON_NAME = "cluster-proportional-autoscaler"


def run(argv: Sequence[str], prog: str = DAEMON_NAME) -> int:
    """Parse flags, start the Node watch, hand over to :func:`cpa_run.run
    <cpa.horizontal.daemon.cpa_run.run>`."""
    try:
        return _run(argv, prog)
    finally:
        logs.release()  # events still held (an early exit) are written before we go
        logs.flush()  # ... and the buffered lines are out before the process is


def _run(argv: Sequence[str], prog: str) -> int:
    opts = read_command_line(argv, prog, flags.parse_args, flags.usage, VERSION_TEXT,
                             flags.validate, "failed to validate all input parameters")
    if isinstance(opts, int):
        return opts
    config = loop_config(opts)
    try:
        stopper, conn, api = connect(opts.kubeconfig)
    except StartupError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return EXIT_INVALID
    store = NodeStore()
    watch = NodeReflector(api, store, opts.nodelabels, first_page=ONE_PAGE_NODES)
    watch.start()
    stopper.abort_on_stop(api)
    from cpa.horizontal.daemon import cpa_run  # the rest, while the first list is prepared

    instance = os.environ.get("HOSTNAME") or DAEMON_NAME
    return cpa_run.run(prog, instance, opts, config, stopper, conn, api, store, watch)


def loop_config(opts: flags.Options) -> LoopConfig:
    """What the poll loop needs of the validated flags (``flags.validate`` filled
    ``opts.targets``)."""
    return LoopConfig(namespace=opts.namespace, configmap=opts.configmap, targets=opts.targets,
                      poll_period_seconds=opts.poll_period_seconds,
                      default_params=opts.default_params,
                      max_sync_failures=opts.max_sync_failures, dry_run=opts.dry_run,
                      react_to_node_changes=opts.react_to_node_changes,
                      config_dir=opts.config_dir,
                      update_configmap_from_defaults=opts.update_configmap_from_defaults)


