"""The Pod churn's bookkeeping (no control plane: a recording client stands for the API
server): every tick one create and one delete, the oldest Pods first, the total tallied
from the answers, a failure counted and not raised."""

from __future__ import annotations

import threading
from typing import Any

from bench import podchurn
from bench.objects import existing_pods


class RecordingClient:
    """Records POSTs and DELETEs; refuses the DELETE of the names in ``refuse``."""

    def __init__(self, log: list[tuple[str, str]], lock: threading.Lock,
                 refuse: frozenset[str] = frozenset()) -> None:
        self.log, self.lock, self.refuse = log, lock, refuse

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            self.log.append(("POST", f"{path}/{body['metadata']['name']}"))
        return body

    def delete(self, path: str) -> None:
        if path.rsplit("/", 1)[1] in self.refuse:
            raise RuntimeError("HTTP 500")
        with self.lock:
            self.log.append(("DELETE", path))


def churn(pods: int, refuse: frozenset[str] = frozenset()
          ) -> tuple[podchurn.PodChurn, list[tuple[str, str]]]:
    log: list[tuple[str, str]] = []
    lock = threading.Lock()
    def client() -> Any:  # stands for an AdminClient: post and delete are all it uses
        return RecordingClient(log, lock, refuse)

    made = podchurn.PodChurn(client, existing_pods(pods), 4, pods, threads=4)
    return made, log


def test_each_tick_creates_one_and_deletes_the_oldest() -> None:
    made, log = churn(pods=10)
    result = made.run(rate=200.0, seconds=0.05)
    assert (result.planned, result.created, result.deleted, result.errors) == (10, 10, 10, 0)
    deleted = sorted(path for verb, path in log if verb == "DELETE")
    assert deleted == sorted(f"/api/v1/namespaces/bench-{i % 20}/pods/p-{i:06d}"
                             for i in range(10))
    created = sorted(path for verb, path in log if verb == "POST")
    assert created == sorted(f"/api/v1/namespaces/bench-{i % 4}/pods/churn-{i:06d}"
                             for i in range(10))
    assert made.present == 10
    summary = result.summary(200.0)
    assert summary["creates_per_second"] > 0 and summary["errors"] == 0


def test_a_second_window_goes_on_and_deletes_the_churns_own() -> None:
    made, log = churn(pods=4)
    made.run(rate=200.0, seconds=0.02)
    log.clear()
    made.run(rate=200.0, seconds=0.02)
    deleted = {path.rsplit("/", 1)[1] for verb, path in log if verb == "DELETE"}
    assert deleted == {f"churn-{i:06d}" for i in range(4)}
    assert (made.next_victim, made.next_new, made.present) == (8, 8, 4)


def test_a_failed_request_is_counted_and_the_tally_follows_the_answers() -> None:
    made, _ = churn(pods=10, refuse=frozenset({"p-000003"}))
    result = made.run(rate=200.0, seconds=0.05)
    assert (result.created, result.deleted, result.errors) == (10, 9, 1)
    assert made.present == 11
    assert result.summary(200.0)["kept_up"] is False
