"""``/cpvpa``'s command line: CPVA v0.8.9's flags with pflag's syntax, its validation and
exit codes (cmd/cpvpa/options/options.go), and ours on top."""

from __future__ import annotations

import json

import pytest

from cpa.cli import _is_cpva_command_line
from cpa.go.pflag import UsageError, usage
from cpa.vertical import cpvpa_flags as options
from cpa.vertical.daemon.cpvpa_main import run_vertical
from cpa.vertical.decide.patch import PatchTarget

CONFIG = '{"c": {"requests": {"cpu": {"base": "10m"}}}}'
CPVA_FLAGS = {"target", "namespace", "default-config", "config-file", "poll-period-seconds",
              "kubeconfig", "version", "dry-run"}
GLOG_FLAGS = {"v", "vmodule", "log-backtrace-at", "logtostderr", "alsologtostderr",
              "stderrthreshold", "log-dir", "log-link", "logbuflevel"}


def valid(*args: str) -> options.VerticalOptions:
    opts = options.parse(["--target=deployment/x", "--namespace=ns",
                          f"--default-config={CONFIG}", *args], environ={})
    assert options.validate(opts) == []
    return opts


def test_every_cpva_and_glog_flag_is_accepted() -> None:
    names = {flag.name for flag in options.TABLE.flags}
    assert names >= CPVA_FLAGS | GLOG_FLAGS


def test_cpvas_manifest_command_line_parses_with_pflag_syntax() -> None:
    opts = options.parse(["--target=DaemonSet/Kube-Proxy", "--namespace", "kube-system",
                          "--logtostderr=true", "--poll_period_seconds=0x14", "-v=2",
                          "--config-file=/etc/config/kube-proxy", "--dry-run",
                          "positional-is-ignored"], environ={})
    assert options.validate(opts) == []
    assert opts.patch_target == PatchTarget("DaemonSet", "kube-proxy")  # lower-cased, name too
    assert (opts.namespace, opts.poll_period_seconds, opts.v) == ("kube-system", 20, 2)
    assert opts.dry_run and opts.logtostderr and opts.config_file.endswith("kube-proxy")


def test_defaults_are_cpvas_and_ours_are_off() -> None:
    opts = options.parse([], environ={"MY_NAMESPACE": "from-env", "MY_POD_NAMESPACE": "no"})
    assert opts.namespace == "from-env"  # CPVA's variable, not the autoscaler's
    assert (opts.poll_period_seconds, opts.dry_run, opts.health_port) == (10, False, 0)
    assert (opts.resize_mode, opts.invalid_config, opts.leader_elect) == (
        "template", "refuse", False)


@pytest.mark.parametrize(("argv", "fragment"), [
    (["--bogus"], "unknown flag: --bogus"),
    (["--default-confg={}"], r"unknown flag: --default-confg \(did you mean --default-config\?\)"),
    (["--poll-period-seconds=1.5"], "invalid argument '1.5' for --poll-period-seconds"),
    (["--resize-mode=sideways"], "must be one of template, in-place"),
    (["--invalid-config=ignore"], "must be one of"),
    (["--target"], "flag needs an argument"),
])
def test_usage_errors(argv: list[str], fragment: str) -> None:
    with pytest.raises(UsageError, match=fragment):
        options.parse(argv, environ={})


def test_validation_reports_every_problem_in_cpvas_order_with_its_words() -> None:
    opts = options.parse(["--poll-period-seconds=0"], environ={})
    problems = options.validate(opts)
    assert [p.split(":")[0].split(" Pass")[0] for p in problems] == [
        "--target parameter cannot be empty",
        "--namespace parameter not set and failed to fallback",
        "Either --default-config or --config-file must be specified",
        "--poll-period-seconds cannot be less than 1"]


@pytest.mark.parametrize(("target", "fragment"), [
    ("statefulset/x", "Unknown target format: must be one of deployment/*, daemonset/*, "
                      "or replicaset/* (not case sensitive)."),
    ("deployment", "Unknown target format"),
    ("deployment/", "has no name"),  # CPVA: passes, then every PATCH fails
    ("deployment/a/b", "target format error: deployment/a/b"),  # CPVA: exit 1 after discovery
])
def test_bad_targets(target: str, fragment: str) -> None:
    opts = options.parse([f"--target={target}", "--namespace=ns",
                          f"--default-config={CONFIG}"], environ={})
    problems = options.validate(opts)
    assert len(problems) == 1 and fragment in problems[0]


