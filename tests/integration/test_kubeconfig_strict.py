"""Kubeconfigs read as client-go reads them: typed fields, its refusals, ``tls-server-name``,
one-line errors, and exec plugins that fail loudly at start.

The real daemon against the real API server: a kubeconfig client-go refuses must stop the
daemon at start (exit 1, one line naming what is wrong), never let it connect.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.controlplane import AdminClient, ControlPlane
from tests.integration.support import (
    coredns_flags,
    daemon_command,
    free_port,
    one_replica_per_node,
    wait_replicas,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

CM = "kc-params"


def setup(controlplane: ControlPlane, namespace: str) -> AdminClient:
    """coredns on two Nodes, one replica a Node; the admin client."""
    admin = controlplane.admin()
    one_replica_per_node(admin, namespace, CM, f"kc-{namespace[-6:]}", 2)
    return admin


def kubeconfig(plane: ControlPlane, out: Path, *, cluster: dict[str, Any] | None = None,
               user: dict[str, Any] | None = None, drop: tuple[str, ...] = ()) -> Path:
    """The autoscaler's kubeconfig with its cluster and user entries changed."""
    doc = yaml.safe_load(plane.autoscaler_kubeconfig.read_text())
    entry = doc["clusters"][0]["cluster"]
    for key in drop:
        entry.pop(key, None)
    entry.update(cluster or {})
    if user is not None:
        doc["users"][0]["user"] = user
    out.write_text(yaml.safe_dump(doc))
    return out


def refused(config: Path, namespace: str) -> tuple[int | None, str]:
    """Run the daemon with ``config``; (exit code, stderr) if it stopped within 20 s, else
    (None, what it printed) once stopped by PID."""
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    proc = subprocess.Popen([*daemon_command(), f"--kubeconfig={config}",
                             f"--health-port={free_port()}", *coredns_flags(namespace, CM)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        _, err = proc.communicate(timeout=20)
        return proc.returncode, err
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate(timeout=10)
        return None, err


def one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line, got:\n{err}"
    assert "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize(("cluster", "drop", "fragments"), [
    ({"insecure-skip-tls-verify": "false"}, (),
     ["insecure-skip-tls-verify", "bool", "string"]),
    ({"insecure-skip-tls-verify": True}, (),
     ["insecure-skip-tls-verify", "certificate-authority", "not allowed"]),
    ({"certificate-authority-data": "not base64 at all!"}, ("certificate-authority",),
     ["certificate-authority-data", "base64"]),
    ({"certificate-authority-data": base64.b64encode(b"-----BEGIN CERTIFICATE-----\nxx\n"
                                                     b"-----END CERTIFICATE-----\n").decode()},
     ("certificate-authority",), ["certificate-authority-data", "PEM"]),
    ({"server": 6443}, (), ["server", "string"]),
])
def test_a_kubeconfig_client_go_refuses_stops_the_daemon_with_one_line(
        controlplane: ControlPlane, namespace: str, no_nodes: None, tmp_path: Path,
        cluster: dict[str, Any], drop: tuple[str, ...], fragments: list[str]) -> None:
    setup(controlplane, namespace)
    config = kubeconfig(controlplane, tmp_path / "kc", cluster=cluster, drop=drop)
    code, err = refused(config, namespace)
    assert code == 1, f"exit {code}: the daemon ran with this kubeconfig:\n{err[-2000:]}"
    line = one_line(err)
    for fragment in fragments:
        assert fragment in line, line
    print(f"\n{cluster}: {line}")


def test_tls_server_name_is_the_name_verified(controlplane: ControlPlane, namespace: str,
                                              no_nodes: None, start: Any,
                                              tmp_path: Path) -> None:
    admin = setup(controlplane, namespace)
    # The certificate names kubernetes (and 127.0.0.1), not localhost: only the name given
    # by tls-server-name makes this connection verify.
    good = kubeconfig(controlplane, tmp_path / "good", cluster={
        "server": f"https://localhost:{controlplane.port}", "tls-server-name": "kubernetes"})
    proc = start(*coredns_flags(namespace, CM), kubeconfig=good)
    wait_replicas(admin, namespace, "deployment", "coredns", 2, proc=proc)
    proc.stop()

    wrong = kubeconfig(controlplane, tmp_path / "wrong",
                       cluster={"tls-server-name": "not-the-apiserver.example"})
    proc = start(*coredns_flags(namespace, CM), kubeconfig=wrong)
    proc.wait_healthy(30)
    body = proc.wait_poll_error("certificate", 30)
    assert "not-the-apiserver.example" in body, body
    print(f"\nwrong tls-server-name: /last-poll {body[:200]!r}")


def exec_user(tmp_path: Path, script: str, name: str = "cpa-test-login") -> dict[str, Any]:
    plugin = tmp_path / name
    plugin.write_text(f"#!{sys.executable}\n{script}")
    plugin.chmod(0o755)
    return {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": str(plugin),
                     "args": ["--cluster", "test"], "interactiveMode": "Never"}}


def test_a_failing_exec_plugin_is_an_error_at_start_naming_it_and_its_stderr(
        controlplane: ControlPlane, namespace: str, no_nodes: None, tmp_path: Path) -> None:
    setup(controlplane, namespace)
    user = exec_user(tmp_path, "import sys\nprint('error: the refresh token has expired; "
                               "run cpa-test-login', file=sys.stderr)\nsys.exit(1)\n")
    code, err = refused(kubeconfig(controlplane, tmp_path / "kc", user=user), namespace)
    assert code == 1, f"exit {code}:\n{err[-2000:]}"
    line = one_line(err)
    assert "cpa-test-login" in line and "the refresh token has expired" in line, line
    print(f"\nfailing exec plugin: {line}")


def test_an_exec_plugin_token_authenticates(controlplane: ControlPlane, namespace: str,
                                            no_nodes: None, start: Any,
                                            tmp_path: Path) -> None:
    admin = setup(controlplane, namespace)
    token = yaml.safe_load(controlplane.autoscaler_kubeconfig.read_text()
                           )["users"][0]["user"]["token"]
    credential = {"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                  "status": {"token": token}}
    user = exec_user(tmp_path, f"import json, os\nassert os.environ['KUBERNETES_EXEC_INFO']\n"
                               f"print(json.dumps({credential!r}))\n")
    proc = start(*coredns_flags(namespace, CM), kubeconfig=kubeconfig(controlplane, tmp_path / "kc",
                                                          user=user))
    wait_replicas(admin, namespace, "deployment", "coredns", 2, proc=proc)
    proc.wait_poll_ok()
