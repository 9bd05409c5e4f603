"""Bearer tokens read from a file, as the real daemons read them, against the real API
server: a token that rotates, is revoked, or whose file is emptied (issue 27, defects 2
and 3).

The tokens are the API server's own ServiceAccount tokens (TokenRequest), each bound to a
Secret of its own: deleting the Secret revokes the token, as deleting a Pod revokes its
projected one. Both daemons (``cluster-proportional-autoscaler`` and ``cpvpa``) read them
two ways:

* ``pod``: in-cluster, from ``/var/run/secrets/kubernetes.io/serviceaccount`` in the
  kubelet's layout (``token`` a symlink through ``..data``, a symlink to a timestamped
  directory, swapped by a rename as the kubelet's AtomicWriter does). The daemon runs in a
  private mount namespace (``unshare``) where that path leads to the test's directory;
* ``kubeconfig``: a kubeconfig whose user has ``tokenFile``, replaced by a rename.

"Writes resume" is seen as the API server stores it: a Node is added and the target's
replicas (``cpa``) or CPU request (``cpvpa``) must follow. The figures (seconds, polls)
are printed; the assertions count failed polls (``*_polls_total{result="error"}``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import urllib3
import yaml

from tests.controlplane import AdminClient, ControlPlane
from tests.integration.support import (
    AutoscalerProcess,
    LoggedProcess,
    cpvpa_command,
    create_nodes,
    create_workload,
    daemon_command,
    free_port,
    replicas,
    run_cli,
    service_account,
    wait_until,
)
from tests.integration.test_vertical import create_target, template_resources

pytestmark = pytest.mark.integration

SA = "tokens"
# A change the daemon has no 401 to tell it of is read at its first request a minute after
# the last read: for cpvpa, whose steady polls send nothing, a node watch's renewal (every
# 40-50 s), so up to 110 s.
REREAD_WAIT = 120

# --- the tokens ------------------------------------------------------------------------------


def bound_token(admin: AdminClient, namespace: str, secret: str) -> str:
    """A token of ServiceAccount ``SA`` bound to a new Secret ``secret``: deleting the
    Secret revokes it."""
    made = admin.post(f"/api/v1/namespaces/{namespace}/secrets", {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": secret},
        "type": "Opaque"})
    answer = admin.post(f"/api/v1/namespaces/{namespace}/serviceaccounts/{SA}/token", {
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"expirationSeconds": 3600, "boundObjectRef": {
            "kind": "Secret", "apiVersion": "v1", "name": secret,
            "uid": made["metadata"]["uid"]}}})
    token: str = answer["status"]["token"]
    return token


def answers(plane: ControlPlane, token: str) -> int:
    client = plane.client(token)
    try:
        return client.raw("GET", "/api")[0]
    finally:
        client.close()


def revoke(plane: ControlPlane, namespace: str, secret: str, token: str) -> None:
    """Delete the Secret the token is bound to, and wait until the API server refuses it
    (its authentication cache may still accept it for a few seconds)."""
    plane.admin().delete(f"/api/v1/namespaces/{namespace}/secrets/{secret}")
    wait_until("the token refused", lambda: answers(plane, token) == 401, 60)


class TokenDir:
    """A token file as the daemon finds it: ``pod``, the kubelet's projected-volume layout;
    ``kubeconfig``, one file a tool replaces by a rename."""

    def __init__(self, root: Path, layout: str, ca_file: Path) -> None:
        self.root, self.layout, self.ca_file = root, layout, ca_file
        self._serial = 0
        root.mkdir()

    @property
    def token(self) -> Path:
        return self.root / "token"

    def put(self, token: str) -> None:
        """A new file with ``token``, in place of the old at once (a rename)."""
        self._serial += 1
        if self.layout == "kubeconfig":
            tmp = self.root / f".token.{self._serial}"
            tmp.write_text(token)
            os.replace(tmp, self.token)
            return
        new = self.root / f"..2026_12_02_06_{self._serial:02d}_00.{self._serial:09d}"
        new.mkdir()
        (new / "token").write_text(token)
        shutil.copy(self.ca_file, new / "ca.crt")
        (new / "namespace").write_text("default")
        old = os.readlink(self.root / "..data") if (self.root / "..data").is_symlink() \
            else None
        (self.root / "..data_tmp").symlink_to(new.name)
        os.replace(self.root / "..data_tmp", self.root / "..data")
        for name in ("token", "ca.crt", "namespace"):
            if not (self.root / name).is_symlink():
                (self.root / name).symlink_to(f"..data/{name}")
        if old is not None:
            shutil.rmtree(self.root / old)

    def empty(self) -> None:
        """Truncate the file in place (what the issue's probe did to a tokenFile)."""
        with open(self.token, "w"):
            pass

    def write_in_place(self, token: str) -> None:
        self.token.write_text(token)

    def kubeconfig(self, server: str) -> Path:
        path = self.root.parent / f"{self.root.name}.kubeconfig"
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "k", "cluster": {"server": server,
                                                   "certificate-authority": str(self.ca_file)}}],
            "users": [{"name": "u", "user": {"tokenFile": str(self.token)}}],
            "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}]}))
        return path


