"""Issue 27 #4: one malformed answer is the error of its target alone.

The real daemon writes 20 Deployments through an HTTPS fault proxy in front of the real API
server; the proxy rewrites the Scale of one target to ``spec.replicas: {"x": 1}`` (which
once raised a TypeError that ended the poll: the targets after it were never written) and
of another to ``spec.replicas: "7"`` (which was read as 7 and overwritten, where client-go
refuses to decode it). Every other target must be written in that same poll, the poll's
error must name both bad targets and their field, and neither bad target may be written.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.controlplane import ControlPlane
from tests.integration.httpproxy import Request, Rewrite, Rule
from tests.integration.support import (
    create_configmap,
    create_nodes,
    create_workload,
    replicas,
    wait_until,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

CM = "decode-params"
TARGETS = [f"t{i:02d}" for i in range(20)]
OBJECT = TARGETS[1]  # {"x": 1}: the 18 targets after it were never written
STRING = TARGETS[5]  # "7": was read as 7 and overwritten
WANTED = 3  # three Nodes, one replica per Node


def replace_replicas(value: object) -> Callable[[bytes], bytes]:
    def edit(body: bytes) -> bytes:
        doc = json.loads(body)
        doc["spec"]["replicas"] = value
        return json.dumps(doc).encode()
    return edit


def scale_get(name: str) -> Callable[[Request], bool]:
    return lambda r: r.method == "GET" and r.path.endswith(f"/deployments/{name}/scale")


SHOWN = {OBJECT: "is an object", STRING: "is a string ('7')"}


@pytest.mark.parametrize("bad", [
    {OBJECT: {"x": 1}, STRING: "7"},
    {STRING: "7"},  # alone: before, read as 7 and overwritten with 3
], ids=["object-and-string", "string"])
def test_a_malformed_scale_fails_its_target_alone_in_the_same_poll(
        controlplane: ControlPlane, namespace: str, no_nodes: None, start: Any,
        http_proxy: Any, bad: dict[str, object]) -> None:
    admin = controlplane.admin()
    for name in TARGETS:
        create_workload(admin, namespace, "deployment", name, replicas=1)
    create_nodes(admin, f"dc-{namespace[-6:]}", WANTED)
    create_configmap(admin, namespace, CM, {"linear": '{"nodesPerReplica":1}'})
    proxy, kubeconfig = http_proxy()
    for name, value in bad.items():
        proxy.add(Rule(name, scale_get(name), Rewrite(replace_replicas(value))))

    began = time.monotonic()
    # One poll in the window: a period far longer than the test, so whatever is written
    # was written by the first poll.
    proc = start(f"--namespace={namespace}", f"--configmap={CM}",
                 "--target=" + ",".join(f"deployment/{n}" for n in TARGETS),
                 poll_period=600, kubeconfig=kubeconfig)
    proc.wait_healthy()
    wait_until("the first poll", lambda: proc.alive() and proc.polls() >= 1, 120)
    status, body = proc.last_poll()
    failed_after = time.monotonic() - began
    polls = proc.polls()
    took = proc.metrics().get("cpa_poll_duration_seconds_sum", float("nan"))
    counts = {name: replicas(admin, namespace, "deployment", name) for name in TARGETS}
    written = sorted(n for n, got in counts.items() if got == WANTED)
    puts = {r.path.rsplit("/", 2)[-2] for r in proxy.requests("PUT")}
    print(f"\nfirst poll done {failed_after:.1f}s after start, took {took:.2f}s "
          f"({polls} poll(s)); "
          f"{len(written)}/{len(TARGETS)} targets written, PUTs to {len(puts)}; "
          f"/last-poll: {body[:400]!r}")

    assert polls == 1, "one poll only: the figures are the first poll's"
    assert status == 500, body
    good = [n for n in TARGETS if n not in bad]
    assert written == good, f"every target but the malformed ones: {counts}"
    assert all(counts[name] == 1 for name in bad) and not set(bad) & puts
    for name in bad:
        assert f"deployment/{name}: cannot scale to {WANTED}: GET " in body, body
        assert f"spec.replicas {SHOWN[name]}, not an int32" in body, body
    assert "unexpected" not in body, body



def create_hpa(admin: Any, namespace: str, name: str, minimum: int, maximum: int) -> None:
    admin.post(f"/apis/autoscaling/v2/namespaces/{namespace}/horizontalpodautoscalers", {
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                    "name": name},
                 "minReplicas": minimum, "maxReplicas": maximum}})


def hpa_min(admin: Any, namespace: str, name: str) -> int:
    return int(admin.get(f"/apis/autoscaling/v2/namespaces/{namespace}/"
                         f"horizontalpodautoscalers/{name}")["spec"]["minReplicas"])


def test_a_malformed_hpa_fails_its_target_alone(
        controlplane: ControlPlane, namespace: str, no_nodes: None, start: Any,
        http_proxy: Any) -> None:
    """An HPA floor target whose HPA answers ``minReplicas: "2"``: refused (client-go
    would not decode it), named, not patched; the targets around it are written."""
    admin = controlplane.admin()
    for name in ("a", "web", "b"):
        create_workload(admin, namespace, "deployment", name, replicas=1)
    create_hpa(admin, namespace, "web", 1, 10)
    create_nodes(admin, f"dh-{namespace[-6:]}", WANTED)
    create_configmap(admin, namespace, CM, {"linear": '{"nodesPerReplica":1}'})
    proxy, kubeconfig = http_proxy(controlplane.admin_kubeconfig)

    def spoil(body: bytes) -> bytes:
        doc = json.loads(body)
        doc["spec"]["minReplicas"] = "2"
        return json.dumps(doc).encode()

    proxy.add(Rule("hpa", lambda r: r.method == "GET" and r.path.endswith(
        "/horizontalpodautoscalers/web"), Rewrite(spoil)))
    proc = start(f"--namespace={namespace}", f"--configmap={CM}",
                 "--target=deployment/a,hpa/web,deployment/b", poll_period=600,
                 kubeconfig=kubeconfig)
    wait_until("the first poll", lambda: proc.alive() and proc.polls() >= 1, 120)
    status, body = proc.last_poll()
    got = (replicas(admin, namespace, "deployment", "a"), hpa_min(admin, namespace, "web"),
           replicas(admin, namespace, "deployment", "b"))
    print(f"\n(a, hpa/web minReplicas, b) after the first poll: {got}; /last-poll "
          f"{status}: {body[:300]!r}")
    assert got == (WANTED, 1, WANTED)
    assert status == 500
    assert "horizontalpodautoscaler/web: cannot set minReplicas to 3: GET " in body, body
    assert "spec.minReplicas is a string ('2'), not an int32" in body, body
    assert not proxy.requests("PATCH")


def test_a_malformed_configmap_is_named_and_nothing_is_written(
        controlplane: ControlPlane, namespace: str, no_nodes: None, start: Any,
        http_proxy: Any) -> None:
    """A ConfigMap whose ``data`` value is a number (client-go refuses it; it used to be
    turned into a string): the poll fails naming the field; no target is written."""
    admin = controlplane.admin()
    create_workload(admin, namespace, "deployment", "a", replicas=1)
    create_nodes(admin, f"dm-{namespace[-6:]}", WANTED)
    create_configmap(admin, namespace, CM, {"linear": '{"nodesPerReplica":1}'})
    proxy, kubeconfig = http_proxy()

    def spoil(body: bytes) -> bytes:
        doc = json.loads(body)
        doc["data"]["linear"] = {"nodesPerReplica": 1}
        return json.dumps(doc).encode()

    proxy.add(Rule("cm", lambda r: r.method == "GET" and r.path.endswith(
        f"/configmaps/{CM}"), Rewrite(spoil)))
    proc = start(f"--namespace={namespace}", f"--configmap={CM}", "--target=deployment/a",
                 poll_period=600, kubeconfig=kubeconfig)
    wait_until("the first poll", lambda: proc.alive() and proc.polls() >= 1, 120)
    status, body = proc.last_poll()
    print(f"\n/last-poll {status}: {body[:300]!r}")
    assert status == 500 and f"cannot get ConfigMap {namespace}/{CM}: GET " in body, body
    assert "data['linear'] is an object, not a string" in body, body
    assert replicas(admin, namespace, "deployment", "a") == 1
    assert not proxy.requests("POST") and not proxy.requests("PUT")
