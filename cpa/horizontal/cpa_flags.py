"""The autoscaler's command line, as upstream's pflag + glog command line reads it.

The syntax is pflag's (:mod:`cpa.go.pflag`); the glog and leader-election rows are both
daemons' (:mod:`cpa.runtime.common_flags`); this module has upstream's table in upstream's
order, ours after it, and the checks. Two failure classes, with upstream's exit codes:
:class:`~cpa.go.pflag.UsageError` (exit 2) from :func:`parse_args`, and every problem at
once from :func:`validate` (exit 1), so an operator fixes a manifest in one round trip.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from cpa.go.pflag import Flag, FlagTable, parse_flags, parse_str
from cpa.go.pflag import usage as table_usage
from cpa.go.strconv import parse_bool, parse_go_int
from cpa.horizontal.decide.defaults import default_params_to_data
from cpa.kube.selector import SelectorError, parse_selector
from cpa.kube.targets import Target, parse_targets
from cpa.runtime import common_flags as shared

__all__ = ["CPA_FLAGS", "Options", "flag_names", "parse_args", "usage", "validate"]


class Options(shared.GlogOptions, shared.LeaderElectionOptions):
    """Everything the daemon needs from its command line (and ``MY_POD_NAMESPACE``). (A
    plain class, not a dataclass: it is made on the daemon's start-up path, where a
    dataclass costs ~1 ms to make and the ``dataclasses`` module ~10 ms to import.)"""

    # Every field, the bases' too, as the dataclass had them (the bases have no slots).
    __slots__ = (
        "alsologtostderr", "config_dir", "configmap", "default_params", "dry_run", "events",
        "health_port", "help", "kubeconfig", "leader_elect", "leader_elect_lease_duration",
        "leader_elect_lease_name", "leader_elect_namespace", "leader_elect_renew_deadline",
        "leader_elect_retry_period", "log_backtrace_at", "log_dir", "log_format",
        "log_link", "logbuflevel", "logtostderr", "max_sync_failures", "namespace",
        "nodelabels", "poll_period_seconds", "react_to_node_changes", "stderrthreshold",
        "target", "targets", "update_configmap_from_defaults", "v", "version", "vmodule")

    def __init__(
        self,
        # the bases' fields, in the order a dataclass took them (its bases in reverse MRO)
        leader_elect: bool = False, leader_elect_lease_name: str = "",
        leader_elect_namespace: str = "", leader_elect_lease_duration: float = 15.0,
        leader_elect_renew_deadline: float = 10.0, leader_elect_retry_period: float = 2.0,
        v: int = 0, vmodule: str = "",
        logtostderr: bool = True,  # glog's default in upstream's binary
        alsologtostderr: bool = False, stderrthreshold: int = 2, log_dir: str = "",
        log_link: str = "", logbuflevel: int = 0, log_backtrace_at: str = "",
        target: str = "",
        configmap: str = "",
        namespace: str = "",
        poll_period_seconds: int = 10,
        default_params: dict[str, str] | None = None,
        nodelabels: str = "",
        max_sync_failures: int = 0,
        version: bool = False,
        help: bool = False,
        # ours
        kubeconfig: str = "",
        health_port: int = 8080,
        log_format: str = "text",
        events: bool = False,
        react_to_node_changes: bool = False,
        dry_run: bool = False,
        update_configmap_from_defaults: bool = False,
        config_dir: str = "",
        targets: tuple[Target, ...] = (),
    ) -> None:
        shared.LeaderElectionOptions.__init__(
            self, leader_elect, leader_elect_lease_name, leader_elect_namespace,
            leader_elect_lease_duration, leader_elect_renew_deadline, leader_elect_retry_period)
        shared.GlogOptions.__init__(self, v, vmodule, logtostderr, alsologtostderr,
                                    stderrthreshold, log_dir, log_link, logbuflevel,
                                    log_backtrace_at)
        self.target = target
        self.configmap = configmap
        self.namespace = namespace
        self.poll_period_seconds = poll_period_seconds
        self.default_params = default_params
        self.nodelabels = nodelabels
        self.max_sync_failures = max_sync_failures
        self.version = version
        self.help = help
        self.kubeconfig = kubeconfig
        self.health_port = health_port
        self.log_format = log_format
        self.events = events
        self.react_to_node_changes = react_to_node_changes
        self.dry_run = dry_run
        self.update_configmap_from_defaults = update_configmap_from_defaults
        self.config_dir = config_dir
        self.targets = targets

    @property
    def lease_name(self) -> str:
        """``--leader-elect-lease-name``, else the ``--configmap`` name."""
        return self.leader_elect_lease_name or self.configmap


def _parse_default_params(text: str) -> dict[str, str]:
    """``--default-params``: upstream decodes it while parsing flags, so bad JSON is exit 2."""
    return default_params_to_data(text)


_FLAGS: tuple[Flag, ...] = (
    Flag("target", "target", parse_str,
         "Comma-separated targets to scale, kind/name, e.g. deployment/coredns. Kinds: "
         "deployment, replicaset, replicationcontroller, statefulset; "
         "horizontalpodautoscaler (hpa: writes its minReplicas); RESOURCE.GROUP of any "
         "resource with a scale subresource.", metavar="string"),
    Flag("configmap", "configmap", parse_str,
         "ConfigMap holding the scaling parameters (created from --default-params if "
         "missing).", metavar="string"),
    Flag("namespace", "namespace", parse_str,
         "Namespace of the targets and the ConfigMap (default: $MY_POD_NAMESPACE).",
         metavar="string"),
    Flag("poll-period-seconds", "poll_period_seconds", parse_go_int,
         "Seconds between polls (default 10).", metavar="int"),
    Flag("default-params", "default_params", _parse_default_params,
         "JSON object of default ConfigMap data, e.g. "
         '{"linear":{"coresPerReplica":256,"nodesPerReplica":16}}.', metavar="json"),
    Flag("nodelabels", "nodelabels", parse_str,
         "Label selector for the Nodes to count, e.g. a=b,c=d.", metavar="string"),
    Flag("max-sync-failures", "max_sync_failures", parse_go_int,
         "Exit 1 after this many consecutive failed polls (0: never).", metavar="int"),
    Flag("version", "version", parse_bool, "Print the version and exit.", is_bool=True),
    Flag("help", "help", parse_bool, "Show this help and exit.", is_bool=True),
    shared.verbosity_flag("Log verbosity: 0 scale decisions and errors, 1 mode changes, "
                          "2 parameters, 4 every poll's counts."),
    *shared.GLOG_FLAGS,
    shared.KUBECONFIG_FLAG,
    Flag("health-port", "health_port", parse_go_int,
         "Port of the /healthz and /last-poll server (default 8080).", metavar="int"),
    shared.LOG_FORMAT_FLAG,
    Flag("events", "events", parse_bool,
         "Create Events: Normal on every replica change (regarding the target), Warning "
         "for invalid parameters (regarding the ConfigMap). Needs create on "
         "events.k8s.io events.", is_bool=True),
    shared.LEADER_ELECT_FLAG,
    Flag("leader-elect-lease-name", "leader_elect_lease_name", parse_str,
         "Name of the Lease (default: the --configmap name).", metavar="string"),
    *shared.LEASE_FLAGS,
    Flag("react-to-node-changes", "react_to_node_changes", parse_bool,
         "Also poll as soon as the Node counts change the replica count (once the "
         "changes pause for 0.1s, at most one extra poll a second; the period's polls go "
         "on as before).",
         is_bool=True),
    Flag("dry-run", "dry_run", parse_bool,
         "Compute everything, write nothing: no scale or HPA write, no ConfigMap creation, "
         "no Event, no Lease. Logs dry_run.would_scale and exports cpa_dry_run 1.",
         is_bool=True),
    Flag("update-configmap-from-defaults", "update_configmap_from_defaults", parse_bool,
         "Let new --default-params reach the ConfigMap: the one created records the hash of "
         "its data in an annotation, and while its data still has that hash (nobody edited "
         "it) it is replaced by defaults that differ. An edited ConfigMap, or one without the "
         "annotation, is left alone. Needs update on configmaps.", is_bool=True),
    Flag("config-dir", "config_dir", parse_str,
         "Read the parameters from this directory, a mounted ConfigMap (one file, linear or "
         "ladder), re-read when the kubelet swaps it; no ConfigMap request is made and "
         "--configmap is optional.", metavar="string"),
)

CPA_FLAGS = FlagTable(_FLAGS)


def parse_args(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> Options:
    """Parse ``argv`` (without the program name) with pflag rules; raise
    :class:`~cpa.go.pflag.UsageError`. Positional arguments are ignored, as upstream's
    ``pflag.Parse`` leaves them unused."""
    env = os.environ if environ is None else environ
    opts = Options(namespace=env.get("MY_POD_NAMESPACE", ""),
                   kubeconfig=env.get("KUBECONFIG", ""))
    return parse_flags(argv, CPA_FLAGS, opts)


def validate(opts: Options) -> list[str]:
    """Check the parsed options; return every problem found (empty list: valid).

    Fills ``opts.targets`` as a side effect so the targets are parsed in one place.
    """
    problems: list[str] = []
    opts.target = opts.target.lower()
    opts.targets, target_problems = parse_targets(opts.target)
    problems.extend(target_problems)
    if opts.configmap == "" and not opts.config_dir:
        problems.append("--configmap parameter cannot be empty: pass the ConfigMap's name")
    problems.extend(_parameter_sources(opts))
    if opts.namespace == "":
        problems.append(
            "--namespace parameter cannot be empty: pass --namespace or set MY_POD_NAMESPACE")
    if opts.poll_period_seconds < 1:
        problems.append(
            f"--poll-period-seconds must be at least 1, got {opts.poll_period_seconds}")
    if opts.nodelabels:
        # Imported only for a selector (its parser compiles patterns: ~2 ms of start-up).
        try:
            parse_selector(opts.nodelabels)
        except SelectorError as exc:
            problems.append(f"--nodelabels: {exc}")
    if not 0 < opts.health_port < 65536:
        problems.append(f"--health-port must be between 1 and 65535, got {opts.health_port}")
    problems.extend(shared.validate_leader_election(opts))
    return problems


def _parameter_sources(opts: Options) -> list[str]:
    """Ours: ``--config-dir`` and ``--update-configmap-from-defaults`` with what they need
    and what they exclude (the directory replaces every ConfigMap request)."""
    problems: list[str] = []
    if opts.update_configmap_from_defaults and opts.default_params is None:
        problems.append("--update-configmap-from-defaults needs --default-params: the "
                        "defaults the ConfigMap follows")
    if opts.config_dir:
        for flag, given in (("--default-params", opts.default_params is not None),
                            ("--update-configmap-from-defaults",
                             opts.update_configmap_from_defaults)):
            if given:
                problems.append(f"{flag} cannot be used with --config-dir: the parameters "
                                "come from the directory, and no ConfigMap is read or "
                                f"written; drop {flag} or --config-dir")
        if opts.leader_elect and not opts.leader_elect_lease_name and not opts.configmap:
            problems.append("--leader-elect with --config-dir needs --leader-elect-lease-name "
                            "(its default is the --configmap name, and there is none)")
    return problems


def usage(prog: str) -> str:
    """The ``--help`` text: every flag with its spelling as manifests use it."""
    return table_usage(prog, CPA_FLAGS)


def flag_names() -> list[str]:
    """Every accepted flag name (the README's flag table is checked against it)."""
    return [f.name for f in _FLAGS]
