"""Flag parsing: pflag syntax, glog flags, validation, and real clusters' command lines."""

from __future__ import annotations

import pytest

from cpa.go.pflag import UsageError
from cpa.go.strconv import parse_go_int
from cpa.horizontal.cpa_flags import Options, flag_names, parse_args, validate
from cpa.kube.targets import Target, parse_targets

KUBE_DNS_DEFAULTS = ('{"linear":{"coresPerReplica":256,"nodesPerReplica":16,'
                     '"preventSinglePointFailure":true,"includeUnschedulableNodes":true}}')

# The exact command lines of deployments in the wild (../shared/deployments-in-the-wild.md).
KUBE_DNS_ADDON = [
    "--namespace=kube-system", "--configmap=kube-dns-autoscaler",
    "--target=Deployment/coredns", f"--default-params={KUBE_DNS_DEFAULTS}",
    "--logtostderr=true", "--v=2",
]
KUBESPRAY = [
    "--namespace=kube-system",
    '--default-params={"linear":{"preventSinglePointFailure":true,"coresPerReplica":256,'
    '"nodesPerReplica":16,"min":2}}',
    "--logtostderr=true", "--v=2", "--configmap=dns-autoscaler",
    "--target=Deployment/coredns",
]
GKE_KUBE_DNS = [
    "--namespace=kube-system", "--configmap=kube-dns-autoscaler",
    "--target=Deployment/kube-dns",
    '--default-params={"linear":{"coresPerReplica":256,"nodesPerReplica":16,'
    '"preventSinglePointFailure":true,"includeUnschedulableNodes":true}}',
    "--logtostderr=true", "--v=2",
]
GKE_KONNECTIVITY = [
    "--namespace=kube-system", "--configmap=konnectivity-agent-autoscaler-config",
    "--target=deployment/konnectivity-agent", "--logtostderr=true", "--v=2",
]
HELM_CHART = [
    "--configmap=cpa-config", "--target=deployment/coredns", "--namespace=kube-system",
    "--alsologtostderr", "--log-backtrace-at=main.go:12", "--log-dir=/tmp/logs",
    "--logtostderr=true", "--max-sync-failures=3", "--nodelabels=role=worker,zone=a",
    "--poll-period-seconds=15", "--stderrthreshold=ERROR", "--v=2", "--vmodule=main=4",
]


def ok(argv: list[str], env: dict[str, str] | None = None) -> Options:
    opts = parse_args(argv, env or {})
    assert validate(opts) == []
    return opts


def test_kube_dns_addon_command_line() -> None:
    opts = ok(KUBE_DNS_ADDON)
    assert opts.namespace == "kube-system"
    assert opts.configmap == "kube-dns-autoscaler"
    assert opts.targets == (Target("deployment", "coredns"),)
    assert opts.default_params == {
        "linear": '{"coresPerReplica":256,"includeUnschedulableNodes":true,'
                  '"nodesPerReplica":16,"preventSinglePointFailure":true}'}
    assert opts.v == 2 and opts.logtostderr is True
    assert opts.poll_period_seconds == 10 and opts.max_sync_failures == 0


def test_kubespray_command_line() -> None:
    opts = ok(KUBESPRAY)
    assert opts.configmap == "dns-autoscaler"
    assert opts.default_params is not None
    assert '"min":2' in opts.default_params["linear"]


@pytest.mark.parametrize("argv,target", [(GKE_KUBE_DNS, "deployment/kube-dns"),
                                         (GKE_KONNECTIVITY, "deployment/konnectivity-agent")])
def test_gke_command_lines(argv: list[str], target: str) -> None:
    opts = ok(argv)
    assert [str(t) for t in opts.targets] == [target]


def test_gke_konnectivity_has_no_defaults() -> None:
    assert ok(GKE_KONNECTIVITY).default_params is None


