#!/usr/bin/env bash
# Build (once) the real kube-apiserver and etcd used by the integration tests, and the upstream
# cluster-proportional-autoscaler used as a reference peer by the benchmarks. With the argument
# `node`, also the node components and kubectl of the single-node cluster that
# `make cluster-e2e` runs (tests/cluster/): kube-controller-manager, kube-scheduler, kubelet,
# kube-proxy and kubectl, from the same wrapper module and Kubernetes version.
#
# Why from source: this environment has Go and the Go module proxy but no Docker and no access
# to release downloads, so kind/kwok/setup-envtest binaries are not an option. The wrapper
# module in ./go pins one Kubernetes release (and the etcd it requires); go.sum makes the build
# reproducible. Binaries are cached per version under <repo>/.cache, so only the first run pays.
#
# Output:  <repo>/.cache/controlplane/<k8s-version>/bin/{kube-apiserver,etcd}
#          (with `node`: also kube-controller-manager, kube-scheduler, kubelet, kube-proxy, kubectl)
#          <repo>/.cache/upstream-cpa/<version>/cluster-proportional-autoscaler
# The last line on stdout is the control-plane bin dir; all progress goes to stderr.
# Each binary is cached on its own: only missing ones are built.
#
# Usage:   build.sh [node]
#
# Environment:
#   CPA_SKIP_UPSTREAM=1   do not build the upstream autoscaler
#   CPA_BUILD_FORCE=1     rebuild even if the binaries are cached
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
mod="$here/go"

export GOTOOLCHAIN=local
# A stray GOFLAGS=-mod=mod would let the build silently change go.sum; insist on readonly.
export GOFLAGS="${GOFLAGS:-} -mod=readonly"

log() { printf '[controlplane-build] %s\n' "$*" >&2; }

if ! command -v go >/dev/null 2>&1; then
    log "ERROR: 'go' is not on PATH; a Go toolchain (>= the 'go' line in $mod/go.mod) is needed"
    exit 2
fi

# Single source of truth for versions: the wrapper module's go.mod.
k8s_version="$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ {print $2; exit}' "$mod/go.mod")"
etcd_version="$(awk '$1 == "go.etcd.io/etcd/server/v3" && $2 ~ /^v/ {print $2; exit}' "$mod/go.mod")"
upstream_version="v1.10.3"
if [[ -z "$k8s_version" || -z "$etcd_version" ]]; then
    log "ERROR: cannot read the Kubernetes/etcd versions from $mod/go.mod"
    exit 2
fi

bin_dir="$repo/.cache/controlplane/$k8s_version/bin"
upstream_dir="$repo/.cache/upstream-cpa/$upstream_version"
mkdir -p "$bin_dir" "$upstream_dir"

# Serialise concurrent builds (e.g. two test sessions starting at once).
if command -v flock >/dev/null 2>&1; then
    exec 9>"$repo/.cache/controlplane/.build.lock"
    if ! flock -n 9; then
        log "another build is running; waiting for it to finish"
        flock 9
    fi
fi

# Run "go build -v" with a compact progress report: a line every 25 packages plus a heartbeat
# every 60 s (the final link of kube-apiserver is silent and takes a few minutes).
go_build_progress() {
    local what="$1" out="$2" pkg="$3" ldflags="$4"
    local logfile="$bin_dir/.build-$what.log" tmp="$out.tmp.$$"
    local start=$SECONDS rc=0 hb
    log "building $what ($pkg); full log: $logfile"
    ( while sleep 60; do log "  ... $what still building ($(( SECONDS - start ))s elapsed)"; done ) &
    hb=$!
    (cd "$mod" && go build -v -trimpath -ldflags "$ldflags" -o "$tmp" "$pkg") 2>&1 \
        | tee "$logfile" \
        | awk -v what="$what" '{ n++; if (n % 25 == 0) {
              printf "[controlplane-build]   %s: %d packages compiled (%s)\n", what, n, $0 > "/dev/stderr"
              fflush("/dev/stderr") } }' \
        || rc=$?
    kill "$hb" 2>/dev/null || true
    wait "$hb" 2>/dev/null || true
    if [[ $rc -ne 0 || ! -x "$tmp" ]]; then
        rm -f "$tmp"
        log "ERROR: building $what failed (exit $rc); last lines of $logfile:"
        tail -n 40 "$logfile" >&2 || true
        return 1
    fi
    mv -f "$tmp" "$out"
    log "built $what in $(( SECONDS - start ))s: $(du -h "$out" | cut -f1)"
}

