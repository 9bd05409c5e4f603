"""Run the built image the way a kubelet runs it in a Pod, with podman and no kubelet.

What a kubelet gives a container, and how we give it here:

* a network namespace of its own with one address, reached by probes on that address
  (``PodNetwork``: a netns and a veth pair, made with ``ip``; no NAT, no port mapping);
* the API server at ``KUBERNETES_SERVICE_HOST``/``_PORT`` (here the apiserver listens on the
  host end of the veth, so its self-signed certificate is valid for that address);
* the ServiceAccount's token, the cluster CA and the namespace mounted read-only at
  ``/var/run/secrets/kubernetes.io/serviceaccount/``;
* the Deployment's securityContext: read-only root filesystem (and no tmpfs anywhere),
  uid/gid 65534, all capabilities dropped, no privilege escalation; its memory limit.

Everything made here is removed by ``close()``: the container by its ID, the netns (which
takes the veth pair with it) by its name, the secrets directory.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import secrets
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

SA_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
REPO = Path(__file__).resolve().parents[2]


def containers_conf() -> dict[str, str]:
    """The environment podman needs here: image/env.sh writes the containers.conf."""
    env = dict(os.environ)
    conf = REPO / ".cache" / "image" / "containers.conf"
    if "CONTAINERS_CONF" not in env and conf.exists():
        env["CONTAINERS_CONF"] = str(conf)
    return env


def podman(*args: str, check: bool = True, timeout: float = 120.0
           ) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["podman", *args], capture_output=True, text=True,
                          timeout=timeout, env=containers_conf(), check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)} failed ({proc.returncode}):\n"
                             f"{proc.stdout}\n{proc.stderr}")
    return proc


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def _used_networks() -> list[ipaddress.IPv4Network]:
    out = subprocess.run(["ip", "-4", "-o", "addr", "show"], check=True, capture_output=True,
                         text=True).stdout
    return [ipaddress.IPv4Interface(line.split()[3]).network for line in out.splitlines()]


class PodNetwork:
    """A netns with one veth to the host: ``host_ip`` <-> ``pod_ip`` on a /30."""

    def __init__(self) -> None:
        suffix = secrets.token_hex(3)
        self.netns = f"cpa-pod-{suffix}"
        self.host_if = f"cpah{suffix}"
        used = _used_networks()
        net = next(n for n in (ipaddress.ip_network(f"10.231.{i}.0/30") for i in range(256))
                   if not any(n.overlaps(u) for u in used))
        self.host_ip, self.pod_ip = (str(h) for h in net.hosts())
        self.prefix = net.prefixlen
        self._made = False

    def create(self) -> None:
        _ip("netns", "add", self.netns)
        self._made = True
        _ip("link", "add", self.host_if, "type", "veth", "peer", "name", "eth0",
            "netns", self.netns)
        _ip("addr", "add", f"{self.host_ip}/{self.prefix}", "dev", self.host_if)
        _ip("link", "set", self.host_if, "up")
        for args in (("addr", "add", f"{self.pod_ip}/{self.prefix}", "dev", "eth0"),
                     ("link", "set", "eth0", "up"), ("link", "set", "lo", "up"),
                     ("route", "add", "default", "via", self.host_ip)):
            _ip("netns", "exec", self.netns, "ip", *args)

    @property
    def path(self) -> str:
        return f"/run/netns/{self.netns}"

    def close(self) -> None:
        if self._made:
            with contextlib.suppress(subprocess.CalledProcessError):
                _ip("netns", "del", self.netns)  # the veth pair goes with it
            self._made = False

    def leftovers(self) -> list[str]:
        """What of ours is still on the host (for the cleanup assertion)."""
        found = []
        if Path(self.path).exists():
            found.append(self.path)
        if subprocess.run(["ip", "link", "show", self.host_if], capture_output=True,
                          check=False).returncode == 0:
            found.append(f"link {self.host_if}")
        return found


class ServiceAccountFiles:
    """The projected ServiceAccount volume: token, ca.crt, namespace (world-readable, as
    the kubelet's default mode 0644 makes them)."""

    def __init__(self, token: str, ca_pem: bytes, namespace: str) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="cpa-sa-"))
        self.dir.chmod(0o755)
        for name, data in (("token", token.encode()), ("ca.crt", ca_pem),
                           ("namespace", namespace.encode())):
            path = self.dir / name
            path.write_bytes(data)
            path.chmod(0o644)

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def _diff(container: str) -> list[str]:
    return [line for line in podman("diff", container).stdout.splitlines() if line.strip()]


