"""A single-node Kubernetes cluster from real parts, started and stopped by one object.

Why: the issue asks for proof that a Pod of our image does the job in a real cluster (the
kubelet mounts the ServiceAccount token, the Pod reaches the API through the ``kubernetes``
Service's ClusterIP, the Deployment controller turns our scale writes into CoreDNS pods),
and kind is impossible here (no Docker engine, no registry). So the node is built from the
same Kubernetes release as the test control plane (tests/controlplane/build.sh node),
Debian's containerd + runc + CNI plugins, and images built locally.

Layout on the host (everything removed again by :meth:`Cluster.stop`):

* a bridge ``cpae2e0`` with ``10.244.0.1/24`` (the pod subnet's gateway), created first; the
  API server listens and advertises there, so the default endpoint reconciler points the
  ``kubernetes`` Service (``10.0.0.1:443``) at it and kube-proxy DNATs the ClusterIP to it;
  the service range is routed onto that bridge too, so a packet that kube-proxy has not
  translated (yet) stays on it and never leaves the machine;
* pods get addresses from host-local IPAM on that bridge and a route to the service range
  only (no default route): they can reach the API server and nothing else;
* containerd with its own root, state, socket and runc root under the temp dir;
* kubelet with its root dir, pod logs and volume plugin dir under the temp dir;
* kube-proxy (iptables mode), kube-controller-manager and kube-scheduler, on loopback
  ports only; every process stopped by its PID.

Use as a context manager; ``stop()`` also runs at interpreter exit.
"""

from __future__ import annotations

import atexit
import contextlib
import ipaddress
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import pytest
import yaml

from tests.cluster import configs, hostlock
from tests.cluster.configs import (
    BRIDGE,
    CNI_BIN_DIR,
    GATEWAY,
    NODE_NAME,
    POD_SUBNET,
    SERVICE_IP,
    SERVICE_RANGE,
)
from tests.cluster.host import HostSnapshot, is_ours, pids_with_arg, run, unmount_under
from tests.cluster.procs import Proc
from tests.controlplane import ControlPlane, ensure_binaries, tail
from tests.controlplane.processes import StartStop
from tests.image.registry import Registry

REPO = Path(__file__).resolve().parents[2]
BUILD_SH = REPO / "tests" / "controlplane" / "build.sh"
IMAGES_DIR = REPO / ".cache" / "cluster" / "images"
NODE_BINARIES = ("kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy",
                 "kubectl")

DEBIAN_PACKAGES = {  # command -> Debian package
    "containerd": "containerd",
    "runc": "runc",
    "iptables": "iptables",
    "conntrack": "conntrack",
    f"{CNI_BIN_DIR}/bridge": "containernetworking-plugins",
    "nft": "nftables",  # cleanup only: deletes the tables the kubelet created
    "dnsperf": "dnsperf",  # the load axis's scenario: real DNS load on CoreDNS
}
KEEP_ENV = "CPA_CLUSTER_KEEP"
"""If 1, keep the temp dir (logs, configs) after stop(); the host is cleaned all the same."""


def ensure_node_binaries() -> Path:
    """The bin dir with the control plane and node binaries, building what is missing."""
    bin_dir = ensure_binaries()
    if not all(os.access(bin_dir / name, os.X_OK) for name in NODE_BINARIES):
        subprocess.run(["bash", str(BUILD_SH), "node"], check=True, stdout=subprocess.DEVNULL)
    missing = [n for n in NODE_BINARIES if not os.access(bin_dir / n, os.X_OK)]
    if missing:
        raise RuntimeError(f"{BUILD_SH} node did not produce {missing} in {bin_dir}")
    return bin_dir


def missing_packages() -> list[str]:
    """Debian packages the node needs that are not installed (tests/cluster/run.sh installs
    them)."""
    return sorted({pkg for cmd, pkg in DEBIAN_PACKAGES.items()
                   if not (shutil.which(cmd) or os.access(cmd, os.X_OK))})


def require_host() -> None:
    """Fail (not skip) a cluster test that cannot run here, saying how to run it."""
    if os.geteuid() != 0:
        pytest.fail("the cluster e2e needs root: run it with `make cluster-e2e`")
    missing = missing_packages()
    if missing:
        pytest.fail(f"missing Debian packages {missing}: `make cluster-e2e` "
                    "(tests/cluster/run.sh) installs them")


