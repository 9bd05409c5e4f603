"""The load axis end to end: the real autoscaler process and a real API server, Pods whose
status the test sets, and small HTTP servers on 127.0.0.x serving their metric.

Short windows keep the scenarios quick: a 6 s stable window, a 3 s panic window (50 %),
a scrape every 0.5 s and a poll every second. The proportional count is 1 throughout (no
Node), so every replica above 1 is the load's.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.controlplane import ControlPlane
from tests.integration.metricpods import METRIC, PORT, MetricPods
from tests.integration.support import (
    AutoscalerProcess,
    create_configmap,
    create_workload,
    replicas,
    service_account,
    wait_replicas,
    wait_until,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

CM = "kube-dns-autoscaler"
PODS_RULE: dict[str, Any] = {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}
STABLE = 6


def params(target: float, **load: Any) -> dict[str, str]:
    spec = {"metric": METRIC, "port": PORT, "targetPerReplica": target,
            "stableWindowSeconds": STABLE, "panicWindowPercentage": 50,
            "scrapeIntervalSeconds": 0.5, "scrapeTimeoutSeconds": 0.3, **load}
    return {"linear": json.dumps({"nodesPerReplica": 16, "max": 60, "load": spec})}


@pytest.fixture
def pods(controlplane: ControlPlane, namespace: str) -> Iterator[MetricPods]:
    made = MetricPods(controlplane.admin(), namespace)
    yield made
    made.close()


@pytest.fixture
def run(controlplane: ControlPlane, namespace: str, start: Any
        ) -> Callable[..., AutoscalerProcess]:
    """The coredns Deployment, the ConfigMap, and the daemon as a ServiceAccount with the
    addon's rules plus ``pods list`` (unless ``pods_rule`` is False)."""
    def go(data: dict[str, str], pods_rule: bool = True, replicas: int = 1
           ) -> AutoscalerProcess:
        admin = controlplane.admin()
        create_workload(admin, namespace, "deployment", "coredns", replicas)
        create_configmap(admin, namespace, CM, data)
        kubeconfig = service_account(controlplane, namespace, "load-sa",
                                     [PODS_RULE] if pods_rule else [])
        return start(f"--namespace={namespace}", f"--configmap={CM}",  # type: ignore[no-any-return]
                     "--target=deployment/coredns", kubeconfig=kubeconfig)
    return go


class Sampler:
    """coredns's spec.replicas every 0.1 s, in a thread: what happened between waits."""

    def __init__(self, admin: Any, namespace: str) -> None:
        self.seen: list[tuple[float, int]] = []
        self._error: Exception | None = None
        self._stop = threading.Event()
        self._admin, self._namespace = admin, namespace
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.wait(0.1):
                self._sample()
        except Exception as err:  # for stop(): a dead sampler must not pass as a flat record
            self._error = err

    def _sample(self) -> None:
        self.seen.append((time.monotonic(),
                          replicas(self._admin, self._namespace, "deployment", "coredns")))

    def stop(self) -> list[tuple[float, int]]:
        """Ends the thread and takes one last sample: the count the caller's wait just saw
        can be written after the thread's last tick, and the record must end with it."""
        self._stop.set()
        self._thread.join(5)
        assert not self._thread.is_alive(), "the sampler's GET hung for 5 s"
        if self._error is not None:
            raise AssertionError("the sampler's GET failed") from self._error
        self._sample()
        return self.seen