# --- the daemons, in a Pod's place or with a kubeconfig --------------------------------------

# In a mount namespace of its own, /var/run gets a tmpfs where the service-account path is
# a symlink to the test's directory ($0); then the daemon replaces the shell (same PID).
IN_POD = ('mount -t tmpfs tmpfs /var/run && mkdir -p /var/run/secrets/kubernetes.io && '
          'ln -s "$0" /var/run/secrets/kubernetes.io/serviceaccount && exec "$@"')


def unshare() -> list[str]:
    if os.geteuid() == 0:
        return ["unshare", "--mount", "--propagation", "private"]
    return ["unshare", "--user", "--map-root-user", "--mount"]


@pytest.fixture(scope="module")
def can_unshare() -> bool:
    if shutil.which("unshare") is None:
        return False
    done = subprocess.run([*unshare(), "sh", "-c", "mount -t tmpfs tmpfs /var/run"],
                          capture_output=True, timeout=30, check=False)
    return done.returncode == 0


class InPodProcess(AutoscalerProcess):
    """The daemon as in a Pod: no --kubeconfig, ``KUBERNETES_SERVICE_HOST``/``_PORT`` set,
    the service-account directory at its real path (a private mount namespace)."""

    def __init__(self, sa_dir: Path, port: int, command: Sequence[str], args: Sequence[str],
                 log_path: Path, prefix: str) -> None:
        self.health_port = free_port()
        self.prefix = prefix
        argv = [*unshare(), "sh", "-c", IN_POD, str(sa_dir), *command,
                f"--health-port={self.health_port}", "--poll-period-seconds=1", "--v=2",
                "--log-format=json", *args]
        env = {k: v for k, v in os.environ.items()
               if k not in ("KUBECONFIG", "MY_POD_NAMESPACE", "MY_NAMESPACE")}
        env.update(KUBERNETES_SERVICE_HOST="127.0.0.1", KUBERNETES_SERVICE_PORT=str(port))
        LoggedProcess.__init__(self, argv, log_path, env)
        self._http = urllib3.PoolManager(retries=False, timeout=2.0)


@dataclass(frozen=True)
class Daemon:
    """One of the two daemons: how it is started, what it writes, what it should write at
    ``n`` Nodes of 1 core."""

    name: str
    prefix: str
    command: Callable[[], list[str]]
    args: Callable[[str], list[str]]
    setup: Callable[[AdminClient, str], None]
    value: Callable[[AdminClient, str], object]
    expected: Callable[[int], object]
    rules: tuple[dict[str, Any], ...] = ()


def _daemonset(admin: AdminClient, namespace: str) -> None:
    create_target(admin, namespace, "daemonset", "agent")


VERTICAL = {"c": {"requests": {"cpu": {"base": "10m", "step": "1m", "coresPerStep": 1}}}}

