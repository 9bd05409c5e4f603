"""Where the parameters come from, beyond upstream (issue 29): new ``--default-params``
reaching a ConfigMap nobody edited (``--update-configmap-from-defaults``), and a mounted
ConfigMap directory swapped the kubelet's way (``--config-dir``), against the real
kube-apiserver with the RBAC each needs and nothing more.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from cpa.kube.configmap import DEFAULTS_ANNOTATION, SUPERSEDED_ANNOTATION, data_hash
from tests.configvolume import kubelet_write
from tests.controlplane import AdminClient, ControlPlane
from tests.integration.support import (
    ADDON_RULES,
    AutoscalerProcess,
    configmap,
    coredns_and_nodes,
    create_configmap,
    put_configmap_data,
    replicas,
    service_account,
    wait_polls,
    wait_replicas,
    wait_until,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

CM = "kube-dns-autoscaler"
OLD = '{"linear":{"nodesPerReplica":4}}'  # 16 Nodes -> 4
NEW = '{"linear":{"nodesPerReplica":2}}'  # 16 Nodes -> 8
OLD_DATA = {"linear": '{"nodesPerReplica":4}'}
NEW_DATA = {"linear": '{"nodesPerReplica":2}'}
FOLLOW = "--update-configmap-from-defaults"
UPDATE_RULE = {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["update"]}
EVENTS_RULE = {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create"]}


def args(namespace: str, defaults: str, *extra: str) -> list[str]:
    return [f"--namespace={namespace}", f"--configmap={CM}", "--target=deployment/coredns",
            f"--default-params={defaults}", *extra]


@pytest.mark.api_paths
def test_new_defaults_reach_an_unedited_configmap_after_a_restart(
        controlplane: ControlPlane, namespace: str, no_nodes: None, start: Any) -> None:
    admin = controlplane.admin()
    coredns_and_nodes(admin, namespace, "dflt", 16, cpu="1")
    kubeconfig = service_account(controlplane, namespace, "follow",
                                 [UPDATE_RULE, EVENTS_RULE])
    first = start(*args(namespace, OLD, FOLLOW), kubeconfig=kubeconfig)
    wait_replicas(admin, namespace, "deployment", "coredns", 4, proc=first)
    created = configmap(admin, namespace, CM)
    assert created["data"] == OLD_DATA
    assert created["metadata"]["annotations"] == {DEFAULTS_ANNOTATION: data_hash(OLD_DATA)}
    first.stop()

    # A distribution upgrade: the same Deployment, new --default-params.
    second = start(*args(namespace, NEW, FOLLOW, "--events"), kubeconfig=kubeconfig)
    wait_replicas(admin, namespace, "deployment", "coredns", 8, proc=second)
    updated = configmap(admin, namespace, CM)
    assert updated["data"] == NEW_DATA
    assert updated["metadata"]["annotations"] == {
        DEFAULTS_ANNOTATION: data_hash(NEW_DATA), SUPERSEDED_ANNOTATION: data_hash(OLD_DATA)}
    assert updated["metadata"]["uid"] == created["metadata"]["uid"]  # updated, not re-created
    (event,) = second.events("configmap.defaults_updated")
    assert event["old"] == OLD_DATA and event["new"] == NEW_DATA
    wait_polls(second, count=3)
    metrics = second.metrics()
    assert metrics["cpa_configmap_defaults_updates_total"] == 1
    assert metrics["cpa_configmap_defaults_diverged"] == 0
    version = updated["metadata"]["resourceVersion"]
    assert configmap(admin, namespace, CM)["metadata"]["resourceVersion"] == version
    (applied,) = wait_until("the DefaultsApplied Event", lambda: [
        e for e in admin.get(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")["items"]
        if e["reason"] == "DefaultsApplied"])
    assert applied["type"] == "Normal"
    assert applied["regarding"]["kind"] == "ConfigMap" and applied["regarding"]["name"] == CM


def test_without_the_flag_the_configmap_created_is_upstreams(
        controlplane: ControlPlane, namespace: str, no_nodes: None, start: Any) -> None:
    """The object upstream creates: name, namespace and data; no annotation; and new
    defaults never reach it."""
    admin = controlplane.admin()
    coredns_and_nodes(admin, namespace, "plain", 16, cpu="1")
    proc = start(*args(namespace, OLD))
    wait_replicas(admin, namespace, "deployment", "coredns", 4, proc=proc)
    created = configmap(admin, namespace, CM)
    assert "annotations" not in created["metadata"] and "labels" not in created["metadata"]
    assert created["data"] == OLD_DATA
    proc.stop()
    again = start(*args(namespace, NEW))
    again.wait_poll_ok()
    wait_polls(again, count=3)
    assert configmap(admin, namespace, CM)["metadata"]["resourceVersion"] == \
        created["metadata"]["resourceVersion"]
    assert replicas(admin, namespace, "deployment", "coredns") == 4
    assert "cpa_configmap_defaults_diverged" not in again.metrics()


@pytest.mark.parametrize("how", ["edited", "no annotation"])
def test_an_edited_or_unannotated_configmap_is_left_alone(
        controlplane: ControlPlane, namespace: str, no_nodes: None, start: Any,
        how: str) -> None:
    admin = controlplane.admin()
    coredns_and_nodes(admin, namespace, "edit", 16, cpu="1")
    kubeconfig = service_account(controlplane, namespace, "follow", [UPDATE_RULE])
    edited = {"linear": '{"nodesPerReplica":16}'}  # 16 Nodes -> 1
    if how == "edited":
        first = start(*args(namespace, OLD, FOLLOW), kubeconfig=kubeconfig)
        wait_replicas(admin, namespace, "deployment", "coredns", 4, proc=first)
        first.stop()
        put_configmap_data(admin, namespace, CM, edited)  # the annotation stays, stale
    else:  # made by hand (or by upstream): no annotation
        create_configmap(admin, namespace, CM, edited)
    version = configmap(admin, namespace, CM)["metadata"]["resourceVersion"]

    proc = start(*args(namespace, NEW, FOLLOW), kubeconfig=kubeconfig)
    wait_replicas(admin, namespace, "deployment", "coredns", 1, proc=proc)
    wait_polls(proc, count=3)
    left = configmap(admin, namespace, CM)
    assert left["data"] == edited and left["metadata"]["resourceVersion"] == version
    metrics = proc.metrics()
    assert metrics["cpa_configmap_defaults_diverged"] == 1
    assert metrics["cpa_configmap_defaults_updates_total"] == 0
    (said,) = proc.events("configmap.defaults_diverged")  # once, not every poll
    assert ("edited since" in said["reason"]) == (how == "edited")
    assert not proc.events("configmap.defaults_updated")
    proc.wait_poll_ok()


def test_without_update_on_configmaps_the_poll_fails_naming_the_rule(
        controlplane: ControlPlane, namespace: str, no_nodes: None, start: Any) -> None:
    """The manifest's RBAC (configmaps get and create only) with the flag: the update is
    refused, /last-poll says which rule to add, and nothing is scaled on old defaults."""
    admin = controlplane.admin()
    coredns_and_nodes(admin, namespace, "deny", 16, cpu="1")
    admin.post(f"/api/v1/namespaces/{namespace}/configmaps", {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": CM, "annotations": {DEFAULTS_ANNOTATION: data_hash(OLD_DATA)}},
        "data": OLD_DATA})  # as the flag created it with the old defaults
    proc = start(*args(namespace, NEW, FOLLOW))  # the harness's addon identity
    body = proc.wait_poll_error("cannot update ConfigMap")
    assert f"cannot update ConfigMap {namespace}/{CM} to the new --default-params" in body
    assert 'verbs ["update"]' in body and "configmap-update-rbac.yaml" in body
    assert "403" in body
    assert replicas(admin, namespace, "deployment", "coredns") == 1
    assert configmap(admin, namespace, CM)["data"] == OLD_DATA


MARKER = "cpa-tests/marker"


def writes_since(admin: Any, path: str, name: str, version: str) -> list[dict[str, Any]]:
    """Every version of the object ``path/name`` written since ``version``, in order, read
    from a watch; the test marks the end of its scenario by annotating the object."""
    admin.patch(f"{path}/{name}", {"metadata": {"annotations": {MARKER: "end"}}})
    events = admin.watch_until(
        f"{path}?watch=1&resourceVersion={version}&fieldSelector=metadata.name%3D{name}",
        lambda e: MARKER in (e["object"]["metadata"].get("annotations") or {}))
    assert all(e["type"] == "MODIFIED" for e in events), [e["type"] for e in events]
    return [e["object"] for e in events[:-1]]


def test_two_autoscalers_with_other_defaults_overlapping_write_the_configmap_once(
        controlplane: ControlPlane, namespace: str, no_nodes: None, start: Any) -> None:
    """A rolling update: the old Pod (old defaults) still polls while the new one (new
    defaults) starts. The new defaults are written once; the old Pod sees that they replaced
    its own and leaves them alone, so the replicas move once, to the new defaults' count."""
    admin = controlplane.admin()
    coredns_and_nodes(admin, namespace, "overlap", 16, cpu="1")
    kubeconfig = service_account(controlplane, namespace, "follow", [UPDATE_RULE])
    old = start(*args(namespace, OLD, FOLLOW), kubeconfig=kubeconfig)
    wait_replicas(admin, namespace, "deployment", "coredns", 4, proc=old)
    cms = f"/api/v1/namespaces/{namespace}/configmaps"
    deployments = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    cm_version = configmap(admin, namespace, CM)["metadata"]["resourceVersion"]
    deployment_version = admin.get(f"{deployments}/coredns")["metadata"]["resourceVersion"]

    new = start(*args(namespace, NEW, FOLLOW), kubeconfig=kubeconfig)
    new.wait_healthy()
    wait_polls(old, new, count=12)  # the overlap: a dozen polls of each at 1 s
    for proc in (old, new):
        assert proc.stop() == 0

    cm_writes = writes_since(admin, cms, CM, cm_version)
    assert [w["data"] for w in cm_writes] == [NEW_DATA]
    scale_writes = writes_since(admin, deployments, "coredns", deployment_version)
    assert [w["spec"]["replicas"] for w in scale_writes] == [8]
    (superseded,) = old.events("configmap.defaults_superseded")  # once, not every poll
    assert superseded["data"] == NEW_DATA
    assert not old.events("configmap.defaults_updated")
    assert len(new.events("configmap.defaults_updated")) == 1


