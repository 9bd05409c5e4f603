"""``/cpvpa``'s command line: CPVA v0.8.9's flags, then ours, all opt-in.

CPVA's flags (cmd/cpvpa/options/options.go:54-63) keep their names, types, defaults and
checks, so a CPVA Deployment's ``command`` works unchanged: ``--target``, ``--namespace``
(default ``$MY_NAMESPACE``, not CPA's ``$MY_POD_NAMESPACE``), ``--default-config``,
``--config-file``, ``--poll-period-seconds`` (10), ``--kubeconfig``, ``--version``,
``--dry-run`` and the glog flags. The syntax is pflag's, parsed by :mod:`cpa.go.pflag`
with the table of :class:`VerticalOptions`, one field per flag: ``_`` and ``-`` are one,
``-v=2`` works; the glog and leader-election groups are both daemons'
(:mod:`cpa.runtime.common_flags`).

Validation reports every problem at once, with CPVA's messages (exit 1). Ours on top of
CPVA's checks: an empty name (``deployment/``) and a name with a ``/`` are refused here
(CPVA fails every PATCH, or exits after discovery), and ``--default-config`` is decoded
here, so a bad one is exit 1 before any API request (CPVA: exit 1 after discovery).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Callable, Mapping, Sequence
from typing import ClassVar

from cpa.go.duration import parse_duration
from cpa.go.pflag import Include, UsageError, flag, parse_flags, parse_str, table_of
from cpa.go.pflag import usage as table_usage
from cpa.go.strconv import parse_bool, parse_go_int
from cpa.runtime import common_flags as shared
from cpa.vertical.decide.cpva_config import ConfigError, ScaleConfig, decode_config
from cpa.vertical.decide.patch import PatchTarget, TargetError, parse_targets, target_key
from cpa.vertical.decide.state import InvalidConfigPolicy

__all__ = ["TABLE", "UsageError", "VerticalOptions", "parse", "usage", "validate"]

RESIZE_MODES = ("template", "in-place")
IN_PLACE_TEMPLATE = ("when-safe", "always", "never")


def _choice(*allowed: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}")
        return text
    return parse


@dataclasses.dataclass(kw_only=True)
class VerticalOptions(shared.GlogOptions, shared.LeaderElectionOptions):
    """Everything ``/cpvpa`` takes from its command line (and ``$MY_NAMESPACE``): a flag per
    :func:`~cpa.go.pflag.flag` field, in ``--help`` order, CPVA's first."""

    # CPVA's
    target: str = flag(
        "", parse_str,
        "The target object to scale: deployment/NAME, daemonset/NAME or replicaset/NAME "
        "(not case sensitive; the name is lower-cased too, as CPVA does); ours: a comma "
        "list of them, one Node count for all, each written on its own.", metavar="string")
    namespace: str = flag("", parse_str,
                          "The namespace of the --target (default: $MY_NAMESPACE).",
                          metavar="string")
    default_config: str = flag(
        "", parse_str,
        'The default configuration, JSON: {"<container>": {"requests"|"limits": '
        '{"<resource>": {"base", "max", "step", "coresPerStep", "nodesPerStep"}}}}.',
        metavar="json")
    config_file: str = flag(
        "", parse_str,
        "A config file (JSON, as --default-config) decoded over the default config; re-read "
        "when it is replaced (a mounted ConfigMap's update).", metavar="path")
    poll_period_seconds: int = flag(
        10, parse_go_int, "Seconds between polls of the cluster size (default 10).",
        metavar="int")
    kubeconfig: str = shared.kubeconfig_flag()
    version: bool = flag(False, parse_bool, "Print the version and exit.")
    dry_run: bool = flag(False, parse_bool,
                         "Compute and log the updates of the target but do not apply them.")
    help: bool = flag(False, parse_bool, "Show this help and exit.")
    _glog: ClassVar[Include] = Include(shared.GlogOptions)  # glog's flags go here
    v: int = shared.verbosity_flag("Log verbosity: 0 writes and errors, 2 the config, 4 every "
                                   "poll's counts and values.")
    # ours, opt-in
    resize_mode: str = flag(
        "template", _choice(*RESIZE_MODES),
        "template (default, CPVA's): patch the target's pod template, which rolls its "
        "Pods. in-place: resize the running Pods through pods/resize (Kubernetes 1.33+), "
        "falling back to the template where the cluster refuses.", metavar="mode")
    in_place_template: str = flag(
        "when-safe", _choice(*IN_PLACE_TEMPLATE),
        "With --resize-mode=in-place, whether the pod template is patched too: when-safe "
        "(default: only where that restarts no Pod, a DaemonSet with updateStrategy "
        "OnDelete or a ReplicaSet), always, never.", metavar="when")
    resize_deferred_timeout: float = flag(
        300.0, parse_duration,
        "How long an in-place resize the kubelet defers may wait before the template is "
        "patched instead (default 5m).", metavar="duration")
    invalid_config: str = flag(
        InvalidConfigPolicy.REFUSE.value, _choice(*(p.value for p in InvalidConfigPolicy)),
        "refuse (default): an invalid config file fails every poll and nothing is written "
        "until the file changes. keep-previous: CPVA's behaviour, the previous config "
        "keeps applying.", metavar="policy")
    health_port: int = flag(
        0, parse_go_int,
        "Serve /healthz, /last-poll and /metrics on this port (default 0: off, as CPVA).",
        metavar="int")
    allow_statefulset: bool = flag(
        False, parse_bool,
        "Accept statefulset/NAME in --target (CPVA refuses the kind; off by default so that "
        "a CPVA command line is read as CPVA reads it).")
    resize_fallback_max_pods_per_cycle: int = flag(
        0, parse_go_int,
        "With --resize-mode=in-place: at most this many Pods restarted per poll by a "
        "fallback (/cpvpa evicts them itself; the template is patched only where that "
        "rolls nothing). 0 (default): the fallback patches the template and the "
        "controller rolls the Pods.", metavar="int")
    resize_fallback_grace_period: float = flag(
        0.0, parse_duration,
        "With --resize-mode=in-place: how long a Pod's resize must stay refused before "
        "the fallback acts on it (default 0: at once).", metavar="duration")
    events: bool = flag(
        False, parse_bool,
        "Create Events regarding each target: Normal on every change of its resources "
        "(template or Pods), Warning on every fallback of in-place resize. Needs create on "
        "events.k8s.io events.")
    log_format: str = shared.log_format_flag()
    _election: ClassVar[Include] = Include(shared.LeaderElectionOptions)  # and the Lease's
    leader_elect_lease_name: str = flag(
        "", parse_str, "Name of the Lease (default: cpvpa-<kind>-<name> of the target).",
        metavar="string")
    # not flags: filled by validate()
    patch_target: PatchTarget | None = None  # the first (CPVA's only) target
    patch_targets: tuple[PatchTarget, ...] = ()
    default_scale_config: ScaleConfig | None = None  # the first target's
    default_scale_configs: tuple[ScaleConfig | None, ...] = ()  # per target, in order

    @property
    def policy(self) -> InvalidConfigPolicy:
        return InvalidConfigPolicy(self.invalid_config)

    @property
    def target_keys(self) -> tuple[str, ...]:
        return tuple(target_key(t) for t in self.patch_targets)

    @property
    def lease_name(self) -> str:
        """``--leader-elect-lease-name``, else ``cpvpa-<kind>-<name>``; with several
        targets, the first one's and a hash of the whole list (one Lease per instance:
        two instances sizing different sets never share one)."""
        if self.leader_elect_lease_name:
            return self.leader_elect_lease_name
        target = self.patch_target
        if target is None:
            return "cpvpa"
        name = f"cpvpa-{target.kind.lower()}-{target.name}"
        if len(self.patch_targets) > 1:
            digest = hashlib.sha256(",".join(self.target_keys).encode()).hexdigest()[:10]
            name = f"{name[:200]}-{digest}"
        return name


