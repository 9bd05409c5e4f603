"""What the single-node cluster changes on the host, and how it is put back.

Why this exists: a kubelet, containerd, CNI and kube-proxy change the host itself (network
devices, iptables chains, mounts, cgroup directories, network namespaces, sysctls and a few
well-known directories), and none of them undoes all of it when stopped. The cluster takes
a :class:`HostSnapshot` before it starts anything and, after stopping everything by PID,
removes what is new and restores what changed; the scenario then asserts that a fresh
snapshot equals the first one (:meth:`HostSnapshot.differences`).

Removal is narrow on purpose: only ``KUBE-*``/``CNI-*`` iptables chains and the rules that
jump to them, only mounts under the cluster's own temp dir or the network namespaces it made,
only cgroup directories that did not exist before. Anything else that differs is reported,
not touched: another process on this machine may own it.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

# What the kubelet (kernel tunables it "protects" by setting them), kube-proxy and the CNI
# bridge plugin (ip_forward) may write. Values are restored at cleanup.
SYSCTLS = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
    "net/ipv4/ip_forward",
    "net/ipv4/conf/all/route_localnet",
    "net/bridge/bridge-nf-call-iptables",
    "net/bridge/bridge-nf-call-ip6tables",
    "net/netfilter/nf_conntrack_max",
    "net/netfilter/nf_conntrack_tcp_timeout_established",
    "net/netfilter/nf_conntrack_tcp_timeout_close_wait",
    "net/netfilter/nf_conntrack_tcp_be_liberal",
    "net/netfilter/nf_conntrack_udp_timeout",
    "net/netfilter/nf_conntrack_udp_timeout_stream",
)

# Host directories these components write to by default; the cluster points each one at
# its temp dir, and the snapshot checks that none of them got anything new anyway.
WATCHED_DIRS = (
    "/var/lib/kubelet",
    "/var/log/pods",
    "/var/log/containers",
    "/var/lib/cni",
    "/var/lib/containerd",
    "/run/containerd",
    "/opt/containerd",
    "/etc/cni/net.d",
    "/etc/kubernetes",
    "/usr/libexec/kubernetes",
    "/run/netns",
    "/var/run/netns",
)

OURS_PREFIXES = ("KUBE-", "CNI-")
_BUILTIN_CHAINS = {"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"}
CGROUP_ROOT = Path("/sys/fs/cgroup")
# The kubelet's pod cgroups (cgroupfs driver) and containerd's for containers it runs
# outside the kubelet's (the k8s.io namespace's default parent).
CGROUP_ROOTS = ("kubepods", "k8s.io")


def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a host command, capturing its output (raises with the output on failure)."""
    proc = subprocess.run(list(args), capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({proc.returncode}): "
                           f"{proc.stdout}{proc.stderr}")
    return proc


def _iptables_rules(binary: str) -> dict[str, tuple[set[str], Counter[str]]]:
    """``*-save`` output per table: (chain names, multiset of ``-A ...`` rule lines)."""
    proc = run(binary, check=False)
    tables: dict[str, tuple[set[str], Counter[str]]] = {}
    current = ""
    for line in proc.stdout.splitlines():
        if line.startswith("*"):
            current = line[1:]
            tables[current] = (set(), Counter())
        elif line.startswith(":") and current:
            tables[current][0].add(line[1:].split()[0])
        elif line.startswith("-A ") and current:
            tables[current][1][line] += 1
    return tables


def _cgroup_dirs() -> set[str]:
    """The cgroup directories under the roots the kubelet and containerd create, in every
    hierarchy (v1 and unified), down to the kubelet's ``kubepods/<qos>/pod<uid>/<id>``.

    Only those roots: other tools on this machine (podman's ``libpod_parent``, the
    sandbox's own per-command cgroups) create and remove cgroups at any time."""
    found: set[str] = set()
    if not CGROUP_ROOT.is_dir():
        return found
    for hierarchy in CGROUP_ROOT.iterdir():
        for top in CGROUP_ROOTS:
            start = hierarchy / top
            if not start.is_dir():
                continue
            found.add(str(start))
            for root, dirs, _files in os.walk(start):
                if len(Path(root).relative_to(start).parts) >= 4:
                    dirs.clear()
                found.update(str(Path(root) / name) for name in dirs)
    return found


def _mounts() -> list[str]:
    """Mount points (field 5 of mountinfo), unescaped, in mount order."""
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4]
        points.append(point.encode().decode("unicode_escape"))
    return points


def read_sysctl(name: str) -> str | None:
    try:
        return Path("/proc/sys", name).read_text().strip()
    except OSError:
        return None


