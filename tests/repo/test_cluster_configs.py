"""The cluster e2e's node configuration keeps the settings this machine requires.

Each of these was found by a failure on this kind of machine (see tests/cluster/configs.py
and /work/shared/node-notes.md); `make cluster-e2e` needs root and minutes, this is instant.
"""

from __future__ import annotations

import ipaddress
import tomllib
from pathlib import Path

from tests.cluster import configs


def test_containerd_settings_required_here(tmp_path: Path) -> None:
    text = configs.containerd_toml(tmp_path, tmp_path / "c.sock", "localhost/p:1", tmp_path,
                                   tmp_path / "certs.d")
    conf = tomllib.loads(text)
    cri = conf["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["restrict_oom_score_adj"] is True
    assert cri["sandbox_image"] == "localhost/p:1"
    assert cri["containerd"]["snapshotter"] == "overlayfs"
    assert cri["containerd"]["runtimes"]["runc"]["options"]["SystemdCgroup"] is False
    assert cri["cni"]["bin_dir"] == "/usr/lib/cni"
    # Nothing under the host's default containerd paths.
    assert conf["root"].startswith(str(tmp_path)) and conf["state"].startswith(str(tmp_path))
    assert conf["grpc"]["address"].startswith(str(tmp_path))
    assert "io.containerd.internal.v1.opt" in conf["disabled_plugins"]
    assert cri["registry"]["config_path"] == str(tmp_path / "certs.d")


def test_local_registry_is_plain_http_on_loopback() -> None:
    hosts = tomllib.loads(configs.registry_hosts_toml("127.0.0.1:5000"))
    assert hosts["server"] == "http://127.0.0.1:5000"
    assert hosts["host"]["http://127.0.0.1:5000"]["capabilities"] == ["pull", "resolve"]


def test_pods_route_only_to_the_service_range(tmp_path: Path) -> None:
    conflist = configs.cni_conflist(tmp_path)
    bridge, portmap = conflist["plugins"]
    assert bridge["bridge"] == configs.BRIDGE and bridge["ipMasq"] is False
    assert bridge["ipam"]["routes"] == [{"dst": configs.SERVICE_RANGE}]
    assert bridge["ipam"]["dataDir"] == str(tmp_path)
    assert portmap["type"] == "portmap"
    subnet = ipaddress.ip_network(configs.POD_SUBNET)
    assert ipaddress.ip_address(configs.GATEWAY) in subnet
    assert ipaddress.ip_address(configs.SERVICE_IP) in ipaddress.ip_network(
        configs.SERVICE_RANGE)


def test_kubelet_for_a_hybrid_cgroup_host_without_systemd(tmp_path: Path) -> None:
    conf = configs.kubelet_config(10250, tmp_path / "c.sock", tmp_path)
    assert conf["cgroupDriver"] == "cgroupfs" and conf["failCgroupV1"] is False
    assert conf["address"] == configs.GATEWAY and conf["readOnlyPort"] == 0
    assert conf["containerRuntimeEndpoint"] == f"unix://{tmp_path / 'c.sock'}"
    assert conf["imageGCHighThresholdPercent"] == 100  # imported images cannot be re-pulled
    assert conf["podLogsDir"].startswith(str(tmp_path))


def test_kube_proxy_leaves_host_sysctls_alone(tmp_path: Path) -> None:
    conf = configs.kube_proxy_config(tmp_path / "k", 1, 2)
    assert conf["mode"] == "iptables" and conf["clusterCIDR"] == configs.POD_SUBNET
    assert conf["conntrack"]["maxPerCore"] == 0
    assert all(conf["conntrack"][k] == "0s" for k in
               ("tcpEstablishedTimeout", "tcpCloseWaitTimeout", "udpTimeout", "udpStreamTimeout"))
    assert conf["iptables"]["localhostNodePorts"] is False
    assert conf["healthzBindAddress"].startswith("127.0.0.1:")
    assert conf["metricsBindAddress"].startswith("127.0.0.1:")


def test_leftover_attribution() -> None:
    from tests.cluster.host import is_ours

    ours = ["iptables-save filter: new chain KUBE-FIREWALL", "new cgroup dir /x/kubepods",
            "sysctl kernel/panic: 1 -> 10", "new link cpae2e0", "new link veth1234abcd",
            "new mount /tmp/cpa-cluster-x/kubelet/pods", "/run/netns: changed ['cni-1']",
            "/var/lib/kubelet: created ['device-plugins']"]
    foreign = ["new link cpah01ab23", "new mount /var/lib/containers/storage/overlay/a/merged",
               "/run/netns: changed ['cpa-pod-01ab23']"]
    assert all(is_ours(d, "/tmp/cpa-cluster-x", "cpae2e0") for d in ours)
    assert not any(is_ours(d, "/tmp/cpa-cluster-x", "cpae2e0") for d in foreign)
