"""The Pod and Service counts: the metadata-only list and watch against a scripted API
(the real API server is in tests/integration/test_object_axes.py), and the counters that
start and stop the watches."""

from __future__ import annotations

import json
import random
import threading
from typing import Any

from cpa.kube.api import ApiError
from cpa.objects.counters import CountUnavailable, ObjectCounters
from cpa.objects.tally import Tally, uid_key
from cpa.objects.watch import ACCEPT_LIST_PROTOBUF, ACCEPT_WATCH_PROTOBUF, KINDS, Kind, ObjectWatch
from tests.fakes import FakeResponse, ScriptedApi

UID = "6f1d2c3b-0000-4000-8000-{:012d}"


def meta(n: int, rv: str = "1", deleting: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"name": f"p{n}", "uid": UID.format(n), "resourceVersion": rv}
    if deleting:
        out["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return out


def page(*uids: int, rv: str = "5", cont: str = "") -> dict[str, Any]:
    return {"kind": "PartialObjectMetadataList",
            "metadata": {"resourceVersion": rv, "continue": cont},
            "items": [{"kind": "PartialObjectMetadata", "metadata": meta(n)} for n in uids]}


def event(kind: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": kind, "object": obj}).encode() + b"\n"


def pod(n: int, rv: str, deleting: bool = False) -> dict[str, Any]:
    return {"kind": "PartialObjectMetadata", "metadata": meta(n, rv, deleting)}


class Harness:
    def __init__(self, api: ScriptedApi, kind: Kind = KINDS["pods"]) -> None:
        self.waits: list[float] = []
        self.watch = ObjectWatch(api, kind, rng=random.Random(3), page_size=2,
                                 wait=self._pause)
        api.when_done = lambda: self.watch.stop(timeout=0)

    def _pause(self, stop: threading.Event, seconds: float) -> bool:
        self.waits.append(seconds)
        return stop.is_set()


def test_paged_metadata_list_then_watch_from_its_version() -> None:
    stream = b"".join([event("ADDED", pod(3, "6")), event("MODIFIED", pod(1, "7", True)),
                       event("DELETED", pod(2, "8")),
                       event("BOOKMARK", {"kind": "PartialObjectMetadata",
                                          "metadata": {"resourceVersion": "9"}})])
    api = ScriptedApi([FakeResponse(stream, chunk=17)],
                      [page(1, 2, cont="tok"), page(4, rv="5")])
    h = Harness(api)
    h.watch.run()
    assert api.page_calls[0] == {"limit": "2", "fieldSelector":
                                 "status.phase!=Succeeded,status.phase!=Failed"}
    assert api.page_calls[1]["continue"] == "tok"
    assert api.accepts[:2] == [ACCEPT_LIST_PROTOBUF] * 2  # a JSON answer is read too
    assert api.accepts[2] == ACCEPT_WATCH_PROTOBUF
    query = api.stream_calls[0][0]
    assert query["resourceVersion"] == "5" and query["watch"] == "1"
    assert query["fieldSelector"] == "status.phase!=Succeeded,status.phase!=Failed"
    # 1 is being deleted (not counted), 2 left the selection; 3 and 4 count
    assert h.watch.tally.count == 2 and len(h.watch.tally) == 3
    assert h.watch.synced


def test_services_have_no_selector() -> None:
    api = ScriptedApi([], [page(1)])
    Harness(api, KINDS["services"]).watch.run()
    assert "fieldSelector" not in api.page_calls[0]


def test_410_relists_and_an_expired_continue_starts_over() -> None:
    gone = event("ERROR", {"kind": "Status", "code": 410, "message": "too old"})
    api = ScriptedApi([FakeResponse(gone)],
                      [page(1, 2, cont="tok"), ApiError(410, "Expired", "continue expired"),
                       page(7, rv="20")])
    h = Harness(api)
    h.watch.run()
    assert "continue" not in api.page_calls[2]
    assert h.watch.tally.count == 1
    assert h.waits == [], "a relist is not a failure: no backoff"


def test_a_watch_that_ends_at_once_with_nothing_backs_off() -> None:
    api = ScriptedApi([FakeResponse(b""), FakeResponse(b"")], [page(1)])
    h = Harness(api)
    h.watch.run()
    assert len(h.waits) == 2 and h.waits[1] > h.waits[0], "backs off, does not spin"
    assert h.watch.error is None, "an empty watch is no failure"


def test_403_names_the_rule_and_backs_off() -> None:
    api = ScriptedApi([], [ApiError(403, "Forbidden", 'pods is forbidden: cannot list')])
    h = Harness(api)
    h.watch.run()
    assert h.watch.forbidden
    assert 'resources ["pods"], verbs ["list", "watch"]' in (h.watch.error or "")
    assert len(h.waits) == 1 and not h.watch.synced


def test_an_event_that_does_not_decode_lists_again() -> None:
    api = ScriptedApi([FakeResponse(b"{not json\n")], [page(1), page(1, 2)])
    h = Harness(api)
    h.watch.run()
    assert len(api.page_calls) >= 2 and h.watch.tally.count == 2


def test_tally_keys_and_moves() -> None:
    tally = Tally()
    assert isinstance(uid_key(UID.format(1)), int)
    assert uid_key("not-a-uuid") == "not-a-uuid"
    tally.put("x", True)
    tally.put("x", False)
    assert tally.count == 0 and len(tally) == 1
    tally.put("x", True)
    tally.remove("x")
    assert tally.count == 0 and len(tally) == 0


class FakeWatch:
    def __init__(self, kind: Kind) -> None:
        self.kind = kind
        self.started = self.stopped = False
        self.error: str | None = None
        self.forbidden = False
        self.synced = False
        self.count = 0
        self.waited: list[float | None] = []

    def start(self) -> None:
        self.started = True

    def stop(self, timeout: float = 1.0) -> None:
        self.stopped = True

    def wait_synced(self, timeout: float | None = None) -> bool:
        self.waited.append(timeout)
        return self.synced


def test_counters_start_and_stop_watches_with_the_parameters() -> None:
    made: list[FakeWatch] = []

    def make(kind: Kind) -> FakeWatch:
        made.append(FakeWatch(kind))
        return made[-1]

    counters = ObjectCounters(ScriptedApi([]), make=make, first_list_wait=7.0)
    counters.use(frozenset({"pods"}))
    assert [w.kind.name for w in made] == ["pods"] and made[0].started
    try:
        counters.count("pods")
    except CountUnavailable as exc:
        assert "not counted yet" in str(exc)
    else:
        raise AssertionError("an unsynced count must not be read as 0")
    assert made[0].waited == [7.0], "the first poll waits for the first list, once"
    made[0].synced, made[0].count = True, 42
    assert counters.count("pods") == 42
    assert made[0].waited == [7.0]
    made[0].forbidden, made[0].error = True, "counting pods: 403: grant it"
    try:
        counters.count("pods")
    except CountUnavailable as exc:
        assert "grant it" in str(exc)
    counters.use(frozenset({"services"}))
    assert made[0].stopped and counters.kinds == {"services"}
    counters.use(frozenset())
    assert made[1].stopped and counters.kinds == frozenset()
