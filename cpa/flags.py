"""Command-line flags, parsed the way upstream's pflag + glog command line parses them.

Manifests written for the Go binary must keep working unchanged, so this is a small
re-implementation of pflag's syntax (``--f=v``, ``--f v``, bare booleans, ``-`` and ``_``
interchangeable, one-letter glog flags usable as ``-v``) rather than argparse, whose
abbreviation matching and option syntax differ in ways a Go user would trip over.

Two failure classes, with upstream's exit codes:
* :class:`UsageError` (exit 2): unknown flag, missing value, unparsable value.
* :func:`validate` returns every problem at once (exit 1), so an operator fixes a manifest in
  one round trip.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from cpa.kube.scale import Target, parse_targets
from cpa.kube.selector import SelectorError, parse_selector

EXIT_USAGE = 2
EXIT_INVALID = 1


class UsageError(Exception):
    """A flag the command line cannot be parsed with; upstream exits 2 for these."""


@dataclass(slots=True)
class Options:
    """Everything the daemon needs from its command line (and ``MY_POD_NAMESPACE``)."""

    target: str = ""
    configmap: str = ""
    namespace: str = ""
    poll_period_seconds: int = 10
    default_params: dict[str, str] | None = None
    nodelabels: str = ""
    max_sync_failures: int = 0
    version: bool = False
    help: bool = False
    # glog flags: accepted for compatibility; only --v changes what we do.
    v: int = 0
    vmodule: str = ""
    logtostderr: bool = True
    alsologtostderr: bool = False
    stderrthreshold: int = 2
    log_dir: str = ""
    log_link: str = ""
    logbuflevel: int = 0
    log_backtrace_at: str = ""
    # ours
    kubeconfig: str = ""
    health_port: int = 8080
    log_format: str = "text"
    events: bool = False
    leader_elect: bool = False
    leader_elect_lease_name: str = ""  # default: the --configmap name
    leader_elect_namespace: str = ""  # default: --namespace
    leader_elect_lease_duration: float = 15.0  # client-go's defaults
    leader_elect_renew_deadline: float = 10.0
    leader_elect_retry_period: float = 2.0
    react_to_node_changes: bool = False
    dry_run: bool = False
    targets: tuple[Target, ...] = field(default_factory=tuple)


def _parse_go_int(text: str, bits: int = 64) -> int:
    """``strconv.ParseInt(s, 0, bits)``: base prefixes and underscores, as pflag's int does."""
    s = text
    sign = 1
    if s[:1] in ("+", "-"):
        sign = -1 if s[0] == "-" else 1
        s = s[1:]
    base, prefixed = 10, False
    if s[:2].lower() in ("0x", "0b", "0o"):
        base, prefixed = {"x": 16, "b": 2, "o": 8}[s[1].lower()], True
        s = s[2:]
    elif len(s) > 1 and s[0] == "0":
        base, prefixed = 8, True
        s = s[1:]
    # Go allows "_" only between digits, or between a base prefix and a digit.
    if "_" in s and (s.endswith("_") or "__" in s or (s.startswith("_") and not prefixed)):
        raise ValueError(text)
    digits = s.replace("_", "")
    if not digits or not digits.isascii() or not digits.isalnum():
        raise ValueError(text)
    value = sign * int(digits, base)
    if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
        raise ValueError(text)
    return value


def _parse_decimal_int(text: str, bits: int = 64) -> int:
    """``strconv.Atoi`` / ``ParseInt(s, 10, bits)``: what glog's flags use."""
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        raise ValueError(text)
    value = int(text, 10)
    if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
        raise ValueError(text)
    return value


_BOOL_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
_BOOL_FALSE = {"0", "f", "F", "FALSE", "false", "False"}


def _parse_bool(text: str) -> bool:
    """``strconv.ParseBool``."""
    if text in _BOOL_TRUE:
        return True
    if text in _BOOL_FALSE:
        return False
    raise ValueError(text)