DAEMONS = {
    "cpa": Daemon(
        "cpa", "cpa", daemon_command,
        lambda ns: [f"--namespace={ns}", "--configmap=params", "--target=deployment/coredns",
                    '--default-params={"linear":{"nodesPerReplica":1}}'],
        lambda admin, ns: create_workload(admin, ns, "deployment", "coredns"),
        lambda admin, ns: replicas(admin, ns, "deployment", "coredns"),
        lambda n: n),
    "cpvpa": Daemon(
        "cpvpa", "cpvpa", cpvpa_command,
        lambda ns: [f"--namespace={ns}", "--target=daemonset/agent",
                    f"--default-config={json.dumps(VERTICAL)}"],
        lambda admin, ns: _daemonset(admin, ns),
        lambda admin, ns: template_resources(admin, ns, "daemonset", "agent")
        .get("requests", {}).get("cpu"),
        lambda n: f"{10 + n}m",
        ({"apiGroups": ["apps"], "resources": ["daemonsets"], "verbs": ["patch"]},)),
}


@dataclass
class Scene:
    plane: ControlPlane
    namespace: str
    daemon: Daemon
    files: TokenDir
    proc: AutoscalerProcess
    nodes: int

    @property
    def admin(self) -> AdminClient:
        return self.plane.admin()

    def errors(self) -> int:
        return int(sum(value for series, value in self.proc.metrics().items()
                       if series.startswith(f"{self.daemon.prefix}_polls_total{{")
                       and 'result="error"' in series))

    def add_node_and_wait(self, timeout: float = 120.0) -> tuple[float, int, int]:
        """Add a Node; wait until the daemon writes for it. (seconds, polls, failed polls)
        meanwhile."""
        start, polls, errors = time.monotonic(), self.proc.polls(), self.errors()
        create_nodes(self.admin, "tok", 1, cpu="1", start=self.nodes)
        self.nodes += 1
        want = self.daemon.expected(self.nodes)
        try:
            wait_until(f"the write for {self.nodes} nodes",
                       lambda: self.daemon.value(self.admin, self.namespace) == want, timeout)
        except AssertionError as exc:
            raise AssertionError(
                f"{exc}; {self.errors() - errors} failed polls of {self.proc.polls() - polls} "
                f"in {time.monotonic() - start:.0f}s; /last-poll: {self.proc.last_poll()}"
            ) from None
        return (time.monotonic() - start, self.proc.polls() - polls, self.errors() - errors)


@pytest.fixture
def scene(controlplane: ControlPlane, namespace: str, no_nodes: None, tmp_path: Path,
          can_unshare: bool, request: pytest.FixtureRequest) -> Iterator[Callable[..., Scene]]:
    """``scene(daemon, layout, first_token)``: the daemon running on that token's file,
    its first write made."""
    procs: list[AutoscalerProcess] = []

    def make(daemon: Daemon, layout: str, token: str) -> Scene:
        if layout == "pod" and not can_unshare:
            pytest.skip("no private mount namespace here (unshare --mount refused): the "
                        "in-cluster path cannot be pointed at a test directory")
        admin = controlplane.admin()
        daemon.setup(admin, namespace)
        files = TokenDir(tmp_path / "sa", layout, controlplane.ca_file)
        files.put(token)
        log = tmp_path / f"{daemon.name}-{layout}.log"
        proc: AutoscalerProcess
        if layout == "pod":
            proc = InPodProcess(files.root, controlplane.port, daemon.command(),
                                daemon.args(namespace), log, daemon.prefix)
        else:
            proc = AutoscalerProcess(files.kubeconfig(controlplane.server),
                                     daemon.args(namespace), log, 1,
                                     command=daemon.command(), prefix=daemon.prefix)
        procs.append(proc)
        made = Scene(controlplane, namespace, daemon, files, proc, 0)
        create_nodes(admin, "tok", 2, cpu="1")
        made.nodes = 2
        wait_until("the first write", lambda: proc._alive_and(
            lambda: daemon.value(admin, namespace) == daemon.expected(2)), 60)
        proc.wait_poll_ok()
        return made

    yield make
    for proc in procs:
        proc.stop()


def grant(plane: ControlPlane, namespace: str, daemon: Daemon) -> None:
    service_account(plane, namespace, SA, daemon.rules)


MATRIX = pytest.mark.parametrize(("daemon", "layout"), [
    ("cpa", "pod"), ("cpa", "kubeconfig"), ("cpvpa", "pod"), ("cpvpa", "kubeconfig")])


# --- rotation, revocation (defect 2) ---------------------------------------------------------


