"""The daemon's start, in a fresh interpreter, in-cluster as in a Pod (the ServiceAccount
directory moved to a temporary one): its first Node request is one page of up to 5,000
Nodes in protobuf, made before the rest of the daemon is imported; nothing on the way
imports the heavy libraries it never needs (the generated Kubernetes client, which is not
in the image; a protobuf library; matplotlib; requests), nor, before its first poll, the
logging library and prometheus_client."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parents[4]

PROBE = r"""
import json, os, sys
import cpa.kube.clientconfig as config
config.SA_DIR = sys.argv[1]
import cpa.horizontal.daemon.cpa_main as main
import cpa.nodes.watch as watch
import cpa.runtime.startup as startup
seen = {}
class First:  # the reflector's first request, recorded and not made
    def stream(self, path, query, read_timeout, accept, deadline=None):
        seen["first_stream"] = [path, dict(query), read_timeout, accept, deadline]
        seen["at_first_stream"] = sorted(sys.modules)
        raise KeyboardInterrupt
def start(self):  # on this thread
    self._api = First()
    try:
        self._sync()
    except KeyboardInterrupt:
        pass
watch.NodeReflector.start = start
def stop(*args, **kwargs):  # the health server, the rest of the daemon loaded
    seen["at_health"] = sorted(sys.modules)
    print(json.dumps(seen), flush=True)
    os._exit(0)
startup.serve_health = stop
sys.exit(main.run(sys.argv[2:]))
"""

NEVER = ("kubernetes", "google", "matplotlib", "requests")
NOT_BEFORE_THE_FIRST_POLL = ("structlog", "prometheus_client")  # docs/architecture.md,
# "Measured exceptions": cpa.logs.hold and LateMetrics keep them off the first write's way


def test_the_first_request_is_one_page_and_no_heavy_library_is_loaded(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("t")
    (tmp_path / "namespace").write_text("kube-system")
    (tmp_path / "ca.crt").write_bytes(_ca())
    port, health = free_port(), free_port()  # nothing listens on the first
    env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(port),
           "PATH": "/usr/bin:/bin",
           "PYTHONPATH": os.pathsep.join([str(REPO), sysconfig.get_paths()["purelib"]])}
    out = subprocess.run(
        [sys.executable, "-S", "-c", PROBE, str(tmp_path), "--namespace=kube-system",
         "--configmap=cm", "--target=deployment/coredns", f"--health-port={health}",
         '--default-params={"linear":{"nodesPerReplica":16}}'],
        capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path, check=False)
    assert out.returncode == 0 and out.stdout, out.stderr
    seen = json.loads(out.stdout.splitlines()[-1])
    # The Node watch starts before the rest of the daemon is imported (docs/architecture.md,
    # "Measured exceptions"): the API server prepares the list meanwhile.
    assert "cpa.horizontal.daemon.cpa_run" not in seen["at_first_stream"]
    assert "cpa.horizontal.daemon.cpa_run" in seen["at_health"]
    loaded = {name.split(".")[0] for name in seen["at_health"]}
    assert [name for name in NEVER if name in loaded] == []
    assert [name for name in NOT_BEFORE_THE_FIRST_POLL if name in loaded] == []
    path, query, read_timeout, accept, deadline = seen["first_stream"]
    assert (path, query) == ("/api/v1/nodes", {"limit": "5000"})
    assert accept.startswith("application/vnd.kubernetes.protobuf") and deadline is None
    assert read_timeout == 60.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ca() -> bytes:
    """A self-signed CA certificate, for a TLS context to load (made with openssl)."""
    done = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                           "-keyout", "/dev/null", "-subj", "/CN=test-ca", "-days", "1"],
                          capture_output=True, check=True)
    return done.stdout