_SEVERITIES = {"INFO": 0, "WARNING": 1, "ERROR": 2, "FATAL": 3}


def _parse_severity(text: str) -> int:
    """glog's ``--stderrthreshold``: a severity name (any case) or its number."""
    if text.upper() in _SEVERITIES:
        return _SEVERITIES[text.upper()]
    return _parse_decimal_int(text, 32)


def _parse_backtrace(text: str) -> str:
    """glog's ``--log_backtrace_at``: empty, or ``file.go:LINE`` with LINE > 0."""
    if text == "":
        return text
    parts = text.split(":")
    if len(parts) != 2 or "." not in parts[0]:
        raise ValueError("syntax error: expect file.go:234")
    line = _parse_decimal_int(parts[1])
    if line <= 0:
        raise ValueError("negative or zero value for level")
    return text


def _parse_vmodule(text: str) -> str:
    """glog's ``--vmodule``: comma-separated ``pattern=N``."""
    if text == "":
        return text
    for item in text.split(","):
        parts = item.split("=")
        if len(parts) != 2 or not parts[0]:
            raise ValueError("syntax error: expect comma-separated list of filename=N")
        _parse_decimal_int(parts[1], 32)
        try:
            fnmatch.translate(parts[0])
        except Exception as exc:  # pragma: no cover - translate rarely raises
            raise ValueError(str(exc)) from exc
    return text


def _parse_default_params(text: str) -> dict[str, str]:
    """``--default-params``: upstream decodes it while parsing flags, so bad JSON is exit 2."""
    from cpa.decide.defaults import default_params_to_data

    return default_params_to_data(text)


def _parse_log_format(text: str) -> str:
    if text not in ("text", "json"):
        raise ValueError("must be text or json")
    return text


def _parse_str(text: str) -> str:
    return text


_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "\u00b5s": 1e-6, "\u03bcs": 1e-6, "ms": 1e-3,
                   "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION_PART = re.compile(r"([0-9]*\.?[0-9]*)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)")


def _parse_duration(text: str) -> float:
    """Go's ``time.ParseDuration`` (pflag's duration flags): "15s", "1m30s", "500ms"; a
    bare "0" is zero. Returns seconds."""
    s = text
    sign = -1.0 if s.startswith("-") else 1.0
    s = s.lstrip("+-")
    if s == "0":
        return 0.0
    if not s:
        raise ValueError("invalid duration")
    total, pos = 0.0, 0
    while pos < len(s):
        match = _DURATION_PART.match(s, pos)
        if match is None or match.group(1) in ("", "."):
            raise ValueError(f"invalid duration {text!r} (write e.g. 15s, 1m30s, 500ms)")
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        pos = match.end()
    return sign * total


@dataclass(frozen=True, slots=True)
class _Flag:
    name: str
    attr: str
    parse: Callable[[str], Any]
    help: str
    is_bool: bool = False
    metavar: str = ""


Flag = _Flag
"""One flag of a table: its name (``-`` spelling), the attribute it sets, its parser."""


