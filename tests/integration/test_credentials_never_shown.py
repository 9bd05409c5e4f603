"""No credential is ever shown (issue 47, defect 1): a canary in every credential source,
every failure path we can reach, and every output of both programs read for it.

The sources: the in-cluster token file, a kubeconfig's ``token``, ``tokenFile`` and exec
plugin, the Prometheus source's ``bearerTokenFile`` and a ``user:password@`` URL. The
failure paths: tokens the API server does not know (401 on every request), a token file
with a second line (refused), an exec plugin answering garbage around its token, RBAC
refusals (403) of a known token, a Prometheus that redirects to another host and fails,
and one that is not there. The outputs: each daemon's log (``--v=4``), ``/healthz``,
``/last-poll``, ``/metrics``, the Events they post, and ``cpa explain`` (horizontal and
vertical) and ``cpa advise`` on the same inputs. ``cpa simulate`` reads no credential
(a timeline and a ConfigMap file), so it has no source to plant one in.

A credential shown anywhere fails the test with where it was seen.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml

from tests.controlplane import ControlPlane
from tests.integration.support import (
    AutoscalerProcess,
    LoggedProcess,
    create_configmap,
    create_nodes,
    create_workload,
    put_configmap_data,
    run_cli,
    service_account,
    wait_until,
)
from tests.integration.test_token_files import (
    DAEMONS,
    InPodProcess,
    TokenDir,
    can_unshare,  # noqa: F401 - the module fixture, used by name
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

CM = "cred-params"
URL_PASSWORD = "CANARYurlPassword7301"
PROM_TOKEN = "CANARYpromBearer4412"
PROM_TOKEN_2 = "CANARYpromSecond8830"
FILE_TOKEN = "CANARYtokenFile5517"
INLINE_TOKEN = "CANARYinlineToken2290"
EXEC_TOKEN = "CANARYexecToken6618"
POD_TOKEN = "CANARYpodToken3391"
CANARIES = (URL_PASSWORD, PROM_TOKEN, PROM_TOKEN_2, FILE_TOKEN, INLINE_TOKEN, EXEC_TOKEN,
            POD_TOKEN)


class _Prometheus(BaseHTTPRequestHandler):
    """``home`` redirects every query to ``stranger``, which answers 500; both record what
    they were sent."""

    seen: ClassVar[list[tuple[str, str]]] = []  # (which server, the whole request head)
    stranger = ""
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        assert isinstance(self.server, ThreadingHTTPServer)
        who = "stranger" if self.server.server_port == _Prometheus.stranger_port else "home"
        _Prometheus.seen.append((who, f"{self.requestline}\n{self.headers}"))
        if who == "home":
            self.send_response(302)
            self.send_header("Location", f"{_Prometheus.stranger}{self.path}")
        else:
            self.send_response(500)
        self.send_header("Content-Length", "0")
        self.end_headers()

    stranger_port = 0

    def log_message(self, *_args: Any) -> None:
        pass


@pytest.fixture
def prometheus() -> Iterator[int]:
    """The port of a Prometheus that redirects to a stranger."""
    servers = [ThreadingHTTPServer(("127.0.0.1", 0), _Prometheus) for _ in range(2)]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    home, stranger = (int(s.server_address[1]) for s in servers)
    _Prometheus.stranger_port = stranger
    _Prometheus.stranger = f"http://127.0.0.1:{stranger}"
    _Prometheus.seen.clear()
    yield home
    for server in servers:
        server.shutdown()
        server.server_close()


def kubeconfig_with(plane: ControlPlane, path: Path, user: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": {"server": plane.server,
                                               "certificate-authority": str(plane.ca_file)}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}]}))
    return path


def exec_plugin(path: Path, body: str) -> dict[str, Any]:
    path.write_text(f"#!{sys.executable}\n{body}")
    path.chmod(0o755)
    return {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": str(path),
                     "interactiveMode": "Never"}}


def credential(token: str) -> str:
    return json.dumps({"apiVersion": "client.authentication.k8s.io/v1",
                       "kind": "ExecCredential", "status": {"token": token}})


class Witness:
    """Every text the programs showed, by where; and the credentials to look for."""

    def __init__(self) -> None:
        self.texts: list[tuple[str, str]] = []
        self.secrets: list[str] = list(CANARIES)

    def daemon(self, name: str, proc: AutoscalerProcess) -> None:
        """What a running daemon shows: /healthz, /last-poll, /metrics (its log at the
        end, once stopped)."""
        for path in ("/healthz", "/last-poll", "/metrics"):
            self.texts.append((f"{name} {path}", proc.health(path)[1]))

    def log(self, name: str, proc: LoggedProcess) -> None:
        self.texts.append((f"{name} log", proc.logs()))

    def cli(self, name: str, args: list[str]) -> None:
        done = run_cli(args)
        self.texts.append((f"{name} (exit {done.returncode})", done.stdout + done.stderr))

    def shown(self) -> list[str]:
        return [f"{where} shows {secret[:12]}..." for where, text in self.texts
                for secret in self.secrets if secret in text]


def test_no_credential_is_ever_shown(controlplane: ControlPlane, namespace: str,
                                     no_nodes: None, tmp_path: Path, prometheus: int,
                                     can_unshare: bool) -> None:  # noqa: F811
    admin = controlplane.admin()
    create_nodes(admin, "cred", 2, cpu="1")
    create_workload(admin, namespace, "deployment", "coredns")
    DAEMONS["cpvpa"].setup(admin, namespace)
    prom_token = tmp_path / "prom-token"
    prom_token.write_text(PROM_TOKEN + "\n")
    source = {"url": f"http://ops:{URL_PASSWORD}@127.0.0.1:{prometheus}",
              "query": "sum(rate(x[1m]))", "bearerTokenFile": str(prom_token)}
    load: dict[str, Any] = {"targetPerReplica": 10, "scrapeIntervalSeconds": 1,
                            "prometheus": source}
    create_configmap(admin, namespace, CM, {"linear": json.dumps(
        {"nodesPerReplica": 1, "load": load})})
    witness = Witness()

    # A known token with too few rights: the scale write refused (403), Events posted.
    known = service_account(controlplane, namespace, "cred", extra=[
        {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
         "verbs": ["get", "create", "update"]}],
        rules=[{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]},
               {"apiGroups": ["apps"], "resources": ["deployments/scale"], "verbs": ["get"]}])
    witness.secrets.append(yaml.safe_load(known.read_text())["users"][0]["user"]["token"])
    files = TokenDir(tmp_path / "sa", "kubeconfig", controlplane.ca_file)
    files.put(FILE_TOKEN + "\n")
    plugin = exec_plugin(tmp_path / "get-token",
                         f"print({credential(EXEC_TOKEN)!r})\n")
    kubeconfigs = {
        "known": known,
        "inline": kubeconfig_with(controlplane, tmp_path / "inline", {"token": INLINE_TOKEN}),
        "tokenFile": files.kubeconfig(controlplane.server),
        "exec": kubeconfig_with(controlplane, tmp_path / "exec", plugin),
    }
    common = [f"--namespace={namespace}", f"--configmap={CM}", "--target=deployment/coredns",
              "--events", "--leader-elect"]
    procs: dict[str, AutoscalerProcess] = {}
    try:
        for name, kubeconfig in kubeconfigs.items():
            procs[f"cpa/{name}"] = AutoscalerProcess(
                kubeconfig, common, tmp_path / f"cpa-{name}.log", verbosity=4)
            procs[f"cpvpa/{name}"] = AutoscalerProcess(
                kubeconfig, [*DAEMONS["cpvpa"].args(namespace), "--events", "--leader-elect"],
                tmp_path / f"cpvpa-{name}.log",
                verbosity=4, command=DAEMONS["cpvpa"].command(), prefix="cpvpa")
        if can_unshare:
            pod = TokenDir(tmp_path / "pod", "pod", controlplane.ca_file)
            pod.put(POD_TOKEN + "\n")
            procs["cpa/in-cluster"] = InPodProcess(
                pod.root, controlplane.port, DAEMONS["cpa"].command(), common,
                tmp_path / "cpa-pod.log", "cpa")
        for proc in procs.values():
            proc.wait_healthy()
        wait_until("the known token's poll to fail on the scale write", lambda: (
            lambda answer: answer[0] == 500 and "forbidden" in answer[1].lower())(
                procs["cpa/known"].last_poll()), 60)
        wait_until("the redirected queries", lambda: any(
            who == "stranger" for who, _ in _Prometheus.seen), 30)
        # Rotations that cannot be used: a second line under the tokens.
        prom_token.write_text(PROM_TOKEN_2 + "\n# rotated by ops\n")
        files.put(FILE_TOKEN + "\n# rotated by ops\n")
        wait_until("the refusals said", lambda: procs["cpa/known"].events(
            "token.file_unusable") and procs["cpa/tokenFile"].events("token.file_unusable"),
            90)
        # Parameters refused, with the password in the URL they name: an Event says so.
        bad = dict(load, prometheus={**source,
                                     "url": f"http://ops:{URL_PASSWORD}@127.0.0.1 :1"})
        put_configmap_data(admin, namespace, CM, {"linear": json.dumps(
            {"nodesPerReplica": 1, "load": bad})})
        wait_until("the InvalidParameters Event", lambda: admin.get(
            f"/apis/events.k8s.io/v1/namespaces/{namespace}/events").get("items"), 30)
        for name, proc in procs.items():
            witness.daemon(name, proc)
    finally:
        for proc in procs.values():
            proc.stop()
    for name, proc in procs.items():
        witness.log(name, proc)

    # Exec plugins that answer garbage around a token, or a token with a second line.
    cut = credential(EXEC_TOKEN)[:100]
    two_lines = credential(EXEC_TOKEN + "\n# second line")
    broken = {"cut": exec_plugin(tmp_path / "cut", f"print({cut!r})\n"),
              "second-line": exec_plugin(tmp_path / "line", f"print({two_lines!r})\n")}
    for name, user in broken.items():
        config = kubeconfig_with(controlplane, tmp_path / f"broken-{name}", user)
        witness.cli(f"cpa explain exec {name}", [
            "explain", "--from-cluster", f"--kubeconfig={config}", *common[:3]])
    for name, kubeconfig in kubeconfigs.items():
        witness.cli(f"cpa explain {name}", [
            "explain", "--from-cluster", f"--kubeconfig={kubeconfig}", *common[:3]])
        witness.cli(f"cpa explain --vertical {name}", [
            "explain", "--vertical", "--from-cluster", f"--kubeconfig={kubeconfig}",
            *DAEMONS["cpvpa"].args(namespace)])
    witness.cli("cpa advise", ["advise", "--prometheus-url",
                               f"http://ops:{URL_PASSWORD}@127.0.0.1:{prometheus}",
                               "--query", "q", "--hours", "1"])
    events = admin.get(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")
    witness.texts.append(("Events", json.dumps(events)))

    print(f"\nFIGURE credentials: {len(witness.texts)} outputs read "
          f"({sum(len(t) for _, t in witness.texts)} characters) for "
          f"{len(witness.secrets)} credentials: {len(witness.shown())} shown")
    stranger = [head for who, head in _Prometheus.seen if who == "stranger"]
    assert stranger, "the redirect was followed"
    assert not [h for h in stranger if "authorization" in h.lower()], \
        "credentials went to another host"
    assert witness.shown() == []
    assert len(events.get("items", [])) > 0, "the failure paths posted Events"
