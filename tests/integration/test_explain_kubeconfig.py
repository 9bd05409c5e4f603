"""`cpa explain --from-cluster` finds the real API server as kubectl would: from
~/.kube/config with no flag, from a KUBECONFIG list, with --context; and says in one line
why when it cannot."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.controlplane import ControlPlane
from tests.integration.support import coredns_and_nodes, create_configmap

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

CM = "kc-params"


def explain(home: Path, *args: str, kubeconfig_env: str | None = None
            ) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT")}
    env["HOME"] = str(home)
    if kubeconfig_env is not None:
        env["KUBECONFIG"] = kubeconfig_env
    return subprocess.run([sys.executable, "-m", "cpa", "explain", "--from-cluster", *args,
                           "-o", "json"], capture_output=True, text=True, timeout=60,
                          env=env, check=False)


def two_contexts(real: dict[str, Any], current: str) -> dict[str, Any]:
    """The test cluster as context "test", and a context "nowhere" whose server refuses."""
    doc: dict[str, Any] = json.loads(json.dumps(real))
    doc["clusters"].append({"name": "dead", "cluster": {"server": "http://127.0.0.1:1"}})
    doc["contexts"] = [{"name": "test", "context": real["contexts"][0]["context"]},
                       {"name": "nowhere", "context": {"cluster": "dead"}}]
    doc["current-context"] = current
    return doc


def test_home_config_kubeconfig_list_and_context(controlplane: ControlPlane, namespace: str,
                                                 no_nodes: None, tmp_path: Path) -> None:
    admin = controlplane.admin()
    coredns_and_nodes(admin, namespace, "kc", 8, cpu="4")
    create_configmap(admin, namespace, CM, {"linear": '{"nodesPerReplica":2}'})
    real = yaml.safe_load(controlplane.autoscaler_kubeconfig.read_text())
    where = [f"--namespace={namespace}", f"--configmap={CM}"]

    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    (home / ".kube" / "config").write_text(yaml.safe_dump(two_contexts(real, "test")))
    found = explain(home, *where)
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["replicas"] == 4  # ceil(8 / 2)

    (home / ".kube" / "config").write_text(yaml.safe_dump(two_contexts(real, "nowhere")))
    refused = explain(home, *where)
    assert refused.returncode == 1
    assert "127.0.0.1:1" in json.loads(refused.stdout)["error"]
    assert explain(home, *where, "--context", "test").returncode == 0

    # KUBECONFIG wins over ~/.kube/config, and its files merge: the users in one file, the
    # clusters and contexts in another.
    users = tmp_path / "users.yaml"
    users.write_text(yaml.safe_dump({"users": real["users"]}))
    rest = tmp_path / "rest.yaml"
    rest.write_text(yaml.safe_dump({k: v for k, v in real.items() if k != "users"}))
    merged = explain(home, *where, kubeconfig_env=os.pathsep.join([str(rest), str(users)]))
    assert merged.returncode == 0, merged.stderr
    assert json.loads(merged.stdout)["replicas"] == 4

    unknown = explain(home, *where, "--context", "nope")
    assert unknown.returncode == 1
    assert "no context named 'nope'" in json.loads(unknown.stdout)["error"]
