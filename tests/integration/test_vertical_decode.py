"""Issue 27 #4 for ``/cpvpa --resize-mode=in-place``: one malformed Pod in a real answer.

An HTTPS fault proxy in front of the real kube-apiserver rewrites the Pod list so that one
of three Pods has ``metadata.ownerReferences: {"x": 1}`` (an object, not an array). That
once raised an AttributeError that ended the poll: no Pod was resized, ever, and the error
named no Pod. Now the other two Pods are resized in that poll, the poll's error names the
bad Pod and its field, and nothing falls back to the template (a RollingUpdate DaemonSet's
generation stays 1).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.controlplane import ControlPlane
from tests.integration.httpproxy import Request, Rewrite, Rule
from tests.integration.support import wait_until
from tests.integration.test_vertical import (
    INPLACE,
    cpvpa,
    create_pod,
    create_target,
    generation,
    pod_resources,
    three_nodes,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

__all__ = ["cpvpa"]  # the fixture, imported for pytest

BURSTABLE = {"requests": {"cpu": "5m", "memory": "32Mi"}, "limits": {"memory": "1Gi"}}
WANT = {"requests": {"cpu": "34m", "memory": "70254592"}, "limits": {"memory": "1Gi"}}
PODS = ("agent-a", "agent-b", "agent-c")
BAD = "agent-b"


def spoil(body: bytes) -> bytes:
    doc = json.loads(body)
    for item in doc["items"]:
        if item["metadata"]["name"] == BAD:
            item["metadata"]["ownerReferences"] = {"x": 1}
    return json.dumps(doc).encode()


def pod_list(request: Request) -> bool:
    return request.method == "GET" and request.path.endswith("/pods") and not request.is_watch


def test_one_malformed_pod_is_named_and_the_others_are_resized(
        controlplane: ControlPlane, namespace: str, no_nodes: None, cpvpa: Any,
        http_proxy: Any) -> None:
    admin = controlplane.admin()
    three_nodes(admin, "v-decode")
    ds = create_target(admin, namespace, "daemonset", "agent", strategy="RollingUpdate")
    for pod in PODS:
        create_pod(admin, namespace, ds, pod, BURSTABLE, node="v-decode-0000")
    proxy, kubeconfig = http_proxy(controlplane.admin_kubeconfig)
    proxy.add(Rule("spoil", pod_list, Rewrite(spoil)))
    proc = cpvpa("--target=daemonset/agent", f"--namespace={namespace}",
                 f"--default-config={json.dumps(INPLACE)}", "--resize-mode=in-place",
                 kubeconfig=kubeconfig)
    wait_until("a poll", lambda: proc.alive() and proc.polls() >= 1, 60)
    status, body = proc.last_poll()
    resized = [pod for pod in PODS if pod_resources(admin, namespace, pod) == WANT]
    print(f"\nafter the first poll: {len(resized)}/{len(PODS)} Pods resized "
          f"({resized}); generation {generation(admin, namespace, 'daemonset', 'agent')}; "
          f"/last-poll {status}: {body[:300]!r}")

    assert resized == ["agent-a", "agent-c"]
    assert status == 500 and f"Pod {BAD}: the Pod answered does not decode" in body, body
    assert "metadata.ownerReferences is an object, not an array" in body, body
    assert "unexpected" not in body, body
    assert generation(admin, namespace, "daemonset", "agent") == 1
    assert proc.events("resize.fallback") == []