def test_default_config_is_decoded_at_validation() -> None:
    opts = valid()
    assert opts.default_scale_config is not None and set(opts.default_scale_config) == {"c"}
    bad = options.parse(["--target=deployment/x", "--namespace=ns",
                         '--default-config={"c": {"requests": {"cpu": {"base": true}}}}'],
                        environ={})
    [problem] = options.validate(bad)
    assert problem.startswith("invalid default config: ")
    assert options.validate(options.parse(
        ["--target=deployment/x", "--namespace=ns", "--default-config=null"], environ={})) == []


def test_lease_name_defaults_to_the_target() -> None:
    assert valid().lease_name == "cpvpa-deployment-x"
    assert valid("--leader-elect-lease-name=mine").lease_name == "mine"


def test_leader_election_durations_are_checked() -> None:
    opts = options.parse(["--target=deployment/x", "--namespace=ns", f"--default-config={CONFIG}",
                          "--leader-elect", "--leader-elect-lease-duration=5s",
                          "--leader-elect-renew-deadline=10s"], environ={})
    assert any("lease-duration must be greater" in p for p in options.validate(opts))


def test_help_lists_every_flag_once() -> None:
    text = options.usage("cpvpa")
    for flag in options.TABLE.flags:
        assert text.count(f"--{flag.name} ") + text.count(f"--{flag.name}\n") >= 1
    assert text == usage("cpvpa", options.TABLE)


@pytest.mark.parametrize(("argv", "code"), [
    (["--version"], 0), (["--help"], 0), (["-h"], 0), (["--bogus"], 2),
    (["--target=replicaset/x"], 1),
    # --version wins over invalid flags, as in CPVA (M:36)
    (["--version", "--poll-period-seconds=0"], 0),
])
def test_exit_codes(argv: list[str], code: int, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_vertical(argv) == code
    out, err = capsys.readouterr()
    if code == 1:
        assert err.rstrip().endswith("cpvpa: failed to validate config parameters")
    if argv == ["--help"]:
        assert out.startswith("Usage of cpvpa:") and "--resize-mode" in out


@pytest.mark.parametrize(("argv", "cpva"), [
    (["--target=deployment/x", "--default-config={}"], True),
    (["--config_file=/etc/config/x", "--target=deployment/x"], True),
    (["--configmap=x", "--target=deployment/x", "--default-params={}"], False),
    (["--configmap=x", "--config-file=/x"], False),
    (["--", "--default-config={}"], False),
])
def test_the_autoscalers_entry_point_recognises_a_cpva_command_line(
        argv: list[str], cpva: bool) -> None:
    assert _is_cpva_command_line(argv) is cpva


def test_default_config_json_is_carried_verbatim() -> None:
    text = json.dumps({"c": {"limits": {"memory": {"base": "1Gi"}}}}, indent=2)
    assert valid(f"--default-config={text}").default_config == text


def test_options_take_every_field_by_keyword_with_its_default() -> None:
    """VerticalOptions' constructor takes every field by keyword, the groups' included,
    with glog's logtostderr default."""
    opts = options.VerticalOptions(namespace="ns", kubeconfig="kc")
    assert (opts.namespace, opts.kubeconfig, opts.logtostderr, opts.v) == ("ns", "kc", False,
                                                                           0)
    assert (opts.leader_elect, opts.leader_elect_lease_duration, opts.resize_mode,
            opts.invalid_config, opts.health_port) == (False, 15.0, "template", "refuse", 0)
    assert (opts.patch_target, opts.patch_targets, opts.default_scale_configs) == (None, (), ())
    opts = options.VerticalOptions(v=4, leader_elect_lease_name="l", stderrthreshold=0)
    assert (opts.v, opts.lease_name, opts.stderrthreshold) == (4, "l", 0)