@MATRIX
def test_a_rotated_token_then_revoked_costs_no_failed_poll(
        controlplane: ControlPlane, namespace: str, scene: Callable[..., Scene], daemon: str,
        layout: str) -> None:
    """The kubelet's rotation: a new token in a new file, the old one revoked (its Secret
    deleted) before the minute's re-read. The request refused 401 reads the file and is
    sent again with the new token. Before: 401s until the 60 s re-read."""
    d = DAEMONS[daemon]
    grant(controlplane, namespace, d)
    admin = controlplane.admin()
    first = bound_token(admin, namespace, "tok-1")
    s = scene(d, layout, first + "\n")
    errors = s.errors()
    second = bound_token(admin, namespace, "tok-2")
    s.files.put(second + "\n")
    revoke(controlplane, namespace, "tok-1", first)
    seconds, polls, failed = s.add_node_and_wait()
    failed = s.errors() - errors
    print(f"\nFIGURE rotation+revocation {daemon}/{layout}: write {seconds:.1f}s, {polls} "
          f"polls after the revocation; {failed} failed polls since the rotation")
    assert failed == 0, "a request refused 401 is sent again with the file's new token"
    s.proc.wait_poll_ok()


# --- an emptied file (defect 3) --------------------------------------------------------------


@MATRIX
def test_an_emptied_token_file_keeps_the_last_good_token_until_a_new_one(
        controlplane: ControlPlane, namespace: str, scene: Callable[..., Scene], daemon: str,
        layout: str) -> None:
    """Before: the empty file replaced the token at the next 60 s re-read; the daemon sent
    an empty bearer token, ran as system:anonymous, every poll failed 403."""
    d = DAEMONS[daemon]
    grant(controlplane, namespace, d)
    admin = controlplane.admin()
    first = bound_token(admin, namespace, "tok-1")
    s = scene(d, layout, first + "\n")
    errors, emptied = s.errors(), time.monotonic()
    s.files.empty()
    try:
        wait_until("the daemon to read the empty file and say so",
                   lambda: s.proc.events("token.file_unusable"), REREAD_WAIT)
    except AssertionError as exc:
        raise AssertionError(
            f"{exc}; {s.errors() - errors} failed polls in "
            f"{time.monotonic() - emptied:.0f}s; /last-poll: {s.proc.last_poll()}") from None
    seconds, polls, _ = s.add_node_and_wait()  # still written, with the last good token
    [warned] = s.proc.events("token.file_unusable")
    assert warned["level"] == "warning" and warned["path"].endswith("token")
    assert "is empty" in warned["error"]

    third = bound_token(admin, namespace, "tok-3")
    s.files.write_in_place(third + "\n")  # the good token comes back
    revoke(controlplane, namespace, "tok-1", first)  # so only the new one works
    seconds_after, polls_after, _ = s.add_node_and_wait()
    failed = s.errors() - errors
    print(f"\nFIGURE emptied {daemon}/{layout}: write while empty {seconds:.1f}s "
          f"({polls} polls); with the new token {seconds_after:.1f}s ({polls_after} polls); "
          f"{failed} failed polls in all")
    assert failed == 0
    assert len(s.proc.events("token.file_unusable")) == 1, "said once"
    [back] = s.proc.events("token.file_usable")
    assert "is empty" in back["after"]
    s.proc.wait_poll_ok()


# --- a token file with a second line (issue 47, defect 1) ------------------------------------

SECOND_LINE = "\n# rotated by ops\n"


def start(plane: ControlPlane, namespace: str, daemon: Daemon, layout: str, tmp_path: Path,
          token_text: str, can_unshare: bool) -> tuple[TokenDir, AutoscalerProcess]:
    """The daemon started on a token file holding ``token_text`` (no first write waited
    for: the file may hold no usable token)."""
    if layout == "pod" and not can_unshare:
        pytest.skip("no private mount namespace here (unshare --mount refused)")
    daemon.setup(plane.admin(), namespace)
    files = TokenDir(tmp_path / "sa", layout, plane.ca_file)
    files.put(token_text)
    log = tmp_path / f"{daemon.name}-{layout}.log"
    proc: AutoscalerProcess
    if layout == "pod":
        proc = InPodProcess(files.root, plane.port, daemon.command(), daemon.args(namespace),
                            log, daemon.prefix)
    else:
        proc = AutoscalerProcess(files.kubeconfig(plane.server), daemon.args(namespace), log,
                                 1, command=daemon.command(), prefix=daemon.prefix)
    return files, proc


