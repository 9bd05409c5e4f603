"""tests/kind/host_check.py's verdict, on snapshots made by hand: what a kind run can have
left (the engine's objects, chains, sysctls, veths, /lib/modules) fails the run; what other
tools change meanwhile is reported only."""

from __future__ import annotations

from collections import Counter

from tests.cluster.host import HostSnapshot
from tests.kind.host_check import KindHostSnapshot


def _snap(**changes: object) -> KindHostSnapshot:
    host = HostSnapshot(
        iptables={"iptables-save": {"filter": ({"INPUT", "FORWARD", "OUTPUT"}, Counter())}},
        links={"lo", "eth0"}, mounts=Counter({"/": 1}), sysctls={"vm/overcommit_memory": "0"},
        dirs={"/var/lib/kubelet": None})
    snap = KindHostSnapshot(host=host, engine="podman", containers=["other"], volumes=[],
                            networks=["podman"], modules_existed=False)
    for name, value in changes.items():
        target = host if hasattr(host, name) else snap
        setattr(target, name, value)
    return snap


def test_the_same_host_is_clean() -> None:
    assert _snap().leftovers(_snap()) == ([], [])


def test_what_a_kind_run_leaves_is_ours() -> None:
    after = _snap(
        iptables={"iptables-save": {"filter": ({"INPUT", "FORWARD", "OUTPUT",
                                                "NETAVARK_FORWARD"}, Counter())}},
        links={"lo", "eth0", "veth1234", "podman1"},
        sysctls={"vm/overcommit_memory": "1"},
        containers=["other", "cpa-e2e-control-plane"], volumes=["0a1b"],
        networks=["podman", "cpa-e2e"], modules_existed=True)
    ours, others = _snap().leftovers(after)
    assert others == []
    for expected in ("new chain NETAVARK_FORWARD", "new link veth1234", "new link podman1",
                     "sysctl vm/overcommit_memory: 0 -> 1",
                     "new podman container cpa-e2e-control-plane", "new podman volume 0a1b",
                     "new podman network cpa-e2e", "/lib/modules: existed False, now True"):
        assert any(expected in line for line in ours), (expected, ours)


def test_what_others_change_meanwhile_is_only_reported() -> None:
    after = _snap(links={"lo", "eth0", "tap7"}, mounts=Counter({"/": 1, "/mnt/other": 1}))
    ours, others = _snap().leftovers(after)
    assert ours == []
    assert sorted(others) == ["new link tap7", "new mount /mnt/other"]
