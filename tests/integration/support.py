"""Helpers for integration tests: the real autoscaler as a subprocess, and cluster objects.

Every process started here is stopped by its PID (``AutoscalerProcess.stop``), and each
test's objects live in its own namespace; Nodes are cluster-scoped, so tests that count them
start from an empty node list (the ``no_nodes`` fixture in conftest).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import resource
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import urllib3
import yaml

from tests.controlplane import AdminClient, ApiError, ControlPlane, Started, terminate

T = TypeVar("T")

KUBE_DNS_DEFAULTS = ('{"linear":{"coresPerReplica":256,"nodesPerReplica":16,'
                     '"preventSinglePointFailure":true,"includeUnschedulableNodes":true}}')


def wait_until(what: str, fn: Callable[[], T | None], timeout: float = 30.0,
               interval: float = 0.2) -> T:
    """Poll ``fn`` until it returns something truthy; fail with ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            value = fn()
        except (ApiError, urllib3.exceptions.HTTPError, OSError) as exc:
            last = exc
        else:
            if value:
                return value
            last = value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_is_free(port: int) -> bool:
    """Whether ``port`` can be bound on every interface now (upstream's fixed health port
    8080 must be free for its binary to start)."""
    with socket.socket() as s:
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
        return True


def console_script(name: str) -> str | None:
    """The console script ``name`` of this interpreter's environment (beside
    ``sys.executable``: the venv the tests run in, whatever PATH says), else PATH's."""
    beside = Path(sys.executable).parent / name
    if os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which(name)


def daemon_command() -> list[str]:
    """The installed console script, exactly what the image's entrypoint runs."""
    exe = console_script("cluster-proportional-autoscaler")
    if exe:
        return [exe]
    return [sys.executable, "-c", "import sys; sys.argv[0] = 'cluster-proportional-autoscaler'; "
            "from cpa.cli import daemon_main; daemon_main()"]


def cpvpa_command() -> list[str]:
    """The installed ``cpvpa`` console script beside this interpreter, else PATH's, else its
    entry point run by this interpreter."""
    exe = console_script("cpvpa")
    if exe:
        return [exe]
    return [sys.executable, "-c", "from cpa.cli import vertical_main; vertical_main()"]


def coredns_flags(namespace: str, configmap: str, *extra: str) -> list[str]:
    """The autoscaler's flags for deployment/coredns in ``namespace``, its parameters in the
    ConfigMap ``configmap``: what most scenarios run."""
    return [f"--namespace={namespace}", f"--configmap={configmap}",
            "--target=deployment/coredns", *extra]


def copy_checkout(dest: Path) -> None:
    """The files git tracks (and the untracked ones it does not ignore) copied to ``dest``:
    this checkout as a fresh clone with the change under test would be."""
    repo = Path(__file__).resolve().parents[2]
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=repo,
                           capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        src = repo / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)


def log_events(text: str, name: str) -> list[dict[str, Any]]:
    """The JSON log events named ``name`` (``--log-format=json``), in order."""
    out = []
    for line in text.splitlines():
        if f'"{name}"' not in line:
            continue
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict) and doc.get("event") == name:
            out.append(doc)
    return out


def _limit_files(nofile: tuple[int, int]) -> Callable[[], None]:
    def preexec() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, nofile)
    return preexec


def rss_mib(pid: int) -> float:
    """A process's resident set size now (VmRSS), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def open_files_limit(pid: int) -> tuple[int, int]:
    """A process's (soft, hard) limit of open files, from /proc/PID/limits."""
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            soft, hard = line.split()[3:5]
            return int(soft), int(hard)
    raise AssertionError(f"no open-files limit for pid {pid}")


def via_address(address: str, kubeconfig: Path, out: Path) -> Path:
    """The same kubeconfig, its server moved to ``address`` (host:port of a proxy on
    127.0.0.1, for which the API server's certificate is valid)."""
    doc = yaml.safe_load(kubeconfig.read_text())
    for cluster in doc["clusters"]:
        cluster["cluster"]["server"] = f"https://{address}"
    out.write_text(yaml.safe_dump(doc))
    return out


