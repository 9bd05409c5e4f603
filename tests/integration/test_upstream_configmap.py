"""``--update-configmap-from-defaults`` on ConfigMaps upstream's own binary created.

Upstream v1.10.3 (built from its source, as the benchmarks build it) runs against the test
API server, in a private mount namespace with the ServiceAccount files in place (it knows
only the in-cluster configuration), until it has created its ConfigMap from its
``--default-params``. Then our daemon, with other defaults and the flag:

* that ConfigMap, never edited, follows the new defaults and gets our annotation;
* one that ``kubectl edit`` changed after upstream created it (its field manager,
  ``kubectl-edit``, owns ``f:data.f:linear``) is left as it is, and the log names the editor.

Needs root (``unshare -m``) and upstream's fixed health port 8080 free; skipped otherwise.
The second test judges ConfigMaps written under upstream's manager name, and runs always.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cpa.kube.configmap import DEFAULTS_ANNOTATION, data_hash
from tests.controlplane import ControlPlane, upstream_autoscaler_binary
from tests.controlplane.client import ApiError
from tests.controlplane.inpod import in_pod
from tests.integration.support import (
    AutoscalerProcess,
    configmap,
    coredns_and_nodes,
    port_is_free,
    service_account,
    wait_replicas,
    wait_until,
)

pytestmark = pytest.mark.integration

OLD = {"linear": {"nodesPerReplica": 16}}
NEW = {"linear": {"nodesPerReplica": 4}}


@pytest.fixture
def upstream(controlplane: ControlPlane, tmp_path: Path) -> Iterator[Callable[[str, str], None]]:
    """Run upstream's binary until it has created ConfigMap ``namespace/name``; each run is
    stopped by PID."""
    binary = upstream_autoscaler_binary()
    if binary is None:
        pytest.skip("upstream's binary is not built (tests/controlplane: UPSTREAM_HOWTO)")
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("upstream reads its token from the ServiceAccount dir: needs root and "
                    "unshare -m")
    token = tmp_path / "token"
    token.write_text(controlplane.autoscaler_token)
    token.chmod(0o600)
    procs: list[subprocess.Popen[bytes]] = []

    def run(namespace: str, name: str) -> None:
        if not port_is_free(8080):
            pytest.skip("port 8080 (upstream's fixed health port) is in use")
        env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "MY_POD_NAMESPACE")}
        env.update(KUBERNETES_SERVICE_HOST="127.0.0.1",
                   KUBERNETES_SERVICE_PORT=controlplane.server.rsplit(":", 1)[1])
        log = (tmp_path / f"upstream-{name}.log").open("wb")
        proc = subprocess.Popen(
            [*in_pod(token, controlplane.ca_file), str(binary), f"--namespace={namespace}",
             f"--configmap={name}", "--target=deployment/coredns",
             f"--default-params={json.dumps(OLD)}", "--poll-period-seconds=1",
             "--logtostderr=true", "--v=2"], stdout=log, stderr=subprocess.STDOUT, env=env)
        procs.append(proc)
        try:
            wait_until(f"upstream to create ConfigMap {name}",
                       lambda: _exists(controlplane, namespace, name) or _dead(proc), 60)
            assert proc.poll() is None, (tmp_path / f"upstream-{name}.log").read_text()
        finally:
            proc.terminate()
            proc.wait(10)
            log.close()

    yield run
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def _exists(plane: ControlPlane, namespace: str, name: str) -> bool:
    try:
        configmap(plane.admin(), namespace, name)
    except ApiError:
        return False
    return True


def _dead(proc: subprocess.Popen[bytes]) -> bool:
    return proc.poll() is not None


def _data_managers(cm: dict[str, Any]) -> set[str]:
    return {e["manager"] for e in cm["metadata"]["managedFields"] if "f:data" in e["fieldsV1"]}


def test_upstreams_untouched_configmap_follows_and_an_edited_one_stays(
        controlplane: ControlPlane, namespace: str, no_nodes: None,
        upstream: Callable[[str, str], None],
        start: Callable[..., AutoscalerProcess]) -> None:
    admin = controlplane.admin()
    coredns_and_nodes(admin, namespace, "upcm", 16)
    upstream(namespace, "untouched")
    upstream(namespace, "edited")
    _judged(controlplane, namespace, start)


def test_a_configmap_written_under_upstreams_manager_name_is_judged_the_same(
        controlplane: ControlPlane, namespace: str, no_nodes: None,
        start: Callable[..., AutoscalerProcess]) -> None:
    """The same judgement where upstream's binary cannot be built (its module is refused by
    the Go module proxy, so CI has none): the ConfigMaps created as upstream creates them,
    under the manager name the API server records for it (the test above checks that name
    against the real binary), so that the rule runs in every CI."""
    admin = controlplane.admin()
    coredns_and_nodes(admin, namespace, "upcm", 16)
    for name in ("untouched", "edited"):
        admin.post(f"/api/v1/namespaces/{namespace}/configmaps"
                   "?fieldManager=cluster-proportional-autoscaler",
                   {"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": name, "namespace": namespace},
                    "data": {"linear": json.dumps(OLD["linear"])}})
    _judged(controlplane, namespace, start)


def _judged(controlplane: ControlPlane, namespace: str,
            start: Callable[..., AutoscalerProcess]) -> None:
    """Upstream's ConfigMaps "untouched" and "edited" are in place: the first follows our
    new defaults, the second, once ``kubectl edit`` changed it, stays as it is."""
    admin = controlplane.admin()
    created = configmap(admin, namespace, "untouched")
    assert _data_managers(created) == {"cluster-proportional-autoscaler"}
    assert DEFAULTS_ANNOTATION not in (created["metadata"].get("annotations") or {})

    edited = configmap(admin, namespace, "edited")
    edited["data"] = {"linear": '{"nodesPerReplica":8}'}
    admin.put(f"/api/v1/namespaces/{namespace}/configmaps/edited?fieldManager=kubectl-edit",
              edited)
    assert _data_managers(configmap(admin, namespace, "edited")) == {
        "cluster-proportional-autoscaler", "kubectl-edit"}

    kubeconfig = service_account(controlplane, namespace, "follow", extra=[
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["update"]}])
    new = f"--default-params={json.dumps(NEW)}"
    follows = start(f"--namespace={namespace}", "--configmap=untouched",
                    "--target=deployment/coredns", new, "--update-configmap-from-defaults",
                    kubeconfig=kubeconfig)
    wait_replicas(admin, namespace, "deployment", "coredns", 4, proc=follows)
    after = configmap(admin, namespace, "untouched")
    new_data = {"linear": json.dumps(NEW["linear"], separators=(",", ":"))}
    assert json.loads(after["data"]["linear"]) == NEW["linear"]
    assert after["metadata"]["annotations"][DEFAULTS_ANNOTATION] == data_hash(new_data)
    follows.stop()

    stays = start(f"--namespace={namespace}", "--configmap=edited",
                  "--target=deployment/coredns", new, "--update-configmap-from-defaults",
                  kubeconfig=kubeconfig)
    wait_replicas(admin, namespace, "deployment", "coredns", 2, proc=stays)
    said = wait_until("the edit named", lambda: stays.events("configmap.defaults_diverged"))
    assert "set by kubectl-edit (not an autoscaler" in said[0]["reason"]
    assert configmap(admin, namespace, "edited")["data"] == {"linear": '{"nodesPerReplica":8}'}
