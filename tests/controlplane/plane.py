"""The control plane itself: etcd and kube-apiserver on free 127.0.0.1 ports in a private
temp dir, with the identities the tests authenticate as."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import re
import secrets
import shutil
import subprocess
import tempfile
import time
import weakref
from pathlib import Path

import urllib3
import yaml

from tests.controlplane import frontproxy
from tests.controlplane.binaries import KEEP_ENV, _has_binaries, ensure_binaries
from tests.controlplane.client import AdminClient, ApiError
from tests.controlplane.processes import (
    StartStop,
    die_with_parent,
    free_port,
    generate_sa_key,
    tail,
    terminate,
)

ADMIN_USER = "cpa-test-admin"
AUTOSCALER_USER = "system:serviceaccount:kube-system:kube-dns-autoscaler"
AUTOSCALER_GROUPS = [
    "system:serviceaccounts",
    "system:serviceaccounts:kube-system",
    "system:authenticated",
]
_SA_USER_RE = re.compile(r"^system:serviceaccount:([a-z0-9.-]+):([a-z0-9.-]+)$")
_STOP_TIMEOUT = 15.0
_START_TIMEOUT = 90.0



def _stop_at_exit(ref: weakref.ref[ControlPlane]) -> None:
    """atexit hook: stop a control plane the test session forgot (or could not) stop."""
    plane = ref()
    if plane is not None:
        plane.stop()


class ControlPlane(StartStop):
    """etcd + kube-apiserver on free 127.0.0.1 ports in a private temp dir.

    Use as a context manager (or start()/stop()). Both processes are stopped by PID at stop(),
    at interpreter exit (atexit), and by the kernel if this process dies (PR_SET_PDEATHSIG).
    Logs go to ``<workdir>/etcd.log`` and ``<workdir>/kube-apiserver.log``.
    """

    def __init__(self, bin_dir: Path | None = None, workdir: Path | None = None,
                 bind_address: str = "127.0.0.1", *, for_nodes: bool = False,
                 aggregation: bool = False) -> None:
        """``bind_address`` is where the apiserver listens and what it advertises (its
        self-signed certificate is valid for it): 127.0.0.1 unless a test gives it an
        address on a bridge it created, so that containers in other network namespaces
        can reach it (see tests/image/). etcd always stays on 127.0.0.1.

        ``for_nodes`` configures the apiserver of a cluster with a real kubelet and
        kube-controller-manager (tests/cluster/): the ServiceAccount and
        TaintNodesByCondition admission plugins stay on (Pods get projected tokens), the
        default endpoint reconciler points the ``kubernetes`` Service at ``bind_address``,
        and the apiserver reaches kubelets at their InternalIP. Without it (the integration
        tests) nothing creates ServiceAccounts or removes the not-ready taint, so both
        plugins are off, and the ``kubernetes`` Service gets no endpoints.

        ``aggregation`` configures the aggregation layer as kubeadm does (front-proxy CA and
        client certificate, requestheader flags: ``frontproxy.py``), for extension API
        servers such as metrics-server."""
        self.bind_address = bind_address
        self.for_nodes = for_nodes
        self.aggregation = aggregation
        self.front_proxy: frontproxy.FrontProxy | None = None
        self.bin_dir = Path(bin_dir) if bin_dir is not None else ensure_binaries()
        if not _has_binaries(self.bin_dir):
            raise RuntimeError(f"{self.bin_dir} does not contain kube-apiserver and etcd")
        self._own_workdir = workdir is None
        self.workdir = (
            Path(tempfile.mkdtemp(prefix="cpa-controlplane-")) if workdir is None else Path(workdir)
        )
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.cert_dir = self.workdir / "certs"
        self.etcd_data_dir = self.workdir / "etcd-data"
        self.token_file = self.workdir / "tokens.csv"
        self.sa_key = self.workdir / "sa.key"
        self.sa_pub = self.workdir / "sa.pub"
        self.etcd_log = self.workdir / "etcd.log"
        self.apiserver_log = self.workdir / "kube-apiserver.log"
        self.ca_file = self.cert_dir / "apiserver.crt"
        self.admin_kubeconfig = self.workdir / "admin.kubeconfig"
        self.autoscaler_kubeconfig = self.workdir / "autoscaler.kubeconfig"
        self.admin_token = secrets.token_hex(16)
        self.autoscaler_token = secrets.token_hex(16)
        # token -> (user, groups); written to --token-auth-file on each apiserver start.
        self._tokens: dict[str, tuple[str, list[str]]] = {
            self.admin_token: (ADMIN_USER, ["system:masters", "system:authenticated"]),
            self.autoscaler_token: (AUTOSCALER_USER, list(AUTOSCALER_GROUPS)),
        }
        self._etcd_port = 0
        self._etcd_peer_port = 0
        self._apiserver_port = 0
        self._etcd: subprocess.Popen[bytes] | None = None
        self._apiserver: subprocess.Popen[bytes] | None = None
        self._admin: AdminClient | None = None
        self._stopped = False
        self._kubeconfig_count = 0
        # atexit holds only a weak reference so a forgotten ControlPlane can still be collected.
        atexit.register(_stop_at_exit, weakref.ref(self))

    # ---------------------------------------------------------------- properties
    @property
    def server(self) -> str:
        """``https://<bind address>:PORT`` (the port is chosen at the first start)."""
        if not self._apiserver_port:
            raise RuntimeError("control plane not started yet")
        return f"https://{self.bind_address}:{self._apiserver_port}"

    @property
    def port(self) -> int:
        """The apiserver's secure port (0 before the first start)."""
        return self._apiserver_port

    @property
    def etcd_url(self) -> str:
        return f"http://127.0.0.1:{self._etcd_port}"

    @property
    def apiserver_pid(self) -> int | None:
        """PID of the running kube-apiserver, or None when it is not running."""
        proc = self._apiserver
        return proc.pid if proc is not None and proc.poll() is None else None

    @property
    def etcd_pid(self) -> int | None:
        """PID of the running etcd, or None when it is not running."""
        proc = self._etcd
        return proc.pid if proc is not None and proc.poll() is None else None

    # ---------------------------------------------------------------- lifecycle
    def start(self) -> None:
        """Start etcd and the apiserver; returns once /readyz is 200 and core namespaces exist.

        On failure everything started is stopped again and RuntimeError carries the log tail.
        """
        if self._stopped:
            raise RuntimeError("a stopped ControlPlane cannot be restarted; create a new one")
        if not self._apiserver_port:
            self._etcd_port = free_port()
            self._etcd_peer_port = free_port()
            self._apiserver_port = free_port(self.bind_address)
            self.cert_dir.mkdir(parents=True, exist_ok=True)
            self.etcd_data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            generate_sa_key(self.sa_key, self.sa_pub)
            if self.aggregation:
                self.front_proxy = frontproxy.generate(self.cert_dir / "front-proxy")
        try:
            self.start_etcd()
            self.start_apiserver()
        except BaseException:
            self._stop_processes()
            raise
        self._write_kubeconfig(self.admin_kubeconfig, "admin", self.admin_token)
        self._write_kubeconfig(self.autoscaler_kubeconfig, "autoscaler", self.autoscaler_token)

    def stop(self) -> None:
        """Stop both processes by PID (SIGTERM, SIGKILL after a timeout) and remove the temp dir.

        Idempotent. A workdir passed by the caller is kept; so is the temp dir if
        $CPA_CONTROLPLANE_KEEP=1 (for reading the logs).
        """
        self._stop_processes()
        if self._stopped:
            return
        self._stopped = True
        if self._own_workdir and os.environ.get(KEEP_ENV) != "1":
            shutil.rmtree(self.workdir, ignore_errors=True)

    def _stop_processes(self) -> None:
        self.stop_apiserver()
        self.stop_etcd()

    def _spawn(self, args: list[str], log: Path) -> subprocess.Popen[bytes]:
        with log.open("ab") as out:
            out.write(f"\n==== {time.strftime('%H:%M:%S')} {' '.join(args)}\n".encode())
            out.flush()
            return subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                preexec_fn=die_with_parent,  # only calls prctl
            )

    # ---------------------------------------------------------------- etcd
    def start_etcd(self) -> None:
        """Start etcd on the same ports and data dir as before; waits until /health is true."""
        if self.etcd_pid is not None:
            return
        if not self._etcd_port:
            raise RuntimeError("call start() first")
        peer = f"http://127.0.0.1:{self._etcd_peer_port}"
        args = [
            str(self.bin_dir / "etcd"),
            "--name=default",
            f"--data-dir={self.etcd_data_dir}",
            f"--listen-client-urls={self.etcd_url}",
            f"--advertise-client-urls={self.etcd_url}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=default={peer}",
            "--unsafe-no-fsync",
            "--log-level=warn",
        ]
        self._etcd = self._spawn(args, self.etcd_log)
        http = urllib3.PoolManager(timeout=urllib3.Timeout(total=2.0), retries=False)
        deadline = time.monotonic() + _START_TIMEOUT
        while True:
            if self._etcd.poll() is not None:
                self._fail("etcd", f"exited with code {self._etcd.returncode}", self.etcd_log)
            with contextlib.suppress(urllib3.exceptions.HTTPError):
                resp = http.request("GET", self.etcd_url + "/health")
                if resp.status == 200 and json.loads(resp.data).get("health") == "true":
                    return
            if time.monotonic() > deadline:
                self._fail("etcd", "not healthy in time", self.etcd_log)
            time.sleep(0.1)

    def stop_etcd(self) -> None:
        """Stop etcd (by PID); the data dir is kept for start_etcd()."""
        if self._etcd is not None:
            terminate(self._etcd, _STOP_TIMEOUT, _STOP_TIMEOUT)

    # ---------------------------------------------------------------- apiserver
    def start_apiserver(self) -> None:
        """Start the apiserver on the same port with the same etcd, certs and tokens."""
        if self.apiserver_pid is not None:
            return
        if not self._apiserver_port:
            raise RuntimeError("call start() first")
        self._write_token_file()
        args = [
            str(self.bin_dir / "kube-apiserver"),
            f"--etcd-servers={self.etcd_url}",
            f"--bind-address={self.bind_address}",
            f"--advertise-address={self.bind_address}",
            f"--secure-port={self._apiserver_port}",
            f"--cert-dir={self.cert_dir}",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--authorization-mode=RBAC",
            f"--token-auth-file={self.token_file}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={self.sa_pub}",
            f"--service-account-signing-key-file={self.sa_key}",
            "--profiling=false",
        ]
        if self.for_nodes:
            args.append("--kubelet-preferred-address-types=InternalIP")
        else:
            args += ["--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
                     "--endpoint-reconciler-type=none"]
        if self.front_proxy is not None:
            args += frontproxy.apiserver_flags(self.front_proxy)
        self._apiserver = self._spawn(args, self.apiserver_log)
        self._wait_apiserver_ready()

    def stop_apiserver(self) -> None:
        """Stop the apiserver (by PID); etcd keeps running."""
        if self._apiserver is not None:
            terminate(self._apiserver, _STOP_TIMEOUT, _STOP_TIMEOUT)
        if self._admin is not None:
            self._admin.close()  # drop keep-alive connections to the old process

    def _wait_apiserver_ready(self) -> None:
        deadline = time.monotonic() + _START_TIMEOUT
        last = "no answer"
        while True:
            proc = self._apiserver
            assert proc is not None
            if proc.poll() is not None:
                self._fail(
                    "kube-apiserver", f"exited with code {proc.returncode}", self.apiserver_log
                )
            if self.ca_file.exists():
                client = self.admin()
                try:
                    status, body = client.raw("GET", "/readyz")
                    last = f"/readyz {status}: {body[-300:].decode(errors='replace')}"
                    if status == 200 and all(
                        client.raw("GET", f"/api/v1/namespaces/{ns}")[0] == 200
                        for ns in ("default", "kube-system")
                    ):
                        return
                except urllib3.exceptions.HTTPError as exc:
                    last = repr(exc)
            if time.monotonic() > deadline:
                self._fail("kube-apiserver", f"not ready in time ({last})", self.apiserver_log)
            time.sleep(0.2)

    def _fail(self, what: str, reason: str, log: Path) -> None:
        raise RuntimeError(f"{what} {reason}; last lines of {log}:\n{tail(log)}")

    # ---------------------------------------------------------------- identities
    def _write_token_file(self) -> None:
        lines = [
            f'{token},{user},uid-{index},"{",".join(groups)}"'
            for index, (token, (user, groups)) in enumerate(self._tokens.items())
        ]
        self.token_file.write_text("\n".join(lines) + "\n")
        self.token_file.chmod(0o600)

    def _write_kubeconfig(self, path: Path, name: str, token: str) -> None:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "cpa-test",
                    "cluster": {"server": self.server, "certificate-authority": str(self.ca_file)},
                }
            ],
            "users": [{"name": name, "user": {"token": token}}],
            "contexts": [{"name": name, "context": {"cluster": "cpa-test", "user": name}}],
            "current-context": name,
        }
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        path.chmod(0o600)

    def token_for(self, user: str, groups: list[str]) -> str:
        """A bearer token authenticating as ``user`` with ``groups`` (see kubeconfig_for)."""
        wanted = set(groups) | {"system:authenticated"}
        for token, (known_user, known_groups) in self._tokens.items():
            if known_user == user and set(known_groups) | {"system:authenticated"} == wanted:
                return token
        match = _SA_USER_RE.match(user)
        sa_groups = {"system:serviceaccounts", "system:authenticated"}
        if match:
            sa_groups.add(f"system:serviceaccounts:{match.group(1)}")
        if match and wanted <= sa_groups:
            return self.service_account_token(match.group(1), match.group(2))
        # Any other identity: static tokens are read only at startup, so restart the apiserver.
        token = secrets.token_hex(16)
        self._tokens[token] = (user, sorted(wanted))
        if self.apiserver_pid is not None:
            self.stop_apiserver()
            self.start_apiserver()
        return token

    def service_account_token(self, namespace: str, name: str) -> str:
        """A TokenRequest token (a signed JWT, 24 h) for a real ServiceAccount, creating it
        (and its namespace) if missing: what a kubelet projects into a Pod."""
        admin = self.admin()
        admin.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        admin.apply(
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": name, "namespace": namespace},
            }
        )
        answer = admin.post(
            f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": 24 * 3600},
            },
        )
        token: str = answer["status"]["token"]
        return token

    def kubeconfig_for(self, user: str, groups: list[str]) -> Path:
        """A kubeconfig (bearer token) for the identity ``user`` in ``groups``.

        How the token is obtained, in order:

        * a pre-registered static token if one matches (admin; the kube-dns-autoscaler SA
          identity ``system:serviceaccount:kube-system:kube-dns-autoscaler``);
        * for ``system:serviceaccount:NS:NAME`` with at most the standard ServiceAccount
          groups: the ServiceAccount is created if missing and a TokenRequest token (24 h) is
          used -- no restart;
        * anything else: a new static token is added to --token-auth-file and the apiserver
          is RESTARTED (same port/etcd/certs, new PID; open watches are cut). Ask for such
          identities before starting the code under test.
        """
        token = self.token_for(user, groups)
        self._kubeconfig_count += 1
        path = self.workdir / f"user-{self._kubeconfig_count}.kubeconfig"
        self._write_kubeconfig(path, f"user-{self._kubeconfig_count}", token)
        return path

    # ---------------------------------------------------------------- clients
    def admin(self) -> AdminClient:
        """A client authenticated as a member of system:masters (bypasses RBAC)."""
        if self._admin is None:
            self._admin = AdminClient(self.server, self.ca_file, self.admin_token)
        return self._admin

    def client(self, token: str) -> AdminClient:
        """A JSON client with another bearer token, e.g. ``self.autoscaler_token``."""
        return AdminClient(self.server, self.ca_file, token)

    def metrics(self) -> str:
        """The apiserver's Prometheus /metrics text (as admin)."""
        status, body = self.admin().raw("GET", "/metrics", headers={"Accept": "text/plain"})
        if status != 200:
            raise ApiError("GET", "/metrics", status, body.decode(errors="replace"))
        return body.decode()
