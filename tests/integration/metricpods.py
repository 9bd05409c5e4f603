"""Pods whose status the test sets, each backed by a small HTTP server on its own 127.0.0.x
address serving a counter in the Prometheus text format: what the load axis scrapes.

A :class:`MetricPod` is a real Pod object on the real API server (labels matching the
target's selector; ``status`` written through ``pods/NAME/status``: Running, Ready, the
server's address as ``podIP``) and a real HTTP server whose counter grows at a rate the
test sets, and can be reset, hidden, slowed or broken. Servers are stopped, and Pods
deleted, by :meth:`MetricPods.close`.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

from tests.controlplane import AdminClient
from tests.httpserve import QuietHandler, QuietServer

METRIC = "coredns_dns_requests_total"
PORT = 19153


class Counter:
    """A counter growing at ``rate`` per second (piecewise: set_rate keeps what it has),
    from ``base``."""

    def __init__(self, rate: float, base: float = 0.0) -> None:
        self._lock = threading.Lock()
        self._base = base
        self._since = time.monotonic()
        self._rate = rate
        self.start_time = time.time()
        self.missing = False
        self.delay = 0.0
        self.status = 200
        self.pages = 0
        """Pages with the metric served so far."""
        self._hidden: dict[str, int] = {}  # series type -> pages still to leave it out of
        self._reordered = 0  # pages still to write with the labels in another order

    def value(self) -> float:
        with self._lock:
            return self._base + self._rate * (time.monotonic() - self._since)

    def set_rate(self, rate: float) -> None:
        with self._lock:
            now = time.monotonic()
            self._base += self._rate * (now - self._since)
            self._since, self._rate = now, rate

    def reset(self, restarted: bool = True) -> None:
        """Back to 0, as a restarted process (a new start time) or, with ``restarted``
        False, a counter going backwards in the same process."""
        with self._lock:
            self._base, self._since = 0.0, time.monotonic()
            if restarted:
                self.start_time = time.time()

    def hide(self, series: str, pages: int = 1) -> int:
        """Leave the series ``type=series`` (``A`` or ``AAAA``) out of the next ``pages``
        pages, as an exporter that skips a series for a scrape; the pages served so far."""
        with self._lock:
            self._hidden[series] = pages
            return self.pages

    def reorder(self, pages: int = 1) -> int:
        """Write the labels of the next ``pages`` pages in another order (the same
        series); the pages served so far."""
        with self._lock:
            self._reordered = pages
            return self.pages

    def _series(self, value: float) -> list[str]:
        with self._lock:
            self.pages += 1
            reordered, self._reordered = self._reordered > 0, max(0, self._reordered - 1)
            hidden = {name for name, left in self._hidden.items() if left > 0}
            self._hidden = {name: left - 1 for name, left in self._hidden.items() if left > 1}
        lines = []
        for kind, share in (("A", 0.75), ("AAAA", 0.25)):  # two series, as CoreDNS has
            if kind in hidden:
                continue
            labels = [("proto", "udp"), ("server", "dns://:53"), ("type", kind), ("zone", ".")]
            if reordered:
                labels.reverse()
            text = ",".join(f'{name}="{label}"' for name, label in labels)
            lines.append(f"{METRIC}{{{text}}} {int(value * share)}")  # each never decreases
        return lines

    def page(self) -> bytes:
        lines = [*_PADDING,
                 "# HELP process_start_time_seconds Start time of the process.",
                 "# TYPE process_start_time_seconds gauge",
                 f"process_start_time_seconds {self.start_time:.3f}",
                 "# TYPE coredns_build_info gauge",
                 'coredns_build_info{version="1.15.0"} 1']
        if not self.missing:
            lines += [f"# TYPE {METRIC} counter", *self._series(self.value())]
        return ("\n".join(lines) + "\n").encode()


# The rest of a CoreDNS page (go_*, process_*, coredns_* families): ~140 lines the scraper
# has to read past, as on a real CoreDNS.
_PADDING = [line for i in range(35) for line in (
    f"# HELP go_padding_{i} A metric the load axis does not read.",
    f"# TYPE go_padding_{i} gauge",
    f'go_padding_{i}{{quantile="0.5"}} {i * 1.5e-05}',
    f'go_padding_{i}{{quantile="1"}} {i * 3.1e-04}')]


class _Server(QuietServer):
    def __init__(self, address: str, counter: Counter) -> None:
        self.counter = counter
        super().__init__((address, PORT), _Handler)


class _Handler(QuietHandler):
    server: _Server

    def do_GET(self) -> None:
        counter = self.server.counter
        if counter.delay:
            time.sleep(counter.delay)
        body = counter.page() if self.path == "/metrics" else b"not found\n"
        status = counter.status if self.path == "/metrics" else 404
        self.answer(status, body, "text/plain; version=0.0.4")


class MetricPod:
    def __init__(self, name: str, ip: str, counter: Counter, server: _Server) -> None:
        self.name, self.ip, self.counter, self.server = name, ip, counter, server


class MetricPods:
    """The Pods of ``app=<app>`` in ``namespace``, each with its metrics server."""

    def __init__(self, admin: AdminClient, namespace: str, app: str = "coredns",
                 first_ip: int = 10) -> None:
        self._admin = admin
        self._namespace = namespace
        self._app = app
        self._next = first_ip
        self.pods: list[MetricPod] = []
        self._threads: list[threading.Thread] = []

    def add(self, count: int, rate: float, ready: bool = True, base: float = 0.0
            ) -> list[MetricPod]:
        """``count`` more Pods, each counter growing at ``rate`` per second from ``base``."""
        made = []
        for _ in range(count):
            ip = f"127.0.0.{self._next}"
            self._next += 1
            counter = Counter(rate, base)
            server = _Server(ip, counter)
            thread = threading.Thread(target=server.serve_forever, daemon=True)
            thread.start()
            self._threads.append(thread)
            name = f"{self._app}-{len(self.pods)}"
            pod = MetricPod(name, ip, counter, server)
            self._create(pod, ready)
            self.pods.append(pod)
            made.append(pod)
        return made

    def _create(self, pod: MetricPod, ready: bool) -> None:
        path = f"/api/v1/namespaces/{self._namespace}/pods"
        obj = self._admin.post(path, {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod.name, "labels": {"app": self._app}},
            "spec": {"containers": [{"name": "coredns", "image": "coredns:test"}]}})
        self.set_ready(pod, ready, obj)

    def set_ready(self, pod: MetricPod, ready: bool, obj: dict[str, Any] | None = None) -> None:
        path = f"/api/v1/namespaces/{self._namespace}/pods/{pod.name}"
        obj = obj or self._admin.get(path)
        obj["status"] = {
            "phase": "Running", "podIP": pod.ip, "podIPs": [{"ip": pod.ip}],
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
        self._admin.put(path + "/status", obj)

    def set_rate(self, rate: float) -> None:
        for pod in self.pods:
            pod.counter.set_rate(rate)

    def close(self) -> None:
        for pod in self.pods:
            pod.server.shutdown()
            pod.server.server_close()
            with contextlib.suppress(Exception):  # the namespace stays anyway
                self._admin.delete(f"/api/v1/namespaces/{self._namespace}/pods/{pod.name}")
        for thread in self._threads:
            thread.join(timeout=5)