class LoggedProcess(Started):
    """A process under test: stdout+stderr to a log file; stopped by PID only."""

    def __init__(self, argv: Sequence[str], log_path: Path,
                 env: Mapping[str, str] | None = None,
                 nofile: tuple[int, int] | None = None, stderr_pipe: bool = False) -> None:
        """``nofile``: the process's (soft, hard) limit of open files, as a container
        runtime would set it (e.g. containerd 2.x's 1,024). ``stderr_pipe``: stderr (the
        logs) to a pipe, ``proc.stderr``, that the test reads or not (a container
        runtime's log pipe); stdout still to the log file."""
        self.argv = list(argv)
        self.log_path = log_path
        self._log = open(log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.started = time.monotonic()
        self.proc = subprocess.Popen(self.argv, stdout=self._log,
                                     stderr=subprocess.PIPE if stderr_pipe else subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL,
                                     env=dict(env) if env is not None else None,
                                     preexec_fn=_limit_files(nofile) if nofile else None)

    def logs(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def events(self, name: str) -> list[dict[str, Any]]:
        return log_events(self.logs(), name)

    def signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def wait_exit(self, timeout: float) -> int:
        return self.proc.wait(timeout)

    def stop(self, grace: float = 10.0) -> int | None:
        """SIGTERM by PID, SIGKILL after ``grace`` seconds; returns the exit code."""
        terminate(self.proc, grace)
        with contextlib.suppress(OSError):
            self._log.close()
            if self.proc.stderr is not None:
                self.proc.stderr.close()
        return self.proc.returncode


class AutoscalerProcess(LoggedProcess):
    """The real ``cluster-proportional-autoscaler`` process with JSON logs and a free
    health port, authenticated by ``kubeconfig``. ``command`` runs another daemon of the
    package with the same common flags (``/cpvpa``), whose metrics start ``prefix``."""

    def __init__(self, kubeconfig: Path, args: Sequence[str], log_path: Path,
                 poll_period: int = 1, verbosity: int = 2,
                 nofile: tuple[int, int] | None = None,
                 command: Sequence[str] | None = None, prefix: str = "cpa",
                 stderr_pipe: bool = False, extra_env: Mapping[str, str] | None = None
                 ) -> None:
        self.health_port = free_port()
        self.prefix = prefix
        argv = [*(command or daemon_command()), f"--kubeconfig={kubeconfig}",
                f"--health-port={self.health_port}",
                f"--poll-period-seconds={poll_period}", f"--v={verbosity}",
                "--log-format=json", *args]
        env = {k: v for k, v in os.environ.items()
               if k not in ("KUBECONFIG", "MY_POD_NAMESPACE", "MY_NAMESPACE")}
        env.update(extra_env or {})
        super().__init__(argv, log_path, env, nofile, stderr_pipe)
        self._http = urllib3.PoolManager(retries=False, timeout=2.0)

    def health(self, path: str) -> tuple[int, str]:
        resp = self._http.request("GET", f"http://127.0.0.1:{self.health_port}{path}")
        return resp.status, resp.data.decode()

    def last_poll(self) -> tuple[int, str]:
        return self.health("/last-poll")

    def wait_healthy(self, timeout: float = 60.0) -> None:
        wait_until("the health server", lambda: self._alive_and(
            lambda: self.health("/healthz")[0] == 200), timeout)

    def _alive_and(self, fn: Callable[[], T]) -> T:
        if self.proc.poll() is not None:
            raise AssertionError(f"autoscaler exited with {self.proc.returncode}:\n{self.logs()}")
        return fn()

    def wait_poll_ok(self, timeout: float = 30.0) -> None:
        wait_until("a successful poll", lambda: self._alive_and(
            lambda: self.last_poll()[0] == 200), timeout)

    def metrics(self) -> dict[str, float]:
        """The samples of ``/metrics``: series (its name and labels, as exposed) -> value."""
        status, body = self.health("/metrics")
        assert status == 200, f"/metrics answered {status}: {body[:200]}"
        out: dict[str, float] = {}
        for line in body.splitlines():
            match = re.fullmatch(r"([a-z_]+(?:\{[^}]*\})?) (\S+)", line)
            if match:
                out[match.group(1)] = float(match.group(2))
        return out

    def polls(self) -> int:
        """The polls made so far, of either result (``cpa_polls_total``)."""
        return int(sum(value for series, value in self.metrics().items()
                       if series.startswith(f"{self.prefix}_polls_total{{")))

    def wait_poll_error(self, fragment: str, timeout: float = 30.0) -> str:
        def check() -> str | None:
            status, body = self._alive_and(self.last_poll)
            return body if status == 500 and fragment in body else None
        return wait_until(f"/last-poll 500 mentioning {fragment!r}", check, timeout)


def wait_polls(*procs: AutoscalerProcess, count: int = 3, timeout: float = 60.0) -> None:
    """Wait until each process has polled ``count`` more times (its ``cpa_polls_total`` grew
    by that much): what a test means by "a few polls later", however slow the machine."""
    starts = [proc.polls() for proc in procs]
    wait_until(f"{count} more polls", lambda: all(
        proc.polls() >= start + count for proc, start in zip(procs, starts, strict=True)),
        timeout)


# --- objects ---------------------------------------------------------------------------
def node_object(name: str, cpu: str = "8", *, ready: bool = True, unschedulable: bool = False,
                labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name,
                                              **(labels or {})}},
        "spec": {"unschedulable": unschedulable} if unschedulable else {},
        "status": {
            "capacity": {"cpu": cpu, "memory": "32Gi", "pods": "110"},
            "allocatable": {"cpu": cpu, "memory": "30Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False",
                            "reason": "KubeletReady" if ready else "KubeletNotReady",
                            "lastHeartbeatTime": "2026-11-30T00:00:00Z",
                            "lastTransitionTime": "2026-11-30T00:00:00Z"}],
        },
    }


