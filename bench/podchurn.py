"""Pod churn for ``bench.objects``: Pods created and deleted at a fixed rate, the total kept.

Why: a cluster's Pods come and go all the time (deploys, jobs, evictions), and each one is
a watch event the Pods axis decodes; a daemon that counts 150,000 Pods must not pay for
that churn with much more than the events themselves, nor lose count in it.

Each tick (``rate`` a second, tick j due at start + j/rate) creates one new Pod and deletes
one Pod that already existed (the oldest first), so the total stays where it was. Pods
without a Node are deleted at once (no grace period: no kubelet has to confirm), so a
delete is one event. The requests go out from a pool of threads, each with its own client
(its own connections); whether the generator kept up is measured (achieved rates, lag
behind the schedule), not assumed.
"""

from __future__ import annotations

import json
import statistics
import threading
import time
import urllib.parse
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from tests.controlplane.client import AdminClient

METADATA_LIST = ("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,"
                 "application/json")


def pod_body(name: str, app: int) -> dict[str, Any]:
    """A Pod no kubelet will run (it stays Pending): all the API server needs."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": f"a{app % 97}"}},
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}


def new_name(k: int) -> str:
    return f"churn-{k:06d}"


def new_namespace(k: int, namespaces: int) -> str:
    return f"bench-{k % namespaces}"


def _done(request: Callable[[], object]) -> bool:
    """Whether the request was answered with success; a failure is counted, not raised,
    so that the window goes on."""
    try:
        request()
    except Exception:
        return False
    return True


@dataclass
class ChurnResult:
    planned: int = 0
    created: int = 0
    deleted: int = 0
    errors: int = 0
    lags: list[float] = field(default_factory=list)  # start - due, seconds
    started: float = 0.0
    ended: float = 0.0

    def summary(self, rate: float) -> dict[str, Any]:
        wall = max(1e-9, self.ended - self.started)
        lags = sorted(self.lags) or [0.0]
        return {
            "target_per_second": rate,
            "seconds": round(wall, 1),
            "created": self.created,
            "deleted": self.deleted,
            "errors": self.errors,
            "creates_per_second": round(self.created / wall, 1),
            "deletes_per_second": round(self.deleted / wall, 1),
            "lag_median_seconds": round(statistics.median(lags), 3),
            "lag_max_seconds": round(lags[-1], 3),
            # Kept up: every planned request answered and none started a second late.
            "kept_up": (self.created == self.deleted == self.planned and lags[-1] < 1.0),
        }


class PodChurn:
    """Windows of churn over Pods named by ``existing(i)`` (the i-th Pod already there, as
    (namespace, name)); a second window goes on where the first stopped."""

    def __init__(self, client: Callable[[], AdminClient], existing: Callable[[int], tuple[
            str, str]], namespaces: int, present: int, threads: int = 48) -> None:
        self._client = client
        self._existing = existing
        self._namespaces = namespaces
        self._threads = threads
        self._local = threading.local()
        self._lock = threading.Lock()
        self.next_victim = 0  # the next of the Pods already there to delete
        self.next_new = 0  # the number of the next Pod to create
        self.present = present  # Pods in the cluster, by the answers so far

    def _api(self) -> AdminClient:
        api: AdminClient | None = getattr(self._local, "api", None)
        if api is None:
            api = self._local.api = self._client()
        return api

    def _tick(self, result: ChurnResult, victim: int, new: int, due: float) -> None:
        start = time.monotonic()
        ns, name = self._existing(victim)
        created = _done(lambda: self._api().post(
            f"/api/v1/namespaces/{new_namespace(new, self._namespaces)}/pods",
            pod_body(new_name(new), new)))
        deleted = _done(lambda: self._api().delete(f"/api/v1/namespaces/{ns}/pods/{name}"))
        with self._lock:
            result.created += created
            result.deleted += deleted
            result.errors += (not created) + (not deleted)
            result.lags.append(start - due)
            result.ended = max(result.ended, time.monotonic())

    def run(self, rate: float, seconds: float) -> ChurnResult:
        """One window: ``rate`` creates and ``rate`` deletes a second for ``seconds``;
        returns when every request has been answered."""
        total = int(rate * seconds)
        result = ChurnResult(planned=total)
        with ThreadPoolExecutor(self._threads, thread_name_prefix="podchurn") as pool:
            result.started = t0 = time.monotonic()
            for j in range(total):
                due = t0 + j / rate
                delay = due - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                pool.submit(self._tick, result, self.next_victim + j, self.next_new + j, due)
        self.next_victim += total
        self.next_new += total
        self.present += result.created - result.deleted
        return result


def count_pods(api: AdminClient, page: int = 5000) -> int:
    """Pods in the cluster not being deleted, by a paged metadata-only list: what the
    daemon's count must equal once the churn is over (no kubelet: none is finished)."""
    count, token = 0, ""
    while True:
        query = {"limit": str(page), **({"continue": token} if token else {})}
        status, body = api.raw("GET", "/api/v1/pods?" + urllib.parse.urlencode(query),
                               headers={"Accept": METADATA_LIST})
        if status != 200:
            raise RuntimeError(f"listing Pods answered {status}: {body[:200]!r}")
        doc = json.loads(body)
        count += sum(1 for item in doc.get("items") or []
                     if not (item.get("metadata") or {}).get("deletionTimestamp"))
        token = (doc.get("metadata") or {}).get("continue") or ""
        if not token:
            return count
