"""``--watch-targets``' pure parts: who owns a target's replicas in managedFields, the
contention rule with injected time, when the watch wakes the poll, and what a poll reports
of another writer's count (a dry run included). The real API server is in
tests/integration/test_watch_targets.py."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from cpa.horizontal.daemon.contention import (
    CALM_SECONDS,
    FIGHT_WINDOW_SECONDS,
    Contention,
    contended,
)
from cpa.horizontal.daemon.foreignwrites import UNKNOWN_WRITER, ForeignWrites
from cpa.horizontal.daemon.targetwatch import TargetWatches, watch_kind
from cpa.horizontal.daemon.watchdogs import Overwrite
from cpa.kube.api import ApiError
from cpa.kube.fieldowners import (
    count_field,
    field_owners,
    foreign_owner,
    last_foreign_writer,
    latest_owner,
)
from cpa.kube.targets import ScaleResult, Target
from cpa.objects.watch import Kind, ObjectWatch, Seen
from tests.fakes import FakeResponse, ScriptedApi

COREDNS = Target("deployment", "coredns")
HPA = Target("horizontalpodautoscaler", "coredns")
REPLICAS = ("f:spec", "f:replicas")


def entry(manager: str, time: str, fields: dict[str, Any], subresource: str = "",
          operation: str = "Update") -> dict[str, Any]:
    out = {"manager": manager, "operation": operation, "apiVersion": "apps/v1",
           "time": time, "fieldsType": "FieldsV1", "fieldsV1": fields}
    if subresource:
        out["subresource"] = subresource
    return out


OWNS: dict[str, Any] = {"f:spec": {"f:replicas": {}}}
OURS = entry("cluster-proportional-autoscaler-py", "2026-12-07T10:00:00Z", OWNS, "scale")
GITOPS = entry("gitops-tool", "2026-12-07T10:05:00Z", OWNS, "scale")
STATUS = entry("kube-controller-manager", "2026-12-07T10:06:00Z",
               {"f:status": {"f:replicas": {}}}, "status")
CREATOR = entry("kubectl-client-side-apply", "2026-12-07T09:00:00Z",
                {"f:spec": {"f:template": {}}, "f:metadata": {"f:labels": {}}})


# --- managedFields -----------------------------------------------------------------------
def test_the_owner_of_spec_replicas_is_named_and_status_writers_are_not() -> None:
    fields = [CREATOR, STATUS, GITOPS]
    assert [o.manager for o in field_owners(fields, REPLICAS)] == ["gitops-tool"]
    assert foreign_owner(fields, REPLICAS) == "gitops-tool"
    assert foreign_owner([CREATOR, STATUS, OURS], REPLICAS) is None
    assert latest_owner([CREATOR, STATUS, OURS], REPLICAS).manager == (  # type: ignore[union-attr]
        "cluster-proportional-autoscaler-py")


def test_co_owners_most_recent_first_and_ours_skipped() -> None:
    applier = entry("argocd-controller", "2026-12-07T09:30:00Z", OWNS, operation="Apply")
    fields = [applier, OURS]
    assert [o.manager for o in field_owners(fields, REPLICAS)] == [
        "cluster-proportional-autoscaler-py", "argocd-controller"]
    assert foreign_owner(fields, REPLICAS) == "argocd-controller"


@pytest.mark.parametrize("fields", [None, [], "x", [1, {"manager": 3, "fieldsV1": OWNS}],
                                    [{"manager": "m", "fieldsV1": {"f:spec": "x"}}]])
def test_managed_fields_of_another_shape_name_nobody(fields: object) -> None:
    assert field_owners(fields, REPLICAS) == []
    assert latest_owner(fields, REPLICAS) is None


def test_an_hpa_floor_is_owned_through_min_replicas() -> None:
    assert count_field(HPA) == ("f:spec", "f:minReplicas")
    assert count_field(COREDNS) == REPLICAS
    floor = entry("argocd", "2026-12-07T10:00:00Z", {"f:spec": {"f:minReplicas": {}}})
    assert last_foreign_writer({"metadata": {"managedFields": [floor]}}, HPA) == "argocd"
    assert last_foreign_writer({"metadata": {"managedFields": [floor]}}, COREDNS) is None
    assert last_foreign_writer({"metadata": {"managedFields": [GITOPS, OURS]}}, COREDNS) \
        == "gitops-tool"
    assert last_foreign_writer({"metadata": {"managedFields": [OURS]}}, COREDNS) is None
    assert last_foreign_writer({}, COREDNS) is None
    kind = watch_kind("kube-system", COREDNS)
    assert kind.path == "/apis/apps/v1/namespaces/kube-system/deployments"
    assert "apiGroups [apps] resources [deployments] verbs [get, list, watch]" in kind.rbac


# --- the contention rule -----------------------------------------------------------------
def test_three_foreign_writes_within_the_window_make_a_fight() -> None:
    assert not contended([0.0, 100.0], 100.0, False)
    assert contended([0.0, 100.0, 200.0], 200.0, False)
    assert not contended([0.0, 200.0, FIGHT_WINDOW_SECONDS + 1], FIGHT_WINDOW_SECONDS + 1,
                         False), "the first write fell out of the window"


def test_a_fight_calms_after_the_calm_period_without_a_foreign_write() -> None:
    times = [0.0, 10.0, 20.0]
    assert contended(times, 20.0 + CALM_SECONDS - 1, True)
    assert not contended(times, 20.0 + CALM_SECONDS, True)
    assert not contended(times, 20.0 + CALM_SECONDS - 1, False), "calm is only an end"


def test_contention_state_with_an_injected_clock() -> None:
    now = [0.0]
    state = Contention(lambda: now[0])
    assert [state.record(COREDNS) for now[0] in (0.0, 60.0)] == [False, False]
    now[0] = 120.0
    assert state.record(COREDNS) and state.is_contended(COREDNS)
    assert not state.is_contended(HPA)
    now[0] = 120.0 + CALM_SECONDS - 1
    assert state.is_contended(COREDNS)
    now[0] = 120.0 + CALM_SECONDS
    assert not state.is_contended(COREDNS)
    assert not state.record(COREDNS), "one write after the calm is not a fight"


# --- the watch's side ----------------------------------------------------------------------
class FakeWatch:
    def __init__(self, kind: Kind, seen: Seen) -> None:
        self.kind, self.seen = kind, seen
        self.started = self.stopped = False
        self.error: str | None = None
        self.forbidden = False

    def start(self) -> None:
        self.started = True

    def stop(self, timeout: float = 1.0) -> None:
        self.stopped = True


def obj(name: str, generation: int, *fields: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": name, "generation": generation,
                         "managedFields": list(fields)}}


def watches() -> tuple[TargetWatches, list[FakeWatch], list[str], list[float]]:
    made: list[FakeWatch] = []
    woken: list[str] = []
    now = [0.0]
    state = Contention(lambda: now[0])

    def make(kind: Kind, seen: Seen) -> FakeWatch:
        made.append(FakeWatch(kind, seen))
        return made[-1]

    w = TargetWatches(ScriptedApi([], []), "kube-system", state, make=make)
    w.answer = lambda: woken.append("poll")
    return w, made, woken, now


def test_one_watch_per_kind_started_and_stopped_with_the_targets() -> None:
    w, made, _, _ = watches()
    w.use((COREDNS, Target("deployment", "other"), HPA))
    assert sorted(m.kind.name for m in made) == ["deployments", "horizontalpodautoscalers"]
    assert all(m.started for m in made)
    w.use((COREDNS,))
    assert [m.kind.name for m in made if m.stopped] == ["horizontalpodautoscalers"]
    w.stop()
    assert all(m.stopped for m in made)


def test_a_new_foreign_write_wakes_the_poll_and_ours_or_others_do_not() -> None:
    w, made, woken, _ = watches()
    w.use((COREDNS,))
    seen = made[0].seen
    seen("LISTED", obj("coredns", 2, CREATOR, OURS))
    seen("MODIFIED", obj("other", 3, GITOPS))  # not a target
    seen("MODIFIED", obj("coredns", 2, CREATOR, OURS, STATUS))  # status only
    assert woken == [] and w.writer(COREDNS) is None
    seen("MODIFIED", obj("coredns", 3, CREATOR, GITOPS))
    assert woken == ["poll"] and w.writer(COREDNS) == "gitops-tool"
    seen("MODIFIED", obj("coredns", 3, CREATOR, GITOPS, STATUS))  # the same write
    seen("MODIFIED", obj("coredns", 4, CREATOR, OURS))  # our answer
    assert woken == ["poll"]
    assert w.writer(COREDNS) == "gitops-tool", "still named after our answer"
    seen("MODIFIED", obj("coredns", 5, CREATOR, GITOPS))  # again, within the same second
    assert woken == ["poll", "poll"]


def test_a_contended_target_is_not_answered_at_once() -> None:
    w, made, woken, _ = watches()
    w.use((COREDNS,))
    for _ in range(3):
        w.contention.record(COREDNS)
    made[0].seen("LISTED", obj("coredns", 2, OURS))
    made[0].seen("MODIFIED", obj("coredns", 3, GITOPS))
    assert woken == [] and w.writer(COREDNS) == "gitops-tool"


def test_a_refused_watch_is_a_problem_of_the_poll() -> None:
    w, made, _, _ = watches()
    assert w.poll((COREDNS,)) == []
    made[0].forbidden, made[0].error = True, "--watch-targets: watching the deployments: 403"
    assert w.poll((COREDNS,)) == ["--watch-targets: watching the deployments: 403"]


def test_the_object_watch_tells_of_each_object_and_names_the_rule_on_403() -> None:
    seen: list[tuple[str, str]] = []
    kind = watch_kind("ns", COREDNS)
    item = {"kind": "PartialObjectMetadata", "metadata": {
        "name": "coredns", "uid": "u1", "resourceVersion": "5", "generation": 1}}
    modified = json.dumps({"type": "MODIFIED", "object": item}).encode() + b"\n"
    bookmark = json.dumps({"type": "BOOKMARK", "object": {
        "kind": "PartialObjectMetadata", "metadata": {"resourceVersion": "9"}}}).encode() + b"\n"
    api = ScriptedApi([FakeResponse(modified + bookmark)],
                      [{"metadata": {"resourceVersion": "5"}, "items": [item]}])
    watch = ObjectWatch(api, kind, rng=random.Random(1),
                        seen=lambda event, o: seen.append((event, o["metadata"]["name"])))
    api.when_done = lambda: watch.stop(timeout=0)
    watch.run()
    assert seen == [("LISTED", "coredns"), ("MODIFIED", "coredns")]
    refused = ScriptedApi([], [ApiError(403, "Forbidden", "deployments is forbidden")])
    watch = ObjectWatch(refused, kind, rng=random.Random(1),
                        wait=lambda stop, seconds: True)
    watch.run()
    assert watch.forbidden and watch.error is not None
    assert watch.error.startswith("--watch-targets: watching the deployments: ")
    assert "verbs [get, list, watch] to the autoscaler's Role" in watch.error


# --- the poll's side -----------------------------------------------------------------------
class Named:
    def __init__(self, writer: str | None) -> None:
        self.name = writer

    def writer(self, target: Target) -> str | None:
        return self.name


def test_an_overwrite_is_a_foreign_write_named_and_counted_towards_a_fight() -> None:
    now = [0.0]
    foreign = ForeignWrites(Named("gitops-tool"), Contention(lambda: now[0]))
    res = ScaleResult(COREDNS, 1, 4, True)
    assert foreign.check(res, None) is None
    found = [foreign.check(res, Overwrite(COREDNS, 4, 1)) for now[0] in (0.0, 1.0, 2.0)]
    assert [(f.manager, f.ours, f.found, f.contended) for f in found if f] == [
        ("gitops-tool", 4, 1, False), ("gitops-tool", 4, 1, False),
        ("gitops-tool", 4, 1, True)]
    assert foreign.states((COREDNS,)) == {COREDNS: True}
    now[0] = 2.0 + CALM_SECONDS
    assert foreign.states((COREDNS,)) == {COREDNS: False}


def test_a_dry_run_reports_a_changed_count_and_names_an_unseen_writer_unknown() -> None:
    foreign = ForeignWrites(Named(None), Contention(lambda: 0.0))
    first = ScaleResult(COREDNS, 4, 4, False, dry_run=True)
    assert foreign.check(first, None) is None
    assert foreign.check(first, None) is None
    found = foreign.check(ScaleResult(COREDNS, 1, 4, False, dry_run=True), None)
    assert found is not None
    assert (found.manager, found.ours, found.found) == (UNKNOWN_WRITER, None, 1)