def _dir_entries(path: str) -> frozenset[str] | None:
    try:
        return frozenset(os.listdir(path))
    except OSError:
        return None


@dataclass
class HostSnapshot:
    """The host state the cluster may change, taken before it starts and after it stops."""

    iptables: dict[str, dict[str, tuple[set[str], Counter[str]]]] = field(default_factory=dict)
    links: set[str] = field(default_factory=set)
    mounts: Counter[str] = field(default_factory=Counter)
    cgroups: set[str] = field(default_factory=set)
    sysctls: dict[str, str | None] = field(default_factory=dict)
    dirs: dict[str, frozenset[str] | None] = field(default_factory=dict)

    @classmethod
    def take(cls) -> HostSnapshot:
        links = run("ip", "-o", "link", "show").stdout.splitlines()
        return cls(
            iptables={binary: _iptables_rules(binary)
                      for binary in ("iptables-save", "ip6tables-save")},
            links={line.split(":")[1].strip().split("@")[0] for line in links},
            mounts=Counter(_mounts()),
            cgroups=_cgroup_dirs(),
            sysctls={name: read_sysctl(name) for name in SYSCTLS},
            dirs={path: _dir_entries(path) for path in WATCHED_DIRS},
        )

    def differences(self, other: HostSnapshot) -> list[str]:
        """What ``other`` (taken later) has that this snapshot had not, and vice versa."""
        out: list[str] = []
        for binary, tables in other.iptables.items():
            before = self.iptables.get(binary, {})
            for table in sorted(set(tables) | set(before)):
                chains_b, rules_b = before.get(table, (set(), Counter()))
                chains_a, rules_a = tables.get(table, (set(), Counter()))
                out += [f"{binary} {table}: new chain {c}" for c in sorted(chains_a - chains_b)]
                out += [f"{binary} {table}: chain {c} gone" for c in sorted(chains_b - chains_a)]
                out += [f"{binary} {table}: new rule {r}" for r in (rules_a - rules_b)]
                out += [f"{binary} {table}: rule gone {r}" for r in (rules_b - rules_a)]
        out += [f"new link {x}" for x in sorted(other.links - self.links)]
        out += [f"link gone {x}" for x in sorted(self.links - other.links)]
        out += [f"new mount {x}" for x in (other.mounts - self.mounts)]
        out += [f"mount gone {x}" for x in (self.mounts - other.mounts)]
        out += [f"new cgroup dir {x}" for x in sorted(other.cgroups - self.cgroups)]
        out += [f"sysctl {k}: {self.sysctls.get(k)} -> {v}"
                for k, v in other.sysctls.items() if self.sysctls.get(k) != v]
        for path, entries in other.dirs.items():
            was = self.dirs.get(path)
            if entries != was:
                added = sorted((entries or frozenset()) - (was or frozenset()))
                out.append(f"{path}: {'created' if was is None else 'changed'} {added}")
        return out

    # ------------------------------------------------------------------ restoring
    def remove_iptables_additions(self, prefixes: tuple[str, ...] = OURS_PREFIXES) -> list[str]:
        """Delete new chains whose names start with one of ``prefixes`` (``KUBE-*``/``CNI-*``
        by default) and every new rule that jumps to one (filter/nat/mangle/raw, IPv4 and
        IPv6); returns what was removed."""
        removed: list[str] = []
        now = HostSnapshot.take()
        for save, tables in now.iptables.items():
            binary = save.removesuffix("-save")
            before = self.iptables.get(save, {})
            for table, (chains, rules) in tables.items():
                chains_b, rules_b = before.get(table, (set(), Counter()))
                new_chains = {c for c in chains - chains_b if c.startswith(prefixes)}
                for rule in (rules - rules_b).elements():
                    words = shlex.split(rule)
                    target = words[words.index("-j") + 1] if "-j" in words else ""
                    # A jump from a chain we keep to one of ours (rules inside our chains
                    # go with the chain).
                    if target in new_chains and words[1] not in new_chains:
                        run(binary, "-t", table, "-D", *words[1:], check=False)
                        removed.append(f"{binary} -t {table} {rule}")
                for chain in sorted(new_chains):
                    run(binary, "-t", table, "-F", chain, check=False)
                for chain in sorted(new_chains):
                    run(binary, "-t", table, "-X", chain, check=False)
                    removed.append(f"{binary} -t {table} -X {chain}")
        return removed

    def restore_sysctls(self) -> list[str]:
        """Write back every watched sysctl whose value changed; returns what was restored."""
        restored = []
        for name, value in self.sysctls.items():
            now = read_sysctl(name)
            if value is not None and now != value:
                with contextlib.suppress(OSError):
                    Path("/proc/sys", name).write_text(value + "\n")
                    restored.append(f"{name}: {now} -> {value}")
        return restored

    def remove_new_cgroups(self) -> list[str]:
        """rmdir cgroup directories created since the snapshot, deepest first (a cgroup
        directory with no processes and no children can be removed with rmdir)."""
        removed = []
        for path in sorted(_cgroup_dirs() - self.cgroups, key=lambda p: -p.count("/")):
            try:
                os.rmdir(path)
                removed.append(path)
            except OSError:
                continue
        return removed

    def remove_new_dir_entries(self, workdir: str) -> list[str]:
        """Put the watched directories back.

        A watched directory that did not exist before was made by the cluster's kubelet or
        containerd, which write a few fixed paths whatever they are configured with
        (/var/lib/kubelet/device-plugins, containerd's /run/containerd/s shim sockets, the
        CNI result cache /var/lib/cni, /var/log/containers, the kubelet's FlexVolume dir):
        it is removed with its contents. In one that existed, only what is provably ours
        goes: new ``cni-*`` network namespaces (bind mounts, unmounted before this) and
        symlinks into ``workdir``. The network namespace directories are shared with
        other tools (``ip netns``, podman), so there only our entries go, and the directory
        only when it is empty."""
        removed = []
        for path, was in self.dirs.items():
            now = _dir_entries(path)
            if now is None:
                continue
            shared = path.endswith("/netns")
            if was is None and not shared:
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
                continue
            for name in sorted(now - (was or frozenset())):
                target = Path(path, name)
                ours = (shared and name.startswith("cni-")) or (
                    target.is_symlink() and os.readlink(target).startswith(workdir + "/"))
                if ours:
                    with contextlib.suppress(OSError):
                        target.unlink()
                        removed.append(str(target))
            if was is None:
                with contextlib.suppress(OSError):
                    os.rmdir(path)
                    removed.append(path)
        return removed

    def remove_new_empty_tables(self) -> list[str]:
        """Delete iptables tables (nf_tables tables, with the nft backend) that did not exist
        before and hold no rule and no chain but the built-in ones any more: the kubelet
        creates mangle (and IPv6) tables just to hold its canary chains."""
        removed: list[str] = []
        if shutil.which("nft") is None:
            return removed
        now = HostSnapshot.take().iptables
        for save, family in (("iptables-save", "ip"), ("ip6tables-save", "ip6")):
            before = self.iptables.get(save, {})
            for table, (chains, rules) in now.get(save, {}).items():
                if table in before or rules or not chains <= _BUILTIN_CHAINS:
                    continue
                if run("nft", "delete", "table", family, table, check=False).returncode == 0:
                    removed.append(f"nft delete table {family} {table}")
        return removed