TABLE = table_of(VerticalOptions)


def parse(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> VerticalOptions:
    """Parse ``argv`` (without the program name); raise :class:`cpa.go.pflag.UsageError`."""
    env = os.environ if environ is None else environ
    opts = VerticalOptions(namespace=env.get("MY_NAMESPACE", ""),
                           kubeconfig=env.get("KUBECONFIG", ""))
    args = list(argv)
    # pflag answers -h as --help (CPVA defines no such flag; pflag does it for any set).
    if "-h" in args[:args.index("--") if "--" in args else len(args)]:
        opts.help = True
        return opts
    return parse_flags(args, TABLE, opts)


def validate(opts: VerticalOptions) -> list[str]:
    """Every problem, CPVA's first in CPVA's order and words; fills ``patch_target`` and
    ``default_scale_config``."""
    problems: list[str] = []
    opts.target = opts.target.lower()
    try:
        opts.patch_targets = tuple(parse_targets(opts.target,
                                                 statefulsets=opts.allow_statefulset))
    except TargetError as exc:
        own = ("format error", "empty item", "twice")  # these say what to do already
        hint = "" if any(words in str(exc) for words in own) else (
            " Pass e.g. --target=daemonset/kube-proxy.")
        if "statefulset/" in opts.target and not opts.allow_statefulset:
            hint += " statefulset/NAME needs --allow-statefulset."
        problems.append(str(exc) + hint)
    else:
        opts.patch_target = opts.patch_targets[0]
        for target in opts.patch_targets:
            if not target.name:
                problems.append(f"--target {opts.target!r} has no name: pass e.g. "
                                f"{target.kind.lower()}/my-app")
    if opts.namespace == "":
        problems.append("--namespace parameter not set and failed to fallback: pass "
                        "--namespace or set MY_NAMESPACE")
    if opts.default_config == "" and opts.config_file == "":
        problems.append("Either --default-config or --config-file must be specified")
    if opts.poll_period_seconds < 1:
        problems.append("--poll-period-seconds cannot be less than 1")
    if opts.default_config:
        problems.extend(_decode_defaults(opts))
    if not 0 <= opts.health_port < 65536:
        problems.append(f"--health-port must be between 0 (off) and 65535, got "
                        f"{opts.health_port}")
    if opts.resize_deferred_timeout <= 0:
        problems.append("--resize-deferred-timeout must be positive")
    if opts.resize_fallback_max_pods_per_cycle < 0:
        problems.append("--resize-fallback-max-pods-per-cycle must be 0 (no bound) or more")
    if opts.resize_fallback_grace_period < 0:
        problems.append("--resize-fallback-grace-period must not be negative")
    if opts.resize_mode != "in-place" and (opts.resize_fallback_max_pods_per_cycle
                                           or opts.resize_fallback_grace_period):
        problems.append("--resize-fallback-max-pods-per-cycle and "
                        "--resize-fallback-grace-period bound in-place resize's fallback: "
                        "add --resize-mode=in-place or drop them")
    problems.extend(shared.validate_leader_election(opts))
    return problems


def _decode_defaults(opts: VerticalOptions) -> list[str]:
    """``--default-config`` for each target: CPVA's format applies to all of them alike, a
    document of per-target blocks gives each its block."""
    if not opts.patch_targets:  # --target is invalid: decode it as CPVA's format alone
        try:
            opts.default_scale_config = decode_config(opts.default_config)
        except ConfigError as exc:
            return [f"invalid default config: {exc}"]
        return []
    keys = opts.target_keys
    configs: list[ScaleConfig | None] = []
    for key in keys:
        try:
            configs.append(decode_config(opts.default_config, target=key, targets=keys))
        except ConfigError as exc:
            return [f"invalid default config: {exc}"]
    opts.default_scale_configs = tuple(configs)
    opts.default_scale_config = configs[0]
    if len(keys) > 1 and not opts.config_file:
        missing = [key for key, config in zip(keys, configs, strict=True) if not config]
        if missing:
            return [f"--default-config has no config for {', '.join(missing)} (and there "
                    "is no --config-file): give each target a block, e.g. "
                    f'{{"{missing[0]}": {{"<container>": {{"requests": ...}}}}}}']
    return []


def usage(prog: str) -> str:
    return table_usage(prog, TABLE)