class PodContainer:
    """One container of the image, started detached with a Pod's constraints."""

    def __init__(self, image: str, command: list[str], *, network: PodNetwork,
                 sa: ServiceAccountFiles, api_host: str, api_port: int,
                 memory: str) -> None:
        self.name = f"cpa-image-test-{secrets.token_hex(3)}"
        self.id = podman(
            "run", "--detach", "--name", self.name,
            "--network", f"ns:{network.path}",
            "--read-only", "--read-only-tmpfs=false",
            "--user", "65534:65534", "--cap-drop", "ALL",
            "--security-opt", "no-new-privileges",
            "--memory", memory, "--memory-swap", memory,
            "--env", f"KUBERNETES_SERVICE_HOST={api_host}",
            "--env", f"KUBERNETES_SERVICE_PORT={api_port}",
            "--volume", f"{sa.dir}:{SA_MOUNT}:ro",
            "--entrypoint", command[0], image, *command[1:],
        ).stdout.strip()
        self.started = time.monotonic()
        probe = podman("create", "--read-only", "--read-only-tmpfs=false", "--network", "none",
                       "--volume", f"{sa.dir}:{SA_MOUNT}:ro", image, "--version").stdout.strip()
        try:
            podman("start", "--attach", probe)
            self._baseline = _diff(probe)
        finally:
            podman("rm", "--force", probe, check=False)

    def inspect(self) -> dict[str, Any]:
        doc: list[dict[str, Any]] = json.loads(podman("inspect", self.id).stdout)
        return doc[0]

    @property
    def pid(self) -> int:
        return int(self.inspect()["State"]["Pid"])

    def logs(self) -> str:
        proc = podman("logs", self.id, check=False)
        return proc.stdout + proc.stderr

    def proc_status(self) -> dict[str, str]:
        """/proc/<pid>/status of the container's process, as seen from the host."""
        text = Path(f"/proc/{self.pid}/status").read_text()
        return dict(line.split(":\t", 1) for line in text.splitlines() if ":\t" in line)

    def changed_files(self) -> list[str]:
        """``podman diff``: what changed in the container's root filesystem, less what
        podman itself changes in every container of this image with these mounts (mount
        points, /etc/hosts and friends), measured on a container that only prints
        ``--version``."""
        return sorted(set(_diff(self.id)) - set(self._baseline))

    def stop(self, grace_seconds: int) -> tuple[int, float]:
        """SIGTERM, and SIGKILL after ``grace_seconds`` (a kubelet's grace period); returns
        the exit code and how long the container took to stop."""
        began = time.monotonic()
        podman("stop", "--time", str(grace_seconds), self.id, timeout=grace_seconds + 60)
        took = time.monotonic() - began
        return int(self.inspect()["State"]["ExitCode"]), took

    def memory_peak_mib(self) -> float | None:
        """The container's cgroup peak memory (what its limit is held against: RSS and
        page cache, not the shared libraries' mapped pages), cgroup v1 or v2; None when
        the cgroup is not found."""
        for pattern, name in (("memory/**/*{id}*", "memory.max_usage_in_bytes"),
                              ("**/*{id}*", "memory.peak")):
            for found in Path("/sys/fs/cgroup").glob(pattern.format(id=self.id)):
                with contextlib.suppress(OSError, ValueError):
                    return round(int((found / name).read_text()) / 2**20, 1)
        return None

    def oom_killed(self) -> bool:
        return bool(self.inspect()["State"].get("OOMKilled"))

    def remove(self) -> None:
        podman("rm", "--force", "--time", "0", self.id, check=False)
