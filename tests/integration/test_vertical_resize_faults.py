"""``/cpvpa --resize-mode=in-place`` when one Pod's ``pods/resize`` fails once (issue 27, 1).

An HTTPS fault proxy (:mod:`tests.integration.httpproxy`) sits between ``cpvpa`` and the
real kube-apiserver and answers ONE resize PATCH of one Pod with a 500, a 409, a 429
(without ``Retry-After``: the client hands it to the caller) or a connection reset; every
other request reaches the API server. Such an error says nothing about whether the Pod
can be resized in place, so it must not make the default ``--in-place-template=when-safe``
patch a RollingUpdate DaemonSet's template (in a real cluster its controller would then
replace every Pod): the Pod is resized at a later poll and the template's generation stays
1. Only 403, 404 and 422 (and a long deferral) fall back, held by tests/unit/vertical.

The Pods are created by the test (there is no controller-manager or kubelet), as in
test_vertical.py, whose helpers these are.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.controlplane import ControlPlane
from tests.integration.httpproxy import Request, Reset, Respond, Rule
from tests.integration.support import wait_polls, wait_until
from tests.integration.test_vertical import (
    AGENTS,
    agents_to_resize,
    generation,
    in_place,
    resized_agents,
    template_resources,
)

pytestmark = pytest.mark.integration



def _status(code: int, reason: str, message: str) -> Respond:
    body = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                       "reason": reason, "message": message, "code": code}).encode()
    return Respond(code, body, {"Content-Type": "application/json"})


FAULTS: dict[str, tuple[Respond | Reset, str]] = {
    "500": (_status(500, "InternalError", "etcdserver: leader changed"), "server_error"),
    "409": (_status(409, "Conflict", "Operation cannot be fulfilled on pods \"agent-a\": "
                                     "the object has been modified"), "conflict"),
    "429": (_status(429, "TooManyRequests", "too many requests"), "too_many_requests"),
    "reset": (Reset(), "connection"),
}


def _resize_of(pod: str) -> Any:
    def match(request: Request) -> bool:
        return request.method == "PATCH" and request.path.endswith(f"/pods/{pod}/resize")
    return match


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_one_transient_resize_error_is_retried_and_never_patches_the_template(
        controlplane: ControlPlane, namespace: str, no_nodes: None, cpvpa: Any,
        http_proxy: Any, fault: str) -> None:
    admin = agents_to_resize(controlplane, namespace, "v-inplace")
    before = generation(admin, namespace, "daemonset", "agent")
    proxy, kubeconfig = http_proxy(controlplane.admin_kubeconfig)
    action, reason = FAULTS[fault]
    rule = proxy.add(Rule(f"one {fault}", _resize_of("agent-a"), action, times=1))
    proc = cpvpa(*in_place(namespace), kubeconfig=kubeconfig)
    wait_until("every Pod resized", lambda: resized_agents(admin, namespace) == list(AGENTS), 30)
    wait_polls(proc, count=2)  # a fallback would have happened by now
    after = generation(admin, namespace, "daemonset", "agent")

    faulted = proxy.requests("PATCH", _resize_of("agent-a"))
    resized = [r for r in proxy.requests("PATCH", lambda r: r.path.endswith("/resize"))
               if r.status == 200 and r.answered is not None]
    took = max(r.answered for r in resized if r.answered is not None) - faulted[0].arrived
    print(f"\n[{fault}] generation {before} -> {after}; every Pod resized "
          f"{took:.2f}s after the fault; resize PATCHes of agent-a: "
          f"{[r.status for r in faulted]}; template patches: "
          f"{len(proxy.requests('PATCH', lambda r: r.path.endswith('/daemonsets/agent')))}")

    assert rule.applied == 1
    assert after == before == 1, "the template was patched: its controller would roll"
    assert template_resources(admin, namespace, "daemonset", "agent") == {
        "requests": {"cpu": "5m"}}
    assert proc.events("resize.fallback") == []
    [retry] = proc.events("resize.retry")
    assert retry["pod"] == "agent-a" and retry["reason"] == reason
    assert retry["failures"] == 1
    assert len(faulted) == 2 and faulted[-1].status == 200  # retried once, and it took
    metrics = proc.metrics()
    assert metrics[f'cpvpa_resize_retries_total{{reason="{reason}"}}'] == 1
    assert metrics["cpvpa_pod_resizes_total"] == len(AGENTS)
    assert metrics["cpvpa_pod_resizes_retrying"] == 0
    assert not any(k.startswith("cpvpa_resize_fallbacks_total") and v for k, v in
                   metrics.items())
    proc.wait_poll_ok()
