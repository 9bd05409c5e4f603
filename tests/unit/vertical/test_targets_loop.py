"""Several targets in one poll loop: one count, each target on its own (a failing one does
not stop the others), per-target metrics and Events; StatefulSets' update strategies."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from cpa.runtime.event_sink import EventSink
from cpa.vertical.daemon.configfile import ConfigFile
from cpa.vertical.daemon.cpvpa_events import VerticalEvents
from cpa.vertical.daemon.cpvpa_loop import VerticalAutoscaler, VerticalLoopConfig
from cpa.vertical.daemon.cpvpa_metrics import VerticalMetrics
from cpa.vertical.daemon.target import TargetLoop
from cpa.vertical.daemon.writer import TemplateWriter
from cpa.vertical.decide.cpva_config import decode_config
from cpa.vertical.decide.patch import PatchTarget, target_key
from cpa.vertical.decide.resize import rollout_note, template_is_safe
from cpa.vertical.decide.state import VerticalState

CONFIG = decode_config('{"c": {"requests": {"cpu": {"base": "10m", "step": "1m", '
                       '"coresPerStep": 1}}}}')
A, B = PatchTarget("Deployment", "a"), PatchTarget("StatefulSet", "b")
KEYS = (target_key(A), target_key(B))


class Api:
    """Template PATCHes by path; a path in ``broken`` raises a plain bug (not ApiError)."""

    def __init__(self, *broken: str) -> None:
        self.broken = set(broken)
        self.patched: list[str] = []
        self.events: list[dict[str, Any]] = []

    def get_json(self, path: str, query: Mapping[str, str] | None = None, *,
                 deadline: float | None = None) -> dict[str, Any]:
        return {}

    def send_json(self, method: str, path: str, body: Any, *,
                  deadline: float | None = None) -> dict[str, Any]:
        assert path.endswith("/events")
        self.events.append(body)
        return dict(body)

    def send_raw(self, method: str, path: str, data: bytes, content_type: str, *,
                 deadline: float | None = None) -> dict[str, Any]:
        if path in self.broken:
            raise RuntimeError("a bug in this target's write")
        self.patched.append(path)
        answer = json.loads(data)
        if "statefulsets" in path:
            answer["spec"]["updateStrategy"] = {"type": "OnDelete"}
        return dict(answer)


def loop(api: Api, observers: list[Any] | None = None) -> VerticalAutoscaler:
    def state(key: str) -> VerticalState:
        return VerticalState(CONFIG, target=key, targets=KEYS)

    second = TargetLoop(state(KEYS[1]), TemplateWriter(api, "ns", B))
    first = TargetLoop(state(KEYS[0]), TemplateWriter(api, "ns", A))
    return VerticalAutoscaler(VerticalLoopConfig(), lambda: (3, 24), ConfigFile(""),
                              [first, second], observers=observers or [])


A_PATH = "/apis/apps/v1/namespaces/ns/deployments/a"
B_PATH = "/apis/apps/v1/namespaces/ns/statefulsets/b"


@pytest.mark.parametrize("broken", [A_PATH, B_PATH])
def test_one_failing_target_does_not_stop_the_others(broken: str) -> None:
    api = Api(broken)
    result = loop(api).poll_once()
    assert api.patched == [p for p in (A_PATH, B_PATH) if p != broken]
    failed = KEYS[0] if broken == A_PATH else KEYS[1]
    assert result.error == f"{failed}: unexpected RuntimeError: a bug in this target's write"
    assert [t.error is None for t in result.targets] == [broken != A_PATH, broken != B_PATH]
    assert (result.nodes, result.cores) == (3, 24)  # one count for both


def test_per_target_metrics_carry_a_target_label() -> None:
    metrics = VerticalMetrics(targets=KEYS)
    loop(Api(B_PATH), [metrics.observe]).poll_once()
    text = metrics.exposition().decode()
    assert ('cpvpa_written{container="c",kind="requests",resource="cpu",'
            'target="deployment/a"} 0.034') in text
    assert 'cpvpa_target_ok{target="statefulset/b"} 0.0' in text
    assert 'cpvpa_target_ok{target="deployment/a"} 1.0' in text
    assert 'cpvpa_writes_total{result="success",target="deployment/a"} 1.0' in text
    # statefulset/b has no news: written stays absent, not removed from a/ by b's poll.
    assert 'target="statefulset/b"} 0.034' in text  # computed, before its write failed


def test_events_regard_each_target_and_say_the_strategy() -> None:
    api = Api()
    sink = EventSink(api, "ns", "cluster-proportional-vertical-autoscaler", "pod-x")
    loop(api, [VerticalEvents(sink).observe]).poll_once()
    assert [(e["reason"], e["regarding"]["kind"], e["regarding"]["name"])
            for e in api.events] == [("ResourcesUpdated", "Deployment", "a"),
                                     ("ResourcesUpdated", "StatefulSet", "b")]
    assert "updateStrategy OnDelete" in api.events[1]["note"]
    assert "c requests[cpu]=34m (3 nodes, 24 cores)" in api.events[0]["note"]


def sts(strategy: dict[str, Any] | None, replicas: int = 3) -> dict[str, Any]:
    spec: dict[str, Any] = {"replicas": replicas}
    if strategy is not None:
        spec["updateStrategy"] = strategy
    return {"spec": spec}


@pytest.mark.parametrize(("obj", "safe", "note"), [
    (sts(None), False, "replaces every Pod, one at a time, highest ordinal first"),
    (sts({"type": "OnDelete"}), True, "none is restarted"),
    (sts({"type": "RollingUpdate", "rollingUpdate": {"partition": 3}}), True,
     "no Pod is updated until the partition is lowered"),
    (sts({"type": "RollingUpdate", "rollingUpdate": {"partition": 1}}), False,
     "replaces ordinals 1 and up"),
])
def test_statefulset_strategies(obj: dict[str, Any], safe: bool, note: str) -> None:
    assert template_is_safe(obj, "StatefulSet")[0] is safe
    said = rollout_note(obj, "StatefulSet")
    assert said is not None and note in said