def test_panic_scales_up_at_once_and_down_only_after_the_stable_window(
        controlplane: ControlPlane, namespace: str, no_nodes: None, pods: MetricPods,
        run: Callable[..., AutoscalerProcess]) -> None:
    admin = controlplane.admin()
    pods.add(3, rate=100.0)  # 300/s at 110 per replica: 3 (no count sits on a boundary)
    proc = run(params(110))
    wait_replicas(admin, namespace, "deployment", "coredns", 3, timeout=30, proc=proc)
    assert proc.metrics()['cpa_load_available{target="deployment/coredns"}'] == 1
    # Knative's start rule: 3 Ready Pods at the start hold 3 for a stable window.
    started = proc.events("load.panic.started")
    assert started and started[0]["ready"] == 3
    wait_until("the start's panic to end", lambda: proc.metrics().get(
        'cpa_load_panic{target="deployment/coredns"}') == 0, STABLE + 10)

    sampler = Sampler(admin, namespace)
    surge = time.monotonic()
    pods.set_rate(1000.0)  # 3000/s: 28, nine times the 3 Ready Pods: panic
    wait_replicas(admin, namespace, "deployment", "coredns", 28, timeout=15, proc=proc)
    reaction = time.monotonic() - surge
    assert len(proc.events("load.panic.started")) == 2, proc.logs()[-3000:]
    assert proc.metrics()['cpa_load_panic{target="deployment/coredns"}'] == 1

    pods.set_rate(10.0)  # 30/s: 1; panic holds 28 for a stable window after the last surge
    quiet = time.monotonic()
    wait_replicas(admin, namespace, "deployment", "coredns", 1, timeout=30, proc=proc)
    down = time.monotonic() - quiet
    seen = sampler.stop()
    assert len(proc.events("load.panic.ended")) == 2, proc.logs()[-3000:]
    # Panic only goes up: each count sampled until the first drop is at least the one
    # before, and the drop is the end of the panic (straight to the stable count).
    first_down = next((i for i in range(1, len(seen)) if seen[i][1] < seen[i - 1][1]), None)
    assert first_down is not None, seen
    assert seen[first_down][1] == 1, seen
    assert down >= STABLE - 1.0, (down, seen)  # the panic window's last surge + 6 s
    print(f"load step: 28 replicas after {reaction:.2f} s; back to 1 after {down:.2f} s")


def test_faults_leave_pods_out_and_fail_safe_to_the_proportional_count(
        controlplane: ControlPlane, namespace: str, no_nodes: None, pods: MetricPods,
        run: Callable[..., AutoscalerProcess]) -> None:
    admin = controlplane.admin()
    made = pods.add(4, rate=250.0)  # 1000/s at 230 per replica: 5 (4.35, off boundaries)
    proc = run(params(230))
    wait_replicas(admin, namespace, "deployment", "coredns", 5, timeout=30, proc=proc)
    # Knative's start rule holds the start's count for a stable window: wait it out, so
    # that what follows is the stable count's (a panic would keep any passing peak).
    wait_until("the start's panic to end", lambda: proc.metrics().get(
        'cpa_load_panic{target="deployment/coredns"}') == 0, STABLE + 10)
    series = 'cpa_load_scrape_errors_total{{reason="{}",target="deployment/coredns"}}'

    # A counter reset (the process restarted): no spike, the count stays.
    sampler = Sampler(admin, namespace)
    made[0].counter.reset(restarted=True)
    time.sleep(3)
    # A counter going backwards without a restart: that Pod is left out, counted.
    made[1].counter.reset(restarted=False)
    wait_until("a counter_backwards error", lambda: proc.metrics().get(
        series.format("counter_backwards"), 0) >= 1, 10)
    # One Pod without the metric, one too slow: left out, counted. Two of 4 Ready Pods are
    # fewer than an estimate needs (all 4, Knative's sample): those scrapes are gaps, and
    # the windows' samples still give 5.
    made[2].counter.missing = True
    made[3].counter.delay = 1.0
    wait_until("missing_metric, timeout and too_few_pods errors", lambda: all(
        proc.metrics().get(series.format(r), 0) >= 1
        for r in ("missing_metric", "timeout", "too_few_pods")), 10)
    time.sleep(2)
    made[2].counter.missing = False
    made[3].counter.delay = 0.0
    time.sleep(2)
    assert {r for _t, r in sampler.stop()} == {5}, "no fault moved the count"
    assert [e["pod"] for e in proc.events("load.pod.failed")][:3] == [
        made[1].name, made[2].name, made[3].name]

    # Every Pod loses the metric: no rate. The axis holds its last rates until they are
    # older than the stable window, then drops out: the proportional 1.
    lost = time.monotonic()
    for pod in made:
        pod.counter.missing = True
    wait_replicas(admin, namespace, "deployment", "coredns", 1, timeout=30, proc=proc)
    assert time.monotonic() - lost >= STABLE - 1.0
    out = proc.events("load.unavailable")
    assert out and out[-1]["reason"] == "missing_metric", proc.logs()[-3000:]
    assert proc.metrics()['cpa_load_available{target="deployment/coredns"}'] == 0
    assert len(proc.events("load.unavailable")) == 1  # once per episode

    for pod in made:
        pod.counter.missing = False
    wait_replicas(admin, namespace, "deployment", "coredns", 5, timeout=30, proc=proc)
    assert proc.events("load.available")


