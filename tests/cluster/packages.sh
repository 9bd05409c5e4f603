#!/usr/bin/env bash
# The Debian packages a single-node cluster needs on the host (tests/cluster), installed
# where missing: containerd, runc, the CNI plugins (bridge, host-local, loopback, portmap),
# iptables, conntrack, nftables; dnsperf (the DNS load of the load-axis scenario). Run by
# tests/cluster/run.sh and .ci/run.
set -euo pipefail
declare -A packages=([containerd]=containerd [runc]=runc [iptables]=iptables
                     [conntrack]=conntrack [nft]=nftables [dnsperf]=dnsperf
                     [/usr/lib/cni/bridge]=containernetworking-plugins)
missing=()
for cmd in "${!packages[@]}"; do
    if ! command -v "$cmd" >/dev/null 2>&1 && [[ ! -x $cmd ]]; then
        missing+=("${packages[$cmd]}")
    fi
done
if [[ ${#missing[@]} -gt 0 ]]; then
    printf '[cluster-e2e] installing Debian packages: %s\n' "${missing[*]}" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        "${missing[@]}" >&2
fi
