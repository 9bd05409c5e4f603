"""``capToPlaceable``: the key as the ConfigMap spells it (true, false, "report", refused
otherwise, as the other keys are), and the cap itself, a pure function of the count wanted
and the room."""

from __future__ import annotations

import pytest

from cpa.horizontal.decide.modes.registry import parse_configmap_data
from cpa.horizontal.decide.params import ParamsError
from cpa.horizontal.decide.placeable import Room, cap_replicas

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


@pytest.mark.parametrize(("mode", "value", "expected", "shown"), [
    ("linear", "true", "cap", True),
    ("ladder", "true", "cap", True),
    ("linear", '"report"', "report", "report"),
    ("ladder", '"report"', "report", "report"),
    ("linear", "false", None, None),
    ("linear", "null", None, None),
])
def test_the_key_reads_true_report_or_false(mode: str, value: str, expected: str | None,
                                            shown: object) -> None:
    body = ('"coresPerReplica":2' if mode == "linear" else '"coresToReplicas":[[1,1]]')
    params = parse_configmap_data({mode: f'{{{body},"capToPlaceable":{value}}}'})
    assert params.shared.cap_to_placeable == expected
    assert params.shared.fields().get("capToPlaceable") == shown


def test_without_the_key_the_parameters_are_upstreams() -> None:
    params = parse_configmap_data({"linear": '{"coresPerReplica":2}'})
    assert params.shared.cap_to_placeable is None
    assert "capToPlaceable" not in params.shared.fields()


@pytest.mark.parametrize(("value", "message"), [
    ('"yes"', r'capToPlaceable is the string "yes"; write true to cap .* "report" to only report'),
    ('"Report"', r'capToPlaceable is the string "Report"; write true'),
    ('"true"', r'capToPlaceable is the string "true"; write true'),
    ("1", r'linear.capToPlaceable: expected true, false or "report", got 1 '
          r'\(write true, false or "report"\)'),
    ("[]", r'linear.capToPlaceable: expected true, false or "report"'),
    ("{}", r'linear.capToPlaceable: expected true, false or "report"'),
])
def test_any_other_value_is_refused_naming_the_key(value: str, message: str) -> None:
    with pytest.raises(ParamsError, match=r'ConfigMap key "linear": .*' + message):
        parse_configmap_data({"linear": f'{{"coresPerReplica":2,"capToPlaceable":{value}}}'})


def test_a_bad_value_is_reported_with_the_other_problems() -> None:
    with pytest.raises(ParamsError) as caught:
        parse_configmap_data({"linear": '{"coresPerReplica":2,"capToPlaceable":"no",'
                                        '"maxCoresPerNode":-1}'})
    assert "maxCoresPerNode" in str(caught.value) and "capToPlaceable" in str(caught.value)


@pytest.mark.parametrize(("wanted", "mode", "room", "replicas", "unplaceable", "key"), [
    (5, "cap", Room(HOST, 3), 3, 2, "placeable.capped"),
    (3, "cap", Room(HOST, 3), 3, 0, "placeable.fits"),
    (2, "cap", Room(HOST, 3), 2, 0, "placeable.fits"),
    (5, "report", Room(HOST, 3), 5, 2, "placeable.reported"),
    (2, "report", Room(HOST, 3), 2, 0, "placeable.fits"),
    (7, "cap", Room(ZONE, 3), 3, 4, "placeable.capped"),
    # no Node the Pods can go to: never below one replica
    (4, "cap", Room(HOST, 0), 1, 4, "placeable.capped"),
    (0, "cap", Room(HOST, 0), 0, 0, "placeable.fits"),
    (1, "cap", Room(HOST, 0), 1, 1, "placeable.capped"),
])
def test_the_cap(wanted: int, mode: str, room: Room, replicas: int, unplaceable: int,
                 key: str) -> None:
    outcome = cap_replicas(wanted, mode, room)
    assert outcome is not None
    assert (outcome.replicas, outcome.unplaceable, outcome.step.key) == (
        replicas, unplaceable, key)
    assert outcome.wanted == wanted


def test_no_room_no_cap() -> None:
    assert cap_replicas(9, "cap", None) is None
    assert cap_replicas(9, "report", None) is None


def test_the_steps_say_what_and_why() -> None:
    capped = cap_replicas(5, "cap", Room(HOST, 3))
    reported = cap_replicas(5, "report", Room(ZONE, 2))
    floor = cap_replicas(4, "cap", Room(HOST, 0))
    assert capped is not None and reported is not None and floor is not None
    assert capped.step.text == ("capToPlaceable: 5 wanted, but a required self anti-affinity "
                                f"on {HOST} places them on 3 Nodes only: capped to 3.")
    assert reported.step.text == (
        'capToPlaceable "report": 5 wanted, but a required self anti-affinity on '
        f"{ZONE} places them on 2 values of {ZONE} only: 3 would stay Pending (not capped).")
    assert floor.step.text.endswith("capped to 1 (never below 1).")
