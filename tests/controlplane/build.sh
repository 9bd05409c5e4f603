#!/usr/bin/env bash
# Build (once) the real kube-apiserver and etcd used by the integration tests, and the upstream
# cluster-proportional-autoscaler used as a reference peer by the benchmarks. With the argument
# `node`, also the node components and kubectl of the single-node cluster that
# `make cluster-e2e` runs (tests/cluster/): kube-controller-manager, kube-scheduler, kubelet,
# kube-proxy and kubectl, from the same wrapper module and Kubernetes version. With `kind`,
# those and kubeadm: everything the kind node image (image/kind-node/) holds.
#
# Why from source: this environment has Go and the Go module proxy but no Docker and no access
# to release downloads, so kind/kwok/setup-envtest binaries are not an option. The wrapper
# module in ./go pins one Kubernetes release (and the etcd it requires); go.sum makes the build
# reproducible. Binaries are cached per version under <repo>/.cache, so only the first run pays.
#
# Output:  <repo>/.cache/controlplane/<k8s-version>/bin/{kube-apiserver,etcd}
#          (with `node`: also kube-controller-manager, kube-scheduler, kubelet, kube-proxy, kubectl;
#          with `kind`: also kubeadm)
#          <repo>/.cache/upstream-cpa/<version>/cluster-proportional-autoscaler
# The last line on stdout is the control-plane bin dir; all progress goes to stderr.
# Each binary is cached on its own: only missing ones are built.
#
# Usage:   [K8S_VERSION=v1.37.2] build.sh [node|kind]
#
# Any Kubernetes release the Go module proxy serves: the default is the version ./go pins
# (its go.mod and go.sum committed); any other gets a wrapper module made from that
# release's own go.mod (wrapper.sh: its staging modules replaced by their published
# releases, the etcd it requires) under <repo>/.cache/controlplane/<version>/module, with
# go.sum from `go mod tidy`; both cached per version.
#
# The upstream autoscaler cannot come from the Go module proxy (it refuses
# github.com/kubernetes-sigs/cluster-proportional-autoscaler, every version), so it is built
# from a checkout of its source when one is given, and otherwise this says how to provide it.
#
# Environment:
#   K8S_VERSION=vX.Y.Z                build this Kubernetes release (default: ./go's)
#   CPA_CONTROLPLANE_BIN=DIR          use kube-apiserver + etcd from DIR (no build)
#   CPA_UPSTREAM_AUTOSCALER_BIN=PATH  use this upstream binary (no build)
#   CPA_UPSTREAM_SRC=DIR              build upstream from this checkout of tag v1.10.3
#   CPA_SKIP_UPSTREAM=1               do not look for the upstream autoscaler
#   CPA_BUILD_FORCE=1                 rebuild even if the binaries are cached
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

# The default version: the committed wrapper module's go.mod (the one source of truth).
gomod_version() {   # gomod_version MODULE GO.MOD
    awk -v m="$1" '$1 == m && $2 ~ /^v/ {print $2; exit}' "$2"
}
default_version="$(gomod_version k8s.io/kubernetes "$mod/go.mod")"
k8s_version="${K8S_VERSION:-$default_version}"
upstream_version="v1.10.3"
if [[ ! $k8s_version =~ ^v1\.[0-9]+\.[0-9]+$ ]]; then
    log "ERROR: K8S_VERSION=$k8s_version is not a Kubernetes release like v1.37.2"
    log "  (\`go list -m -versions k8s.io/kubernetes\` lists those the Go module proxy serves)"
    exit 2
fi

version_dir="$repo/.cache/controlplane/$k8s_version"
bin_dir="$version_dir/bin"
upstream_dir="$repo/.cache/upstream-cpa/$upstream_version"
if [[ -n "${CPA_CONTROLPLANE_BIN:-}" ]]; then
    if [[ -x "$CPA_CONTROLPLANE_BIN/kube-apiserver" && -x "$CPA_CONTROLPLANE_BIN/etcd" ]]; then
        bin_dir="$CPA_CONTROLPLANE_BIN"
    else
        log "ERROR: CPA_CONTROLPLANE_BIN=$CPA_CONTROLPLANE_BIN lacks kube-apiserver and etcd"
        exit 2
    fi
fi
mkdir -p "$bin_dir" "$upstream_dir" "$version_dir"