def shows(proc: AutoscalerProcess, *secrets: str) -> list[str]:
    """Where any of ``secrets`` (or a long part of one) shows: the log, /healthz,
    /last-poll, /metrics."""
    texts = {"log": proc.logs(), "/healthz": proc.health("/healthz")[1],
             "/last-poll": proc.last_poll()[1],
             "/metrics": "\n".join(proc.metrics())}
    return [f"{where} shows a credential" for where, text in texts.items()
            for secret in secrets if secret[:24] in text]


@MATRIX
def test_a_token_file_with_a_second_line_is_refused_by_name_and_the_daemon_recovers(
        controlplane: ControlPlane, namespace: str, no_nodes: None, tmp_path: Path,
        can_unshare: bool, daemon: str, layout: str) -> None:
    """Before: the token went into the header as it was; the threads that send ahead died
    with ``ValueError: Invalid header 'Authorization': 'Bearer <token>...'`` in the log
    (``cpvpa``: in /last-poll too), and the daemon stayed waiting for the first Node list
    after the file was fixed. Now: refused by the file's name and byte, never shown; the
    daemon runs on and writes once the file is right."""
    d = DAEMONS[daemon]
    grant(controlplane, namespace, d)
    admin = controlplane.admin()
    create_nodes(admin, "tok", 2, cpu="1")
    first = bound_token(admin, namespace, "tok-1")
    files, proc = start(controlplane, namespace, d, layout, tmp_path, first + SECOND_LINE,
                        can_unshare)
    try:
        proc.wait_healthy()
        said = wait_until("/last-poll to say why", lambda: (
            lambda answer: answer[1] if answer[0] == 500 and "line break" in answer[1]
            else None)(proc.last_poll()), 30)
        assert f"{files.token}" in said or "token file" in said
        assert f"contains a line break at byte {len(first)}" in said
        assert proc.health("/healthz")[0] == 200
        fixed = time.monotonic()
        files.put(first + "\n")
        wait_until("the first write once the file is right", lambda: proc._alive_and(
            lambda: d.value(admin, namespace) == d.expected(2)), 60)
        recovered = time.monotonic() - fixed
        proc.wait_poll_ok()

        second = bound_token(admin, namespace, "tok-2")
        files.put(second + SECOND_LINE)  # while running: the last good token is kept
        wait_until("the refusal said", lambda: proc.events("token.file_unusable"),
                   REREAD_WAIT)
        [warned] = proc.events("token.file_unusable")
        assert f"contains a line break at byte {len(second)}" in warned["error"]
        seconds, _polls, failed = Scene(controlplane, namespace, d, files, proc, 2) \
            .add_node_and_wait()
        print(f"\nFIGURE second line {daemon}/{layout}: first write {recovered:.1f}s after "
              f"the file was fixed; with a bad file mid-run, a write in {seconds:.1f}s on "
              f"the last good token ({failed} failed polls)")
        assert shows(proc, first, second) == []
    finally:
        proc.stop()
    assert first[:24] not in proc.logs() and second[:24] not in proc.logs()


def test_cpa_explain_names_an_unusable_token_file_and_never_prints_it(
        controlplane: ControlPlane, namespace: str, no_nodes: None, tmp_path: Path) -> None:
    grant(controlplane, namespace, DAEMONS["cpa"])
    admin = controlplane.admin()
    create_workload(admin, namespace, "deployment", "coredns")
    token = bound_token(admin, namespace, "tok-1")
    files = TokenDir(tmp_path / "sa", "kubeconfig", controlplane.ca_file)
    files.put(token + SECOND_LINE)
    kubeconfig = files.kubeconfig(controlplane.server)
    done = run_cli(["explain", "--from-cluster", f"--kubeconfig={kubeconfig}",
                    f"--namespace={namespace}", "--configmap=params",
        "--target=deployment/coredns",
        '--default-params={"linear":{"nodesPerReplica":1}}'])
    assert done.returncode != 0
    assert f"contains a line break at byte {len(token)}" in done.stderr
    assert token[:24] not in done.stdout + done.stderr
