#!/usr/bin/env bash
# `make cluster-e2e`: a single-node Kubernetes cluster on this machine, the scenario of
# tests/cluster/test_cluster_e2e.py against it, and everything removed again.
#
# Prepares what the cluster needs (each step is a no-op when warm), then runs pytest, whose
# module fixture starts the cluster (tests/cluster/cluster.py) and stops it, by PID, at the
# end, checking that the host is left as it was:
#   1. Debian packages where missing (packages.sh): containerd, runc,
#      containernetworking-plugins, iptables, conntrack, nftables (podman/buildah/mmdebstrap,
#      the cross compilers: image/env.sh);
#   2. kube-apiserver, etcd, kube-controller-manager, kube-scheduler, kubelet, kube-proxy and
#      kubectl v1.35.4 from the wrapper Go module (tests/controlplane/build.sh node);
#   3. helm (scripts/install-helm.sh);
#   4. the images: ours (`make image`), the pause and CoreDNS stand-ins (images.sh).
# Needs root (network devices, iptables, mounts, cgroups). Extra pytest arguments: $PYTEST_ARGS.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cd "$repo"
log() { printf '[cluster-e2e] %s\n' "$*" >&2; }
start=$SECONDS

if [[ $(id -u) -ne 0 ]]; then
    log "ERROR: needs root (it creates a bridge, iptables rules, mounts and cgroups)"
    exit 2
fi

bash "$here/packages.sh"

step=$SECONDS
log "binaries (tests/controlplane/build.sh node)"
CPA_SKIP_UPSTREAM=1 bash tests/controlplane/build.sh node >/dev/null
log "binaries ready in $((SECONDS - step))s"

step=$SECONDS
bash scripts/install-helm.sh >/dev/null
log "helm ready in $((SECONDS - step))s"

step=$SECONDS
bash "$here/images.sh"
log "images ready in $((SECONDS - step))s"

step=$SECONDS
rc=0
# shellcheck disable=SC2086
python3 -m pytest -q -s -p no:cacheprovider tests/cluster ${PYTEST_ARGS:-} || rc=$?
log "scenario (cluster starts, every step, cleanup) took $((SECONDS - step))s"
log "make cluster-e2e took $((SECONDS - start))s in all (exit $rc)"
exit $rc