# Serialise concurrent builds of one version (e.g. two test sessions starting at once);
# builds of different versions run side by side (CI builds the extra ones in the background).
if command -v flock >/dev/null 2>&1; then
    exec 9>"$version_dir/.build.lock"
    if ! flock -n 9; then
        log "another build of $k8s_version is running; waiting for it to finish"
        flock 9
    fi
fi

# A finished build's binary moved into place; or, if the build failed, the temp file removed
# and why said with the last `lines` lines of its log (returns 1).
install_built() {
    local tmp="$1" out="$2" rc="$3" logfile="$4" lines="$5" failed="$6"
    if [[ $rc -ne 0 || ! -x "$tmp" ]]; then
        rm -f "$tmp"
        log "$failed (exit $rc); last lines of $logfile:"
        tail -n "$lines" "$logfile" >&2 || true
        return 1
    fi
    mv -f "$tmp" "$out"
}

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
    install_built "$tmp" "$out" "$rc" "$logfile" 40 "ERROR: building $what failed" || return 1
    log "built $what in $(( SECONDS - start ))s: $(du -h "$out" | cut -f1)"
}

# What to build: name -> Go package. The control plane always; `node` adds the rest.
components=(etcd kube-apiserver)
node_components=(kube-controller-manager kube-scheduler kube-proxy kubelet kubectl)
case "${1:-}" in
    "") ;;
    node) components+=("${node_components[@]}") ;;
    kind) components+=("${node_components[@]}" kubeadm) ;;
    *) log "ERROR: unknown argument '$1' (usage: build.sh [node|kind])"; exit 2 ;;
esac
package_of() {
    case "$1" in
        etcd) echo go.etcd.io/etcd/server/v3 ;;
        *) echo "k8s.io/kubernetes/cmd/$1" ;;
    esac
}

# Another release: its wrapper module, made from its go.mod and kept with its binaries;
# made again (tidy only adds) when this build needs a command its tools.go lacks.
if [[ $k8s_version != "$default_version" && -z ${CPA_CONTROLPLANE_BIN:-} ]]; then
    mod="$version_dir/module"
    packages=()
    for name in "${components[@]}"; do packages+=("$(package_of "$name")"); done
    fresh=1
    if [[ -s $mod/go.sum && -f $mod/tools.go ]]; then
        fresh=0
        mapfile -t had < <(awk '$1 == "_" { gsub(/"/, "", $2); print $2 }' "$mod/tools.go")
        for pkg in "${packages[@]}"; do
            printf '%s\n' "${had[@]}" | grep -qxF "$pkg" || { fresh=1; log "$mod: adding $pkg"; }
        done
        packages+=("${had[@]}")
    fi
    if (( fresh )); then
        start=$SECONDS
        rm -rf "$mod.tmp"
        mkdir -p "$mod.tmp"
        bash "$here/wrapper.sh" "$k8s_version" "$mod.tmp" "${packages[@]}"
        log "go mod tidy of the $k8s_version wrapper module (downloads its modules once)"
        (cd "$mod.tmp" && GOFLAGS='' go mod tidy) >&2 \
            || { log "ERROR: go mod tidy failed in $mod.tmp (the Go module proxy must serve"
                 log "  every module the commands import at that release)"; exit 1; }
        rm -rf "$mod"
        mv "$mod.tmp" "$mod"
        log "wrapper module for $k8s_version ready in $(( SECONDS - start ))s: $mod"
    fi
fi
etcd_version="$(gomod_version go.etcd.io/etcd/server/v3 "$mod/go.mod")"
if [[ -z $etcd_version ]]; then
    log "ERROR: cannot read the etcd version from $mod/go.mod"
    exit 2
fi

missing=()
for name in "${components[@]}"; do
    if [[ "${CPA_BUILD_FORCE:-0}" == 1 || ! -x "$bin_dir/$name" ]]; then
        missing+=("$name")
    fi
done

if [[ -n "${CPA_CONTROLPLANE_BIN:-}" ]]; then
    # Someone else's binaries: never rebuilt here, not even with CPA_BUILD_FORCE.
    for name in "${components[@]}"; do
        if [[ ! -x "$bin_dir/$name" ]]; then
            log "ERROR: CPA_CONTROLPLANE_BIN=$bin_dir lacks $name (unset it to build here)"
            exit 2
        fi
    done
    log "${components[*]} from CPA_CONTROLPLANE_BIN=$bin_dir (not built)"