def create_nodes(admin: AdminClient, prefix: str, count: int, cpu: str = "8",
                 start: int = 0, **kw: Any) -> list[str]:
    names = []
    for i in range(start, start + count):
        name = f"{prefix}-{i:04d}"
        admin.post("/api/v1/nodes", node_object(name, cpu, **kw))
        names.append(name)
    return names


def delete_all_nodes(admin: AdminClient) -> None:
    admin.delete("/api/v1/nodes")
    wait_until("no nodes left", lambda: not admin.get("/api/v1/nodes")["items"], 30)


def set_node_ready(admin: AdminClient, name: str, ready: bool) -> None:
    node = admin.get(f"/api/v1/nodes/{name}")
    for cond in node["status"]["conditions"]:
        if cond["type"] == "Ready":
            cond["status"] = "True" if ready else "False"
    admin.patch(f"/api/v1/nodes/{name}/status",
                {"status": {"conditions": node["status"]["conditions"]}})


def cordon(admin: AdminClient, name: str, unschedulable: bool = True) -> None:
    admin.patch(f"/api/v1/nodes/{name}", {"spec": {"unschedulable": unschedulable}})


_WORKLOADS = {
    "deployment": ("apps/v1", "Deployment", "/apis/apps/v1", "deployments"),
    "replicaset": ("apps/v1", "ReplicaSet", "/apis/apps/v1", "replicasets"),
    "statefulset": ("apps/v1", "StatefulSet", "/apis/apps/v1", "statefulsets"),
    "replicationcontroller": ("v1", "ReplicationController", "/api/v1",
                              "replicationcontrollers"),
}


