"""The aggregation layer as kubeadm (and so kind) configures it: a front-proxy CA, a client
certificate it signed for ``front-proxy-client``, and the API server's requestheader flags.

Why: an extension API server (metrics-server, for an HPA on CPU) trusts the API server's
proxied requests only when they come with a client certificate that the
``requestheader-client-ca-file`` it reads from ``kube-system/extension-apiserver-
authentication`` signed, with the user in ``X-Remote-User``. Without these flags the API
server publishes no such CA and presents no certificate: every metrics request fails.
The names and headers are kubeadm's (``cmd/kubeadm/app/phases/controlplane/manifests.go``).
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path
from typing import NamedTuple

CLIENT_NAME = "front-proxy-client"
_DAYS = "2"  # a test run's certificates never outlive it by much


class FrontProxy(NamedTuple):
    ca: Path
    cert: Path
    key: Path


def _openssl(*args: str) -> None:
    proc = subprocess.run(["openssl", *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args[:2])} failed: {proc.stderr.strip()}")


def generate(cert_dir: Path) -> FrontProxy:
    """Write the CA and the client certificate under ``cert_dir`` (the openssl CLI)."""
    cert_dir.mkdir(parents=True, exist_ok=True)
    files = FrontProxy(cert_dir / "front-proxy-ca.crt", cert_dir / "front-proxy-client.crt",
                       cert_dir / "front-proxy-client.key")
    ca_key = cert_dir / "front-proxy-ca.key"
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key),
             "-out", str(files.ca), "-days", _DAYS, "-subj", "/CN=front-proxy-ca",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    csr = cert_dir / "front-proxy-client.csr"
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(files.key),
             "-out", str(csr), "-subj", f"/CN={CLIENT_NAME}")
    with tempfile.NamedTemporaryFile("w", suffix=".ext", dir=cert_dir) as ext:
        ext.write("keyUsage=critical,digitalSignature,keyEncipherment\n"
                  "extendedKeyUsage=clientAuth\n")
        ext.flush()
        _openssl("x509", "-req", "-in", str(csr), "-CA", str(files.ca), "-CAkey", str(ca_key),
                 "-CAcreateserial", "-out", str(files.cert), "-days", _DAYS,
                 "-extfile", ext.name)
    csr.unlink()
    files.key.chmod(0o600)
    ca_key.chmod(0o600)
    return files


def apiserver_flags(files: FrontProxy) -> list[str]:
    """kubeadm's requestheader and proxy-client flags for kube-apiserver."""
    return [
        f"--requestheader-client-ca-file={files.ca}",
        f"--requestheader-allowed-names={CLIENT_NAME}",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-username-headers=X-Remote-User",
        f"--proxy-client-cert-file={files.cert}",
        f"--proxy-client-key-file={files.key}",
    ]