@pytest.mark.api_paths
def test_fifty_pods(controlplane: ControlPlane, namespace: str, no_nodes: None,
                    pods: MetricPods, run: Callable[..., AutoscalerProcess]) -> None:
    admin = controlplane.admin()
    pods.add(48, rate=100.0)
    pods.add(2, rate=100.0, ready=False)  # not Ready: not scraped, not counted
    proc = run(params(1000, maxConcurrentScrapes=16))  # 4800/s: 5
    wait_replicas(admin, namespace, "deployment", "coredns", 5, timeout=30, proc=proc)
    wait_until("48 Pods answering", lambda: proc.metrics().get(
        'cpa_load_pods{state="answered",target="deployment/coredns"}') == 48, 10)
    metrics = proc.metrics()
    assert metrics['cpa_load_pods{state="ready",target="deployment/coredns"}'] == 48
    assert metrics['cpa_load_scrape_duration_seconds{target="deployment/coredns"}'] < 0.5


@pytest.mark.api_paths
def test_without_the_pods_rule_the_proportional_count_holds_and_the_403_names_it(
        controlplane: ControlPlane, namespace: str, no_nodes: None, pods: MetricPods,
        run: Callable[..., AutoscalerProcess]) -> None:
    admin = controlplane.admin()
    pods.add(2, rate=5000.0)
    proc = run(params(100), pods_rule=False, replicas=4)
    wait_replicas(admin, namespace, "deployment", "coredns", 1, timeout=30, proc=proc)
    events = wait_until("load.unavailable", lambda: proc.events("load.unavailable") or None, 30)
    event = events[0]
    assert event["reason"] == "pods_list"
    assert 'resources: ["pods"], verbs: ["list"]' in event["error"]
    assert proc.last_poll()[0] == 200  # the load axis out is no failed poll


@pytest.mark.parametrize("change", ["hidden", "reordered"])
def test_a_series_back_after_a_scrape_or_in_another_label_order_is_no_surge(
        controlplane: ControlPlane, namespace: str, no_nodes: None, pods: MetricPods,
        run: Callable[..., AutoscalerProcess], change: str) -> None:
    """One Pod's page leaves a series out for one scrape (or writes its labels in another
    order): the series is the same one, so its counter (near a million here) is no
    increase. Counted from 0, it made the axis ask for hundreds or thousands (written at
    max)."""
    admin = controlplane.admin()
    made = pods.add(3, rate=10.0, base=1e6)  # 30/s at 100 per replica: 1
    data = params(100)
    data["linear"] = data["linear"].replace('"max": 60', '"max": 40')
    proc = run(data)
    wait_until("the load axis's first rate", lambda: proc.metrics().get(
        'cpa_load_available{target="deployment/coredns"}') == 1, 30)
    wait_until("the start's panic to end", lambda: proc.metrics().get(
        'cpa_load_panic{target="deployment/coredns"}') == 0, STABLE + 10)
    wait_replicas(admin, namespace, "deployment", "coredns", 1, timeout=15, proc=proc)
    changes = len(proc.events("scale.changed"))

    sampler = Sampler(admin, namespace)
    counter = made[0].counter
    served = counter.hide("AAAA") if change == "hidden" else counter.reorder()
    # The changed page, the page after it, one more; then two polls after those scrapes.
    wait_until("three pages served", lambda: counter.pages >= served + 3 or None, 10)
    polls = proc.polls()
    wait_until("two polls", lambda: proc.polls() >= polls + 2 or None, 10)
    seen = sampler.stop()
    asked = [event["load"] for event in proc.events("scale.changed")[changes:]]
    held = proc.metrics()['cpa_load_replicas{target="deployment/coredns"}']
    print(f"{change}: replicas written {sorted({r for _t, r in seen})}, the load axis's "
          f"count in the writes {asked or 'unchanged'}, at the end {held:g}")
    assert {r for _t, r in seen} == {1}, (seen, asked)
    assert held == 1