_FLAGS: tuple[_Flag, ...] = (
    _Flag("target", "target", _parse_str,
          "Comma-separated targets to scale, kind/name, e.g. deployment/coredns. Kinds: "
          "deployment, replicaset, replicationcontroller, statefulset; "
          "horizontalpodautoscaler (hpa: writes its minReplicas); RESOURCE.GROUP of any "
          "resource with a scale subresource.", metavar="string"),
    _Flag("configmap", "configmap", _parse_str,
          "ConfigMap holding the scaling parameters (created from --default-params if "
          "missing).", metavar="string"),
    _Flag("namespace", "namespace", _parse_str,
          "Namespace of the targets and the ConfigMap (default: $MY_POD_NAMESPACE).",
          metavar="string"),
    _Flag("poll-period-seconds", "poll_period_seconds", _parse_go_int,
          "Seconds between polls (default 10).", metavar="int"),
    _Flag("default-params", "default_params", _parse_default_params,
          "JSON object of default ConfigMap data, e.g. "
          '{"linear":{"coresPerReplica":256,"nodesPerReplica":16}}.', metavar="json"),
    _Flag("nodelabels", "nodelabels", _parse_str,
          "Label selector for the Nodes to count, e.g. a=b,c=d.", metavar="string"),
    _Flag("max-sync-failures", "max_sync_failures", _parse_go_int,
          "Exit 1 after this many consecutive failed polls (0: never).", metavar="int"),
    _Flag("version", "version", _parse_bool, "Print the version and exit.", is_bool=True),
    _Flag("help", "help", _parse_bool, "Show this help and exit.", is_bool=True),
    _Flag("v", "v", lambda s: _parse_decimal_int(s, 32),
          "Log verbosity: 0 scale decisions and errors, 1 mode changes, 2 parameters, "
          "4 every poll's counts.", metavar="int"),
    _Flag("vmodule", "vmodule", _parse_vmodule, "Accepted for glog compatibility.",
          metavar="string"),
    _Flag("logtostderr", "logtostderr", _parse_bool,
          "Accepted for glog compatibility; logs always go to stderr.", is_bool=True),
    _Flag("alsologtostderr", "alsologtostderr", _parse_bool,
          "Accepted for glog compatibility.", is_bool=True),
    _Flag("stderrthreshold", "stderrthreshold", _parse_severity,
          "Accepted for glog compatibility.", metavar="severity"),
    _Flag("log-dir", "log_dir", _parse_str, "Accepted for glog compatibility.",
          metavar="string"),
    _Flag("log-link", "log_link", _parse_str, "Accepted for glog compatibility.",
          metavar="string"),
    _Flag("logbuflevel", "logbuflevel", _parse_go_int, "Accepted for glog compatibility.",
          metavar="int"),
    _Flag("log-backtrace-at", "log_backtrace_at", _parse_backtrace,
          "Accepted for glog compatibility.", metavar="file:N"),
    _Flag("kubeconfig", "kubeconfig", _parse_str,
          "Kubeconfig file for running outside a cluster (default: $KUBECONFIG, else "
          "in-cluster config).", metavar="path"),
    _Flag("health-port", "health_port", _parse_go_int,
          "Port of the /healthz and /last-poll server (default 8080).", metavar="int"),
    _Flag("log-format", "log_format", _parse_log_format, "text (default) or json.",
          metavar="format"),
    _Flag("events", "events", _parse_bool,
          "Create Events: Normal on every replica change (regarding the target), Warning "
          "for invalid parameters (regarding the ConfigMap). Needs create on "
          "events.k8s.io events.", is_bool=True),
    _Flag("leader-elect", "leader_elect", _parse_bool,
          "Run several replicas: only the holder of a coordination.k8s.io Lease writes. "
          "Needs get, create, update on leases.", is_bool=True),
    _Flag("leader-elect-lease-name", "leader_elect_lease_name", _parse_str,
          "Name of the Lease (default: the --configmap name).", metavar="string"),
    _Flag("leader-elect-namespace", "leader_elect_namespace", _parse_str,
          "Namespace of the Lease (default: --namespace).", metavar="string"),
    _Flag("leader-elect-lease-duration", "leader_elect_lease_duration", _parse_duration,
          "How long followers wait after the last renewal before taking over (default 15s).",
          metavar="duration"),
    _Flag("leader-elect-renew-deadline", "leader_elect_renew_deadline", _parse_duration,
          "How long the leader keeps trying to renew before it stops writing (default 10s).",
          metavar="duration"),
    _Flag("leader-elect-retry-period", "leader_elect_retry_period", _parse_duration,
          "How often to try to acquire or renew the Lease (default 2s).",
          metavar="duration"),
    _Flag("react-to-node-changes", "react_to_node_changes", _parse_bool,
          "Also poll as soon as the Node counts change the replica count (debounced 0.1s, "
          "at most one extra poll a second; the period's polls go on as before).",
          is_bool=True),
    _Flag("dry-run", "dry_run", _parse_bool,
          "Compute everything, write nothing: no scale or HPA write, no ConfigMap creation, "
          "no Event, no Lease. Logs dry_run.would_scale and exports cpa_dry_run 1.",
          is_bool=True),
)

