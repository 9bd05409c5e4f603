"""The autoscaler's command line, as upstream's pflag + glog command line reads it.

The syntax is pflag's (:mod:`cpa.go.pflag`); the glog and leader-election groups are both
daemons' (:mod:`cpa.runtime.common_flags`); this module has :class:`Options`, one field per
flag in upstream's order and ours after it (the parser, ``--help`` and the constructor come
from it), and the checks. Two failure classes, with upstream's exit codes:
:class:`~cpa.go.pflag.UsageError` (exit 2) from :func:`parse_args`, and every problem at
once from :func:`validate` (exit 1), so an operator fixes a manifest in one round trip.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import ClassVar

from cpa.go.pflag import Include, flag, parse_flags, parse_str, repeated_flag, table_of
from cpa.go.pflag import usage as table_usage
from cpa.go.strconv import parse_bool, parse_go_int
from cpa.horizontal.decide.defaults import default_params_to_data
from cpa.kube.selector import SelectorError, parse_selector
from cpa.kube.targets import Target, parse_targets
from cpa.kube.targetselector import TargetSelector, parse_target_selector
from cpa.runtime import common_flags as shared

__all__ = ["CPA_FLAGS", "Options", "flag_names", "parse_args", "usage", "validate"]


def _parse_default_params(text: str) -> dict[str, str]:
    """``--default-params``: upstream decodes it while parsing flags, so bad JSON is exit 2."""
    return default_params_to_data(text)


@dataclasses.dataclass(kw_only=True)
class Options(shared.GlogOptions, shared.LeaderElectionOptions):
    """Everything the daemon needs from its command line (and ``MY_POD_NAMESPACE``): a flag
    per :func:`~cpa.go.pflag.flag` field, in ``--help`` order, upstream's first."""

    # upstream's
    target: str = flag(
        "", parse_str,
        "Comma-separated targets to scale, kind/name, e.g. deployment/coredns. Kinds: "
        "deployment, replicaset, replicationcontroller, statefulset; "
        "horizontalpodautoscaler (hpa: writes its minReplicas); RESOURCE.GROUP of any "
        "resource with a scale subresource.", metavar="string")
    configmap: str = flag(
        "", parse_str,
        "ConfigMap holding the scaling parameters (created from --default-params if "
        "missing).", metavar="string")
    namespace: str = flag(
        "", parse_str,
        "Namespace of the targets and the ConfigMap (default: $MY_POD_NAMESPACE).",
        metavar="string")
    poll_period_seconds: int = shared.poll_period_flag()
    default_params: dict[str, str] | None = flag(
        None, _parse_default_params,
        "JSON object of default ConfigMap data, e.g. "
        '{"linear":{"coresPerReplica":256,"nodesPerReplica":16}}.', metavar="json")
    nodelabels: str = flag("", parse_str,
                           "Label selector for the Nodes to count, e.g. a=b,c=d.",
                           metavar="string")
    max_sync_failures: int = flag(
        0, parse_go_int, "Exit 1 after this many consecutive failed polls (0: never).",
        metavar="int")
    version: bool = shared.version_flag()
    help: bool = shared.help_flag()
    _glog: ClassVar[Include] = Include(shared.GlogOptions)  # glog's flags go here
    v: int = shared.verbosity_flag("Log verbosity: 0 scale decisions and errors, 1 mode "
                                   "changes, 2 parameters, 4 every poll's counts.")
    logtostderr: bool = shared.logtostderr_flag(True)  # glog's default in upstream's binary
    # ours
    kubeconfig: str = shared.kubeconfig_flag()
    health_port: int = flag(8080, parse_go_int,
                            "Port of the /healthz and /last-poll server (default 8080).",
                            metavar="int")
    log_format: str = shared.log_format_flag()
    events: bool = flag(
        False, parse_bool,
        "Create Events: Normal on every replica change (regarding the target), Warning "
        "for invalid parameters (regarding the ConfigMap). Needs create on "
        "events.k8s.io events.")
    _election: ClassVar[Include] = Include(shared.LeaderElectionOptions)  # and the Lease's
    leader_elect_lease_name: str = flag(
        "", parse_str, "Name of the Lease (default: the --configmap name).", metavar="string")
    react_to_node_changes: bool = flag(
        False, parse_bool,
        "Also poll as soon as the Node counts change the replica count (once the "
        "changes pause for 0.1s, at most one extra poll a second; the period's polls go "
        "on as before).")
    dry_run: bool = flag(
        False, parse_bool,
        "Compute everything, write nothing: no scale or HPA write, no ConfigMap creation, "
        "no Event, no Lease. Logs dry_run.would_scale and exports cpa_dry_run 1.")
    update_configmap_from_defaults: bool = flag(
        False, parse_bool,
        "Let new --default-params reach the ConfigMap: the one created records the hash of "
        "its data in an annotation, and while its data still has that hash (nobody edited "
        "it) it is replaced by defaults that differ; one without the annotation, when "
        "managedFields say only autoscalers set its data, too. An edited ConfigMap is left "
        "alone. Needs update on configmaps.")
    config_dir: str = flag(
        "", parse_str,
        "Read the parameters from this directory, a mounted ConfigMap (one file, linear or "
        "ladder), re-read when the kubelet swaps it; no ConfigMap request is made and "
        "--configmap is optional.", metavar="string")
    target_selector: tuple[str, ...] = repeated_flag(
        parse_str,
        "KIND:SELECTOR, repeatable: every KIND (as in --target) in --namespace whose labels "
        "match the label selector is a target, listed every poll, e.g. "
        "deployment:k8s-app=kube-dns. --target becomes optional. Needs list on KIND.",
        metavar="string")
    watch_targets: bool = flag(
        False, parse_bool,
        "Watch every target's workload (one watch per kind): a replica count another "
        "writer sets is answered at once, not a poll later, and the writer is named from "
        "managedFields (target.foreign_write, cpa_foreign_writes_total). A writer that "
        "undoes ours 3 times in 5 minutes is answered at the poll period only "
        "(cpa_target_contended). Needs get, list and watch on each target's kind.")
    # not flags: --target and --target-selector parsed, by validate()
    targets: tuple[Target, ...] = ()
    target_selectors: tuple[TargetSelector, ...] = ()

    @property
    def lease_name(self) -> str:
        """``--leader-elect-lease-name``, else the ``--configmap`` name."""
        return self.leader_elect_lease_name or self.configmap


CPA_FLAGS = table_of(Options)


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
    problems.extend(_targets(opts))
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
        try:
            parse_selector(opts.nodelabels)
        except SelectorError as exc:
            problems.append(f"--nodelabels: {exc}")
    if not 0 < opts.health_port < 65536:
        problems.append(f"--health-port must be between 1 and 65535, got {opts.health_port}")
    problems.extend(shared.validate_leader_election(opts))
    return problems


def _targets(opts: Options) -> list[str]:
    """``--target`` (may be empty only with ``--target-selector``, ours) and each
    ``--target-selector``, parsed into ``opts``."""
    problems: list[str] = []
    selectors: list[TargetSelector] = []
    for text in opts.target_selector:
        selector, problem = parse_target_selector(text)
        if selector is None:
            problems.append(str(problem))
        elif selector not in selectors:
            selectors.append(selector)
    opts.target_selectors = tuple(selectors)
    if opts.target.strip() == "" and opts.target_selector:
        opts.targets = ()
        return problems
    opts.targets, target_problems = parse_targets(opts.target)
    return target_problems + problems


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
    return [f.name for f in CPA_FLAGS.flags]
