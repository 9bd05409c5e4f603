"""The ConfigMap's defaults rules (``--update-configmap-from-defaults``): the hash, the
annotation, the PUT that keeps everything but the data."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cpa.kube.api import ApiError
from cpa.kube.configmap import (
    AUTOSCALER_MANAGERS,
    DEFAULTS_ANNOTATION,
    SUPERSEDED_KEPT,
    DefaultsState,
    data_hash,
    data_writers,
    defaults_state,
    fetch,
    get_or_create,
    replace_data,
    superseded_after,
    superseded_hashes,
    written_by_autoscalers,
)
from tests.fakes import FakeApi

NS, NAME = "kube-system", "kube-dns-autoscaler"
PATH = f"/api/v1/namespaces/{NS}/configmaps/{NAME}"
OLD = {"linear": '{"coresPerReplica":256,"nodesPerReplica":16}'}
NEW = {"linear": '{"coresPerReplica":256,"nodesPerReplica":8}'}

data = st.dictionaries(st.text(max_size=8), st.text(max_size=16), max_size=4)


@given(data)
def test_the_hash_ignores_key_order(value: dict[str, str]) -> None:
    assert data_hash(dict(reversed(list(value.items())))) == data_hash(value)


@given(data, data)
def test_different_data_hashes_differently(a: dict[str, str], b: dict[str, str]) -> None:
    assert (data_hash(a) == data_hash(b)) == (a == b)


def test_no_data_is_empty_data() -> None:
    assert data_hash(None) == data_hash({}) and len(data_hash(None)) == 64


@pytest.mark.parametrize(("data", "recorded", "defaults", "state"), [
    # the defaults already: nothing to do, annotated or not
    (OLD, data_hash(OLD), OLD, DefaultsState.CURRENT),
    (OLD, None, OLD, DefaultsState.CURRENT),
    (OLD, "junk", OLD, DefaultsState.CURRENT),
    # ours and unedited, the defaults changed: replace
    (OLD, data_hash(OLD), NEW, DefaultsState.OUTDATED),
    (None, data_hash({}), NEW, DefaultsState.OUTDATED),
    # edited since we wrote it
    (NEW, data_hash(OLD), {"ladder": "{}"}, DefaultsState.DIVERGED),
    ({**OLD, "x": "1"}, data_hash(OLD), NEW, DefaultsState.DIVERGED),
    # no annotation: upstream's or a hand-made ConfigMap counts as edited
    (OLD, None, NEW, DefaultsState.DIVERGED),
    (None, None, NEW, DefaultsState.DIVERGED),
    (OLD, "", NEW, DefaultsState.DIVERGED),
])
def test_defaults_state(data: dict[str, str] | None, recorded: str | None,
                        defaults: dict[str, str], state: DefaultsState) -> None:
    assert defaults_state(data, recorded, defaults) is state


@given(data, data, st.booleans())
def test_only_unedited_annotated_data_is_ever_replaced(
        current: dict[str, str], defaults: dict[str, str], annotated: bool) -> None:
    recorded = data_hash(current) if annotated else None
    state = defaults_state(current, recorded, defaults)
    assert (state is DefaultsState.OUTDATED) == (annotated and current != defaults)


THIRD = {"ladder": '{"nodesToReplicas":[[1,1]]}'}


@pytest.mark.parametrize(("data", "recorded", "defaults", "superseded", "state"), [
    # our defaults were replaced by the data in force: newer defaults, left alone
    (NEW, data_hash(NEW), OLD, data_hash(OLD), DefaultsState.SUPERSEDED),
    (THIRD, data_hash(THIRD), OLD, f"{data_hash(NEW)},{data_hash(OLD)}",
     DefaultsState.SUPERSEDED),
    # others' defaults were: ours are newer still
    (NEW, data_hash(NEW), THIRD, data_hash(OLD), DefaultsState.OUTDATED),
    (NEW, data_hash(NEW), THIRD, "", DefaultsState.OUTDATED),
    # in force already, or edited: as without the list
    (OLD, data_hash(NEW), OLD, data_hash(OLD), DefaultsState.CURRENT),
    ({"linear": "{}"}, data_hash(NEW), OLD, data_hash(OLD), DefaultsState.DIVERGED),
])
def test_defaults_once_replaced_never_replace_the_data_again(
        data: dict[str, str], recorded: str, defaults: dict[str, str], superseded: str,
        state: DefaultsState) -> None:
    assert defaults_state(data, recorded, defaults, superseded) is state


def test_the_superseded_list_is_newest_first_without_repeats_and_bounded() -> None:
    a, b, c = data_hash(OLD), data_hash(NEW), data_hash(THIRD)
    assert superseded_after(a, None, b) == a
    assert superseded_after(b, a, c) == f"{b},{a}"
    assert superseded_after(c, f"{b},{a}", a) == f"{c},{b}"  # a is in force again
    assert superseded_after(a, f"{a},{b}", c) == f"{a},{b}"
    many = [data_hash({"k": str(i)}) for i in range(SUPERSEDED_KEPT + 3)]
    kept = superseded_hashes(superseded_after(many[0], ",".join(many[1:]), c))
    assert kept == tuple(many[:SUPERSEDED_KEPT])
    assert superseded_hashes("") == () and superseded_hashes(None) == ()


def test_without_annotations_the_created_object_is_upstreams() -> None:
    api = FakeApi()
    get_or_create(api, NS, NAME, OLD)
    ((_, body),) = api.created
    assert body == {"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": NAME, "namespace": NS}, "data": OLD}


def test_created_with_the_annotation_when_asked() -> None:
    api = FakeApi()
    cm = get_or_create(api, NS, NAME, OLD, annotations={DEFAULTS_ANNOTATION: data_hash(OLD)})
    assert cm.annotation(DEFAULTS_ANNOTATION) == data_hash(OLD)
    assert api.created[0][1]["metadata"]["annotations"] == {DEFAULTS_ANNOTATION: data_hash(OLD)}


def _stored(api: FakeApi, **metadata: Any) -> None:
    api.put(PATH, {"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": NAME, "namespace": NS, **metadata}, "data": OLD})


def test_replace_keeps_labels_and_other_annotations() -> None:
    api = FakeApi()
    _stored(api, labels={"app": "dns"}, annotations={"other": "x", DEFAULTS_ANNOTATION: "h"})
    read = fetch(api, NS, NAME)
    out = replace_data(api, NS, NAME, read, NEW, {DEFAULTS_ANNOTATION: data_hash(NEW)})
    stored = api.objects[PATH]
    assert stored["data"] == NEW and out.data == NEW
    assert stored["metadata"]["labels"] == {"app": "dns"}
    assert stored["metadata"]["annotations"] == {"other": "x",
                                                 DEFAULTS_ANNOTATION: data_hash(NEW)}
    assert out.resource_version != read.resource_version


def test_replace_keeps_every_field_it_does_not_own() -> None:
    """A PUT replaces the whole object: binaryData (and any field a later API adds) left
    out of it would be deleted."""
    api = FakeApi()
    binary = {"notes.gz": "H4sIAAAAAAAAA8vMVUhKzEnNS1UoSa0oAQAfmR+DDgAAAA=="}
    api.put(PATH, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": NAME, "namespace": NS, "annotations": {DEFAULTS_ANNOTATION: data_hash(OLD)},
        "ownerReferences": [{"kind": "Addon", "name": "dns"}], "finalizers": ["x/y"]},
        "data": OLD, "binaryData": binary, "immutable": False, "futureField": {"a": 1}})
    replace_data(api, NS, NAME, fetch(api, NS, NAME), NEW,
                 {DEFAULTS_ANNOTATION: data_hash(NEW)})
    stored = api.objects[PATH]
    assert stored["data"] == NEW and stored["binaryData"] == binary
    assert stored["immutable"] is False and stored["futureField"] == {"a": 1}
    assert stored["metadata"]["ownerReferences"] == [{"kind": "Addon", "name": "dns"}]
    assert stored["metadata"]["finalizers"] == ["x/y"]


def test_an_immutable_configmap_is_an_edit() -> None:
    assert defaults_state(OLD, data_hash(OLD), NEW, immutable=True) is DefaultsState.DIVERGED
    assert defaults_state(OLD, data_hash(OLD), OLD, immutable=True) is DefaultsState.CURRENT
    api = FakeApi()
    _stored(api)
    assert not fetch(api, NS, NAME).immutable
    api.objects[PATH]["immutable"] = True
    api.put(PATH, api.objects[PATH])
    assert fetch(api, NS, NAME).immutable


def test_replace_never_overwrites_an_edit_made_since_the_read() -> None:
    api = FakeApi()
    _stored(api)
    read = fetch(api, NS, NAME)
    api.objects[PATH]["data"] = {"linear": "{}"}
    api.put(PATH, api.objects[PATH])  # someone's edit: a new resourceVersion
    with pytest.raises(ApiError) as caught:
        replace_data(api, NS, NAME, read, NEW, {})
    assert caught.value.conflict and api.objects[PATH]["data"] == {"linear": "{}"}


def test_a_403_names_the_rule_to_add() -> None:
    api = FakeApi(fail_writes=ApiError(403, "Forbidden", 'configmaps "x" is forbidden'))
    _stored(api)
    with pytest.raises(ApiError) as caught:
        replace_data(api, NS, NAME, fetch(api, NS, NAME), NEW, {})
    message = str(caught.value)
    assert caught.value.forbidden
    assert '"update"' in message and '"configmaps"' in message
    assert "configmap-update-rbac.yaml" in message
    assert "--update-configmap-from-defaults" in message


def entry(manager: str, fields: Any = None, operation: str = "Update",
          **extra: Any) -> dict[str, Any]:
    return {"manager": manager, "operation": operation, "apiVersion": "v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {".": {}, "f:linear": {}}} if fields is None else fields,
            **extra}


LABELS_ONLY: dict[str, Any] = {"f:metadata": {"f:labels": {"f:team": {}}}}


@pytest.mark.parametrize("managed", [
    [entry("cluster-proportional-autoscaler")],
    [entry("cluster-proportional-autoscaler-py")],
    [entry("cluster-proportional-autoscaler"), entry("cluster-proportional-autoscaler-py")],
    [entry("cluster-proportional-autoscaler", operation="Apply")],
    [entry("cluster-proportional-autoscaler"), entry("kubectl-label", LABELS_ONLY)],
])
def test_data_set_by_autoscalers_only_follows_the_defaults(managed: Any) -> None:
    assert written_by_autoscalers(managed)
    assert defaults_state(OLD, None, NEW, managed_fields=managed) is DefaultsState.OUTDATED


@pytest.mark.parametrize("managed", [
    None, [], {}, "x", [None], [entry(5)],  # type: ignore[arg-type]
    [entry("kubectl-edit")],
    [entry("cluster-proportional-autoscaler"), entry("kubectl-edit")],
    [entry("cluster-proportional-autoscaler"), entry("kubectl-client-side-apply")],
    [entry("cluster-proportional-autoscaler"), entry("helm", operation="Apply")],
    [entry("cluster-proportional-autoscaler", operation="Delete")],
    [entry("cluster-proportional-autoscaler", fields=["f:data"])],
    [entry("kube-controller-manager", LABELS_ONLY)],  # nobody set the data
    [entry("Cluster-Proportional-Autoscaler")],
    [entry("cluster-proportional-autoscaler "), ],
])
def test_anything_else_is_edited(managed: Any) -> None:
    assert not written_by_autoscalers(managed)
    assert defaults_state(OLD, None, NEW, managed_fields=managed) is DefaultsState.DIVERGED


def test_managed_fields_never_override_the_annotation_or_immutable() -> None:
    ours = [entry("cluster-proportional-autoscaler")]
    assert defaults_state(OLD, "0" * 64, NEW, managed_fields=ours) is DefaultsState.DIVERGED
    assert defaults_state(OLD, None, NEW, immutable=True,
                          managed_fields=ours) is DefaultsState.DIVERGED


def test_the_writers_named() -> None:
    managed = [entry("cluster-proportional-autoscaler"), entry("kubectl-edit"),
               entry("x", LABELS_ONLY), entry("status-writer", subresource="status")]
    assert data_writers(managed) == frozenset({"cluster-proportional-autoscaler", "kubectl-edit"})


def test_our_manager_name_is_our_user_agents_program() -> None:
    from cpa.kube.client import USER_AGENT

    assert USER_AGENT.split("/")[0] in AUTOSCALER_MANAGERS
