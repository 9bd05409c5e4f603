"""A real kube-apiserver + etcd for the integration tests, started on 127.0.0.1.

Why: the autoscaler's correctness depends on the real API server's behaviour (RBAC, the
``/scale`` subresource, watch semantics, server-side apply, errors and restarts), which fakes
get subtly wrong. Docker/kind and release downloads are unavailable here, so the binaries are
built from Go modules by ``build.sh`` (pinned in ``go/go.mod``) and cached under
``<repo>/.cache``; a warm start takes a few seconds.

There is no scheduler, controller-manager or kubelet: workload objects and their ``/scale``
subresources work, but no Pods appear, namespaces never finish deleting and no default
ServiceAccount is created. Use a fresh namespace per test and do not delete namespaces.

Identities (see :meth:`ControlPlane.kubeconfig_for`): static bearer tokens registered with
``--token-auth-file`` at apiserver start (admin and the kube-dns-autoscaler ServiceAccount
identity are pre-registered), TokenRequest tokens for other ServiceAccounts, and, for any
other user, a token-file rewrite followed by an apiserver restart.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import weakref
from pathlib import Path
from typing import Any

import urllib3
import yaml

__all__ = [
    "ADMIN_USER",
    "AUTOSCALER_GROUPS",
    "AUTOSCALER_USER",
    "BIN_DIR_ENV",
    "ETCD_VERSION",
    "K8S_VERSION",
    "UPSTREAM_BIN_ENV",
    "UPSTREAM_CPA_VERSION",
    "UPSTREAM_HOWTO",
    "AdminClient",
    "ApiError",
    "ControlPlane",
    "die_with_parent",
    "ensure_binaries",
    "find_binaries",
    "go_available",
    "resource_path",
    "tail",
    "upstream_autoscaler_binary",
]

BIN_DIR_ENV = "CPA_CONTROLPLANE_BIN"
"""Optional override: a directory holding ``kube-apiserver`` and ``etcd`` (no build then)."""

UPSTREAM_BIN_ENV = "CPA_UPSTREAM_AUTOSCALER_BIN"
"""Optional override: path of an upstream ``cluster-proportional-autoscaler`` binary."""

KEEP_ENV = "CPA_CONTROLPLANE_KEEP"
"""If set to 1, :meth:`ControlPlane.stop` keeps its temp dir (logs, certs) for debugging."""

_HERE = Path(__file__).resolve().parent
_REPO = _HERE.parents[1]
_GO_MOD = _HERE / "go" / "go.mod"
_BUILD_SH = _HERE / "build.sh"
UPSTREAM_CPA_VERSION = "v1.10.3"
UPSTREAM_HOWTO = (
    "not available: the Go module proxy refuses its module, so build it from its source: "
    f"check out tag {UPSTREAM_CPA_VERSION} of "
    "https://github.com/kubernetes-sigs/cluster-proportional-autoscaler and run `make bench` "
    "with CPA_UPSTREAM_SRC=<that checkout> (build.sh builds it into "
    f".cache/upstream-cpa/{UPSTREAM_CPA_VERSION}/), or `go build "
    "./cmd/cluster-proportional-autoscaler` there and set CPA_UPSTREAM_AUTOSCALER_BIN=<binary>")
"""Why there is no upstream binary, and how to provide one (benchmarks only)."""

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


def _module_version(module: str) -> str:
    """Read a required module's version from the wrapper go.mod: the one source of truth."""
    pattern = re.compile(rf"^\s*{re.escape(module)}\s+(v\S+)", re.MULTILINE)
    match = pattern.search(_GO_MOD.read_text())
    if match is None:
        raise RuntimeError(f"{module} not found in {_GO_MOD}")
    return match.group(1)


K8S_VERSION = _module_version("k8s.io/kubernetes")
ETCD_VERSION = _module_version("go.etcd.io/etcd/server/v3")


def _default_bin_dir() -> Path:
    return _REPO / ".cache" / "controlplane" / K8S_VERSION / "bin"


def _has_binaries(bin_dir: Path) -> bool:
    return all(os.access(bin_dir / name, os.X_OK) for name in ("kube-apiserver", "etcd"))


def find_binaries() -> Path | None:
    """The bin dir holding both binaries ($CPA_CONTROLPLANE_BIN or the cache), else None."""
    override = os.environ.get(BIN_DIR_ENV)
    bin_dir = Path(override) if override else _default_bin_dir()
    return bin_dir if _has_binaries(bin_dir) else None


def go_available() -> bool:
    """Whether a Go toolchain is on PATH, i.e. whether :func:`ensure_binaries` can build."""
    return shutil.which("go") is not None


def upstream_autoscaler_binary() -> Path | None:
    """The upstream reference autoscaler (benchmarks only), if it was built or configured."""
    override = os.environ.get(UPSTREAM_BIN_ENV)
    default = _REPO / ".cache" / "upstream-cpa" / UPSTREAM_CPA_VERSION
    path = Path(override) if override else default / "cluster-proportional-autoscaler"
    return path if os.access(path, os.X_OK) else None


