#!/usr/bin/env bash
# `make dns-bench`: DNS served under a spike on a real node, CoreDNS scaled by upstream,
# ours, ours with the load axis and an HPA (bench/dns.py; docs/performance.md).
#
# Prepares what `make cluster-e2e` prepares (each step a no-op when warm: the Debian
# packages, the node binaries, the images), plus metrics-server v0.8.0 built from its Go
# module (scripts/go-tool.sh) and its module directory (its manifests/base is what is
# applied), then runs `python -m bench.dns`. Needs root. Minutes: run it under the host
# lock on a shared machine (`flock /tmp/bench.lock make dns-bench`).
#   DNS_BENCH_ARGS   extra arguments (e.g. --profiles spike,ramp; --profiles short to try
#                    the setups out; --setups ours_load,hpa)
#   CPA_UPSTREAM_AUTOSCALER_BIN / CPA_UPSTREAM_SRC   upstream v1.10.3 (bench/README.md)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
cd "$repo"
log() { printf '[dns-bench] %s\n' "$*" >&2; }
ms_version=v0.8.0   # the approved release (bench/dnscluster.py METRICS_SERVER_VERSION)

if [[ $(id -u) -ne 0 ]]; then
    log "ERROR: needs root (the node's bridge, iptables rules, mounts and cgroups)"
    exit 2
fi
bash tests/cluster/packages.sh
log "binaries (tests/controlplane/build.sh node; upstream v1.10.3 too)"
bash tests/controlplane/build.sh node >/dev/null
bash tests/cluster/images.sh
ms_bin="$(bash "$here/go-tool.sh" metrics-server sigs.k8s.io/metrics-server/cmd/metrics-server \
    "$ms_version" -X "k8s.io/client-go/pkg/version.gitVersion=$ms_version")"
ms_dir="$(GOTOOLCHAIN=local GOFLAGS=-mod=mod go mod download -json \
    "sigs.k8s.io/metrics-server@$ms_version" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')"
# shellcheck disable=SC2086
exec python3 -m bench.dns --metrics-server-bin "$ms_bin" --metrics-server-dir "$ms_dir" \
    ${DNS_BENCH_ARGS:-}
