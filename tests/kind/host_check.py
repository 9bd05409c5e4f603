"""What a kind cluster leaves on the host, and putting it back (`make e2e`).

Why this exists: `kind delete cluster` removes the node containers and their volumes, and
nothing else. A kind node is a privileged container, so it shares the host's kernel
tunables: the kubelet in every node writes the host's ``vm.overcommit_memory``,
``kernel.panic``, ``kernel.panic_on_oops`` and the keyring limits. Podman's network backend
(netavark) leaves its ``NETAVARK*`` chains in the host's iptables after the last container
of a network is gone, and kind mounts ``/lib/modules`` into every node, which podman
refuses when the host has no such directory. So the e2e script takes a snapshot before the
cluster and, after deleting it, puts back what is provably the run's and compares::

    python -m tests.kind.host_check snapshot FILE   # before `kind create cluster`
    python -m tests.kind.host_check restore FILE    # after `kind delete cluster`

``restore`` prints what it removed and restored, then every difference left; it exits 1
when one of those can be the cluster's (see :func:`tests.cluster.host.is_ours`).
"""

from __future__ import annotations

import argparse
import json
import pickle
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tests.cluster.host import HostSnapshot, is_ours

MODULES = Path("/lib/modules")
# Chains of kube-proxy and the kubelet (if a node's network namespace were the host's), of
# the CNI plugins, and of podman's netavark.
CHAIN_PREFIXES = ("KUBE-", "CNI-", "NETAVARK")
# Links and mounts that name these are a kind run's: the nodes' veths and podman bridges,
# their overlay root filesystems and volumes, and what kubelets and containerd mount.
MARKERS = ("veth", "podman", "/var/lib/containers", "libpod", "netavark")


def _engine_names(engine: str, *what: str) -> list[str]:
    """Names of the engine's containers, volumes or networks (empty without the engine)."""
    if shutil.which(engine) is None:
        return []
    formats = {"ps": "{{.Names}}", "volume": "{{.Name}}", "network": "{{.Name}}"}
    args = [engine, *what, "--format", formats[what[0]]]
    if what[0] == "ps":
        args.insert(2, "-a")
    proc = subprocess.run(args, capture_output=True, text=True, check=False)
    return sorted(proc.stdout.split())


@dataclass
class KindHostSnapshot:
    """The host as a kind run may change it: :class:`HostSnapshot`, the container engine's
    containers, volumes and networks, and whether /lib/modules existed."""

    host: HostSnapshot
    engine: str
    containers: list[str] = field(default_factory=list)
    volumes: list[str] = field(default_factory=list)
    networks: list[str] = field(default_factory=list)
    modules_existed: bool = True

    @classmethod
    def take(cls, engine: str) -> KindHostSnapshot:
        return cls(host=HostSnapshot.take(), engine=engine,
                   containers=_engine_names(engine, "ps"),
                   volumes=_engine_names(engine, "volume", "ls"),
                   networks=_engine_names(engine, "network", "ls"),
                   modules_existed=MODULES.exists())

    def put_back(self) -> list[str]:
        """Remove what the run added and restore what it changed; returns what was done."""
        done = self.host.remove_iptables_additions(CHAIN_PREFIXES)
        done += self.host.remove_new_empty_tables()
        done += [f"restored sysctl {s}" for s in self.host.restore_sysctls()]
        done += [f"removed cgroup {c}" for c in self.host.remove_new_cgroups()]
        if not self.modules_existed and MODULES.is_dir() and not any(MODULES.iterdir()):
            MODULES.rmdir()
            done.append(f"removed the empty {MODULES} made for kind's mount")
        return done

    def leftovers(self, now: KindHostSnapshot) -> tuple[list[str], list[str]]:
        """(differences that can be the run's, other differences) between this snapshot
        and ``now``, a later one."""
        changes = self.host.differences(now.host)
        ours = [c for c in changes
                if is_ours(c, "/var/lib/containers", "podman")
                or any(marker in c for marker in MARKERS)]
        # The engine's objects: the e2e runs alone on the engine (host lock), so any
        # container, volume or network that came or went is the run's.
        for kind in ("containers", "volumes", "networks"):
            before, after = set(getattr(self, kind)), set(getattr(now, kind))
            ours += [f"new {self.engine} {kind[:-1]} {x}" for x in sorted(after - before)]
            ours += [f"{self.engine} {kind[:-1]} gone {x}" for x in sorted(before - after)]
        if now.modules_existed != self.modules_existed:
            ours.append(f"{MODULES}: existed {self.modules_existed}, now {now.modules_existed}")
        return ours, [c for c in changes if c not in ours]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.kind.host_check")
    parser.add_argument("action", choices=("snapshot", "restore"))
    parser.add_argument("file", type=Path)
    parser.add_argument("--engine", default="podman", help="podman or docker")
    args = parser.parse_args(argv)
    if args.action == "snapshot":
        snap = KindHostSnapshot.take(args.engine)
        args.file.write_bytes(pickle.dumps(snap))
        print(json.dumps({"host_snapshot": str(args.file), "containers": len(snap.containers),
                          "networks": snap.networks, "lib_modules": snap.modules_existed}))
        return 0
    snap = pickle.loads(args.file.read_bytes())  # our own file, written by `snapshot`
    if not isinstance(snap, KindHostSnapshot):
        raise SystemExit(f"{args.file}: not a snapshot of this tool")
    for line in snap.put_back():
        print(f"put back: {line}")
    ours, others = snap.leftovers(KindHostSnapshot.take(snap.engine))
    for line in others:
        print(f"changed meanwhile (not the cluster's): {line}")
    for line in ours:
        print(f"LEFT BEHIND: {line}")
    print("host: as before" if not ours else f"host: {len(ours)} leftovers of the kind run")
    return 1 if ours else 0


if __name__ == "__main__":
    sys.exit(main())