def ensure_binaries() -> Path:
    """Return the bin dir, running build.sh first if needed (a cold build takes 10-20 min).

    Build progress goes to this process's stderr. Raises RuntimeError with the reason when the
    binaries cannot be had (override dir incomplete, no Go, build failure).
    """
    found = find_binaries()
    if found is not None:
        return found
    override = os.environ.get(BIN_DIR_ENV)
    if override:
        raise RuntimeError(
            f"${BIN_DIR_ENV}={override} does not contain executable kube-apiserver and etcd"
        )
    if not go_available():
        raise RuntimeError(
            "kube-apiserver/etcd are not cached and 'go' is not on PATH to build them "
            f"(run {_BUILD_SH} on a machine with Go, or set ${BIN_DIR_ENV})"
        )
    print(
        f"[controlplane] building kube-apiserver {K8S_VERSION} + etcd {ETCD_VERSION} "
        "(cold build ~10-20 minutes, cached afterwards)",
        file=sys.stderr,
        flush=True,
    )
    proc = subprocess.run(
        ["bash", str(_BUILD_SH)], stdout=subprocess.PIPE, stderr=None, text=True, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"{_BUILD_SH} failed with exit code {proc.returncode}; see its output above"
        )
    found = find_binaries()
    if found is None:
        raise RuntimeError(f"{_BUILD_SH} succeeded but {_default_bin_dir()} lacks the binaries")
    return found


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


def _free_port(address: str = "127.0.0.1") -> int:
    """A currently free TCP port on ``address`` (small race, acceptable for tests)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((address, 0))
        port: int = sock.getsockname()[1]
        return port


def die_with_parent() -> None:
    """preexec_fn: ask Linux to SIGTERM the child if the test process dies (e.g. SIGKILL)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def tail(path: Path, lines: int = 40) -> str:
    """The last ``lines`` lines of a log file (for error messages)."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as exc:
        return f"<no log: {exc}>"


def _generate_sa_key(key: Path, pub: Path) -> None:
    """RSA key pair for signing ServiceAccount tokens (openssl CLI, else `cryptography`)."""
    if shutil.which("openssl"):
        subprocess.run(
            ["openssl", "genrsa", "-out", str(key), "2048"], check=True, capture_output=True
        )
        subprocess.run(
            ["openssl", "rsa", "-in", str(key), "-pubout", "-out", str(pub)],
            check=True,
            capture_output=True,
        )
        return
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa
    except ImportError as exc:
        raise RuntimeError("need the openssl CLI or the cryptography package") from exc
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    key.write_bytes(
        private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    pub.write_bytes(
        private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )


def _stop_at_exit(ref: weakref.ref[ControlPlane]) -> None:
    """atexit hook: stop a control plane the test session forgot (or could not) stop."""
    plane = ref()
    if plane is not None:
        plane.stop()


class ControlPlane:
    """etcd + kube-apiserver on free 127.0.0.1 ports in a private temp dir.

    Use as a context manager (or start()/stop()). Both processes are stopped by PID at stop(),
    at interpreter exit (atexit), and by the kernel if this process dies (PR_SET_PDEATHSIG).
    Logs go to ``<workdir>/etcd.log`` and ``<workdir>/kube-apiserver.log``.
    """

    def __init__(self, bin_dir: Path | None = None, workdir: Path | None = None,
                 bind_address: str = "127.0.0.1", *, for_nodes: bool = False) -> None:
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
        plugins are off, and the ``kubernetes`` Service gets no endpoints."""
        self.bind_address = bind_address
        self.for_nodes = for_nodes
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
    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Start etcd and the apiserver; returns once /readyz is 200 and core namespaces exist.

        On failure everything started is stopped again and RuntimeError carries the log tail.
        """
        if self._stopped:
            raise RuntimeError("a stopped ControlPlane cannot be restarted; create a new one")
        if not self._apiserver_port:
            self._etcd_port = _free_port()
            self._etcd_peer_port = _free_port()
            self._apiserver_port = _free_port(self.bind_address)
            self.cert_dir.mkdir(parents=True, exist_ok=True)
            self.etcd_data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            _generate_sa_key(self.sa_key, self.sa_pub)
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

    @staticmethod
    def _terminate(proc: subprocess.Popen[bytes] | None) -> None:
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)  # Popen signals its own PID only
        try:
            proc.wait(timeout=_STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=_STOP_TIMEOUT)

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
        self._terminate(self._etcd)

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
        self._apiserver = self._spawn(args, self.apiserver_log)
        self._wait_apiserver_ready()

    def stop_apiserver(self) -> None:
        """Stop the apiserver (by PID); etcd keeps running."""
        self._terminate(self._apiserver)
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
