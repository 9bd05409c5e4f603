"""Typed fakes of the API protocols (:mod:`cpa.kube.api`), shared by the unit tests.

As client-go's ``kubernetes/fake``: one place, typed against the same protocols as the real
client, so mypy checks that each fake still stands for what it replaces.

* :class:`FakeApi` (a :class:`~cpa.kube.api.RawApi`): an in-memory API server for the single
  requests the poll loop, the Event recorder and the leader elector make: objects by path,
  each with a resourceVersion, written with the API server's optimistic concurrency, every
  request recorded like an audit log, failures injected per test;
* :class:`FakeResponse` (a :class:`~cpa.kube.api.StreamResponse`): a response body read in
  chunks split at awkward places, then EOF or an exception;
* :class:`ScriptedApi` (a :class:`~cpa.kube.api.StreamingApi`): answers the node watch's
  lists and streams from scripts, in order.

The integration tests use the real API server instead (``tests/controlplane``).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from cpa.kube.api import ApiError, RawApi, StreamingApi, StreamResponse
from cpa.kube.wire import JSON, PROTOBUF

__all__ = ["Answer", "FakeApi", "FakeResponse", "Page", "ScriptedApi"]


class FakeApi:
    """Objects by path with resourceVersions; POST creates ``{collection}/{name}``, PUT
    replaces an object only at the resourceVersion it was read at (else 409), as the API
    server does. Every request is recorded in :attr:`calls`, every create in
    :attr:`created`."""

    def __init__(self, fail_writes: Exception | None = None) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, str]] = []
        self.created: list[tuple[str, dict[str, Any]]] = []
        """(collection path, body) of every successful POST, in order."""
        self.rv = 100
        self.down = False
        """Every request fails as if the API server were unreachable."""
        self.fail_writes = fail_writes
        """Every POST and PUT raises this (a 403, a dropped connection, ...)."""
        self.fail_reads: ApiError | None = None
        """Every GET raises this (a 403 where a right is missing, ...)."""
        self.conflicts: dict[str, int] = {}
        """path -> how many PUTs to refuse with 409, as if another writer got there first."""
        self.deadlines: list[tuple[str, str, float | None]] = []
        """(method, path, deadline) of every request, as the caller bounded it."""

    # --- the test's side -------------------------------------------------------------------
    def put(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Store ``obj`` at ``path`` with a new resourceVersion (as a write by anyone)."""
        self.rv += 1
        stored = copy.deepcopy(obj)
        stored.setdefault("metadata", {})["resourceVersion"] = str(self.rv)
        self.objects[path] = stored
        return copy.deepcopy(stored)

    def add_scale(self, path: str, replicas: int) -> None:
        self.put(path, {"kind": "Scale", "spec": {"replicas": replicas}})

    def set_configmap(self, path: str, data: dict[str, str]) -> None:
        self.put(path, {"kind": "ConfigMap", "data": data})

    def replicas(self, path: str) -> int:
        return int(self.objects[path]["spec"]["replicas"])

    # --- the Api protocol ----------------------------------------------------------------
    def get_json(self, path: str, query: Mapping[str, str] | None = None, *,
                 deadline: float | None = None) -> dict[str, Any]:
        self.calls.append(("GET", path))
        self.deadlines.append(("GET", path, deadline))
        if self.down:
            raise ApiError(0, "ConnectionError", "connection refused")
        if self.fail_reads is not None:
            raise self.fail_reads
        if path not in self.objects:
            raise ApiError(404, "NotFound", f"{path} not found")
        return copy.deepcopy(self.objects[path])

    def send_json(self, method: str, path: str, body: Any, *,
                  deadline: float | None = None) -> dict[str, Any]:
        self.calls.append((method, path))
        self.deadlines.append((method, path, deadline))
        if self.down:
            raise ApiError(0, "ConnectionError", "connection refused")
        if self.fail_writes is not None:
            raise self.fail_writes
        if method == "POST":
            full = f"{path}/{body['metadata']['name']}"
            if full in self.objects:
                raise ApiError(409, "AlreadyExists", f"{full} already exists")
            self.created.append((path, copy.deepcopy(body)))
            return self.put(full, body)
        if method == "DELETE":
            self._current(path)
            del self.objects[path]
            return {}
        assert method == "PUT", f"{method} is not a request the daemon makes"
        current = self._current(path)
        if body["metadata"]["resourceVersion"] != current["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict", "the object has been modified; stale "
                                            "resourceVersion")
        return self.put(path, body)

    def send_raw(self, method: str, path: str, data: bytes, content_type: str, *,
                 deadline: float | None = None) -> dict[str, Any]:
        """A JSON merge patch (the HPA floor's), with the API server's precondition: a
        resourceVersion in the patch must be the object's."""
        self.calls.append((method, path))
        if self.down:
            raise ApiError(0, "ConnectionError", "connection refused")
        if self.fail_writes is not None:
            raise self.fail_writes
        assert (method, content_type) == ("PATCH", "application/merge-patch+json"), \
            f"{method} {content_type} is not a request the daemon makes"
        patch = json.loads(data)
        current = self._current(path)
        rv = (patch.get("metadata") or {}).get("resourceVersion")
        if rv is not None and rv != current["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict", "the object has been modified; stale "
                                            "resourceVersion")
        return self.put(path, _merge(current, patch))

    def _current(self, path: str) -> dict[str, Any]:
        """The object a write replaces (404 when absent; 409 while a conflict is injected)."""
        current = self.objects.get(path)
        if current is None:
            raise ApiError(404, "NotFound", f"{path} not found")
        if self.conflicts.get(path, 0) > 0:
            self.conflicts[path] -= 1
            self.put(path, current)  # another writer's change, in between
            raise ApiError(409, "Conflict", "the object has been modified")
        return current


