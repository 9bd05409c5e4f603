"""The poll loop's rules, against an in-memory fake of the few API calls it makes.

This is a unit test of the loop's logic only; the same rules are checked end to end against
a real kube-apiserver in tests/integration.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from cpa.horizontal.cpa_flags import parse_args, validate
from cpa.horizontal.daemon.cpa_loop import Autoscaler
from cpa.horizontal.daemon.cpa_main import loop_config
from cpa.nodes.counts import ClusterCounts
from cpa.objects.counters import ObjectCounters
from cpa.objects.watch import Kind
from cpa.runtime.health import HealthState
from tests.fakes import FakeApi

DEFAULTS = ('{"linear":{"coresPerReplica":256,"nodesPerReplica":16,'
            '"preventSinglePointFailure":true,"includeUnschedulableNodes":true}}')
CM = "/api/v1/namespaces/kube-system/configmaps/kube-dns-autoscaler"


def scale_path(kind: str, name: str) -> str:
    group = "/api/v1" if kind == "replicationcontrollers" else "/apis/apps/v1"
    return f"{group}/namespaces/kube-system/{kind}/{name}/scale"


COREDNS = scale_path("deployments", "coredns")


ONE_PER_NODE = {"linear": '{"nodesPerReplica":1}'}


def coredns_api(data: dict[str, str] | None = None, replicas: int = 1) -> FakeApi:
    """The fake API holding coredns's Scale at ``replicas`` and, given ``data``, the
    ConfigMap: what nearly every test here starts from."""
    api = FakeApi()
    api.add_scale(COREDNS, replicas)
    if data is not None:
        api.set_configmap(CM, data)
    return api


def make(api: FakeApi, counts: ClusterCounts | Callable[[], ClusterCounts], *extra: str,
         target: str = "Deployment/coredns",
         clock: Callable[[], float] = time.monotonic, **kw: Any) -> Autoscaler:
    opts = parse_args(["--namespace=kube-system", "--configmap=kube-dns-autoscaler",
                       f"--target={target}", *extra], {})
    assert validate(opts) == []
    source = counts if callable(counts) else (lambda: counts)
    return Autoscaler(loop_config(opts), api, source, clock=clock, **kw)


def events(capsys: pytest.CaptureFixture[str], name: str) -> list[dict[str, Any]]:
    """The JSON log events named ``name`` written to stderr so far (the daemon's format)."""
    out = []
    for line in capsys.readouterr().err.splitlines():
        if line.startswith("{"):
            doc = json.loads(line)
            if doc["event"] == name:
                out.append(doc)
    return out


def counts(nodes: int, cores: int, sched_nodes: int | None = None,
           sched_cores: int | None = None) -> ClusterCounts:
    return ClusterCounts(nodes, cores, nodes if sched_nodes is None else sched_nodes,
                         cores if sched_cores is None else sched_cores)


def test_seed_walkthrough_creates_configmap_and_scales() -> None:
    api = coredns_api()
    a = make(api, counts(16, 128), f"--default-params={DEFAULTS}")
    result = a.poll_once()
    assert result.error is None
    assert api.objects[CM]["data"] == {
        "linear": '{"coresPerReplica":256,"includeUnschedulableNodes":true,'
                  '"nodesPerReplica":16,"preventSinglePointFailure":true}'}
    assert api.objects[COREDNS]["spec"]["replicas"] == 2


def test_no_write_when_replicas_already_right() -> None:
    api = coredns_api(replicas=2)
    a = make(api, counts(16, 128), f"--default-params={DEFAULTS}")
    a.poll_once()
    api.calls.clear()
    a.poll_once()
    assert api.calls == [("GET", CM), ("GET", COREDNS)]  # 1 ConfigMap GET + 1 scale GET


def test_missing_configmap_without_defaults_fails_the_poll() -> None:
    api = coredns_api()
    health = HealthState()
    opts = parse_args(["--namespace=kube-system", "--configmap=kube-dns-autoscaler",
                       "--target=deployment/coredns"], {})
    assert validate(opts) == []
    a = Autoscaler(loop_config(opts), api, lambda: counts(3, 3), observers=[health.observe])
    result = a.poll_once()
    assert result.error is not None and "--default-params" in result.error
    assert health.error == result.error
    assert api.objects[COREDNS]["spec"]["replicas"] == 1


def test_deleted_configmap_is_recreated() -> None:
    api = coredns_api()
    a = make(api, counts(16, 128), f"--default-params={DEFAULTS}")
    a.poll_once()
    del api.objects[CM]
    assert a.poll_once().error is None
    assert CM in api.objects


def test_get_error_other_than_not_found_does_not_create() -> None:
    api = FakeApi()
    api.down = True
    a = make(api, counts(1, 1), f"--default-params={DEFAULTS}")
    assert a.poll_once().error
    assert ("POST", "/api/v1/namespaces/kube-system/configmaps") not in api.calls


@pytest.mark.parametrize("data,fragment", [
    ({"linear": "{bad json"}, "linear"),
    ({"linear": '{"nodesPerReplica":1}', "ladder": '{"nodesToReplicas":[[1,1]]}'}, "one"),
    ({"bogus": "{}"}, "bogus"),
    ({}, "key"),
])
def test_invalid_configmap_fails_and_scales_nothing(data: dict[str, str], fragment: str) -> None:
    api = coredns_api(data)
    a = make(api, counts(10, 10))
    result = a.poll_once()
    assert result.error is not None and fragment in result.error
    assert api.objects[COREDNS]["spec"]["replicas"] == 1
    # fixed -> scaling resumes on the next poll
    api.set_configmap(CM, {"linear": '{"nodesPerReplica":2}'})
    assert a.poll_once().error is None
    assert api.objects[COREDNS]["spec"]["replicas"] == 5


def test_params_reparsed_only_on_new_resource_version(monkeypatch: pytest.MonkeyPatch) -> None:
    import cpa.horizontal.daemon.paramscache as mod
    from cpa.horizontal.decide.modes.registry import parse_configmap_data as real

    calls: list[Any] = []

    def counting(data: Any) -> Any:
        calls.append(data)
        return real(data)

    monkeypatch.setattr(mod, "parse_configmap_data", counting)
    api = coredns_api({"linear": '{"nodesPerReplica":2}'})
    a = make(api, counts(10, 10))
    for _ in range(3):
        a.poll_once()
    assert len(calls) == 1
    api.set_configmap(CM, {"ladder": '{"nodesToReplicas":[[1,1],[5,7]]}'})  # mode switch
    a.poll_once()
    assert len(calls) == 2
    assert api.objects[COREDNS]["spec"]["replicas"] == 7


def test_the_free_heap_is_given_back_after_the_first_poll_then_every_30th(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """malloc_trim walks the heap's free chunks, work a steady poll has no use for: it runs
    after the first poll (the node list's peak), every TRIM_EVERY_POLLS polls, and, with
    the garbage collected, for GIVE_BACK_POLLS polls after a large version came or went."""
    import cpa.horizontal.daemon.paramscache as mod

    api = coredns_api({"linear": '{"nodesPerReplica":2}'})
    a = make(api, counts(10, 10))
    trims: list[tuple[int, bool]] = []
    monkeypatch.setattr(mod, "return_free_memory",
                        lambda collect=False: trims.append((a.polls, collect)))
    every = mod.TRIM_EVERY_POLLS
    for _ in range(2 * every + 1):
        assert a.poll_once().error is None
    assert trims == [(1, False), (1 + every, False), (1 + 2 * every, False)]
    trims.clear()
    steps = ",".join(f"[{n},{n}]" for n in range(1, 12_000))  # over LARGE_PARAMS_BYTES
    api.set_configmap(CM, {"ladder": f'{{"nodesToReplicas":[{steps}]}}'})
    for _ in range(mod.GIVE_BACK_POLLS + every):
        assert a.poll_once().error is None
    start = 2 * every + 2
    assert trims == [*[(start + i, True) for i in range(mod.GIVE_BACK_POLLS)],
                     (start + mod.GIVE_BACK_POLLS - 1 + every, False)]


def test_every_target_is_attempted_and_failure_reported() -> None:
    api = FakeApi()
    paths = [scale_path("deployments", "a"), scale_path("replicasets", "b"),
             scale_path("replicationcontrollers", "c"), scale_path("statefulsets", "d")]
    for p in paths:
        api.add_scale(p, 1)
    del api.objects[paths[1]]  # replicaset/b is missing
    api.set_configmap(CM, ONE_PER_NODE)
    a = make(api, counts(3, 3),
             target="deployment/a,replicaset/b,replicationcontroller/c,statefulset/d")
    result = a.poll_once()
    assert result.error is not None and "replicaset/b" in result.error
    for p in (paths[0], paths[2], paths[3]):
        assert api.objects[p]["spec"]["replicas"] == 3


def test_conflict_is_retried_once_with_a_fresh_get() -> None:
    api = coredns_api(ONE_PER_NODE)
    api.conflicts[COREDNS] = 1
    a = make(api, counts(4, 4))
    assert a.poll_once().error is None
    assert api.objects[COREDNS]["spec"]["replicas"] == 4
    assert api.calls.count(("GET", COREDNS)) == 2


def test_two_conflicts_fail_the_poll() -> None:
    api = coredns_api(ONE_PER_NODE)
    api.conflicts[COREDNS] = 2
    result = make(api, counts(4, 4)).poll_once()
    assert result.error is not None and "coredns" in result.error


def test_max_sync_failures_exits_1() -> None:
    api = FakeApi()
    api.down = True
    clock = [0.0]
    a = make(api, counts(1, 1), "--max-sync-failures=3", "--poll-period-seconds=1",
             clock=lambda: clock[0])

    class InstantStop(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            clock[0] += timeout or 0
            return False

    assert a.run(InstantStop()) == 1
    assert a.polls == 3


def test_slow_polls_do_not_pile_up() -> None:
    api = coredns_api(ONE_PER_NODE)
    clock = [0.0]
    starts: list[float] = []

    def slow_counts() -> ClusterCounts:
        starts.append(clock[0])
        clock[0] += 25.0  # each poll takes 2.5 periods
        return counts(1, 1)

    a = make(api, slow_counts, "--poll-period-seconds=10", clock=lambda: clock[0])
    waits: list[float] = []

    class Stop(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            waits.append(timeout or 0)
            clock[0] += timeout or 0
            return len(starts) >= 4

    a.run(Stop())
    assert starts == [0.0, 30.0, 60.0, 90.0]  # next boundary, never back-to-back
    assert all(w > 0 for w in waits)


def test_stop_ends_the_loop_with_0() -> None:
    """A stop (SIGTERM) while the loop waits for the next period ends it at once, with 0."""
    api = coredns_api(ONE_PER_NODE)
    stop = threading.Event()
    polled = threading.Event()
    a = make(api, counts(1, 1), "--poll-period-seconds=3600",
             observers=[lambda _result: polled.set()])
    codes: list[int] = []
    loop = threading.Thread(target=lambda: codes.append(a.run(stop)))
    loop.start()
    assert polled.wait(30), "the first poll runs at once"
    stop.set()  # the loop now waits for a boundary an hour away
    loop.join(30)
    assert codes == [0] and a.polls == 1


def test_a_follower_reports_instead_of_polling() -> None:
    """Under --leader-elect a follower does not poll; on each period boundary it reports
    (its Lease's problem, if any: cpa.runtime.election.Election.follower_report)."""
    api = coredns_api(ONE_PER_NODE)
    stop = threading.Event()
    reports: list[int] = []

    def report() -> None:
        reports.append(1)
        if len(reports) == 2:
            stop.set()

    a = make(api, counts(1, 1), "--poll-period-seconds=1", may_write=lambda: False,
             on_follower=report)
    assert a.run(stop) == 0
    assert reports == [1, 1] and a.polls == 0 and api.replicas(COREDNS) == 1


# --------------------------------------------------------- fail closed; int32 range


def test_unexpected_parse_error_fails_closed_until_the_configmap_changes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Any exception while reading a new version makes it invalid on every poll; the
    previous parameters never stay in force (they did: one failed poll, then the old
    parameters were used again with /last-poll 200)."""
    import cpa.horizontal.daemon.paramscache as autoscaler_module
    from cpa.horizontal.decide.modes.registry import parse_configmap_data as real

    api = coredns_api(ONE_PER_NODE)
    a = make(api, counts(5, 5))
    assert a.poll_once().error is None
    assert api.objects[COREDNS]["spec"]["replicas"] == 5


    def explode(data: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(autoscaler_module, "parse_configmap_data", explode)
    api.set_configmap(CM, {"linear": '{"nodesPerReplica":2}'})
    a._counts = lambda: counts(9, 9)  # a change the old parameters would act on
    for _ in range(3):
        result = a.poll_once()
        assert result.error is not None
        assert "unexpected RuntimeError while parsing it: boom" in result.error
        assert "resourceVersion" in result.error
    assert api.objects[COREDNS]["spec"]["replicas"] == 5, "old parameters stayed in force"

    monkeypatch.setattr(autoscaler_module, "parse_configmap_data", real)
    api.set_configmap(CM, {"linear": '{"nodesPerReplica":3}'})
    assert a.poll_once().error is None
    assert api.objects[COREDNS]["spec"]["replicas"] == 3


@pytest.mark.parametrize("data", [
    {"linear": '{"nodesPerReplica":16,"min":2147483648}'},
    {"ladder": '{"nodesToReplicas":[[0,4611686018427387904]]}'},
    {"linear": '{"coresPerReplica":1e-320}'},
])
def test_replicas_beyond_int32_write_nothing(data: dict[str, str]) -> None:
    api = coredns_api(data, replicas=3)
    a = make(api, counts(3, 12))
    health = HealthState()
    a.add_observer(health.observe)
    result = a.poll_once()
    assert result.error is not None and "more than a scale subresource can hold" in result.error
    assert ("PUT", COREDNS) not in api.calls
    assert api.objects[COREDNS]["spec"]["replicas"] == 3
    assert health.error == result.error


@pytest.mark.parametrize("literal", ["9" * 4301, "-" + "9" * 5000, "1" + "0" * 30])
def test_huge_integer_literal_is_an_invalid_configmap_every_poll(literal: str) -> None:
    api = coredns_api({"linear": f'{{"nodesPerReplica":1,"min":{literal}}}'}, replicas=2)
    a = make(api, counts(3, 3))
    for _ in range(2):
        result = a.poll_once()
        assert result.error is not None and "out of range" in result.error
        assert "unexpected" not in result.error
    assert api.objects[COREDNS]["spec"]["replicas"] == 2


# ------------------------------------------------------------- observers; stale counts


def test_observers_get_the_whole_poll_and_cannot_break_it() -> None:
    api = coredns_api({"linear": '{"nodesPerReplica":2}'})
    seen: list[Any] = []

    def broken(result: Any) -> None:
        raise RuntimeError("observer bug")

    a = make(api, counts(6, 6), observers=[broken, seen.append])
    result = a.poll_once()
    assert result.ok and seen == [result]
    assert result.counts == counts(6, 6)
    assert result.params is not None and result.params_version is not None
    assert result.decision is not None and result.decision.replicas == 3
    assert [s.replicas for s in result.scales] == [3]
    assert result.duration >= 0
    assert api.objects[COREDNS]["spec"]["replicas"] == 3


def test_stale_counts_are_reported_and_the_poll_goes_on() -> None:
    from cpa.nodes.watch import WatchStatus

    clock = [1000.0]
    status = [WatchStatus(True, True, 1000.0, None, 0)]
    api = coredns_api(ONE_PER_NODE)
    health = HealthState()
    a = make(api, counts(4, 4), "--poll-period-seconds=10", clock=lambda: clock[0],
             observers=[health.observe], watch_status=lambda: status[0])
    assert a.poll_once().stale is None and health.error is None

    # The watch went down at t=1000 with a reason; within 3 periods it is not yet "stale".
    status[0] = WatchStatus(True, False, 1000.0, "connection refused", 1)
    clock[0] = 1030.0
    assert a.poll_once().stale is None
    clock[0] = 1031.0
    result = a.poll_once()
    assert result.ok, "stale counts are not a failed poll (--max-sync-failures ignores them)"
    assert result.stale is not None
    assert "down for 31s (connection refused)" in result.stale
    assert health.error == result.stale
    assert a.consecutive_failures == 0
    assert api.objects[COREDNS]["spec"]["replicas"] == 4  # decided on the last counts

    status[0] = WatchStatus(True, True, 1040.0, None, 1)
    clock[0] = 1041.0
    assert a.poll_once().stale is None and health.error is None


def test_another_writer_is_warned_once_per_episode_and_counted(
        capsys: pytest.CaptureFixture[str]) -> None:
    from cpa import logs

    logs.configure(0, "json")
    api = coredns_api(ONE_PER_NODE)
    a = make(api, counts(3, 3))
    assert a.poll_once().overwritten == []  # we write 3
    assert a.poll_once().overwritten == []  # 3 is still there: nothing to say
    overwrites = []
    for other in (7, 8):  # an HPA, a person, a second autoscaler...
        api.objects[COREDNS]["spec"]["replicas"] = other
        result = a.poll_once()
        overwrites += result.overwritten
        assert api.objects[COREDNS]["spec"]["replicas"] == 3  # upstream's behaviour: undo
    assert [(str(o.target), o.ours, o.found) for o in overwrites] == [
        ("deployment/coredns", 3, 7), ("deployment/coredns", 3, 8)]
    assert a.poll_once().overwritten == []  # the episode ends
    api.objects[COREDNS]["spec"]["replicas"] = 9
    assert len(a.poll_once().overwritten) == 1  # a new episode
    events = [json.loads(line)["event"] for line in capsys.readouterr().err.splitlines()
              if line.startswith("{")]
    assert events.count("scale.overwritten") == 2
    assert events.count("scale.overwritten.ended") == 1


def test_a_target_deleted_and_created_again_is_not_another_writer() -> None:
    api = FakeApi()
    api.put(COREDNS, {"kind": "Scale", "metadata": {"uid": "first"}, "spec": {"replicas": 1}})
    api.set_configmap(CM, ONE_PER_NODE)
    a = make(api, counts(3, 3))
    a.poll_once()  # we write 3 on the first object
    api.put(COREDNS, {"kind": "Scale", "metadata": {"uid": "second"},
                      "spec": {"replicas": 1}})  # deleted, created again from its manifest
    result = a.poll_once()
    assert result.overwritten == [] and result.scales[0].uid == "second"
    assert api.objects[COREDNS]["spec"]["replicas"] == 3
    api.objects[COREDNS]["spec"]["replicas"] = 5  # but the same object changed is
    assert len(a.poll_once().overwritten) == 1


def test_the_parameters_counting_policy_reaches_the_node_store() -> None:
    from cpa.nodes.counts import DEFAULT_POLICY, CountingPolicy

    api = coredns_api({"linear": '{"coresPerReplica":1,"excludeNodesWithTaints":["vk"]}'})
    policies: list[Any] = []
    current = [counts(3, 20012)]

    def count_by(policy: Any) -> bool:
        changed = not policies or policies[-1] != policy
        policies.append(policy)
        if changed:
            current[0] = counts(2, 12) if policy != DEFAULT_POLICY else counts(3, 20012)
        return changed

    a = make(api, lambda: current[0], count_by=count_by)
    result = a.poll_once()
    assert policies == [CountingPolicy(frozenset({"vk"}))]
    assert result.counts == counts(2, 12), "counted again under the new policy"
    assert api.objects[COREDNS]["spec"]["replicas"] == 12
    api.set_configmap(CM, {"linear": '{"coresPerReplica":1}'})
    a.poll_once()
    assert policies[-1] == DEFAULT_POLICY
    assert api.objects[COREDNS]["spec"]["replicas"] == 20012


class _Recorder:
    """Stands in for the loop's logger: keeps (event, fields) of every call."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def __getattr__(self, _level: str) -> Callable[..., None]:
        def record(event: str, **fields: Any) -> None:
            self.events.append((event, fields))
        return record

    def named(self, event: str) -> list[dict[str, Any]]:
        return [fields for name, fields in self.events if name == event]


def test_mode_changed_names_the_mode_in_force_before_an_invalid_version(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from cpa import logs

    monkeypatch.setattr(logs, "_verbosity", 1)
    api = coredns_api()
    a = make(api, counts(16, 64))
    log = _Recorder()
    a._params._log = log
    api.set_configmap(CM, {"linear": '{"nodesPerReplica":16}'})
    assert a.poll_once().ok
    api.set_configmap(CM, {"linear": '{"nodesPerReplica":-1}'})
    assert not a.poll_once().ok
    api.set_configmap(CM, {"linear": '{"nodesPerReplica":8}'})
    assert a.poll_once().ok
    # The same mode back after an invalid version is no change of mode.
    assert log.named("mode.changed") == [{"mode": "linear", "previous": None}]
    api.set_configmap(CM, {"ladder": "{"})
    assert not a.poll_once().ok
    api.set_configmap(CM, {"ladder": '{"nodesToReplicas":[[1,3]]}'})
    assert a.poll_once().ok
    assert log.named("mode.changed")[1:] == [{"mode": "ladder", "previous": "linear"}]


# --------------------------------------------------------- --react-to-node-changes


def _reacting(api: FakeApi, source: Callable[[], ClusterCounts], *extra: str,
              **kw: Any) -> Autoscaler:
    """A loop whose period's next poll is an hour away: any second poll is an early one."""
    return make(api, source, "--react-to-node-changes", "--poll-period-seconds=3600", *extra,
                **kw)


def _running(a: Autoscaler) -> tuple[threading.Event, threading.Thread, list[int]]:
    stop = threading.Event()
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(a.run(stop)), daemon=True)
    thread.start()
    return stop, thread, codes


def _polled_once(a: Autoscaler) -> tuple[threading.Event, threading.Thread, list[int]]:
    """The loop running, past its first (ordinary) poll: what comes next is early."""
    running = _running(a)
    _until("the first poll", lambda: a.polls == 1)
    return running


def _until(what: str, condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


def _stopped(a: Autoscaler, stop: threading.Event, thread: threading.Thread,
             codes: list[int]) -> None:
    stop.set()
    a.interrupt()
    thread.join(30)
    assert codes == [0]


def test_react_polls_early_when_the_counts_change_the_decision() -> None:
    api = coredns_api(ONE_PER_NODE)
    now = [counts(3, 3)]
    a = _reacting(api, lambda: now[0])
    stop, thread, codes = _running(a)
    _until("the first poll", lambda: api.replicas(COREDNS) == 3)
    now[0] = counts(5, 5)
    a.nodes_changed()
    _until("the early poll", lambda: api.replicas(COREDNS) == 5)
    assert (a.polls, a.early_polls) == (2, 1)
    # An early poll makes the same requests as any poll: one ConfigMap GET, one scale GET
    # (and the PUT that changed it).
    assert api.calls[-3:] == [("GET", CM), ("GET", COREDNS), ("PUT", COREDNS)]
    _stopped(a, stop, thread, codes)


def test_react_does_not_poll_when_the_decision_stays() -> None:
    api = coredns_api({"linear": '{"nodesPerReplica":16}'})
    now = [counts(17, 17)]
    a = _reacting(api, lambda: now[0])
    stop, thread, codes = _polled_once(a)
    requests = len(api.calls)
    now[0] = counts(18, 18)  # ceil(18/16) == ceil(17/16): the same 2 replicas
    a.nodes_changed()
    _until("the decision's check", lambda: a.decision_checks == 1)
    assert (a.polls, a.early_polls, len(api.calls)) == (1, 0, requests)  # no request
    _stopped(a, stop, thread, codes)


def test_react_follower_never_polls() -> None:
    """Only the leader polls: a follower's node changes are dropped unexamined, and the
    poll it runs on taking the lead is the ordinary one."""
    api = coredns_api(ONE_PER_NODE)
    leading = [False]
    now = [counts(3, 3)]
    a = _reacting(api, lambda: now[0], may_write=lambda: leading[0])
    stop, thread, codes = _running(a)
    now[0] = counts(4, 4)
    a.nodes_changed()
    _until("the loop to look at the change", lambda: a.node_wakeups == 1)
    assert (a.polls, a.decision_checks, api.calls) == (0, 0, [])
    leading[0] = True
    a.wake()
    _until("the new leader's poll", lambda: api.replicas(COREDNS) == 4)
    assert a.early_polls == 0
    _stopped(a, stop, thread, codes)


def test_react_at_most_one_early_poll_a_second() -> None:
    """A long burst of Nodes, each changing the decision: the early polls come at most once
    a second, and the last counts are written without waiting for the period."""
    api = coredns_api(ONE_PER_NODE)
    now = [counts(2, 2)]
    a = _reacting(api, lambda: now[0])
    stop, thread, codes = _polled_once(a)
    started = time.monotonic()
    for n in range(3, 3 + 100):
        now[0] = counts(n, n)
        a.nodes_changed()
        time.sleep(0.025)
    _until("the last count written", lambda: api.replicas(COREDNS) == 102)
    elapsed = time.monotonic() - started
    assert 1 <= a.early_polls <= int(elapsed) + 1
    assert a.polls == 1 + a.early_polls
    _stopped(a, stop, thread, codes)


def test_react_waits_for_a_burst_to_pause_and_writes_its_last_count_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A burst shorter than a second, its changes closer together than the debounce: one
    early poll, after the burst, with the burst's last count. (Counting the debounce from
    the first change polled in the middle of the burst, and its last Nodes then waited out
    the one-a-second limit.) The debounce is 0.3 s here and the changes 0.02 s apart, so a
    stalled test thread does not pass for a pause."""
    import cpa.horizontal.daemon.react as react

    monkeypatch.setattr(react, "REACT_DEBOUNCE_SECONDS", 0.3)
    api = coredns_api(ONE_PER_NODE)
    now = [counts(2, 2)]
    a = _reacting(api, lambda: now[0])
    stop, thread, codes = _polled_once(a)
    for n in range(3, 3 + 20):  # 0.4 s of changes
        now[0] = counts(n, n)
        a.nodes_changed()
        time.sleep(0.02)
        assert a.early_polls == 0, "an early poll in the middle of the burst"
    _until("the last count written", lambda: api.replicas(COREDNS) == 22, timeout=5)
    assert (a.polls, a.early_polls) == (2, 1)
    _stopped(a, stop, thread, codes)


def test_react_polls_within_a_second_while_the_changes_go_on() -> None:
    """Changes that never pause still get an early poll about a second after the first
    one: waiting for a pause has a limit."""
    api = coredns_api(ONE_PER_NODE)
    now = [counts(2, 2)]
    a = _reacting(api, lambda: now[0])
    stop, thread, codes = _polled_once(a)
    started = time.monotonic()
    n = 3
    while a.early_polls == 0:
        assert time.monotonic() - started < 10, "no early poll while the changes went on"
        now[0] = counts(n, n)
        a.nodes_changed()
        n += 1
        time.sleep(0.02)
    assert api.replicas(COREDNS) > 2
    _stopped(a, stop, thread, codes)


def test_react_stop_is_noticed_at_once() -> None:
    api = coredns_api(ONE_PER_NODE)
    a = _reacting(api, lambda: counts(1, 1))
    stop, thread, codes = _polled_once(a)
    _stopped(a, stop, thread, codes)
    assert a.polls == 1


def test_the_decision_is_computed_again_only_when_its_inputs_change(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """decide() is pure: a poll with the last poll's parameters and counts reuses its
    decision (the steps it writes out cost a tenth of a steady poll)."""
    import cpa.horizontal.daemon.cpa_loop as loop_module
    from cpa.horizontal.decide.decision import decide as real

    calls: list[ClusterCounts] = []

    def counting(params: Any, c: ClusterCounts) -> Any:
        calls.append(c)
        return real(params, c)

    monkeypatch.setattr(loop_module, "decide", counting)
    api = coredns_api(ONE_PER_NODE)
    now = [counts(3, 3)]
    a = make(api, lambda: now[0])
    for _ in range(3):
        assert a.poll_once().decision is not None
    assert len(calls) == 1 and api.replicas(COREDNS) == 3
    now[0] = counts(4, 4)
    assert a.poll_once().decision is not None and api.replicas(COREDNS) == 4
    api.set_configmap(CM, {"linear": '{"nodesPerReplica":2}'})  # new parameters
    assert a.poll_once().decision is not None and api.replicas(COREDNS) == 2
    assert len(calls) == 3


@pytest.mark.parametrize("bad", [{"x": 1}, "7", 7.0, True, 2**31])
def test_a_malformed_scale_is_its_target_error_alone(bad: object) -> None:
    """Issue 27 #4: one target's Scale with spec.replicas of the wrong type (or out of the
    int32 range) fails that target, named; every other target is written in the same
    poll, and the malformed one is not overwritten ("7" is not read as 7)."""
    api = FakeApi()
    names = [f"t{i:02d}" for i in range(20)]
    for name in names:
        api.add_scale(scale_path("deployments", name), 1)
    bad_path = scale_path("deployments", names[1])
    api.objects[bad_path]["spec"]["replicas"] = bad
    api.set_configmap(CM, ONE_PER_NODE)
    a = make(api, counts(3, 3), target=",".join(f"deployment/{n}" for n in names))
    result = a.poll_once()
    assert result.error is not None
    assert result.error.startswith(f"deployment/{names[1]}: cannot scale to 3: GET ")
    assert "spec.replicas" in result.error and "unexpected" not in result.error
    assert api.objects[bad_path]["spec"]["replicas"] == bad
    assert not [c for c in api.calls if c == ("PUT", bad_path)]
    for name in names[:1] + names[2:]:
        assert api.replicas(scale_path("deployments", name)) == 3


def test_an_unexpected_error_in_one_target_is_that_target_alone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever else goes wrong in one target's write (a bug) is named and the targets
    after it are still written."""
    import cpa.kube.scale as scale_mod

    real = scale_mod.ensure_scale

    def ensure(api: Any, namespace: str, target: Any, *args: Any, **kw: Any) -> Any:
        if target.name == "a":
            raise KeyError("boom")
        return real(api, namespace, target, *args, **kw)

    monkeypatch.setattr(scale_mod, "ensure_scale", ensure)
    api = FakeApi()
    for name in ("a", "b"):
        api.add_scale(scale_path("deployments", name), 1)
    api.set_configmap(CM, ONE_PER_NODE)
    a = make(api, counts(3, 3), target="deployment/a,deployment/b")
    result = a.poll_once()
    assert result.error == "deployment/a: unexpected KeyError: 'boom'"
    assert api.replicas(scale_path("deployments", "b")) == 3


def test_budgets_follow_the_replicas_and_go_with_the_key() -> None:
    """managePodDisruptionBudget: a budget while the target has several replicas, none at
    one, and ours deleted when a version without the key comes; without the key no
    request beyond upstream's."""
    api = FakeApi()
    api.add_scale(COREDNS, 1)
    api.put("/apis/apps/v1/namespaces/kube-system/deployments/coredns",
            {"metadata": {"uid": "u"}, "spec": {"selector": {"matchLabels": {"a": "b"}}}})
    pdb = "/apis/policy/v1/namespaces/kube-system/poddisruptionbudgets/coredns-cpa"
    on = '{"nodesPerReplica":16,"managePodDisruptionBudget":true}'
    api.set_configmap(CM, {"linear": on})
    a = make(api, counts(40, 40))
    assert a.poll_once().error is None
    assert api.objects[pdb]["spec"]["maxUnavailable"] == 1
    api.set_configmap(CM, {"linear": on.replace("16", "100")})  # one replica
    assert a.poll_once().error is None and pdb not in api.objects
    api.set_configmap(CM, {"linear": on})
    a.poll_once()
    assert pdb in api.objects
    api.set_configmap(CM, {"linear": '{"nodesPerReplica":16}'})
    assert a.poll_once().error is None and pdb not in api.objects
    api.calls.clear()
    a.poll_once()
    assert api.calls == [("GET", CM), ("GET", COREDNS)]


def test_target_selectors_list_their_targets_every_poll() -> None:
    """--target-selector: the listed workloads are this poll's targets (after --target's,
    each once); a selector matching nothing fails the poll naming it after the writes."""
    api = FakeApi()
    listing = "/apis/apps/v1/namespaces/kube-system/deployments"
    api.set_configmap(CM, {"linear": '{"nodesPerReplica":16}'})
    api.add_scale(COREDNS, 1)
    other = scale_path("deployments", "other")
    api.add_scale(other, 1)
    api.put(listing, {"items": []})
    a = make(api, counts(40, 40), "--target-selector=deployment:k8s-app=dns")
    result = a.poll_once()
    assert result.error is not None and "--target-selector=deployment:k8s-app=dns: no " \
        "deployment in namespace kube-system matches" in result.error
    assert api.replicas(COREDNS) == 3  # --target's target is still written
    api.put(listing, {"items": [{"metadata": {"name": "other"}},
                                {"metadata": {"name": "coredns"}}]})
    assert a.poll_once().error is None
    assert api.replicas(other) == 3
    assert [c for c in api.calls if c[0] == "PUT"] == [("PUT", COREDNS), ("PUT", other)]


# --- ours: the Pods and Services axes ---------------------------------------------------------


class _Watch:
    def __init__(self, count: int) -> None:
        self.error: str | None = None
        self.forbidden = False
        self.synced = True
        self.count = count
        self.running = False

    def start(self) -> None:
        self.running = True

    def stop(self, timeout: float = 1.0) -> None:
        self.running = False

    def wait_synced(self, timeout: float | None = None) -> bool:
        return self.synced


def test_the_object_axes_start_their_watches_and_stop_them_with_the_keys() -> None:
    watches: dict[str, _Watch] = {}

    def watch(kind: Kind) -> _Watch:
        made = watches[kind.name] = _Watch({"pods": 2501, "services": 40}[kind.name])
        return made

    api = FakeApi()
    api.add_scale(COREDNS, 1)
    objects = ObjectCounters(api, make=watch)  # type: ignore[arg-type]
    a = make(api, counts(16, 128), "--default-params="
             '{"linear":{"nodesPerReplica":16,"podsPerReplica":100}}', objects=objects)
    result = a.poll_once()
    assert result.error is None and api.objects[COREDNS]["spec"]["replicas"] == 26
    assert result.counts is not None and result.counts.pods == 2501
    assert set(watches) == {"pods"} and watches["pods"].running
    # A version without the key: the watch stops, the count is upstream's again.
    api.objects[CM]["data"] = {"linear": '{"nodesPerReplica":16}'}
    api.objects[CM]["metadata"]["resourceVersion"] = "2"
    result = a.poll_once()
    assert result.error is None and api.objects[COREDNS]["spec"]["replicas"] == 1
    assert not watches["pods"].running and objects.kinds == frozenset()


def test_an_object_axis_without_a_counter_fails_the_poll() -> None:
    api = FakeApi()
    api.add_scale(COREDNS, 1)
    a = make(api, counts(16, 128), "--default-params="
             '{"ladder":{"servicesToReplicas":[[0,1]]}}')
    result = a.poll_once()
    assert result.error is not None and "counts no Pods or Services" in result.error
    assert api.objects[COREDNS]["spec"]["replicas"] == 1


def test_react_leaves_the_object_axes_to_the_polls() -> None:
    """The node counts alone cannot say what a Pods axis gives: a Node change checks the
    decision, finds it cannot, and polls no earlier (before, it read the Pods as 0 and
    polled early for nothing)."""
    api = FakeApi()
    api.add_scale(COREDNS, 1)
    api.set_configmap(CM, {"linear": '{"nodesPerReplica":16,"podsPerReplica":100}'})
    objects = ObjectCounters(api, make=lambda kind: _Watch(2501))  # type: ignore[arg-type]
    now = [counts(17, 17)]
    a = _reacting(api, lambda: now[0], objects=objects)
    stop, thread, codes = _running(a)
    _until("the first poll", lambda: api.replicas(COREDNS) == 26)
    now[0] = counts(18, 18)
    a.nodes_changed()
    _until("the decision's check", lambda: a.decision_checks == 1)
    assert (a.polls, a.early_polls) == (1, 0)
    _stopped(a, stop, thread, codes)