def test_helm_chart_command_line() -> None:
    opts = ok(HELM_CHART)
    assert opts.alsologtostderr is True
    assert opts.log_backtrace_at == "main.go:12"
    assert opts.log_dir == "/tmp/logs"
    assert opts.max_sync_failures == 3
    assert opts.nodelabels == "role=worker,zone=a"
    assert opts.poll_period_seconds == 15
    assert opts.stderrthreshold == 2
    assert opts.vmodule == "main=4"


@pytest.mark.parametrize("argv", [
    ["--poll-period-seconds=7"], ["--poll-period-seconds", "7"], ["--poll_period_seconds=7"],
    ["--poll_period-seconds", "7"], ["--poll-period-seconds=0x7"], ["--poll-period-seconds=07"],
    ["--poll-period-seconds=+7"],
])
def test_pflag_value_syntax(argv: list[str]) -> None:
    assert parse_args(argv, {}).poll_period_seconds == 7


@pytest.mark.parametrize("argv,expected", [
    (["--alsologtostderr"], True), (["--alsologtostderr=false"], False),
    (["--alsologtostderr=0"], False), (["--alsologtostderr=T"], True),
    (["--alsologtostderr", "false"], True),  # a bare bool never takes the next word
    (["--logtostderr=FALSE"], False),
])
def test_bool_flags(argv: list[str], expected: bool) -> None:
    opts = parse_args(argv, {})
    assert (opts.alsologtostderr if "also" in argv[0] else opts.logtostderr) is expected


@pytest.mark.parametrize("argv,v", [(["--v=4"], 4), (["-v=3"], 3), (["-v", "5"], 5),
                                    (["-v4"], 4), (["--v", "1"], 1)])
def test_verbosity_spellings(argv: list[str], v: int) -> None:
    assert parse_args(argv, {}).v == v


def test_last_value_wins() -> None:
    assert parse_args(["--v=1", "--v=3"], {}).v == 3


def test_positional_arguments_are_ignored() -> None:
    assert parse_args(["stray", "--v=2"], {}).v == 2


def test_double_dash_stops_parsing() -> None:
    assert parse_args(["--", "--v=2"], {}).v == 0


def test_namespace_falls_back_to_env() -> None:
    assert parse_args([], {"MY_POD_NAMESPACE": "dns"}).namespace == "dns"
    assert parse_args(["--namespace=x"], {"MY_POD_NAMESPACE": "dns"}).namespace == "x"


def test_kubeconfig_falls_back_to_env() -> None:
    assert parse_args([], {"KUBECONFIG": "/k"}).kubeconfig == "/k"


@pytest.mark.parametrize("argv,fragment", [
    (["--bogus=1"], "unknown flag: --bogus"),
    (["-target=x"], "unknown shorthand flag"),
    (["--poll-period-seconds=ten"], "--poll-period-seconds"),
    (["--poll-period-seconds=1.5"], "--poll-period-seconds"),
    (["--poll-period-seconds"], "needs an argument"),
    (["--v=high"], "--v"),
    (["--v=0x2"], "--v"),  # glog's level is base 10
    (["--logtostderr=yes"], "--logtostderr"),
    (["--default-params={not json"], "--default-params"),
    (["--default-params=[1]"], "--default-params"),
    (["--log-backtrace-at=nofile"], "--log-backtrace-at"),
    (["--log-backtrace-at=main.go:0"], "--log-backtrace-at"),
    (["--vmodule=main"], "--vmodule"),
    (["--stderrthreshold=LOUD"], "--stderrthreshold"),
    (["--log-format=xml"], "--log-format"),
    (["---v=1"], "unknown flag"),
])
def test_usage_errors(argv: list[str], fragment: str) -> None:
    with pytest.raises(UsageError, match=fragment.replace("[", r"\[")):
        parse_args(argv, {})