def _merge(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch, as the API server applies ``application/merge-patch+json``."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _merge(out.get(key), value)
    return out


class FakeResponse:
    """A streamed response: ``payload`` in chunks of ``chunk`` bytes, then EOF or ``then``
    raised (a dead connection, a read timeout)."""

    def __init__(self, payload: bytes, chunk: int = 7, then: Exception | None = None,
                 content_type: str = JSON) -> None:
        self.payload = payload
        self.chunk = chunk
        self.then = then
        self.headers: Mapping[str, str] = {"Content-Type": content_type}
        self.released = False
        self.closed = False

    def stream(self, amt: int, decode_content: bool = True) -> Iterator[bytes]:
        for i in range(0, len(self.payload), self.chunk):
            yield self.payload[i:i + self.chunk]
        if self.then is not None:
            raise self.then

    def release_conn(self) -> None:
        self.released = True

    def close(self) -> None:
        self.closed = True

    def shutdown(self) -> None:
        self.closed = True


Answer = FakeResponse | ApiError
"""What a scripted stream request gets: a response, or the error it raises."""
Page = dict[str, Any] | bytes | ApiError
"""What a scripted list request gets: a JSON NodeList, recorded protobuf bytes, or an error."""


class ScriptedApi:
    """Answers the node watch's requests from scripts: ``stream()`` from ``streams`` and
    ``get_raw()`` (list pages) from ``pages``, in order. When a script runs out the request
    fails and :attr:`when_done` runs (a test stops its reflector there, so its loop ends).
    :attr:`on_stream` runs as each stream is asked for (a test records the watch's status
    at that moment)."""

    def __init__(self, streams: Sequence[Answer], pages: Sequence[Page] = ()) -> None:
        self.streams = list(streams)
        self.pages = list(pages)
        self.stream_calls: list[tuple[dict[str, str], float]] = []
        self.page_calls: list[dict[str, str]] = []
        self.accepts: list[str] = []
        self.responses: list[FakeResponse] = []
        self.when_done: Callable[[], None] | None = None
        self.on_stream: Callable[[], None] | None = None

    def _next(self, script: list[Any], accept: str) -> Any:
        """The script's next answer (its ApiError raised), or the end of the script."""
        self.accepts.append(accept)
        if not script:
            if self.when_done is not None:
                self.when_done()
            raise ApiError(0, "ConnectionError", "script over")
        answer = script.pop(0)
        if isinstance(answer, ApiError):
            raise answer
        return answer

    def stream(self, path: str, query: Mapping[str, str], read_timeout: float,
               accept: str = JSON, deadline: float | None = None,
               ) -> StreamResponse:
        if self.on_stream is not None:
            self.on_stream()
        self.stream_calls.append((dict(query), read_timeout))
        answer: FakeResponse = self._next(self.streams, accept)
        self.responses.append(answer)
        return answer

    def get_raw(self, path: str, query: Mapping[str, str], accept: str = JSON
                ) -> tuple[str, bytes]:
        self.page_calls.append(dict(query))
        page: dict[str, Any] | bytes = self._next(self.pages, accept)
        if isinstance(page, bytes):  # protobuf, as recorded
            return PROTOBUF, page
        return JSON, json.dumps(page).encode()

    def get_json(self, path: str, query: Mapping[str, str] | None = None, *,
                 deadline: float | None = None) -> dict[str, Any]:
        raise AssertionError("the node watch makes no single JSON requests")

    def send_json(self, method: str, path: str, body: Any, *,
                  deadline: float | None = None) -> dict[str, Any]:
        raise AssertionError("the node watch writes nothing")


# Held against the protocols here, once, so a change to a protocol fails at the fake.
_API: type[RawApi] = FakeApi
_STREAMING: type[StreamingApi] = ScriptedApi
_RESPONSE: type[StreamResponse] = FakeResponse