def read_layouts() -> dict[str, Path]:
    """The OCI layouts tests/cluster/images.sh built: AUTOSCALER, PAUSE, STANDIN, COREDNS."""
    env = IMAGES_DIR / "images.env"
    if not env.exists():
        raise RuntimeError(f"{env} missing: run tests/cluster/images.sh first")
    pairs = (line.split("=", 1) for line in env.read_text().splitlines() if "=" in line)
    return {key.removesuffix("_LAYOUT"): Path(value) for key, value in pairs}


# Repository names in the local registry (ours is the published name's last part).
REPOSITORIES = {"AUTOSCALER": "cluster-proportional-autoscaler-py",
                "PAUSE": "cpa-e2e/pause", "STANDIN": "cpa-e2e/standin",
                "COREDNS": "cpa-e2e/coredns"}


def _free_port(address: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((address, 0))
        port: int = sock.getsockname()[1]
        return port


def wait_for(what: str, check: Callable[[], Any], timeout: float,
             alive: Callable[[], None] | None = None, interval: float = 0.5) -> Any:
    """Poll ``check`` until it returns something truthy; ``alive`` raises if a process the
    wait depends on died (so a crash fails fast with its log, not after the timeout)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        if alive is not None:
            alive()
        try:
            last = check()
        except Exception as exc:  # a transient API or command error: keep polling
            last = exc
        if last and not isinstance(last, Exception):
            return last
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what} "
                               f"(last: {last!r})")
        time.sleep(interval)


class Timings:
    """A test module's step timings: each printed as it is taken, all together at the end."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.rows: list[tuple[str, float]] = []

    def add(self, what: str, seconds: float) -> None:
        self.rows.append((what, seconds))
        print(f"[{self.label}] {what}: {seconds:.1f}s", flush=True)

    def table(self) -> str:
        width = max((len(w) for w, _ in self.rows), default=0)
        return "\n".join(f"  {w:<{width}}  {s:7.1f} s" for w, s in self.rows)


@contextlib.contextmanager
def module_cluster(times: Timings,
                   on_stop: Callable[[Cluster], None] = lambda _c: None) -> Iterator[Cluster]:
    """The started cluster of one test module (its fixture's body). Why one copy: every
    module wants the components' logs when a step fails, its timings and what the cleanup
    left on the host printed at the end, and the host checked to be as it was."""
    require_host()
    c = Cluster()
    try:
        c.start()
        yield c
    except BaseException:
        print(c.component_logs(), flush=True)
        raise
    finally:
        c.stop()
        on_stop(c)
        print(f"\n[{times.label}] timings:\n{times.table()}", flush=True)
        print(f"\n[{times.label}] host leftovers: {c.leftovers or 'none'}", flush=True)
        if c.foreign_changes:
            print(f"[{times.label}] host changes meanwhile that are not the cluster's "
                  f"(another process?): {c.foreign_changes}", flush=True)
    assert c.leftovers == [], f"the host is not as it was: {c.leftovers}"


def _stop_at_exit(ref: weakref.ref[Cluster]) -> None:
    cluster = ref()
    if cluster is not None:
        cluster.stop()


class Cluster(StartStop):
    """The control plane, controllers, containerd, kubelet and kube-proxy of one node."""

    def __init__(self, bin_dir: Path | None = None, log: Callable[[str], None] = print,
                 *, aggregation: bool = False) -> None:
        """``aggregation``: the API server's aggregation layer as kubeadm configures it
        (tests/controlplane/frontproxy.py), for metrics-server behind an HPA."""
        self.aggregation = aggregation
        self.bin_dir = bin_dir or ensure_node_binaries()
        self.layouts = read_layouts()
        # AUTOSCALER_IMAGE, PAUSE_IMAGE, STANDIN_IMAGE, COREDNS_IMAGE (the real CoreDNS):
        # references by digest in the local
        # registry, set by start().
        self.images: dict[str, str] = {}
        self.registry: Registry | None = None
        self.log = log
        self.workdir = Path(tempfile.mkdtemp(prefix=hostlock.WORKDIR_PREFIX))
        self.workdir.chmod(0o755)  # pods run as 65534 and read their volumes under it
        self.containerd_dir = self.workdir / "containerd"
        self.containerd_sock = self.containerd_dir / "containerd.sock"
        self.kubelet_dir = self.workdir / "kubelet"
        self.cni_conf_dir = self.workdir / "cni" / "net.d"
        self.snapshot: HostSnapshot | None = None
        self.plane: ControlPlane | None = None
        self._procs: dict[str, Proc] = {}
        self._bridge_made = False
        self._stopped = False
        self.timings: dict[str, float] = {}
        self.cleanup_report: list[str] = []
        self.leftovers: list[str] = []
        self.foreign_changes: list[str] = []  # host changes another process made meanwhile
        self.reaped: list[str] = []  # what a dead run left and start() removed
        self._host_lock: IO[str] | None = None
        atexit.register(_stop_at_exit, weakref.ref(self))

    # ------------------------------------------------------------------ helpers
    def _spawn(self, name: str, argv: list[str]) -> Proc:
        proc = Proc(name, argv, self.workdir / f"{name}.log", self.workdir)
        self._procs[name] = proc
        return proc

    def kubectl(self, *args: str, check: bool = True, timeout: float = 120.0,
                input_text: str | None = None) -> subprocess.CompletedProcess[str]:
        """Our kubectl v1.35.4 as the admin (system:masters)."""
        assert self.plane is not None
        argv = [str(self.bin_dir / "kubectl"), f"--kubeconfig={self.plane.admin_kubeconfig}",
                *args]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              input=input_text, check=False)
        if check and proc.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)} failed ({proc.returncode}):\n"
                               f"{proc.stdout}{proc.stderr}")
        return proc

    def ctr(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """``ctr`` against our containerd, in the CRI's ``k8s.io`` namespace."""
        return run("ctr", "--address", str(self.containerd_sock), "--namespace", "k8s.io",
                   *args, check=check)

    def _timed(self, key: str, began: float) -> None:
        self.timings[key] = time.monotonic() - began

    # ------------------------------------------------------------------ start
    def start(self) -> None:
        """Bring the node up; returns once it is Ready and the ``kubernetes`` Service is
        programmed by kube-proxy. On failure everything started is cleaned up again."""
        began = time.monotonic()
        self._host_lock, self.reaped = hostlock.claim(self.workdir, BRIDGE)
        for line in self.reaped:
            self.log(f"[cluster] {line}")
        self.snapshot = HostSnapshot.take()
        try:
            self._make_bridge()
            step = time.monotonic()
            self.plane = ControlPlane(bin_dir=self.bin_dir, workdir=self.workdir / "plane",
                                      bind_address=GATEWAY, for_nodes=True,
                                      aggregation=self.aggregation)
            self.plane.start()
            self._timed("control plane (etcd + apiserver) ready", step)
            self._start_controllers()
            for what, begin in (
                    ("local registry up + 4 images pushed (OCI layouts, by crane)",
                     self._push_images),
                    ("containerd up", self._start_containerd),
                    ("kubelet start to Node Ready and untainted", self._start_kubelet),
                    ("kube-proxy start to kubernetes Service programmed",
                     self._start_kube_proxy)):
                step = time.monotonic()
                begin()
                self._timed(what, step)
        except BaseException:
            self.stop()
            raise
        self._timed("cluster start total", began)

    def _make_bridge(self) -> None:
        ours = [ipaddress.ip_network(POD_SUBNET), ipaddress.ip_network(SERVICE_RANGE)]
        routes = run("ip", "-4", "route", "show", "table", "all").stdout.splitlines()
        for line in routes:
            dest = line.split()[0]
            if dest in ("default", "local", "broadcast", "unreachable", "blackhole"):
                dest = line.split()[1] if dest != "default" else "0.0.0.0/0"
            with contextlib.suppress(ValueError):
                net = ipaddress.ip_network(dest, strict=False)
                if net.prefixlen > 0 and any(net.overlaps(o) for o in ours):
                    raise RuntimeError(f"route {line!r} overlaps the cluster's {ours}: "
                                       "another cluster or test network is up")
        run("ip", "link", "add", BRIDGE, "type", "bridge")
        self._bridge_made = True
        run("ip", "addr", "add", f"{GATEWAY}/24", "dev", BRIDGE)
        run("ip", "link", "set", BRIDGE, "up")
        # A ClusterIP packet kube-proxy did not translate stays on our bridge (no one answers
        # there) instead of following the default route off the machine. Goes with the bridge.
        run("ip", "route", "add", SERVICE_RANGE, "dev", BRIDGE)

    def _start_controllers(self) -> None:
        plane = self.plane
        assert plane is not None
        kcm = self._spawn("kube-controller-manager", [
            str(self.bin_dir / "kube-controller-manager"),
            f"--kubeconfig={plane.admin_kubeconfig}",
            "--leader-elect=false",
            "--secure-port=0",
            f"--service-account-private-key-file={plane.sa_key}",
            f"--root-ca-file={plane.ca_file}",
            "--use-service-account-credentials=false",
            f"--service-cluster-ip-range={SERVICE_RANGE}",
            # API-only Nodes (the scenario's) have no kubelet to renew their Lease: with the
            # default 50 s the node lifecycle controller would mark them NotReady mid-run.
            "--node-monitor-grace-period=1h",
            "--profiling=false",
            "--v=1",
        ])
        sched = self._spawn("kube-scheduler", [
            str(self.bin_dir / "kube-scheduler"),
            f"--kubeconfig={plane.admin_kubeconfig}",
            "--leader-elect=false",
            "--secure-port=0",
            "--profiling=false",
            "--v=1",
        ])
        admin = plane.admin()

        def both_alive() -> None:
            kcm.check_alive()
            sched.check_alive()

        # The ServiceAccount controller and the root-CA publisher are running once these
        # exist; pods need both (ServiceAccount admission, the projected token volume).
        wait_for("kube-system/default ServiceAccount and kube-root-ca.crt",
                 lambda: admin.get("/api/v1/namespaces/kube-system/serviceaccounts/default")
                 and admin.get("/api/v1/namespaces/kube-system/configmaps/kube-root-ca.crt"),
                 60, both_alive)

    # ------------------------------------------------------------------ containerd
    def _start_containerd(self) -> None:
        self.cni_conf_dir.mkdir(parents=True, exist_ok=True)
        conflist = configs.cni_conflist(self.workdir / "cni" / "ipam")
        (self.cni_conf_dir / "10-cpa-e2e.conflist").write_text(json.dumps(conflist, indent=2))
        for sub in ("root", "state"):
            (self.containerd_dir / sub).mkdir(parents=True, exist_ok=True)
        conf = self.containerd_dir / "config.toml"
        assert self.registry is not None
        registry_dir = self.containerd_dir / "certs.d"
        hosts = registry_dir / self.registry.host / "hosts.toml"
        hosts.parent.mkdir(parents=True, exist_ok=True)
        hosts.write_text(configs.registry_hosts_toml(self.registry.host))
        conf.write_text(configs.containerd_toml(self.containerd_dir, self.containerd_sock,
                                                self.images["PAUSE_IMAGE"], self.cni_conf_dir,
                                                registry_dir))
        proc = self._spawn("containerd", ["containerd", "--config", str(conf)])
        wait_for("containerd socket", lambda: self.ctr("version", check=False).returncode == 0,
                 30, proc.check_alive)

    def _push_images(self) -> None:
        """A real registry on loopback holds the four images; containerd pulls them by
        digest (ours through the multi-platform index, picking this node's platform)."""
        self.registry = Registry().start()
        version = self.layouts["AUTOSCALER"].parent / "digests.json"
        tag = json.loads(version.read_text())["version"]
        for key, repository in REPOSITORIES.items():
            self.images[f"{key}_IMAGE"] = self.registry.push(repository, tag if key ==
                                                             "AUTOSCALER" else "e2e",
                                                             self.layouts[key])

    # ------------------------------------------------------------------ kubelet
    def _start_kubelet(self) -> None:
        plane = self.plane
        assert plane is not None
        self.kubelet_dir.mkdir(parents=True, exist_ok=True)
        config = configs.kubelet_config(_free_port(GATEWAY), self.containerd_sock, self.workdir)
        conf = self.workdir / "kubelet.yaml"
        conf.write_text(yaml.safe_dump(config))
        proc = self._spawn("kubelet", [
            str(self.bin_dir / "kubelet"),
            f"--config={conf}",
            f"--kubeconfig={plane.admin_kubeconfig}",
            f"--root-dir={self.kubelet_dir}",
            f"--cert-dir={self.kubelet_dir / 'pki'}",
            f"--hostname-override={NODE_NAME}",
            f"--node-ip={GATEWAY}",
            "--v=2",
        ])
        admin = plane.admin()

        def ready() -> bool:
            node = admin.get(f"/api/v1/nodes/{NODE_NAME}")
            conditions = {c["type"]: c["status"] for c in node["status"].get("conditions", [])}
            taints = node["spec"].get("taints") or []
            return conditions.get("Ready") == "True" and not taints

        wait_for(f"Node {NODE_NAME} Ready without taints", ready, 120, proc.check_alive)

    # ------------------------------------------------------------------ kube-proxy
    def _start_kube_proxy(self) -> None:
        plane = self.plane
        assert plane is not None
        config = configs.kube_proxy_config(plane.admin_kubeconfig, _free_port(), _free_port())
        conf = self.workdir / "kube-proxy.yaml"
        conf.write_text(yaml.safe_dump(config))
        self._kube_proxy_conf = conf
        proc = self._spawn("kube-proxy", [str(self.bin_dir / "kube-proxy"), f"--config={conf}",
                                          "--v=2"])
        endpoint = f"{GATEWAY}:{plane.port}"

        def programmed() -> bool:
            nat = run("iptables-save", "-t", "nat").stdout
            return "default/kubernetes:https" in nat and f"--to-destination {endpoint}" in nat

        wait_for(f"kube-proxy DNAT {SERVICE_IP}:443 -> {endpoint}", programmed, 60,
                 proc.check_alive)

    # ------------------------------------------------------------------ stop
    def stop(self) -> None:
        """Tear everything down and put the host back; idempotent. Fills
        ``cleanup_report`` with what was removed, ``leftovers`` with what of the cluster's
        still differs from the snapshot taken at start (empty when the host is as it was)
        and ``foreign_changes`` with differences another process made meanwhile."""
        if self._stopped:
            return
        self._stopped = True
        report = self.cleanup_report
        began = time.monotonic()
        self._delete_pods(report)
        for name in ("kubelet", "kube-proxy", "kube-scheduler", "kube-controller-manager"):
            proc = self._procs.get(name)
            if proc is not None:
                report.append(f"stopped {name} (pid {proc.pid}): exit {proc.stop()}")
        self._remove_containers(report)
        containerd = self._procs.get("containerd")
        if containerd is not None:
            report.append(f"stopped containerd (pid {containerd.pid}): exit {containerd.stop()}")
        for pid in pids_with_arg(str(self.containerd_dir)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
                report.append(f"killed leftover shim/process pid {pid}")
        if self.plane is not None:
            self.plane.stop()
            report.append("stopped kube-apiserver and etcd")
        if self.registry is not None:
            registry_pid = self.registry.proc.pid if self.registry.proc else None
            self.registry.close()
            report.append(f"stopped the local registry (pid {registry_pid})")
        if "kube-proxy" in self._procs:
            cleanup = subprocess.run([str(self.bin_dir / "kube-proxy"), "--cleanup",
                                      f"--config={self._kube_proxy_conf}"],
                                     capture_output=True, text=True, check=False)
            report.append(f"kube-proxy --cleanup: exit {cleanup.returncode}")
        snapshot = self.snapshot
        # Network namespaces containerd made under /run/netns are bind mounts.
        netns_mounts = []
        if snapshot is not None:
            for path in ("/run/netns", "/var/run/netns"):
                was = snapshot.dirs.get(path) or frozenset()
                with contextlib.suppress(OSError):
                    netns_mounts += [f"{path}/{n}" for n in os.listdir(path)
                                     if n.startswith("cni-") and n not in was]
        report += [f"unmounted {m}" for m in unmount_under(self.workdir, *netns_mounts)]
        if self._bridge_made:
            run("ip", "link", "del", BRIDGE, check=False)
            report.append(f"deleted bridge {BRIDGE}")
        for link in self._new_veths():
            run("ip", "link", "del", link, check=False)
            report.append(f"deleted leftover link {link}")
        if snapshot is not None:
            report += snapshot.remove_iptables_additions()
            report += [f"removed cgroup {c}" for c in snapshot.remove_new_cgroups()]
            report += [f"restored sysctl {s}" for s in snapshot.restore_sysctls()]
            report += snapshot.remove_new_empty_tables()
            report += [f"removed {p}" for p in snapshot.remove_new_dir_entries(str(self.workdir))]
        if os.environ.get(KEEP_ENV) == "1":
            (self.workdir / hostlock.KEPT_MARKER).write_text("kept on request\n")
            report.append(f"kept {self.workdir} (${KEEP_ENV}=1)")
        else:
            shutil.rmtree(self.workdir, ignore_errors=True)
        changes = snapshot.differences(HostSnapshot.take()) if snapshot is not None else []
        self.leftovers = [c for c in changes if is_ours(c, str(self.workdir), BRIDGE)]
        self.foreign_changes = [c for c in changes if c not in self.leftovers]
        self.leftovers += [f"process {pid} still runs with {self.workdir} in its arguments"
                           for pid in pids_with_arg(str(self.workdir))]
        self.timings["cleanup"] = time.monotonic() - began
        if self._host_lock is not None:
            hostlock.release(self._host_lock)
            self._host_lock = None

    def _new_veths(self) -> list[str]:
        if self.snapshot is None:
            return []
        now = run("ip", "-o", "link", "show", "type", "veth").stdout.splitlines()
        names = {line.split(":")[1].strip().split("@")[0] for line in now}
        return sorted(names - self.snapshot.links)

    def _delete_pods(self, report: list[str]) -> None:
        """Delete every workload and pod through the API while the kubelet still runs, so it
        stops the sandboxes and CNI removes their network (veth, IP, netns)."""
        plane = self.plane
        if plane is None or plane.apiserver_pid is None:
            return
        kubelet = self._procs.get("kubelet")
        if kubelet is None or not kubelet.alive():
            return
        self.kubectl("delete", "deployments,replicasets", "--all", "--all-namespaces",
                     "--wait=false", check=False)
        self.kubectl("delete", "pods", "--all", "--all-namespaces", "--grace-period=5",
                     "--wait=false", check=False)
        try:
            wait_for("pods gone", lambda: not self.kubectl(
                "get", "pods", "-A", "-o", "name").stdout.strip(), 90, interval=1)
            wait_for("pod sandboxes stopped",
                     lambda: not self._running_sandboxes(), 60, interval=1)
            report.append("deleted all pods through the API; the kubelet stopped them")
        except TimeoutError as exc:
            report.append(f"WARNING: {exc}")

    def _running_sandboxes(self) -> list[str]:
        out = self.ctr("tasks", "ls", check=False).stdout.splitlines()[1:]
        return [line.split()[0] for line in out if "RUNNING" in line]

    def _remove_containers(self, report: list[str]) -> None:
        if "containerd" not in self._procs or not self._procs["containerd"].alive():
            return
        for line in self.ctr("tasks", "ls", check=False).stdout.splitlines()[1:]:
            task = line.split()[0]
            self.ctr("tasks", "kill", "--signal", "SIGKILL", task, check=False)
            self.ctr("tasks", "delete", "--force", task, check=False)
            report.append(f"removed containerd task {task}")
        containers = self.ctr("containers", "ls", "-q", check=False).stdout.split()
        for cid in containers:
            self.ctr("containers", "rm", cid, check=False)
        if containers:
            report.append(f"removed {len(containers)} containerd containers")

    # ------------------------------------------------------------------ logs
    def component_logs(self, lines: int = 30) -> str:
        """The last lines of each component's log (for failure messages)."""
        parts = [f"--- {name} ({p.log}):\n{tail(p.log, lines)}" for name, p in
                 self._procs.items()]
        if self.plane is not None:
            parts.append(f"--- kube-apiserver:\n{tail(self.plane.apiserver_log, lines)}")
        return "\n".join(parts)