@pytest.mark.parametrize("argv,message", [
    (["--default-param={}"], "unknown flag: --default-param (did you mean --default-params?)"),
    (["--defaultparams={}"], "unknown flag: --defaultparams (did you mean --default-params?)"),
    (["--configmpa=x"], "unknown flag: --configmpa (did you mean --configmap?)"),
    (["--log_dri=x"], "unknown flag: --log_dri (did you mean --log-dir?)"),
    (["--Target=x"], "unknown flag: --Target (did you mean --target?)"),
    (["--leader"], "unknown flag: --leader (did you mean --leader-elect or "
                   "--leader-elect-lease-name or --leader-elect-namespace?)"),
    (["-configmap=x"], "unknown shorthand flag: 'c' in -configmap=x (did you mean --configmap?)"),
    (["--bogus"], "unknown flag: --bogus"),
    (["-x"], "unknown shorthand flag: 'x' in -x"),
])
def test_an_unknown_flag_names_the_nearest(argv: list[str], message: str) -> None:
    """cobra's suggestions (distance <= 2 or a prefix), on one line."""
    with pytest.raises(UsageError) as err:
        parse_args(argv, {})
    assert str(err.value) == message


def test_severity_names_any_case() -> None:
    assert parse_args(["--stderrthreshold=warning"], {}).stderrthreshold == 1
    assert parse_args(["--stderrthreshold=3"], {}).stderrthreshold == 3


@pytest.mark.parametrize("text,value", [
    ("10", 10), ("-3", -3), ("0x1f", 31), ("0o17", 15), ("017", 15), ("0b101", 5),
    ("1_000", 1000), ("0x_1f", 31),
])
def test_go_int_parsing(text: str, value: int) -> None:
    assert parse_go_int(text) == value


@pytest.mark.parametrize("text", ["", "_1", "1_", "1__0", "08", "1.0", "1e3", " 1", "9" * 20,
                                  "0x", "+-1", "\u0661"])
def test_go_int_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_go_int(text)


def test_validation_reports_every_problem() -> None:
    opts = parse_args(["--poll-period-seconds=0", "--nodelabels=a==b==c"], {})
    problems = validate(opts)
    text = "\n".join(problems)
    assert "--target" in text
    assert "--configmap" in text
    assert "--namespace" in text
    assert "--poll-period-seconds" in text
    assert "--nodelabels" in text
    assert len(problems) == 5


@pytest.mark.parametrize("text,expected", [
    ("Deployment/coredns", ["deployment/coredns"]),
    ("deployment/a, ReplicaSet/b ,replicationcontroller/c,statefulset/d",
     ["deployment/a", "replicaset/b", "replicationcontroller/c", "statefulset/d"]),
    ("DEPLOYMENT/CoreDNS", ["deployment/coredns"]),
    # ours: the HPA floor (hpa/ is the same kind) and any resource with /scale
    ("hpa/web,HorizontalPodAutoscaler/api", ["horizontalpodautoscaler/web",
                                              "horizontalpodautoscaler/api"]),
    ("rollouts.argoproj.io/web,Clones.Example.COM/x", ["rollouts.argoproj.io/web",
                                                        "clones.example.com/x"]),
])
def test_targets(text: str, expected: list[str]) -> None:
    targets, problems = parse_targets(text)
    assert problems == []
    assert [str(t) for t in targets] == expected


@pytest.mark.parametrize("text", [
    "deployment/a deployment/b",  # a space instead of a comma
    "deployments/coredns", "pod/x", "coredns", "deployment/", "", "deployment/a,",
    "daemonset/x", "deployment/a/b", "deployment/-bad",
    ".argoproj.io/x", "rollouts./x", "rollouts..io/x", "rollouts.argoproj.io/",
])
def test_bad_targets(text: str) -> None:
    _, problems = parse_targets(text)
    assert problems


def test_every_contract_flag_is_accepted() -> None:
    names = set(flag_names())
    for name in ["target", "configmap", "namespace", "poll-period-seconds", "default-params",
                 "nodelabels", "max-sync-failures", "version", "v", "vmodule", "logtostderr",
                 "alsologtostderr", "stderrthreshold", "log-dir", "log-link", "logbuflevel",
                 "log-backtrace-at", "kubeconfig", "health-port", "log-format"]:
        assert name in names