def create_workload(admin: AdminClient, namespace: str, kind: str, name: str,
                    replicas: int = 1) -> None:
    api_version, kind_name, prefix, plural = _WORKLOADS[kind]
    labels = {"app": name}
    template = {"metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}
    spec: dict[str, Any] = {"replicas": replicas, "template": template}
    if kind == "replicationcontroller":
        spec["selector"] = labels
    else:
        spec["selector"] = {"matchLabels": labels}
    if kind == "statefulset":
        spec["serviceName"] = name
    admin.post(f"{prefix}/namespaces/{namespace}/{plural}",
               {"apiVersion": api_version, "kind": kind_name,
                "metadata": {"name": name, "namespace": namespace}, "spec": spec})


def replicas(admin: AdminClient, namespace: str, kind: str, name: str) -> int:
    _, _, prefix, plural = _WORKLOADS[kind]
    obj = admin.get(f"{prefix}/namespaces/{namespace}/{plural}/{name}")
    return int(obj["spec"].get("replicas", 0))


def wait_replicas(admin: AdminClient, namespace: str, kind: str, name: str, expected: int,
                  timeout: float = 30.0, proc: AutoscalerProcess | None = None) -> None:
    try:
        wait_until(f"{kind}/{name} at {expected} replicas",
                   lambda: replicas(admin, namespace, kind, name) == expected, timeout)
    except AssertionError as exc:
        got = replicas(admin, namespace, kind, name)
        detail = f"\n--- autoscaler log ---\n{proc.logs()[-6000:]}" if proc else ""
        raise AssertionError(f"{exc}; it has {got}{detail}") from None
    if proc is not None:
        # The daemon holds its events until its first poll is done (cpa.logs.hold), so the
        # first write can be seen a moment before its log line: wait for them, so that a
        # test counting events after this sees every write made so far.
        wait_until("the daemon's start-up events in its log",
                   lambda: bool(proc.events("starting")), 10.0)


def coredns_and_nodes(admin: AdminClient, namespace: str, prefix: str, count: int,
                      cpu: str = "8", **kw: Any) -> list[str]:
    """The usual scenario: a ``coredns`` Deployment (1 replica) and ``count`` Nodes; returns
    the Nodes' names."""
    create_workload(admin, namespace, "deployment", "coredns")
    return create_nodes(admin, prefix, count, cpu, **kw)


ONE_PER_NODE = {"linear": '{"nodesPerReplica":1}'}


def one_replica_per_node(admin: AdminClient, namespace: str, configmap: str, prefix: str,
                         count: int, cpu: str = "8") -> list[str]:
    """:func:`coredns_and_nodes` and the ConfigMap ``configmap`` asking one replica per
    Node: the scenario where the replicas to expect are the Nodes; returns their names."""
    names = coredns_and_nodes(admin, namespace, prefix, count, cpu)
    create_configmap(admin, namespace, configmap, ONE_PER_NODE)
    return names


def create_configmap(admin: AdminClient, namespace: str, name: str,
                     data: dict[str, str]) -> None:
    admin.post(f"/api/v1/namespaces/{namespace}/configmaps", {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})


def configmap(admin: AdminClient, namespace: str, name: str) -> dict[str, Any]:
    return admin.get(f"/api/v1/namespaces/{namespace}/configmaps/{name}")


def put_configmap_data(admin: AdminClient, namespace: str, name: str,
                       data: dict[str, str]) -> None:
    cm = configmap(admin, namespace, name)
    cm["data"] = data
    admin.put(f"/api/v1/namespaces/{namespace}/configmaps/{name}", cm)


def run_cli(args: Sequence[str], timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    exe = console_script("cpa")
    cmd = [exe] if exe else [sys.executable, "-m", "cpa"]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=timeout,
                          check=False)


# --- identities -------------------------------------------------------------------------
ADDON_RULES: list[dict[str, Any]] = [
    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "create"]},
    {"apiGroups": ["apps"], "resources": ["deployments/scale"], "verbs": ["get", "update"]},
]
LEASE_RULE: dict[str, Any] = {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                              "verbs": ["get", "create", "update"]}


def explain_json(kubeconfig: Path, namespace: str, configmap: str, *extra: str
                 ) -> dict[str, Any]:
    """What ``cpa explain --from-cluster -o json`` says of the ConfigMap ``configmap`` in
    ``namespace``, read with ``kubeconfig``'s rights (the command must succeed)."""
    out = run_cli(["explain", "--from-cluster", f"--namespace={namespace}",
                   f"--configmap={configmap}", f"--kubeconfig={kubeconfig}", *extra,
                   "-o", "json"])
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout))


def peak_rss(pid: int, seconds: float) -> float:
    """The highest RSS in MiB over ``seconds`` (one reading can fall inside a poll)."""
    end, peak = time.monotonic() + seconds, 0.0
    while time.monotonic() < end:
        peak = max(peak, rss_mib(pid))
        time.sleep(0.1)
    return peak


def service_account(plane: ControlPlane, namespace: str, name: str,
                    extra: Sequence[dict[str, Any]] = (), nodes: bool = True,
                    rules: Sequence[dict[str, Any]] | None = None) -> Path:
    """A ServiceAccount with the addon's rules (or ``rules`` instead) in ``namespace`` plus
    ``extra``, and (unless ``nodes`` is False: the most common RBAC mistake) list/watch on
    Nodes; its kubeconfig."""
    admin = plane.admin()
    rbac = "rbac.authorization.k8s.io/v1"
    subject = [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]
    if nodes:
        admin.apply({"apiVersion": rbac, "kind": "ClusterRole",
                     "metadata": {"name": f"{namespace}-{name}"},
                     "rules": [{"apiGroups": [""], "resources": ["nodes"],
                                "verbs": ["list", "watch"]}]})
        admin.apply({"apiVersion": rbac, "kind": "ClusterRoleBinding",
                     "metadata": {"name": f"{namespace}-{name}"}, "subjects": subject,
                     "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                 "kind": "ClusterRole", "name": f"{namespace}-{name}"}})
    admin.apply({"apiVersion": rbac, "kind": "Role",
                 "metadata": {"name": name, "namespace": namespace},
                 "rules": [*(ADDON_RULES if rules is None else rules), *extra]})
    admin.apply({"apiVersion": rbac, "kind": "RoleBinding",
                 "metadata": {"name": name, "namespace": namespace}, "subjects": subject,
                 "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                             "name": name}})
    return plane.kubeconfig_for(f"system:serviceaccount:{namespace}:{name}", [])
