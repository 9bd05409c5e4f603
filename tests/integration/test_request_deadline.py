"""One deadline per request, connect to last byte, and Retry-After honoured with a cap.

An HTTPS fault proxy drip-feeds the ConfigMap's answer one byte every 10 s (no read ever
waits 30 s, so a per-read timeout never fires), answers 429 with ``Retry-After``, or holds a
request for good; the daemon's requests go through it.
"""

from __future__ import annotations

import json
import signal
import time
from typing import Any

import pytest

from tests.controlplane import ControlPlane
from tests.integration.httpproxy import Drip, Request, Respond, Rule
from tests.integration.support import (
    AutoscalerProcess,
    coredns_flags,
    one_replica_per_node,
    wait_replicas,
    wait_until,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

CM = "rd-params"
DEADLINE = 30.0  # the default, for every request but a watch
RETRY_AFTER_CAP = 10.0


def through_a_proxy(controlplane: ControlPlane, namespace: str, start: Any, http_proxy: Any,
                    poll_period: int) -> tuple[Any, AutoscalerProcess]:
    """coredns on two Nodes scaled by an autoscaler whose every request passes a fault
    proxy (no rule yet), past its first good poll: (proxy, process)."""
    admin = controlplane.admin()
    one_replica_per_node(admin, namespace, CM, f"rd-{namespace[-6:]}", 2)
    proxy, kubeconfig = http_proxy()
    proc = start(*coredns_flags(namespace, CM), poll_period=poll_period, kubeconfig=kubeconfig)
    wait_replicas(admin, namespace, "deployment", "coredns", 2, proc=proc)
    proc.wait_poll_ok()
    return proxy, proc


def is_configmap(r: Request) -> bool:
    return r.method == "GET" and r.path.endswith(f"/configmaps/{CM}")


def test_a_drip_fed_answer_fails_the_poll_at_the_deadline_and_sigterm_still_works(
        controlplane: ControlPlane, namespace: str, no_nodes: None, start: Any,
        http_proxy: Any) -> None:
    proxy, proc = through_a_proxy(controlplane, namespace, start, http_proxy, 2)

    proxy.add(Rule("drip", is_configmap, Drip(10.0)))
    first = wait_until("a drip-fed ConfigMap GET", lambda: proxy.requests(
        where=lambda r: r.rule == "drip"), 30)[0]
    body = proc.wait_poll_error("", timeout=DEADLINE + 20)
    failed_after = time.monotonic() - first.arrived
    print(f"\ndrip-fed answer: the poll failed {failed_after:.1f}s after its request "
          f"(deadline {DEADLINE:.0f}s): {body[:200]!r}")
    assert failed_after < DEADLINE + 10
    assert "30" in body and "deadline" in body, body

    # SIGTERM in the middle of the next hung request: honoured within 2 s, exit 0.
    count = len(proxy.requests(where=lambda r: r.rule == "drip"))
    wait_until("the next drip-fed request", lambda: len(proxy.requests(
        where=lambda r: r.rule == "drip")) > count, 30)
    time.sleep(1.5)
    proc.signal(signal.SIGTERM)
    sent = time.monotonic()
    code = proc.wait_exit(30)
    took = time.monotonic() - sent
    print(f"SIGTERM in a hung request: exit {code} after {took:.2f}s")
    assert code == 0
    assert took < 3.0, "SIGTERM must be honoured within 2 s (1 s of slack for the machine)"


def too_many(seconds: str) -> Respond:
    status = {"kind": "Status", "apiVersion": "v1", "status": "Failure",
              "reason": "TooManyRequests", "code": 429,
              "message": "too many requests, please try again later"}
    return Respond(429, json.dumps(status).encode(),
                   {"Content-Type": "application/json", "Retry-After": seconds})


@pytest.mark.parametrize(("retry_after", "low", "high"), [
    ("3", 2.5, 8.0),
    ("3600", RETRY_AFTER_CAP - 0.5, RETRY_AFTER_CAP + 5),  # capped
])
def test_retry_after_on_429_is_honoured_with_a_cap(
        controlplane: ControlPlane, namespace: str, no_nodes: None, start: Any,
        http_proxy: Any, retry_after: str, low: float, high: float) -> None:
    proxy, proc = through_a_proxy(controlplane, namespace, start, http_proxy, 1)
    failed_before = len(proc.events("poll.failed"))

    proxy.add(Rule("429", is_configmap, too_many(retry_after), times=1))
    throttled = wait_until("a 429", lambda: proxy.requests(
        where=lambda r: r.rule == "429"), 30)[0]
    retry = wait_until("the next ConfigMap GET", lambda: proxy.requests(
        where=lambda r: is_configmap(r) and r.arrived > throttled.arrived), 30)[0]
    gap = retry.arrived - throttled.arrived
    time.sleep(1)
    failed = [e for e in proc.events("poll.failed")[failed_before:] if "429" in e["error"]]
    print(f"\nRetry-After: {retry_after}: the next attempt came {gap:.1f}s later; "
          f"{len(failed)} polls failed with the 429")
    assert low <= gap <= high, f"next attempt after {gap:.1f}s"
    assert failed == [], "a 429 with Retry-After is waited out, not a failed poll"
    proc.wait_poll_ok()