@pytest.mark.parametrize(("argv", "attr", "value"), [
    (["--log_dir=/x"], "log_dir", "/x"), (["--log-dir=/x"], "log_dir", "/x"),
    (["--log_link=/y"], "log_link", "/y"), (["--log-link", "/y"], "log_link", "/y"),
    (["--logbuflevel=-1"], "logbuflevel", -1), (["--log_backtrace_at=x.go:7"],
                                                "log_backtrace_at", "x.go:7"),
    (["--log_backtrace_at="], "log_backtrace_at", ""),
])
def test_glog_underscore_spellings(argv: list[str], attr: str, value: object) -> None:
    """``_`` and ``-`` name the same flag (upstream's WordSepNormalizeFunc)."""
    assert getattr(parse_args(argv, {}), attr) == value


def test_health_port_range() -> None:
    opts = parse_args([*KUBE_DNS_ADDON, "--health-port=0"], {})
    assert any("--health-port" in p for p in validate(opts))


def test_opt_in_flags_default_off() -> None:
    opts = parse_args(KUBE_DNS_ADDON, {})
    assert validate(opts) == []
    assert not opts.events and not opts.leader_elect
    assert (opts.leader_elect_lease_duration, opts.leader_elect_renew_deadline,
            opts.leader_elect_retry_period) == (15.0, 10.0, 2.0)  # client-go's defaults


@pytest.mark.parametrize(("text", "seconds"), [
    ("15s", 15.0), ("1m30s", 90.0), ("500ms", 0.5), ("0", 0.0), ("1.5h", 5400.0),
    ("2h45m", 9900.0), ("10us", 1e-5), ("+3s", 3.0),
])
def test_go_durations(text: str, seconds: float) -> None:
    opts = parse_args([f"--leader-elect-lease-duration={text}"], {})
    assert opts.leader_elect_lease_duration == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["15", "s", "1x", ".s", "", "1.5.2s"])
def test_bad_durations_are_usage_errors(text: str) -> None:
    with pytest.raises(UsageError, match="leader-elect-retry-period"):
        parse_args([f"--leader-elect-retry-period={text}"], {})


def test_leader_election_durations_are_checked_like_client_go() -> None:
    opts = parse_args([*KUBE_DNS_ADDON, "--leader-elect", "--leader-elect-lease-duration=10s",
                       "--leader-elect-renew-deadline=10s", "--leader-elect-retry-period=9s"],
                      {})
    problems = validate(opts)
    assert any("lease-duration must be greater" in p for p in problems)
    assert any("1.2 x" in p for p in problems)


def test_custom_targets_wait_for_discovery() -> None:
    (hpa, custom), problems = parse_targets("hpa/web,rollouts.argoproj.io/web")
    assert problems == []
    assert not hpa.custom and hpa.api.floor and hpa.api.api_version == "autoscaling/v2"
    assert custom.custom and custom.resolved is None
    with pytest.raises(ValueError, match="not been resolved through API discovery"):
        assert custom.api


def test_options_take_every_field_by_keyword_with_its_default() -> None:
    """Options' constructor takes every field by keyword, the groups' included, with
    upstream's logtostderr default."""
    opts = Options()
    assert (opts.logtostderr, opts.v, opts.stderrthreshold, opts.leader_elect) == (
        True, 0, 2, False)
    assert (opts.leader_elect_lease_duration, opts.leader_elect_renew_deadline,
            opts.leader_elect_retry_period) == (15.0, 10.0, 2.0)
    assert (opts.poll_period_seconds, opts.health_port, opts.log_format, opts.targets) == (
        10, 8080, "text", ())
    target = Target("deployment", "x")
    opts = Options(v=2, logtostderr=False, leader_elect=True, leader_elect_lease_name="l",
                   configmap="cm", targets=(target,))
    assert (opts.v, opts.logtostderr, opts.leader_elect, opts.lease_name) == (2, False, True,
                                                                              "l")
    assert opts.targets == (target,) and Options().targets == ()
