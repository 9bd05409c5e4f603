"""``--update-configmap-from-defaults`` through the poll loop: what is created, when the
data follows new defaults (a restart with other ``--default-params``), when it is left
alone, and what the metrics, Events and logs say."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cpa import logs
from cpa.horizontal.cpa_flags import parse_args, validate
from cpa.horizontal.daemon.cpa_events import EventRecorder
from cpa.horizontal.daemon.cpa_loop import Autoscaler
from cpa.horizontal.daemon.cpa_main import loop_config
from cpa.horizontal.daemon.cpa_metrics import Metrics
from cpa.kube.api import ApiError
from cpa.kube.configmap import (
    DEFAULTS_ANNOTATION,
    SUPERSEDED_ANNOTATION,
    DefaultsState,
    data_hash,
)
from cpa.nodes.counts import ClusterCounts
from tests.fakes import FakeApi
from tests.unit.horizontal.daemon.test_metrics import value

CM = "/api/v1/namespaces/kube-system/configmaps/kube-dns-autoscaler"
COREDNS = "/apis/apps/v1/namespaces/kube-system/deployments/coredns/scale"
OLD = '{"linear":{"nodesPerReplica":4}}'
NEW = '{"linear":{"nodesPerReplica":2}}'
OLD_DATA = {"linear": '{"nodesPerReplica":4}'}
NEW_DATA = {"linear": '{"nodesPerReplica":2}'}


def make(api: FakeApi, defaults: str, *extra: str) -> Autoscaler:
    opts = parse_args(["--namespace=kube-system", "--configmap=kube-dns-autoscaler",
                       "--target=deployment/coredns", f"--default-params={defaults}",
                       *extra], {})
    assert validate(opts) == []
    return Autoscaler(loop_config(opts), api, lambda: ClusterCounts(16, 16, 16, 16))


FOLLOW = "--update-configmap-from-defaults"


def events(capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in capsys.readouterr().err.splitlines()
            if line.startswith("{")]


@pytest.fixture(autouse=True)
def _json_logs() -> Any:
    logs.configure(0, "json")
    yield
    logs.configure(0, "text")


def test_without_the_flag_the_configmap_is_upstreams_and_never_updated() -> None:
    api = FakeApi()
    api.add_scale(COREDNS, 1)
    assert make(api, OLD).poll_once().error is None
    assert api.objects[CM]["metadata"].keys() == {"name", "namespace", "resourceVersion"}
    result = make(api, NEW).poll_once()  # a restart with other defaults
    assert result.error is None and result.configmap_defaults is None
    assert api.objects[CM]["data"] == OLD_DATA and api.replicas(COREDNS) == 4
    assert ("PUT", CM) not in api.calls


def test_new_defaults_reach_an_unedited_configmap_after_a_restart(
        capsys: pytest.CaptureFixture[str]) -> None:
    api = FakeApi()
    api.add_scale(COREDNS, 1)
    first = make(api, OLD, FOLLOW).poll_once()
    assert first.error is None and api.replicas(COREDNS) == 4
    assert api.objects[CM]["metadata"]["annotations"] == {DEFAULTS_ANNOTATION: data_hash(OLD_DATA)}
    assert first.configmap_defaults is not None
    assert first.configmap_defaults.state is DefaultsState.CURRENT

    restarted = make(api, NEW, FOLLOW)
    result = restarted.poll_once()
    assert result.error is None and api.replicas(COREDNS) == 8
    assert api.objects[CM]["data"] == NEW_DATA
    assert api.objects[CM]["metadata"]["annotations"] == {
        DEFAULTS_ANNOTATION: data_hash(NEW_DATA), SUPERSEDED_ANNOTATION: data_hash(OLD_DATA)}
    assert result.configmap_defaults is not None
    assert result.configmap_defaults.replaced == OLD_DATA
    assert result.params_version == api.objects[CM]["metadata"]["resourceVersion"]
    puts = api.calls.count(("PUT", CM))
    for _ in range(3):  # in step now: no more writes
        assert restarted.poll_once().configmap_defaults.replaced is None  # type: ignore[union-attr]
    assert api.calls.count(("PUT", CM)) == puts == 1
    updated = [e for e in events(capsys) if e["event"] == "configmap.defaults_updated"]
    assert len(updated) == 1 and updated[0]["old"] == OLD_DATA and updated[0]["new"] == NEW_DATA


@pytest.mark.parametrize("how", ["edited", "no annotation"])
def test_an_edited_or_unannotated_configmap_is_left_alone_and_said_so_once(
        capsys: pytest.CaptureFixture[str], how: str) -> None:
    api = FakeApi()
    api.add_scale(COREDNS, 1)
    if how == "edited":
        make(api, OLD, FOLLOW).poll_once()
        api.objects[CM]["data"] = {"linear": '{"nodesPerReplica":16}'}
        api.put(CM, api.objects[CM])
    else:  # created by upstream (or by us without the flag)
        make(api, OLD).poll_once()
    a = make(api, NEW, FOLLOW)
    metrics = Metrics([], follow_defaults=True)
    for _ in range(3):
        result = a.poll_once()
        metrics.observe(result)
        assert result.error is None
        assert result.configmap_defaults is not None
        assert result.configmap_defaults.state is DefaultsState.DIVERGED
    assert ("PUT", CM) not in api.calls
    assert api.objects[CM]["data"] != NEW_DATA
    text = metrics.exposition().decode()
    assert value(text, "cpa_configmap_defaults_diverged") == 1
    assert value(text, "cpa_configmap_defaults_updates_total") == 0
    said = [e for e in events(capsys) if e["event"] == "configmap.defaults_diverged"]
    assert len(said) == 1
    assert ("edited since" in said[0]["reason"]) == (how == "edited")
    assert ("no " + DEFAULTS_ANNOTATION in said[0]["reason"]) == (how == "no annotation")


def test_two_autoscalers_with_other_defaults_write_the_newer_ones_once(
        capsys: pytest.CaptureFixture[str]) -> None:
    """A rolling update: the old Pod and the new one poll in turn. The new defaults are
    written once; the old Pod, finding its defaults superseded, leaves them alone."""
    api = FakeApi()
    api.add_scale(COREDNS, 1)
    old = make(api, OLD, FOLLOW)
    assert old.poll_once().error is None and api.replicas(COREDNS) == 4
    new = make(api, NEW, FOLLOW)
    metrics = Metrics([], follow_defaults=True)
    replicas = []
    for _ in range(10):
        for a in (new, old):
            result = a.poll_once()
            assert result.error is None
            replicas.append(api.replicas(COREDNS))
        metrics.observe(result)  # the old Pod's
    assert api.calls.count(("PUT", CM)) == 1 and api.objects[CM]["data"] == NEW_DATA
    assert set(replicas) == {8}
    assert result.configmap_defaults is not None
    assert result.configmap_defaults.state is DefaultsState.SUPERSEDED
    assert value(metrics.exposition().decode(), "cpa_configmap_defaults_diverged") == 1
    said = [e for e in events(capsys) if e["event"] == "configmap.defaults_superseded"]
    assert len(said) == 1 and said[0]["data"] == NEW_DATA
    assert "delete the ConfigMap" in said[0]["hint"]


def test_a_rollback_keeps_the_newer_defaults_until_the_configmap_is_deleted() -> None:
    api = FakeApi()
    api.add_scale(COREDNS, 1)
    make(api, OLD, FOLLOW).poll_once()
    make(api, NEW, FOLLOW).poll_once()
    rolled_back = make(api, OLD, FOLLOW)
    assert rolled_back.poll_once().error is None
    assert api.objects[CM]["data"] == NEW_DATA and api.replicas(COREDNS) == 8
    del api.objects[CM]  # the operator's way back to the old defaults
    assert rolled_back.poll_once().error is None
    assert api.objects[CM]["data"] == OLD_DATA and api.replicas(COREDNS) == 4
    assert api.objects[CM]["metadata"]["annotations"] == {DEFAULTS_ANNOTATION: data_hash(OLD_DATA)}
    # ... and a later upgrade reaches it again, once.
    make(api, NEW, FOLLOW).poll_once()
    assert api.objects[CM]["data"] == NEW_DATA and api.calls.count(("PUT", CM)) == 2


def test_a_third_version_supersedes_both(capsys: pytest.CaptureFixture[str]) -> None:
    api = FakeApi()
    api.add_scale(COREDNS, 1)
    third = '{"linear":{"nodesPerReplica":1}}'
    versions = [make(api, defaults, FOLLOW) for defaults in (OLD, NEW, third)]
    for _ in range(3):
        for a in versions:
            assert a.poll_once().error is None
    assert api.calls.count(("PUT", CM)) == 2 and api.replicas(COREDNS) == 16
    assert api.objects[CM]["metadata"]["annotations"][SUPERSEDED_ANNOTATION] == \
        f"{data_hash(NEW_DATA)},{data_hash(OLD_DATA)}"
    said = [e for e in events(capsys) if e["event"] == "configmap.defaults_superseded"]
    assert len(said) == 2  # the first two, once each


def test_an_immutable_configmap_is_left_alone_with_its_data_in_force(
        capsys: pytest.CaptureFixture[str]) -> None:
    api = FakeApi()
    api.add_scale(COREDNS, 1)
    make(api, OLD, FOLLOW).poll_once()  # unedited, annotated: would be updated ...
    api.objects[CM]["immutable"] = True  # ... but an operator froze it
    api.put(CM, api.objects[CM])
    a = make(api, NEW, FOLLOW)
    for _ in range(3):
        result = a.poll_once()
        assert result.error is None and api.replicas(COREDNS) == 4
        assert result.configmap_defaults is not None
        assert result.configmap_defaults.state is DefaultsState.DIVERGED
    assert ("PUT", CM) not in api.calls
    (said,) = [e for e in events(capsys) if e["event"] == "configmap.defaults_diverged"]
    assert said["reason"].startswith("immutable: true")


def test_the_update_is_counted_and_recorded_as_an_event() -> None:
    api = FakeApi()
    api.add_scale(COREDNS, 1)
    make(api, OLD, FOLLOW).poll_once()
    metrics = Metrics([], follow_defaults=True)
    recorder = EventRecorder(api, "kube-system", "kube-dns-autoscaler", "pod-1")
    result = make(api, NEW, FOLLOW).poll_once()
    metrics.observe(result)
    recorder.observe(result)
    text = metrics.exposition().decode()
    assert value(text, "cpa_configmap_defaults_updates_total") == 1
    assert value(text, "cpa_configmap_defaults_diverged") == 0
    (event,) = [body for path, body in api.created
                if path.endswith("/events") and body["reason"] != "Scaled"]
    assert event["reason"] == "DefaultsApplied" and event["type"] == "Normal"
    assert event["regarding"]["kind"] == "ConfigMap"
    assert event["regarding"]["name"] == "kube-dns-autoscaler"


def test_without_the_flag_there_are_no_defaults_series() -> None:
    assert "cpa_configmap_defaults" not in Metrics([]).exposition().decode()


def test_a_403_fails_the_poll_naming_the_rule_and_scales_nothing() -> None:
    api = FakeApi()
    api.add_scale(COREDNS, 1)
    make(api, OLD, FOLLOW).poll_once()
    api.fail_writes = ApiError(403, "Forbidden", 'configmaps "kube-dns-autoscaler" is '
                               'forbidden: User "x" cannot update resource "configmaps"')
    result = make(api, NEW, FOLLOW).poll_once()
    assert result.error is not None
    assert "cannot update ConfigMap kube-system/kube-dns-autoscaler" in result.error
    assert 'verbs [\\"update\\"]' in result.error or 'verbs ["update"]' in result.error
    assert api.replicas(COREDNS) == 4 and api.objects[CM]["data"] == OLD_DATA


def test_an_edit_racing_the_update_wins() -> None:
    api = FakeApi()
    api.add_scale(COREDNS, 1)
    make(api, OLD, FOLLOW).poll_once()
    api.conflicts[CM] = 1  # someone writes between our GET and our PUT
    a = make(api, NEW, FOLLOW)
    result = a.poll_once()
    assert result.error is None and api.objects[CM]["data"] == OLD_DATA
    # The concurrent write kept the data, so it is still ours and unedited: next poll.
    assert a.poll_once().error is None and api.objects[CM]["data"] == NEW_DATA


def test_a_dry_run_updates_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    api = FakeApi()
    api.add_scale(COREDNS, 1)
    make(api, OLD, FOLLOW).poll_once()
    a = make(api, NEW, FOLLOW, "--dry-run")
    for _ in range(2):
        assert a.poll_once().error is None
    assert api.objects[CM]["data"] == OLD_DATA and ("PUT", CM) not in api.calls
    assert [e["event"] for e in events(capsys)].count("configmap.would_update") == 1


@pytest.mark.parametrize(("argv", "fragment"), [
    ([FOLLOW], "--update-configmap-from-defaults needs --default-params"),
    (["--config-dir=/p", f"--default-params={OLD}"], "--default-params cannot be used with"),
    (["--config-dir=/p", FOLLOW, f"--default-params={OLD}"],
     "--update-configmap-from-defaults cannot be used with --config-dir"),
    (["--config-dir=/p", "--leader-elect"], "needs --leader-elect-lease-name"),
])
def test_flag_combinations_refused(argv: list[str], fragment: str) -> None:
    base = ["--namespace=a", "--target=deployment/c"]
    if not any(a.startswith("--config-dir") for a in argv):
        base.append("--configmap=b")
    problems = validate(parse_args([*base, *argv], {}))
    assert any(fragment in p for p in problems), problems


def test_config_dir_makes_configmap_optional() -> None:
    assert validate(parse_args(["--namespace=a", "--target=deployment/c",
                                "--config-dir=/p"], {})) == []
    assert any("--configmap" in p for p in validate(parse_args(
        ["--namespace=a", "--target=deployment/c"], {})))


def managed(*managers: str) -> list[dict[str, Any]]:
    return [{"manager": m, "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:data": {".": {}, "f:linear": {}}}} for m in managers]


@pytest.mark.parametrize(("managers", "follows"), [
    (("cluster-proportional-autoscaler",), True),
    (("cluster-proportional-autoscaler", "kubectl-edit"), False),
])
def test_upstreams_configmap_is_judged_by_who_set_its_data(
        capsys: pytest.CaptureFixture[str], managers: tuple[str, ...], follows: bool) -> None:
    """No annotation: managedFields say whether anyone but an autoscaler set the data."""
    api = FakeApi()
    api.add_scale(COREDNS, 1)
    api.put(CM, {"kind": "ConfigMap", "metadata": {"managedFields": managed(*managers)},
                 "data": OLD_DATA})
    result = make(api, NEW, FOLLOW).poll_once()
    assert result.error is None and result.configmap_defaults is not None
    if follows:
        assert api.objects[CM]["data"] == NEW_DATA
        assert api.objects[CM]["metadata"]["annotations"][DEFAULTS_ANNOTATION] == data_hash(
            NEW_DATA)
        assert result.configmap_defaults.replaced == OLD_DATA
    else:
        assert ("PUT", CM) not in api.calls and api.objects[CM]["data"] == OLD_DATA
        (said,) = [e for e in events(capsys) if e["event"] == "configmap.defaults_diverged"]
        assert "set by kubectl-edit (not an autoscaler" in said["reason"]