# The value parsers another daemon's table uses: pflag's int, bool, string and duration,
# glog's decimal int.
parse_go_int, parse_bool, parse_str = _parse_go_int, _parse_bool, _parse_str
parse_duration, parse_decimal_int = _parse_duration, _parse_decimal_int


class FlagTable:
    """A daemon's flags, parsed by :func:`parse_flags` with pflag's rules. The
    autoscaler's table is :data:`CPA_FLAGS`; ``/cpvpa`` has its own
    (:mod:`cpa.vertical.daemon.options`), sharing the glog entries (:func:`shared`)."""

    def __init__(self, flags: Sequence[_Flag]) -> None:
        self.flags = tuple(flags)
        self.by_name: dict[str, _Flag] = {f.name: f for f in self.flags}
        # pflag.PFlagFromGoFlag gives one-letter Go flags a shorthand: "-v=2" works; and
        # pflag answers -h with the usage, as --help.
        self.shorthands: dict[str, _Flag] = {f.name: f for f in self.flags if len(f.name) == 1}
        if "help" in self.by_name and "h" not in self.shorthands:
            self.shorthands["h"] = self.by_name["help"]


CPA_FLAGS = FlagTable(_FLAGS)


def shared(*names: str) -> tuple[_Flag, ...]:
    """The autoscaler's entries for ``names`` (the glog flags, ``--kubeconfig``), for
    another daemon's table."""
    return tuple(CPA_FLAGS.by_name[name] for name in names)


_OptionsT = TypeVar("_OptionsT")


def _normalize(name: str) -> str:
    """Upstream's WordSepNormalizeFunc: ``_`` and ``-`` are the same in flag names."""
    return name.replace("_", "-")


