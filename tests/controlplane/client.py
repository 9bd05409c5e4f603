"""The tests' own API client (urllib3, JSON), for setup and assertions: not the code under
test."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import urllib3
import yaml


class ApiError(Exception):
    """A non-2xx answer from the API server; keeps the status and body for assertions."""

    def __init__(self, method: str, path: str, status: int, body: str) -> None:
        super().__init__(f"{method} {path} -> HTTP {status}: {body[:500]}")
        self.method = method
        self.path = path
        self.status = status
        self.body = body


# kind -> (apiVersion, plural, namespaced): the kinds the tests create.
_KINDS: dict[str, tuple[str, str, bool]] = {
    "Namespace": ("v1", "namespaces", False),
    "ServiceAccount": ("v1", "serviceaccounts", True),
    "ConfigMap": ("v1", "configmaps", True),
    "Secret": ("v1", "secrets", True),
    "Service": ("v1", "services", True),
    "Node": ("v1", "nodes", False),
    "Pod": ("v1", "pods", True),
    "ReplicationController": ("v1", "replicationcontrollers", True),
    "Deployment": ("apps/v1", "deployments", True),
    "ReplicaSet": ("apps/v1", "replicasets", True),
    "StatefulSet": ("apps/v1", "statefulsets", True),
    "DaemonSet": ("apps/v1", "daemonsets", True),
    "ClusterRole": ("rbac.authorization.k8s.io/v1", "clusterroles", False),
    "ClusterRoleBinding": ("rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
    "Role": ("rbac.authorization.k8s.io/v1", "roles", True),
    "RoleBinding": ("rbac.authorization.k8s.io/v1", "rolebindings", True),
    "PriorityClass": ("scheduling.k8s.io/v1", "priorityclasses", False),
    "PodDisruptionBudget": ("policy/v1", "poddisruptionbudgets", True),
    "NetworkPolicy": ("networking.k8s.io/v1", "networkpolicies", True),
    "CustomResourceDefinition": ("apiextensions.k8s.io/v1", "customresourcedefinitions", False),
    # prometheus-operator's kinds (the chart's opt-in monitoring), once their CRDs are in.
    "PodMonitor": ("monitoring.coreos.com/v1", "podmonitors", True),
    "ServiceMonitor": ("monitoring.coreos.com/v1", "servicemonitors", True),
    "PrometheusRule": ("monitoring.coreos.com/v1", "prometheusrules", True),
}


def resource_path(obj: dict[str, Any]) -> str:
    """REST path of a named object (``/api/v1/namespaces/ns/configmaps/x``) from kind/apiVersion.

    Raises ValueError for kinds not in the table or a mismatching apiVersion, so a typo in a
    test manifest fails loudly instead of hitting a 404 on a guessed path.
    """
    kind = obj.get("kind", "")
    if kind not in _KINDS:
        raise ValueError(f"unsupported kind {kind!r} (known: {', '.join(sorted(_KINDS))})")
    api_version, plural, namespaced = _KINDS[kind]
    if obj.get("apiVersion") != api_version:
        raise ValueError(f"{kind} needs apiVersion {api_version}, got {obj.get('apiVersion')!r}")
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    if not name:
        raise ValueError(f"{kind} without metadata.name")
    prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    if namespaced:
        return f"{prefix}/namespaces/{meta.get('namespace') or 'default'}/{plural}/{name}"
    return f"{prefix}/{plural}/{name}"


class AdminClient:
    """A tiny JSON client over urllib3 for test setup and assertions (not the code under test).

    Despite the name it works with any bearer token; :meth:`ControlPlane.admin` gives the admin
    one. Every method except :meth:`raw` raises :class:`ApiError` on a non-2xx answer.
    """

    def __init__(self, server: str, ca_file: Path, token: str, timeout: float = 30.0) -> None:
        self.server = server.rstrip("/")
        self.token = token
        self._http = urllib3.PoolManager(
            ca_certs=str(ca_file),
            cert_reqs="CERT_REQUIRED",
            timeout=urllib3.Timeout(connect=5.0, read=timeout),
            retries=False,
            maxsize=4,
        )

    def close(self) -> None:
        """Close pooled connections (the next request reconnects)."""
        self._http.clear()

    def raw(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, bytes]:
        """Send one request; returns (status, body) and never raises on HTTP status."""
        hdrs = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        hdrs.update(headers or {})
        resp = self._http.request(method, self.server + path, body=body, headers=hdrs)
        return resp.status, resp.data

    def _json(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json"
    ) -> dict[str, Any]:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": content_type} if data is not None else {}
        status, out = self.raw(method, path, data, headers)
        if not 200 <= status < 300:
            raise ApiError(method, path, status, out.decode(errors="replace"))
        if not out:
            return {}
        result: dict[str, Any] = json.loads(out)
        return result

    def get(self, path: str) -> dict[str, Any]:
        return self._json("GET", path)

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._json("POST", path, body)

    def put(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._json("PUT", path, body)

    def patch(
        self, path: str, body: Any, content_type: str = "application/merge-patch+json"
    ) -> dict[str, Any]:
        return self._json("PATCH", path, body, content_type)

    def delete(self, path: str) -> None:
        self._json("DELETE", path)

    def watch_until(self, path: str, last: Callable[[dict[str, Any]], bool]
                    ) -> list[dict[str, Any]]:
        """The events of the watch ``path`` (``...?watch=1&resourceVersion=RV``: from RV on,
        the API server replays what changed since), up to and including the first that
        ``last`` accepts. A test makes that event itself (a marker written after the
        scenario), so the count of the writes before it needs no waiting for time."""
        hdrs = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        resp = self._http.request("GET", self.server + path, headers=hdrs,
                                  preload_content=False)
        try:
            if resp.status != 200:
                raise ApiError("GET", path, resp.status, resp.read().decode(errors="replace"))
            events: list[dict[str, Any]] = []
            for line in resp:
                if not line.strip():
                    continue
                events.append(json.loads(line))
                if last(events[-1]):
                    return events
            raise ApiError("GET", path, resp.status, f"the watch ended after {len(events)} "
                           "events, without the last one expected")
        finally:
            resp.close()  # mid-stream: the connection is dropped, not given back to the pool

    def apply(self, obj: dict[str, Any], field_manager: str = "cpa-tests") -> dict[str, Any]:
        """Server-side apply (force): creates or updates ``obj`` idempotently.

        Only the kinds in the table (Namespace, ServiceAccount, ConfigMap, Node, workloads,
        RBAC, PriorityClass, ...) are supported; others raise ValueError.
        """
        path = resource_path(obj)
        query = f"?fieldManager={field_manager}&force=true"
        # JSON is YAML, so the apply-patch+yaml content type takes a JSON body as is.
        return self._json("PATCH", path + query, obj, "application/apply-patch+yaml")

    def apply_file(self, path: Path) -> list[dict[str, Any]]:
        """Apply every document of a (multi-document) YAML file; ``kind: List`` is flattened."""
        applied: list[dict[str, Any]] = []
        for doc in yaml.safe_load_all(Path(path).read_text()):
            if not doc:
                continue
            items = (doc.get("items") or []) if doc.get("kind") == "List" else [doc]
            applied.extend(self.apply(item) for item in items)
        return applied


