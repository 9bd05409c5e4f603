"""The option groups both daemons take: glog's flags and leader election, each a dataclass of
flag rows (:func:`cpa.go.pflag.flag`) with one validator, so the two command lines cannot
drift apart; and the single flags both take (``--kubeconfig``, ``--log-format``), each made
by a function, as each program places it where its ``--help`` has it.

Each program's options class inherits the groups and places their flags in its ``--help``
with an :class:`~cpa.go.pflag.Include` marker (each upstream's order). What differs between
the programs is declared again by the program: ``--v``'s help (what each logs at which
level, :func:`verbosity_flag`), ``--logtostderr``'s default (:func:`logtostderr_flag`) and
``--leader-elect-lease-name``'s help (each program's default name).

The groups are plain dataclasses, not ``slots=True`` ones: a class can combine at most one
base with slots, and each program's options combine both groups.
"""

from __future__ import annotations

import dataclasses

from cpa.go.duration import parse_duration
from cpa.go.pflag import flag, parse_str
from cpa.go.strconv import parse_bool, parse_decimal_int, parse_go_int

__all__ = ["GlogOptions", "LeaderElectionOptions", "kubeconfig_flag", "log_format_flag",
           "logtostderr_flag", "validate_leader_election", "verbosity_flag"]


def validate_leader_election(opts: LeaderElectionOptions) -> list[str]:
    """client-go's checks of the Lease durations (only with ``--leader-elect``)."""
    if not opts.leader_elect:
        return []
    problems: list[str] = []
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


# --- glog's value syntax -----------------------------------------------------------------

_SEVERITIES = {"INFO": 0, "WARNING": 1, "ERROR": 2, "FATAL": 3}


def _parse_severity(text: str) -> int:
    """glog's ``--stderrthreshold``: a severity name (any case) or its number."""
    if text.upper() in _SEVERITIES:
        return _SEVERITIES[text.upper()]
    return parse_decimal_int(text, 32)


def _parse_backtrace(text: str) -> str:
    """glog's ``--log_backtrace_at``: empty, or ``file.go:LINE`` with LINE > 0."""
    if text == "":
        return text
    parts = text.split(":")
    if len(parts) != 2 or "." not in parts[0]:
        raise ValueError("syntax error: expect file.go:234")
    line = parse_decimal_int(parts[1])
    if line <= 0:
        raise ValueError("negative or zero value for level")
    return text


def _parse_vmodule(text: str) -> str:
    """glog's ``--vmodule``: comma-separated ``pattern=N``."""
    if text == "":
        return text
    import fnmatch  # only for this flag (~0.5 ms of every start otherwise)

    for item in text.split(","):
        parts = item.split("=")
        if len(parts) != 2 or not parts[0]:
            raise ValueError("syntax error: expect comma-separated list of filename=N")
        parse_decimal_int(parts[1], 32)
        try:
            fnmatch.translate(parts[0])
        except Exception as exc:  # pragma: no cover - translate rarely raises
            raise ValueError(str(exc)) from exc
    return text


def _parse_log_format(text: str) -> str:
    if text not in ("text", "json"):
        raise ValueError("must be text or json")
    return text


# --- the rows ----------------------------------------------------------------------------

_GLOG = "Accepted for glog compatibility."


def _parse_int32(text: str) -> int:
    return parse_decimal_int(text, 32)


def verbosity_flag(help_text: str) -> int:
    """glog's ``--v`` (``-v``), with what this program logs at each level."""
    return flag(0, _parse_int32, help_text, metavar="int")


def logtostderr_flag(default: bool) -> bool:
    """glog's ``--logtostderr``; upstream's autoscaler sets it, glog's default is false."""
    return flag(default, parse_bool, "Accepted for glog compatibility; logs always go to stderr.")


def kubeconfig_flag() -> str:
    return flag("", parse_str, "Kubeconfig file for running outside a cluster (default: "
                "$KUBECONFIG, else in-cluster config).", metavar="path")


def log_format_flag() -> str:
    return flag("text", _parse_log_format, "text (default) or json.", metavar="format")


@dataclasses.dataclass(kw_only=True)
class GlogOptions:
    """glog's flags, in glog's order: accepted for compatibility; only ``--v`` changes what
    we do."""

    v: int = verbosity_flag("Log verbosity.")
    vmodule: str = flag("", _parse_vmodule, _GLOG, metavar="string")
    logtostderr: bool = logtostderr_flag(False)
    alsologtostderr: bool = flag(False, parse_bool, _GLOG)
    stderrthreshold: int = flag(2, _parse_severity, _GLOG, metavar="severity")
    log_dir: str = flag("", parse_str, _GLOG, metavar="string")
    log_link: str = flag("", parse_str, _GLOG, metavar="string")
    logbuflevel: int = flag(0, parse_go_int, _GLOG, metavar="int")
    log_backtrace_at: str = flag("", _parse_backtrace, _GLOG, metavar="file:N")


@dataclasses.dataclass(kw_only=True)
class LeaderElectionOptions:
    """``--leader-elect`` and its Lease (ours): client-go's defaults."""

    leader_elect: bool = flag(
        False, parse_bool, "Run several replicas: only the holder of a coordination.k8s.io "
        "Lease writes. Needs get, create, update on leases.")
    leader_elect_lease_name: str = flag("", parse_str, "Name of the Lease.", metavar="string")
    leader_elect_namespace: str = flag(
        "", parse_str, "Namespace of the Lease (default: --namespace).", metavar="string")
    leader_elect_lease_duration: float = flag(
        15.0, parse_duration,
        "How long followers wait after the last renewal before taking over (default 15s).",
        metavar="duration")
    leader_elect_renew_deadline: float = flag(
        10.0, parse_duration,
        "How long the leader keeps trying to renew before it stops writing (default 10s).",
        metavar="duration")
    leader_elect_retry_period: float = flag(
        2.0, parse_duration, "How often to try to acquire or renew the Lease (default 2s).",
        metavar="duration")
