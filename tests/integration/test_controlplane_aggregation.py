"""The test control plane's aggregation layer (``ControlPlane(aggregation=True)``), as an
extension API server sees it.

Why: the DNS benchmark's HPA reads CPU through metrics-server, an extension API server
behind the aggregation layer. Here a small HTTPS server stands in for it (a fake far end):
it accepts only a client certificate signed by the front-proxy CA and records the
requestheader headers. An APIService routes a group to it through an ExternalName Service
(the API server resolves that name itself, so no kube-proxy is needed), and a request sent
to the API server must arrive there with the caller's name.
"""

from __future__ import annotations

import json
import ssl
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.controlplane import ADMIN_USER, ControlPlane
from tests.controlplane.frontproxy import CLIENT_NAME

pytestmark = pytest.mark.integration
GROUP = "aggregation.cpa.test"


class Extension(ThreadingHTTPServer):
    """An HTTPS server that answers discovery for GROUP/v1 and records who called."""

    def __init__(self, cert: Path, key: Path, client_ca: Path) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.seen: list[dict[str, Any]] = []
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(client_ca))
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_cert_chain(str(cert), str(key))
        self.socket = context.wrap_socket(self.socket, server_side=True)


class _Handler(BaseHTTPRequestHandler):
    server: Extension

    def do_GET(self) -> None:
        peer = self.connection.getpeercert() if hasattr(self.connection, "getpeercert") else {}
        subject = dict(pair[0] for pair in (peer or {}).get("subject", ()))
        self.server.seen.append({"path": self.path, "cn": subject.get("commonName"),
                                 "user": self.headers.get("X-Remote-User")})
        body = json.dumps({"kind": "APIResourceList", "apiVersion": "v1",
                           "groupVersion": f"{GROUP}/v1", "resources": []}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def _serving_cert(directory: Path) -> tuple[Path, Path]:
    cert, key = directory / "ext.crt", directory / "ext.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                    str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost"], check=True, capture_output=True)
    return cert, key


@pytest.fixture
def plane(controlplane: ControlPlane) -> Iterator[ControlPlane]:
    with ControlPlane(bin_dir=controlplane.bin_dir, aggregation=True) as cp:
        yield cp


def _register(cp: ControlPlane, port: int) -> None:
    admin = cp.admin()
    admin.post("/api/v1/namespaces/kube-system/services", {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "ext"},
        "spec": {"type": "ExternalName", "externalName": "localhost",
                 "ports": [{"port": port}]}})
    admin.post("/apis/apiregistration.k8s.io/v1/apiservices", {
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": f"v1.{GROUP}"},
        "spec": {"group": GROUP, "version": "v1", "insecureSkipTLSVerify": True,
                 "groupPriorityMinimum": 100, "versionPriority": 100,
                 "service": {"name": "ext", "namespace": "kube-system", "port": port}}})


def _available(event: dict[str, Any]) -> bool:
    return any(c["type"] == "Available" and c["status"] == "True"
               for c in event["object"].get("status", {}).get("conditions", []))


def test_the_api_server_publishes_its_front_proxy_ca(plane: ControlPlane) -> None:
    assert plane.front_proxy is not None
    data = plane.admin().get(
        "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication")["data"]
    assert data["requestheader-client-ca-file"].strip() == \
        plane.front_proxy.ca.read_text().strip()
    assert json.loads(data["requestheader-allowed-names"]) == [CLIENT_NAME]
    assert json.loads(data["requestheader-username-headers"]) == ["X-Remote-User"]


def test_a_proxied_request_reaches_the_extension_as_the_caller(
        plane: ControlPlane, tmp_path: Path) -> None:
    assert plane.front_proxy is not None
    cert, key = _serving_cert(tmp_path)
    ext = Extension(cert, key, plane.front_proxy.ca)
    thread = threading.Thread(target=ext.serve_forever, daemon=True)
    thread.start()
    try:
        _register(plane, ext.server_address[1])
        events = plane.admin().watch_until(
            "/apis/apiregistration.k8s.io/v1/apiservices?watch=1"
            f"&fieldSelector=metadata.name%3Dv1.{GROUP}", _available)
        assert events[-1]["object"]["metadata"]["name"] == f"v1.{GROUP}"
        listed = plane.admin().get(f"/apis/{GROUP}/v1")
        assert listed["groupVersion"] == f"{GROUP}/v1"
        from_admin = [s for s in ext.seen if s["user"] == ADMIN_USER]
        assert from_admin, ext.seen
        assert {s["cn"] for s in ext.seen} == {CLIENT_NAME}
    finally:
        ext.shutdown()
        ext.server_close()
        thread.join(5)


def test_without_it_no_front_proxy_ca_is_published(controlplane: ControlPlane) -> None:
    status, body = controlplane.admin().raw(
        "GET", "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication")
    assert status == 404 or "requestheader-client-ca-file" not in json.loads(body)["data"]