def create_annotated_configmap(admin: Any, namespace: str, data: dict[str, str],
                               **fields: Any) -> dict[str, Any]:
    """The ConfigMap as ``--update-configmap-from-defaults`` created it with ``data``, and
    what an operator added to it (``fields``: top-level fields, ``labels``,
    ``annotations``)."""
    labels = fields.pop("labels", {})
    annotations = {DEFAULTS_ANNOTATION: data_hash(data), **fields.pop("annotations", {})}
    body = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": CM, "labels": labels, "annotations": annotations},
            "data": data, **fields}
    result: dict[str, Any] = admin.post(f"/api/v1/namespaces/{namespace}/configmaps", body)
    return result


@pytest.mark.api_paths
def test_an_immutable_configmap_is_left_alone_with_its_data_in_force(
        controlplane: ControlPlane, namespace: str, no_nodes: None, start: Any) -> None:
    """An operator froze the ConfigMap: no update is tried (it could only fail), every poll
    scales from its data."""
    admin = controlplane.admin()
    coredns_and_nodes(admin, namespace, "frozen", 16, cpu="1")
    kubeconfig = service_account(controlplane, namespace, "follow", [UPDATE_RULE])
    created = create_annotated_configmap(admin, namespace, OLD_DATA, immutable=True)
    proc = start(*args(namespace, NEW, FOLLOW), kubeconfig=kubeconfig)
    wait_replicas(admin, namespace, "deployment", "coredns", 4, proc=proc)
    wait_polls(proc, count=3)
    proc.wait_poll_ok()
    metrics = proc.metrics()
    assert metrics.get('cpa_polls_total{result="error"}', 0) == 0
    assert metrics["cpa_configmap_defaults_diverged"] == 1
    assert metrics["cpa_configmap_defaults_updates_total"] == 0
    (said,) = proc.events("configmap.defaults_diverged")
    assert "immutable" in said["reason"]
    assert not proc.events("configmap.defaults_updated")
    left = configmap(admin, namespace, CM)
    assert left["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


def test_the_update_keeps_what_an_operator_added(
        controlplane: ControlPlane, namespace: str, no_nodes: None, start: Any) -> None:
    """The autoscaler owns the data and its annotations: binaryData, labels and other
    annotations an operator added are written back as they were."""
    admin = controlplane.admin()
    coredns_and_nodes(admin, namespace, "keep", 16, cpu="1")
    kubeconfig = service_account(controlplane, namespace, "follow", [UPDATE_RULE])
    binary = {"notes.gz": "H4sIAAAAAAAAA8vMVUhKzEnNS1UoSa0oAQAfmR+DDgAAAA=="}
    created = create_annotated_configmap(
        admin, namespace, OLD_DATA, binaryData=binary, labels={"team": "dns"},
        annotations={"owner": "platform"})
    proc = start(*args(namespace, NEW, FOLLOW), kubeconfig=kubeconfig)
    wait_replicas(admin, namespace, "deployment", "coredns", 8, proc=proc)
    updated = configmap(admin, namespace, CM)
    assert updated["metadata"]["uid"] == created["metadata"]["uid"]
    assert updated["data"] == NEW_DATA
    assert updated.get("binaryData") == binary
    assert updated["metadata"]["labels"] == {"team": "dns"}
    assert updated["metadata"]["annotations"]["owner"] == "platform"
    assert updated["metadata"]["annotations"][DEFAULTS_ANNOTATION] == data_hash(NEW_DATA)


NO_CONFIGMAP_RULES = [rule for rule in ADDON_RULES if "configmaps" not in rule["resources"]]
LINEAR_4 = json.dumps({"nodesPerReplica": 4})
LADDER_6 = json.dumps({"nodesToReplicas": [[1, 1], [10, 6]]})


def from_a_config_dir(controlplane: ControlPlane, namespace: str, start: Any, prefix: str,
                      volume: Path) -> tuple[AdminClient, AutoscalerProcess]:
    """coredns on 16 one-core Nodes, scaled by the parameters in ``volume`` (--config-dir)
    as a ServiceAccount without any configmaps right: a ConfigMap request would be a 403
    and a failed poll. Returns the admin client and the process."""
    admin = controlplane.admin()
    coredns_and_nodes(admin, namespace, prefix, 16, cpu="1")
    kubeconfig = service_account(controlplane, namespace, "gitops", rules=NO_CONFIGMAP_RULES)
    proc = start(f"--namespace={namespace}", "--target=deployment/coredns",
                 f"--config-dir={volume}", kubeconfig=kubeconfig)
    return admin, proc


def test_config_dir_follows_the_kubelets_atomic_swap_without_configmap_rights(
        controlplane: ControlPlane, namespace: str, no_nodes: None, start: Any,
        tmp_path: Path) -> None:
    volume = tmp_path / "params"
    kubelet_write(volume, {"linear": LINEAR_4})
    admin, proc = from_a_config_dir(controlplane, namespace, start, "dir", volume)
    wait_replicas(admin, namespace, "deployment", "coredns", 4, proc=proc)

    # The kubelet's update: a new timestamped directory, ..data_tmp renamed over ..data,
    # a new key (the mode switches), the old key's link and directory removed.
    kubelet_write(volume, {"ladder": LADDER_6})
    wait_replicas(admin, namespace, "deployment", "coredns", 6, proc=proc)
    wait_polls(proc, count=2)
    metrics = proc.metrics()
    assert metrics.get('cpa_polls_total{result="error"}', 0) == 0
    assert metrics['cpa_params_info{mode="ladder"}'] == 1

    # Both keys: the poll fails with what to fix and nothing is written; fixed, it scales.
    kubelet_write(volume, {"linear": LINEAR_4, "ladder": LADDER_6})
    body = proc.wait_poll_error("exactly one key")
    assert f"invalid --config-dir {volume}" in body and '"ladder", "linear"' in body
    assert replicas(admin, namespace, "deployment", "coredns") == 6
    kubelet_write(volume, {"linear": LINEAR_4})
    wait_replicas(admin, namespace, "deployment", "coredns", 4, proc=proc)
    proc.wait_poll_ok()
    assert not proc.events("configmap.created")


def test_config_dir_missing_fails_the_poll_until_mounted(
        controlplane: ControlPlane, namespace: str, no_nodes: None, start: Any,
        tmp_path: Path) -> None:
    volume = tmp_path / "not-yet"
    admin, proc = from_a_config_dir(controlplane, namespace, start, "nodir", volume)
    body = proc.wait_poll_error("no such directory")
    assert f"--config-dir {volume}: no such directory" in body
    wait_polls(proc, count=2)
    assert replicas(admin, namespace, "deployment", "coredns") == 1
    kubelet_write(volume, {"linear": LINEAR_4})
    wait_until("the mounted parameters used",
               lambda: replicas(admin, namespace, "deployment", "coredns") == 4)
    proc.wait_poll_ok()


def test_config_dir_key_that_is_a_fifo_fails_the_poll_without_blocking_it(
        controlplane: ControlPlane, namespace: str, no_nodes: None, start: Any,
        tmp_path: Path) -> None:
    """A directory made by hand (a hostPath) whose key file becomes a FIFO: reading it
    would wait for a writer for ever, the poll loop stuck while /healthz and /last-poll
    still said 200. Each poll fails naming the file; a regular file again, it scales."""
    volume = tmp_path / "params"
    volume.mkdir()
    (volume / "linear").write_text(LINEAR_4)
    admin, proc = from_a_config_dir(controlplane, namespace, start, "fifo", volume)
    wait_replicas(admin, namespace, "deployment", "coredns", 4, proc=proc)

    (volume / "linear").unlink()
    os.mkfifo(volume / "linear")
    body = proc.wait_poll_error("FIFO")
    assert f"{volume / 'linear'} is a FIFO (named pipe), not a regular file" in body
    failed = proc.metrics()['cpa_polls_total{result="error"}']
    wait_polls(proc, count=2)  # the loop goes on: every poll fails, none hangs
    assert proc.metrics()['cpa_polls_total{result="error"}'] >= failed + 2

    (volume / "linear").unlink()
    (volume / "ladder").write_text(LADDER_6)
    wait_replicas(admin, namespace, "deployment", "coredns", 6, proc=proc)
    proc.wait_poll_ok()
