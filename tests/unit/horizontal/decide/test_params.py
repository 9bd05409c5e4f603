"""Parameter parsing with Go encoding/json semantics, and upstream's validation.

The accept/reject tables below were cross-checked against a Go program that runs
upstream's structs through Go 1.26's ``json.Unmarshal`` and upstream's validation.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from cpa.horizontal.decide.defaults import default_params_to_data
from cpa.horizontal.decide.modes.ladder import LadderParams
from cpa.horizontal.decide.modes.linear import LinearParams
from cpa.horizontal.decide.modes.mode import Configured
from cpa.horizontal.decide.modes.registry import MODES, parse_configmap_data
from cpa.horizontal.decide.params import ParamsError
from tests.unit.configured import ladder_params as lad
from tests.unit.configured import linear_params as lin
from tests.unit.configured import parse_ladder, parse_linear

KUBE_DNS = (
    '{"coresPerReplica":256,"nodesPerReplica":16,'
    '"preventSinglePointFailure":true,"includeUnschedulableNodes":true}'
)

# (ConfigMap "linear" value, expected params)
LINEAR_OK: list[tuple[str, Configured[LinearParams]]] = [
    (KUBE_DNS, lin(256, 16, spof=True, include=True)),
    ('{"coresPerReplica":2,"nodesPerReplica":1,"min":1,"max":100,'
     '"preventSinglePointFailure":true}', lin(2, 1, 1, 100, spof=True)),
    ('{"nodesPerReplica":16}', lin(nodes=16)),
    ('{"coresPerReplica":0.5}', lin(cores=0.5)),
    ('{"nodesPerReplica":16,"min":0}', lin(nodes=16, min=1)),  # min 0 -> 1
    ('{"nodesPerReplica":16,"min":2}', lin(nodes=16, min=2)),
    ('{"nodesPerReplica":16,"max":0,"min":5}', lin(nodes=16, min=5)),  # max 0: no cap
    ('{"nodesPerReplica":16,"min":3,"max":3}', lin(nodes=16, min=3, max=3)),
    ('{"nodesPerReplica":16,"max":5}', lin(nodes=16, max=5)),
    # case-insensitive keys; unknown keys ignored
    ('{"NodesPerReplica":16,"MIN":2,"Max":4,"PREVENTSINGLEPOINTFAILURE":true,"x":[1,{}]}',
     lin(nodes=16, min=2, max=4, spof=True)),
    ('{"nodesPerReplica":16,"prevent\u017finglePointFailure":true}', lin(nodes=16, spof=True)),
    # duplicates: last wins; null leaves the field as it was
    ('{"nodesPerReplica":16,"nodesPerReplica":8}', lin(nodes=8)),
    ('{"nodesPerReplica":16,"NODESPERREPLICA":8}', lin(nodes=8)),
    ('{"nodesPerReplica":16,"nodesPerReplica":null}', lin(nodes=16)),
    ('{"nodesPerReplica":16,"min":null,"max":null,"coresPerReplica":null}', lin(nodes=16)),
    ('{"nodesPerReplica":16,"min":3,"min":null}', lin(nodes=16, min=3)),
    # float fields take any number, int fields only integer literals
    ('{"nodesPerReplica":1.6e1,"coresPerReplica":2.0}', lin(2, 16)),
    ('{"nodesPerReplica":16,"min":-0}', lin(nodes=16, min=1)),
    ('{"coresPerReplica":1e-400,"nodesPerReplica":1}', lin(0, 1)),  # underflow is just 0
    ('{"nodesPerReplica":-0,"coresPerReplica":1}', lin(cores=1)),  # -0 is not negative
    ('{"nodesPerReplica":16,"max":9223372036854775807}', lin(nodes=16, max=2**63 - 1)),
    (' \n{"nodesPerReplica":16}\n ', lin(nodes=16)),
    ('{"nodesPerReplica":16,"m\u0131n":7}', lin(nodes=16)),  # dotless i is not i
]

# (ConfigMap "linear" value, a fragment of the error message)
LINEAR_BAD: list[tuple[str, str]] = [
    ("null", "both 0 or absent"),  # null document: all zero, then validation fails
    ("{}", "both 0 or absent"),
    ('{"min":2}', "both 0 or absent"),
    ('{"nodesPerReplica":0,"coresPerReplica":0}', "both 0 or absent"),
    ('{"nodesPerReplica":-1}', "nodesPerReplica is -1; it must be positive"),
    ('{"nodesPerReplica":16,"coresPerReplica":-0.5}', "coresPerReplica is -0.5"),
    ('{"nodesPerReplica":16,"min":-1}', "min is -1"),
    ('{"nodesPerReplica":16,"min":5,"max":4}', "max is 4 but min is 5"),
    ('{"nodesPerReplica":16,"max":-1}', "max is -1 but min is 0"),  # checked before min -> 1
    ('{"nodesPerReplica":16,"min":1.5}', "linear.min: expected an integer, got 1.5"),
    ('{"nodesPerReplica":16,"min":2.0}', "expected an integer, got 2.0"),
    ('{"nodesPerReplica":16,"max":1e2}', "linear.max: expected an integer, got 1e2"),
    ('{"nodesPerReplica":16,"min":"2"}', "expected an integer"),
    ('{"nodesPerReplica":16,"max":99999999999999999999}', "out of range"),
    ('{"nodesPerReplica":"16"}', "linear.nodesPerReplica: expected a number"),
    ('{"nodesPerReplica":1e400}', "out of range for a 64-bit float"),
    ('{"nodesPerReplica":16,"preventSinglePointFailure":"true"}', "expected true or false"),
    ('{"nodesPerReplica":16,"includeUnschedulableNodes":1}', "expected true or false"),
    ('{"nodesPerReplica":[16]}', "expected a number, got an array"),
    ('{"nodesPerReplica":{}}', "expected a number, got an object"),
    # a type error in an overwritten duplicate still fails, as in Go
    ('{"nodesPerReplica":16,"min":1.5,"min":2}', "expected an integer, got 1.5"),
    ('{"nodesPerReplica":"x","nodesPerReplica":16}', "expected a number"),
    # syntax
    ("", "is empty"),
    ("   ", "is empty"),
    ('{"nodesPerReplica":16,}', "invalid JSON"),
    ('{"nodesPerReplica":16} // comment', "invalid JSON"),
    ('/* c */{"nodesPerReplica":16}', "invalid JSON"),
    ('{"nodesPerReplica":16}{}', "invalid JSON"),
    ('{"nodesPerReplica":16} x', "invalid JSON"),
    ('{"nodesPerReplica":NaN}', "invalid JSON"),
    ('{"nodesPerReplica":Infinity}', "invalid JSON"),
    ('{"nodesPerReplica":016}', "invalid JSON"),
    ("{nodesPerReplica:16}", "invalid JSON"),
    ("nodesPerReplica: 16", "invalid JSON"),  # YAML is not JSON
    # not an object
    ('[{"nodesPerReplica":16}]', "expected a JSON object"),
    ('"{\\"nodesPerReplica\\":16}"', "expected a JSON object"),
    ("16", "expected a JSON object"),
    ("true", "expected a JSON object"),
]


def test_linear_reports_every_problem_at_once() -> None:
    with pytest.raises(ParamsError) as caught:
        parse_linear('{"nodesPerReplica":-1,"min":-2}')
    assert "nodesPerReplica is -1" in str(caught.value)
    assert "min is -2" in str(caught.value)


def test_linear_errors_say_how_to_fix() -> None:
    with pytest.raises(ParamsError, match=r"got 1\.5 \(write a whole number such as 2"):
        parse_linear('{"nodesPerReplica":16,"min":1.5}')
    with pytest.raises(ParamsError, match=r"write true or false, without quotes"):
        parse_linear('{"nodesPerReplica":16,"preventSinglePointFailure":"true"}')


AKS = (
    '{"coresToReplicas":[[1,2],[512,3],[1024,4],[2048,5]],'
    '"nodesToReplicas":[[1,2],[8,3],[16,4],[32,5]]}'
)

LADDER_OK: list[tuple[str, Configured[LadderParams]]] = [
    (AKS, lad(((1, 2), (512, 3), (1024, 4), (2048, 5)), ((1, 2), (8, 3), (16, 4), (32, 5)))),
    ('{"nodesToReplicas":[[0,0],[6,1]]}', lad(nodes=((0, 0), (6, 1)))),
    ("null", lad()),  # null document: empty tables (and 0 replicas)
    ("{}", lad()),
    ('{"coresToReplicas":[],"nodesToReplicas":null}', lad()),
    ('{"coresToReplicas":[[64,3],[1,1],[512,5]]}', lad(((1, 1), (64, 3), (512, 5)))),  # sorted
    # stable sort: among equal thresholds the later pair stays later
    ('{"coresToReplicas":[[5,9],[1,1],[5,2]]}', lad(((1, 1), (5, 9), (5, 2)))),
    # short pairs padded with 0, extra elements ignored unchecked, null elements -> 0
    ('{"nodesToReplicas":[[3],[]]}', lad(nodes=((0, 0), (3, 0)))),
    ('{"nodesToReplicas":[[1,2,3],[4,5,"x",{}]]}', lad(nodes=((1, 2), (4, 5)))),
    ('{"nodesToReplicas":[[null,2],[3,null],null]}', lad(nodes=((0, 2), (0, 0), (3, 0)))),
    ('{"CoresToReplicas":[[1,1]],"NODESTOREPLICAS":[[2,2]],"IncludeUnschedulableNodes":true}',
     lad(((1, 1),), ((2, 2),), include=True)),
    ('{"core\u017fToReplica\u017f":[[1,1]]}', lad(((1, 1),))),
    ('{"coresToReplicas":[[1,1]],"coresToReplicas":[[2,2]]}', lad(((2, 2),))),
    # Go decodes a repeated key into the slice it already holds: a null pair keeps the
    # old pair, and pairs hidden by a shorter array come back.
    ('{"coresToReplicas":[[1,1],[2,2]],"coresToReplicas":[null]}', lad(((1, 1),))),
    ('{"coresToReplicas":[[1,1],[2,2],[3,3]],"coresToReplicas":[[9,9]],'
     '"coresToReplicas":[null,null,null]}', lad(((2, 2), (3, 3), (9, 9)))),
    ('{"coresToReplicas":[[1,1],[2,2]],"coresToReplicas":[[7]]}', lad(((7, 0),))),
    # ... while null or [] for the whole table starts afresh
    ('{"coresToReplicas":[[1,1]],"coresToReplicas":null,"coresToReplicas":[null]}',
     lad(((0, 0),))),
    ('{"coresToReplicas":[[1,1]],"coresToReplicas":[],"coresToReplicas":[null]}',
     lad(((0, 0),))),
    ('{"nodesToReplicas":[[1,1]],"includeUnschedulableNodes":null}', lad(nodes=((1, 1),))),
    ('{"nodesToReplicas":[[0,0]]}', lad(nodes=((0, 0),))),
]

LADDER_BAD: list[tuple[str, str]] = [
    ('{"nodesToReplicas":[[-1,1]]}', "nodesToReplicas has the pair [-1,1]"),
    ('{"coresToReplicas":[[1,-1]]}', "coresToReplicas has the pair [1,-1]"),
    ('{"coresToReplicas":[[1.5,1]]}', "ladder.coresToReplicas[0][0]: expected an integer"),
    ('{"coresToReplicas":[[1,2.0]]}', "ladder.coresToReplicas[0][1]: expected an integer"),
    ('{"coresToReplicas":[["1",1]]}', "expected an integer"),
    ('{"coresToReplicas":[[1,1e2]]}', "expected an integer"),
    ('{"coresToReplicas":[1,2]}', "ladder.coresToReplicas[0]: expected a [threshold"),
    ('{"coresToReplicas":[{"a":1}]}', "expected a [threshold"),
    ('{"coresToReplicas":{"1":2}}', "expected an array of [threshold, replicas] pairs"),
    ('{"coresToReplicas":"[[1,2]]"}', "expected an array"),
    ('{"coresToReplicas":3}', "expected an array"),
    ('{"nodesToReplicas":[[1,1]],"includeUnschedulableNodes":"yes"}', "expected true or false"),
    ('{"coresToReplicas":[[1,1]],"coresToReplicas":[[1,1.5]],"coresToReplicas":[]}',
     "expected an integer"),
    ('{"coresToReplicas":[[1,99999999999999999999]]}', "out of range"),
    ("", "is empty"),
    ('{"coresToReplicas":[[1,1],]}', "invalid JSON"),
    ('{"coresToReplicas":[[1,1]]} extra', "invalid JSON"),
    ("[[1,1]]", "expected a JSON object"),
    ('"x"', "expected a JSON object"),
]


PARSERS: dict[str, Callable[[str], object]] = {"linear": parse_linear, "ladder": parse_ladder}


@pytest.mark.parametrize(("key", "text", "expected"),
                         [("linear", *case) for case in LINEAR_OK]
                         + [("ladder", *case) for case in LADDER_OK])
def test_parse_ok(key: str, text: str, expected: object) -> None:
    assert PARSERS[key](text) == expected


@pytest.mark.parametrize(("key", "text", "fragment"),
                         [("linear", *case) for case in LINEAR_BAD]
                         + [("ladder", *case) for case in LADDER_BAD])
def test_parse_bad_names_its_key(key: str, text: str, fragment: str) -> None:
    with pytest.raises(ParamsError) as caught:
        PARSERS[key](text)
    message = str(caught.value)
    assert fragment in message
    assert message.startswith(f'ConfigMap key "{key}"')


# ------------------------------------------------------------------------ configmap data


def test_modes() -> None:
    assert tuple(MODES) == ("linear", "ladder")


def test_parse_configmap_data_picks_mode() -> None:
    assert parse_configmap_data({"linear": KUBE_DNS}) == lin(256, 16, spof=True, include=True)
    assert parse_configmap_data({"ladder": AKS}).name == "ladder"


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (None, "found no keys"),
        ({}, "found no keys"),
        ({"linear": KUBE_DNS, "ladder": AKS}, 'found "ladder", "linear"'),
        ({"Linear": KUBE_DNS}, 'found "Linear"'),  # the key itself is case-sensitive
        ({"params": KUBE_DNS}, 'found "params"'),
        ({"linear ": KUBE_DNS}, 'found "linear "'),
    ],
)
def test_parse_configmap_data_needs_exactly_one_known_key(
    data: dict[str, str] | None, fragment: str
) -> None:
    with pytest.raises(ParamsError, match="exactly one key") as caught:
        parse_configmap_data(data)
    assert fragment in str(caught.value)


def test_parse_configmap_data_passes_value_errors_through() -> None:
    with pytest.raises(ParamsError, match='ConfigMap key "ladder"'):
        parse_configmap_data({"ladder": "{"})


# ------------------------------------------------------------------------ default params

DEFAULTS_OK: list[tuple[str, dict[str, str]]] = [
    (
        '{"linear":{"coresPerReplica":256,"nodesPerReplica":16,'
        '"preventSinglePointFailure":true,"includeUnschedulableNodes":true}}',
        {"linear": '{"coresPerReplica":256,"includeUnschedulableNodes":true,'
                   '"nodesPerReplica":16,"preventSinglePointFailure":true}'},
    ),
    ('{"linear":{"nodesPerReplica":16,"coresPerReplica":256}}',
     {"linear": '{"coresPerReplica":256,"nodesPerReplica":16}'}),
    (AKS.join(['{"ladder":', "}"]),
     {"ladder": '{"coresToReplicas":[[1,2],[512,3],[1024,4],[2048,5]],'
                '"nodesToReplicas":[[1,2],[8,3],[16,4],[32,5]]}'}),
    ('{"linear":{"min":2.0,"x":1e21,"y":1e-7,"z":0.000001,"w":-0}}',
     {"linear": '{"min":2,"w":-0,"x":1e+21,"y":1e-7,"z":0.000001}'}),
    ('{"linear":{"a":1,"a":2},"linear":{"b":3}}', {"linear": '{"b":3}'}),
    ('{"linear":{"s":"<&>"}}', {"linear": r'{"s":"\u003c\u0026\u003e"}'}),
    ('{"a":1,"b":"x","c":null,"d":[true]}', {"a": "1", "b": '"x"', "c": "null", "d": "[true]"}),
    ('{"linear":{"big":123456789012345678901}}', {"linear": '{"big":123456789012345680000}'}),
    ("{}", {}),
    ("null", {}),  # Go: a null map decodes fine and yields no entries
    (' {"Linear":{}} ', {"Linear": "{}"}),  # map keys are kept exactly
]


@pytest.mark.parametrize(("text", "expected"), DEFAULTS_OK)
def test_default_params_to_data(text: str, expected: dict[str, str]) -> None:
    assert default_params_to_data(text) == expected


@pytest.mark.parametrize(
    "text",
    ["", "{", "[]", '"x"', "1", '{"linear":{}} x', '{"linear":{},}', '{"linear":{"a":1e400}}',
     "{'linear':{}}"],
)
def test_default_params_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="--default-params must be a JSON object"):
        default_params_to_data(text)


def test_default_params_round_trip_into_parse() -> None:
    data = default_params_to_data('{"linear":' + KUBE_DNS + "}")
    assert parse_configmap_data(data) == lin(256, 16, spof=True, include=True)


def test_the_opt_in_keys_are_their_modules_fields() -> None:
    """params names the zones and load keys itself, so that their modules load only with a
    value that has one (the daemon's start-up path does not import them)."""
    from cpa.horizontal.decide import load, params, zones

    assert params.ZONES_KEY == zones.FIELD and params.LOAD_KEY == load.FIELD
    assert {"behavior", zones.FIELD, load.FIELD} <= set(params.SHARED_KEYS)


@pytest.mark.parametrize(("value", "expected"), [("true", True), ("false", False),
                                                 ("null", False)])
def test_manage_pod_disruption_budget_key(value: str, expected: bool) -> None:
    params = parse_configmap_data(
        {"linear": f'{{"coresPerReplica":2,"managePodDisruptionBudget":{value}}}'})
    assert params.shared.manage_budgets is expected
    assert ("managePodDisruptionBudget" in params.shared.fields()) is expected


@pytest.mark.parametrize("value", ['"true"', "1", "[]", "{}"])
def test_manage_pod_disruption_budget_takes_true_or_false_only(value: str) -> None:
    with pytest.raises(ParamsError, match=r"managePodDisruptionBudget.*expected true or false"):
        parse_configmap_data({"ladder": '{"coresToReplicas":[[1,1]],'
                                        f'"managePodDisruptionBudget":{value}}}'})
