"""The node's addresses and the configuration files of containerd, CNI, kubelet, kube-proxy.

Why a module of pure functions: each setting here is one that had to be right on this kind
of machine (root without CAP_SYS_RESOURCE, cgroup v1/v2 hybrid, no systemd, no registry,
a host shared with other work), so each carries its reason, and tests/unit checks them
without starting anything.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

BRIDGE = "cpae2e0"
POD_SUBNET = "10.244.0.0/24"
GATEWAY = "10.244.0.1"
SERVICE_RANGE = "10.0.0.0/24"
SERVICE_IP = "10.0.0.1"
NODE_NAME = "cpa-e2e-node"
CNI_BIN_DIR = "/usr/lib/cni"  # Debian's containernetworking-plugins
CNI_NETWORK = "cpa-e2e"


def cni_conflist(ipam_dir: Path) -> dict[str, Any]:
    """bridge + host-local on our bridge, then portmap (no NAT: ``ipMasq`` false).

    Pods get one route, to the service range via the gateway: they reach the API server
    (directly or through the ClusterIP) and nothing beyond this machine. IPAM state goes to
    ``ipam_dir``, not /var/lib/cni/networks."""
    return {
        "cniVersion": "0.4.0",
        "name": CNI_NETWORK,
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": False,
                "ipam": {
                    "type": "host-local",
                    "dataDir": str(ipam_dir),
                    "ranges": [[{"subnet": POD_SUBNET, "gateway": GATEWAY,
                                 "rangeStart": "10.244.0.10"}]],
                    "routes": [{"dst": SERVICE_RANGE}],
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }


def registry_hosts_toml(host: str) -> str:
    """hosts.toml for the test's local registry: plain HTTP on loopback (no TLS to set up
    for a registry that lives as long as one test)."""
    return f"""\
# Written by tests/cluster: the local registry of this test run.
server = "http://{host}"

[host."http://{host}"]
  capabilities = ["pull", "resolve"]
"""


def containerd_toml(base: Path, socket: Path, pause_image: str, cni_conf_dir: Path,
                    registry_dir: Path) -> str:
    """containerd 1.6 (config version 2) with root, state, sockets and runc's state under
    ``base``, for the CRI plugin only; images are pulled from the registries configured in
    ``registry_dir`` (``<host>/hosts.toml``)."""
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    return f"""\
# Written by tests/cluster: containerd for one test node, nothing shared with the host's.
version = 2
root = "{base / 'root'}"
state = "{base / 'state'}"
# The "opt" plugin would create /opt/containerd; the others only fail to load here.
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs",
                    "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.aufs",
                    "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = "{socket}"

[ttrpc]
  address = "{socket}.ttrpc"

[{cri}]
  # Pulled by digest from the test's local registry, as every image of the node.
  sandbox_image = "{pause_image}"
  # Required here: a negative oom_score_adj needs CAP_SYS_RESOURCE, which root lacks, and
  # without this every sandbox fails in runc ("can't get final child's PID from pipe").
  restrict_oom_score_adj = true
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"

[{cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"

[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[{cri}.containerd.runtimes.runc.options]
  # No systemd here: the cgroupfs driver, as the kubelet's.
  SystemdCgroup = false
  Root = "{base / 'runc'}"

[{cri}.registry]
  config_path = "{registry_dir}"

[{cri}.cni]
  bin_dir = "{CNI_BIN_DIR}"
  conf_dir = "{cni_conf_dir}"
  max_conf_num = 1
"""


def kubelet_config(port: int, containerd_socket: Path, workdir: Path) -> dict[str, Any]:
    """KubeletConfiguration of a test node that listens on the gateway address only."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": GATEWAY,
        "port": port,
        "readOnlyPort": 0,
        "healthzPort": 0,
        # A test node on a bridge only this machine reaches; the API server calls it for
        # logs without a client certificate.
        "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
        "authorization": {"mode": "AlwaysAllow"},
        # No systemd; cgroup v1 controllers with a cgroup2 "unified" mount (hybrid).
        "cgroupDriver": "cgroupfs",
        "failCgroupV1": False,
        "failSwapOn": False,
        "containerRuntimeEndpoint": f"unix://{containerd_socket}",
        "enforceNodeAllocatable": [],
        "evictionHard": {},  # no evictions on a test node
        # Never collect the pulled images: the registry is gone after the test.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "podLogsDir": str(workdir / "pod-logs"),
        "volumePluginDir": str(workdir / "volume-plugins"),
        "resolvConf": "",
        "registerNode": True,
        "rotateCertificates": False,
        "serverTLSBootstrap": False,
        "nodeStatusUpdateFrequency": "5s",
    }


def kube_proxy_config(kubeconfig: Path, healthz_port: int, metrics_port: int
                      ) -> dict[str, Any]:
    """KubeProxyConfiguration: iptables mode, loopback-only endpoints, host sysctls left
    alone."""
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "mode": "iptables",
        "clusterCIDR": POD_SUBNET,
        "hostnameOverride": NODE_NAME,
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "healthzBindAddress": f"127.0.0.1:{healthz_port}",
        "metricsBindAddress": f"127.0.0.1:{metrics_port}",
        "nodePortAddresses": [f"{GATEWAY}/32"],
        # 0 = do not set: the host's conntrack sysctls stay as they are.
        "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s",
                      "tcpCloseWaitTimeout": "0s", "udpTimeout": "0s",
                      "udpStreamTimeout": "0s"},
        # true would set net.ipv4.conf.all.route_localnet=1 on the host.
        "iptables": {"localhostNodePorts": False},
    }