# What to build: name -> Go package. The control plane always; `node` adds the rest.
components=(etcd kube-apiserver)
node_components=(kube-controller-manager kube-scheduler kube-proxy kubelet kubectl)
case "${1:-}" in
    "") ;;
    node) components+=("${node_components[@]}") ;;
    *) log "ERROR: unknown argument '$1' (usage: build.sh [node])"; exit 2 ;;
esac
package_of() {
    case "$1" in
        etcd) echo go.etcd.io/etcd/server/v3 ;;
        *) echo "k8s.io/kubernetes/cmd/$1" ;;
    esac
}

missing=()
for name in "${components[@]}"; do
    if [[ "${CPA_BUILD_FORCE:-0}" == 1 || ! -x "$bin_dir/$name" ]]; then
        missing+=("$name")
    fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
    log "${components[*]} ($k8s_version, etcd $etcd_version) already cached in $bin_dir"
else
    log "building ${missing[*]} ($k8s_version, etcd $etcd_version): kube-apiserver + etcd take"
    log "~10-20 minutes cold on 2 cores and ~4 GB RAM (plus a few hundred MB of Go modules on"
    log "first download); the node components add ~20 minutes more (see the README)"
    total_start=$SECONDS
    (cd "$mod" && go mod download) || { log "ERROR: go mod download failed"; exit 1; }

    build_date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    minor="${k8s_version#v1.}"
    minor="${minor%%.*}"
    vpkg="k8s.io/component-base/version"
    k8s_ldflags="-s -w -X $vpkg.gitVersion=$k8s_version -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=$minor"
    k8s_ldflags+=" -X $vpkg.gitTreeState=clean -X $vpkg.buildDate=$build_date"

    for name in "${missing[@]}"; do
        if [[ $name == etcd ]]; then
            go_build_progress etcd "$bin_dir/etcd" "$(package_of etcd)" "-s -w"
        else
            go_build_progress "$name" "$bin_dir/$name" "$(package_of "$name")" "$k8s_ldflags"
        fi
    done
    log "built ${missing[*]} in $(( SECONDS - total_start ))s"
fi

# The upstream autoscaler is only a benchmark reference: never fail the control plane for it.
if [[ "${CPA_SKIP_UPSTREAM:-0}" != 1 ]]; then
    up_bin="$upstream_dir/cluster-proportional-autoscaler"
    if [[ -x "$up_bin" && "${CPA_BUILD_FORCE:-0}" != 1 ]]; then
        log "upstream cluster-proportional-autoscaler $upstream_version already cached"
    else
        log "building upstream cluster-proportional-autoscaler $upstream_version (~1-2 min)"
        up_tmp="$(mktemp -d "$upstream_dir/.gobin.XXXXXX")"
        # Outside the wrapper module, and with GOFLAGS cleared of -mod (go install pkg@v rejects it).
        if (cd "$upstream_dir" && GOFLAGS="" GOBIN="$up_tmp" go install -trimpath -ldflags "-s -w" \
            "github.com/kubernetes-sigs/cluster-proportional-autoscaler/cmd/cluster-proportional-autoscaler@$upstream_version" \
            >"$upstream_dir/.build.log" 2>&1); then
            mv -f "$up_tmp/cluster-proportional-autoscaler" "$up_bin"
            log "built upstream autoscaler: $up_bin"
        else
            log "WARNING: upstream autoscaler build failed (benchmarks only); see $upstream_dir/.build.log"
            tail -n 20 "$upstream_dir/.build.log" >&2 || true
        fi
        rm -rf "$up_tmp"
    fi
fi

echo "$bin_dir"