def parse_args(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> Options:
    """Parse ``argv`` (without the program name) with pflag rules; raise :class:`UsageError`.

    Positional arguments are ignored, as upstream's ``pflag.Parse`` leaves them unused.
    """
    env = os.environ if environ is None else environ
    opts = Options(namespace=env.get("MY_POD_NAMESPACE", ""),
                   kubeconfig=env.get("KUBECONFIG", ""))
    return parse_flags(argv, CPA_FLAGS, opts)


def parse_flags(argv: Sequence[str], table: FlagTable, opts: _OptionsT) -> _OptionsT:
    """Set ``opts``' attributes from ``argv`` as ``table`` says, with pflag rules; raise
    :class:`UsageError`. Positional arguments are ignored."""
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            break
        if not arg.startswith("-") or arg == "-":
            continue
        if arg.startswith("--"):
            body = arg[2:]
            name, equals, value = body.partition("=")
            has_value = bool(equals)
            flag = table.by_name.get(_normalize(name))
            if flag is None or name.startswith("-") or not name:
                raise UsageError(f"unknown flag: --{_cut(name)}{_did_you_mean(name, table)}"
                                 .replace("\n", " "))
            shown = f"--{name}"
        else:
            body = arg[1:]
            letter, rest = body[:1], body[1:]
            flag = table.shorthands.get(letter)
            if flag is None:
                # "-configmap=x" (Go's flag syntax, which pflag refuses) is a long flag
                # with one dash: name the long one.
                typed = body.partition("=")[0]
                hint = _did_you_mean(typed, table) if len(typed) > 1 else ""
                raise UsageError(f"unknown shorthand flag: {letter!r} in {_cut(arg)}{hint}"
                                 .replace("\n", " "))
            has_value = bool(rest)
            value = rest[1:] if rest.startswith("=") else rest
            shown = f"-{letter}"
        if not has_value:
            if flag.is_bool:
                value = "true"
            elif i < len(args):
                value = args[i]
                i += 1
            else:
                raise UsageError(f"flag needs an argument: {shown}")
        try:
            setattr(opts, flag.attr, flag.parse(value))
        except ValueError as exc:
            detail = str(exc)
            reason = f": {detail}" if detail and detail != value else ""
            raise UsageError(
                f"invalid argument {_cut(value)!r} for {shown} flag{_cut(reason, 300)}"
            ) from None
    return opts


SUGGESTION_DISTANCE = 2
"""cobra's default ``SuggestionsMinimumDistance`` (command.go, ``findSuggestions``)."""
MAX_SUGGESTIONS = 3
"""A typo's message stays one line: a short prefix (``--l``) matches half the table."""


def suggest(typed: str, names: Sequence[str]) -> list[str]:
    """The names a mistyped one was probably meant to be, as cobra suggests commands
    (``Command.SuggestionsFor``): within Levenshtein distance 2, ignoring case, or starting
    with what was typed; in the table's order. ``_`` and ``-`` are the same, as in
    parsing. pflag itself suggests nothing; cobra does it for commands, we for flags."""
    word = _normalize(typed).lower()
    if not word or word.startswith("-"):
        return []
    return [name for name in names
            if name.startswith(word) or (abs(len(word) - len(name)) <= SUGGESTION_DISTANCE
                                         and _levenshtein(word, name) <= SUGGESTION_DISTANCE)]


def _did_you_mean(typed: str, table: FlagTable) -> str:
    found = suggest(typed, [f.name for f in table.flags])[:MAX_SUGGESTIONS]
    return f" (did you mean {' or '.join('--' + n for n in found)}?)" if found else ""


def _levenshtein(a: str, b: str) -> int:
    """Edit distance (insert, delete, substitute one character), as cobra's ``ld``."""
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1,
                               previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def _cut(text: str, limit: int = 100) -> str:
    """A value quoted back in a message, shortened: a one-line error stays one line."""
    return text if len(text) <= limit else f"{text[:limit]}...({len(text)} characters)"


def validate(opts: Options) -> list[str]:
    """Check the parsed options; return every problem found (empty list: valid).

    Fills ``opts.targets`` as a side effect so the targets are parsed in one place.
    """
    problems: list[str] = []
    opts.target = opts.target.lower()
    opts.targets, target_problems = parse_targets(opts.target)
    problems.extend(target_problems)
    if opts.configmap == "":
        problems.append("--configmap parameter cannot be empty: pass the ConfigMap's name")
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
    if opts.leader_elect:
        duration = opts.leader_elect_lease_duration
        deadline = opts.leader_elect_renew_deadline
        retry = opts.leader_elect_retry_period
        if not duration > deadline:
            problems.append("--leader-elect-lease-duration must be greater than "
                            f"--leader-elect-renew-deadline ({duration:g}s <= {deadline:g}s)")
        if not deadline > 1.2 * retry:  # client-go's JitterFactor
            problems.append("--leader-elect-renew-deadline must be greater than 1.2 x "
                            f"--leader-elect-retry-period ({deadline:g}s, {retry:g}s)")
        if retry <= 0:
            problems.append("--leader-elect-retry-period must be positive")
    return problems


def usage(prog: str, table: FlagTable = CPA_FLAGS) -> str:
    """The ``--help`` text: every flag with its spelling as manifests use it."""
    lines = [f"Usage of {prog}:"]
    for flag in table.flags:
        spelled = f"--{flag.name}" + (f" {flag.metavar}" if flag.metavar else "")
        lines.append(f"      {spelled:<34} {flag.help}")
    lines.append("Names may use '_' or '-' interchangeably (--log_dir == --log-dir).")
    return "\n".join(lines)


def flag_names() -> list[str]:
    """Every accepted flag name (the README's flag table is checked against it)."""
    return [f.name for f in _FLAGS]