# Differences that another tool on this machine may cause while the cluster runs (podman's
# container mounts, ``ip netns`` namespaces and veths of other tests): not the cluster's
# unless they name one of its own things.
_SHARED_KINDS = ("new link ", "link gone ", "new mount ", "mount gone ", "/run/netns:",
                 "/var/run/netns:")
_OURS_MARKERS = ("cni-", "veth", "kubelet", "containerd", "kubepods")


def is_ours(difference: str, workdir: str, bridge: str) -> bool:
    """Whether a :meth:`HostSnapshot.differences` line can be the cluster's doing.

    iptables, cgroup (already limited to the kubelet's roots), sysctl and kubelet/containerd
    directory changes always count; links, mounts and network namespaces count when they
    name the cluster's bridge or temp dir, a CNI veth or netns, or a kubelet/containerd
    path."""
    if not difference.startswith(_SHARED_KINDS):
        return True
    return any(marker in difference for marker in (workdir, bridge, *_OURS_MARKERS))


def unmount_under(*roots: str | Path) -> list[str]:
    """Unmount every mount point at or below one of ``roots``, deepest first; lazily when
    a plain umount is refused (a mount still busy for a moment after its process died)."""
    prefixes = [str(Path(r)) for r in roots]
    done = []
    for point in sorted(set(_mounts()), key=lambda p: -p.count("/")):
        if any(point == p or point.startswith(p + "/") for p in prefixes):
            if run("umount", point, check=False).returncode != 0:
                run("umount", "-l", point, check=False)
            done.append(point)
    return done


def pids_with_arg(needle: str) -> list[int]:
    """PIDs whose command line contains ``needle`` (a path unique to this cluster, such as
    its containerd socket): how the containerd shims it started are found to be stopped."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(needle.encode() in arg for arg in argv):
            found.append(int(entry.name))
    return found
