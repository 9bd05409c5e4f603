"""The option groups both daemons take: glog's flags and leader election, each with its
flag rows and one validator, so the two command lines cannot drift apart.

Each program's options class inherits the groups (:class:`GlogOptions`,
:class:`LeaderElectionOptions`) and lists the rows in its own table, in its own order (the
``--help`` text is each upstream's order). Only ``--v`` has a help text per program (what
each logs at which level), so it is made by :func:`verbosity_flag`.
"""

from __future__ import annotations

import fnmatch

from cpa.go.duration import parse_duration
from cpa.go.pflag import Flag, parse_str
from cpa.go.strconv import parse_bool, parse_decimal_int, parse_go_int

__all__ = ["GLOG_FLAGS", "KUBECONFIG_FLAG", "LEADER_ELECT_FLAG", "LEASE_FLAGS", "LOG_FORMAT_FLAG",
           "GlogOptions", "LeaderElectionOptions", "validate_leader_election",
           "verbosity_flag"]


class GlogOptions:
    """glog's flags: accepted for compatibility; only ``--v`` changes what we do. (A plain
    class, not a dataclass: the options are made on the daemons' start-up path, where a
    dataclass costs ~1 ms to make and the ``dataclasses`` module ~10 ms to import.)"""

    def __init__(self, v: int = 0, vmodule: str = "", logtostderr: bool = False,
                 alsologtostderr: bool = False, stderrthreshold: int = 2, log_dir: str = "",
                 log_link: str = "", logbuflevel: int = 0, log_backtrace_at: str = "") -> None:
        self.v = v
        self.vmodule = vmodule
        self.logtostderr = logtostderr
        self.alsologtostderr = alsologtostderr
        self.stderrthreshold = stderrthreshold
        self.log_dir = log_dir
        self.log_link = log_link
        self.logbuflevel = logbuflevel
        self.log_backtrace_at = log_backtrace_at


class LeaderElectionOptions:
    """``--leader-elect`` and its Lease (ours): client-go's defaults. (A plain class, not a
    dataclass: the options are made on the daemons' start-up path, where a dataclass costs
    ~1 ms to make and the ``dataclasses`` module ~10 ms to import.)"""

    def __init__(self, leader_elect: bool = False, leader_elect_lease_name: str = "",
                 leader_elect_namespace: str = "", leader_elect_lease_duration: float = 15.0,
                 leader_elect_renew_deadline: float = 10.0,
                 leader_elect_retry_period: float = 2.0) -> None:
        self.leader_elect = leader_elect
        self.leader_elect_lease_name = leader_elect_lease_name  # default: per program
        self.leader_elect_namespace = leader_elect_namespace  # default: --namespace
        self.leader_elect_lease_duration = leader_elect_lease_duration
        self.leader_elect_renew_deadline = leader_elect_renew_deadline
        self.leader_elect_retry_period = leader_elect_retry_period


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


def verbosity_flag(help_text: str) -> Flag:
    """glog's ``--v`` (``-v``), with what this program logs at each level."""
    return Flag("v", "v", lambda s: parse_decimal_int(s, 32), help_text, metavar="int")


GLOG_FLAGS: tuple[Flag, ...] = (
    Flag("vmodule", "vmodule", _parse_vmodule, "Accepted for glog compatibility.",
         metavar="string"),
    Flag("logtostderr", "logtostderr", parse_bool,
         "Accepted for glog compatibility; logs always go to stderr.", is_bool=True),
    Flag("alsologtostderr", "alsologtostderr", parse_bool,
         "Accepted for glog compatibility.", is_bool=True),
    Flag("stderrthreshold", "stderrthreshold", _parse_severity,
         "Accepted for glog compatibility.", metavar="severity"),
    Flag("log-dir", "log_dir", parse_str, "Accepted for glog compatibility.",
         metavar="string"),
    Flag("log-link", "log_link", parse_str, "Accepted for glog compatibility.",
         metavar="string"),
    Flag("logbuflevel", "logbuflevel", parse_go_int, "Accepted for glog compatibility.",
         metavar="int"),
    Flag("log-backtrace-at", "log_backtrace_at", _parse_backtrace,
         "Accepted for glog compatibility.", metavar="file:N"),
)
"""glog's flags after ``--v``, in glog's order."""

KUBECONFIG_FLAG = Flag(
    "kubeconfig", "kubeconfig", parse_str,
    "Kubeconfig file for running outside a cluster (default: $KUBECONFIG, else "
    "in-cluster config).", metavar="path")
LOG_FORMAT_FLAG = Flag("log-format", "log_format", _parse_log_format, "text (default) or json.",
                       metavar="format")
LEADER_ELECT_FLAG = Flag(
    "leader-elect", "leader_elect", parse_bool,
    "Run several replicas: only the holder of a coordination.k8s.io Lease writes. "
    "Needs get, create, update on leases.", is_bool=True)
LEASE_FLAGS: tuple[Flag, ...] = (
    Flag("leader-elect-namespace", "leader_elect_namespace", parse_str,
         "Namespace of the Lease (default: --namespace).", metavar="string"),
    Flag("leader-elect-lease-duration", "leader_elect_lease_duration", parse_duration,
         "How long followers wait after the last renewal before taking over (default 15s).",
         metavar="duration"),
    Flag("leader-elect-renew-deadline", "leader_elect_renew_deadline", parse_duration,
         "How long the leader keeps trying to renew before it stops writing (default 10s).",
         metavar="duration"),
    Flag("leader-elect-retry-period", "leader_elect_retry_period", parse_duration,
         "How often to try to acquire or renew the Lease (default 2s).",
         metavar="duration"),
)
"""The Lease's flags after its name (whose default is each program's own)."""