elif [[ ${#missing[@]} -eq 0 ]]; then
    log "${components[*]} ($k8s_version, etcd $etcd_version) already cached in $bin_dir"
else
    log "building ${missing[*]} ($k8s_version, etcd $etcd_version): kube-apiserver + etcd take"
    log "~10-20 minutes cold on 2 cores and ~4 GB RAM (plus a few hundred MB of Go modules on"
    log "first download); the node components add ~20 minutes more (see docs/development.md)"
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
upstream_howto() {
    log "upstream cluster-proportional-autoscaler $upstream_version: not available, so"
    log "  'make bench' measures ours only. The Go module proxy refuses its module; build it from"
    log "  its source (its dependencies are vendored, or come from the Go module proxy):"
    log "    git clone --branch $upstream_version \\"
    log "      https://github.com/kubernetes-sigs/cluster-proportional-autoscaler /path/to/cpa-src"
    log "    CPA_UPSTREAM_SRC=/path/to/cpa-src make bench      # builds it into the cache below"
    log "  or build it yourself (cd /path/to/cpa-src && go build ./cmd/cluster-proportional-autoscaler)"
    log "  and set CPA_UPSTREAM_AUTOSCALER_BIN=/path/to/cluster-proportional-autoscaler, or copy"
    log "  it to $upstream_dir/cluster-proportional-autoscaler"
}

build_upstream() {
    local src="$1" out="$2" tmp="$2.tmp.$$" logfile="$upstream_dir/.build.log" rc=0 tag=""
    if [[ ! -f "$src/go.mod" || ! -d "$src/cmd/cluster-proportional-autoscaler" ]]; then
        log "WARNING: CPA_UPSTREAM_SRC=$src is not a cluster-proportional-autoscaler checkout"
        return 1
    fi
    if command -v git >/dev/null 2>&1; then
        tag="$(git -C "$src" describe --tags --exact-match 2>/dev/null || true)"
        if [[ "$tag" != "$upstream_version" ]]; then
            log "WARNING: $src is at '${tag:-an untagged commit}', not $upstream_version"
        fi
    fi
    local mod_flag="-mod=mod"
    [[ -d "$src/vendor" ]] && mod_flag="-mod=vendor"
    log "building upstream cluster-proportional-autoscaler from $src ($mod_flag; ~1-3 min)"
    # Its own module: GOFLAGS cleared of the wrapper's -mod=readonly.
    local ldflags="-s -w -X github.com/kubernetes-sigs/cluster-proportional-autoscaler/pkg/version.VERSION=${tag:-$upstream_version}"
    (cd "$src" && GOFLAGS="$mod_flag" go build -trimpath -ldflags "$ldflags" -o "$tmp" \
        ./cmd/cluster-proportional-autoscaler) >"$logfile" 2>&1 || rc=$?
    install_built "$tmp" "$out" "$rc" "$logfile" 20 \
        "WARNING: building upstream failed (benchmarks only)" || return 1
    log "built upstream autoscaler: $out ($("$out" --version 2>&1 | head -n 1))"
}

if [[ "${CPA_SKIP_UPSTREAM:-0}" != 1 ]]; then
    up_bin="$upstream_dir/cluster-proportional-autoscaler"
    if [[ -n "${CPA_UPSTREAM_AUTOSCALER_BIN:-}" ]]; then
        if [[ -x "$CPA_UPSTREAM_AUTOSCALER_BIN" ]]; then
            log "upstream cluster-proportional-autoscaler: $CPA_UPSTREAM_AUTOSCALER_BIN"
        else
            log "WARNING: CPA_UPSTREAM_AUTOSCALER_BIN=$CPA_UPSTREAM_AUTOSCALER_BIN is not executable"
            upstream_howto
        fi
    elif [[ -x "$up_bin" && "${CPA_BUILD_FORCE:-0}" != 1 ]]; then
        log "upstream cluster-proportional-autoscaler $upstream_version already cached: $up_bin"
    elif [[ -n "${CPA_UPSTREAM_SRC:-}" ]]; then
        build_upstream "$CPA_UPSTREAM_SRC" "$up_bin" || upstream_howto
    else
        upstream_howto
    fi
fi

echo "$bin_dir"
