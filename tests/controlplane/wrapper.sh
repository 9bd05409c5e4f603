#!/usr/bin/env bash
# The wrapper Go module that builds one Kubernetes release, made from that release's own
# go.mod.
#
# Why: k8s.io/kubernetes requires its staging modules (k8s.io/api, client-go, ...) at
# v0.0.0 and points them at ./staging/... with replace lines, which only work inside its
# own repository. A module that builds its commands from the Go module proxy must replace
# each of them by its published release (v0.<minor>.<patch> for Kubernetes
# v1.<minor>.<patch>). The list differs between releases (1.36 added cri-streaming and
# streaming), so it is read from the release's go.mod, never written by hand; so are the
# etcd it requires, its go line and its godebug settings.
#
# Usage: wrapper.sh [--module PATH] VERSION OUTDIR [PACKAGE...]
#   writes OUTDIR/go.mod (then `go mod tidy` there makes go.sum) and, given packages,
#   OUTDIR/tools.go importing only them: `go mod tidy` then needs only their modules (the
#   Go module proxy does not serve every staging module at every patch release: at
#   v0.32.13 it has no kubectl or cri-api, which kube-apiserver does not need). Without
#   packages the module's own Go files name what it builds (tests/kind/k8s-e2e).
#
# build.sh runs it for any version but the default, whose module (./go) is its output for
# v1.35.4 with every command in tools.go (tests/repo/test_kubernetes_versions.py checks).
# Shell and awk only: `make controlplane` needs no Python.
#
# Environment: WRAPPER_GOMOD=FILE reads that go.mod instead of downloading the release's.
set -euo pipefail

log() { printf '[controlplane-build] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

module=cpa-tests/controlplane
if [[ ${1:-} == --module ]]; then
    module="$2"
    shift 2
fi
[[ $# -ge 2 ]] || { echo "usage: wrapper.sh [--module PATH] VERSION OUTDIR [PACKAGE...]" >&2; exit 2; }
version="$1" out="$2"
shift 2
[[ $version =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] \
    || die "$version is not a Kubernetes release version like v1.37.2"
published="v0.${BASH_REMATCH[1]}.${BASH_REMATCH[2]}"

gomod="${WRAPPER_GOMOD:-}"
if [[ -z $gomod ]]; then
    json="$(go mod download -json "k8s.io/kubernetes@$version" 2>&1)" \
        || die "cannot download k8s.io/kubernetes@$version ($(tr -s ' \n' ' ' <<<"$json" | cut -c1-300)); \`go list -m -versions k8s.io/kubernetes\` lists the releases"
    gomod="$(sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p' <<<"$json")"
fi
[[ -f $gomod ]] || die "no go.mod for k8s.io/kubernetes@$version ($gomod)"

go_line="$(awk '$1 == "go" && NF == 2 { print $2; exit }' "$gomod")"
etcd="$(awk '$1 == "go.etcd.io/etcd/server/v3" && $2 ~ /^v/ { print $2; exit }
             $1 == "require" && $2 == "go.etcd.io/etcd/server/v3" { print $3; exit }' "$gomod")"
# godebug, single lines and blocks: one key=value a line.
mapfile -t godebug < <(awk '$1 == "godebug" && $2 == "(" { block = 1; next }
                            block && $1 == ")" { block = 0; next }
                            block && NF { print $1; next }
                            $1 == "godebug" && NF == 2 { print $2 }' "$gomod")
# Every module the go.mod points at ./staging/ (the word before "=>", or before its version).
mapfile -t staging < <(awk '/=>[[:space:]]*\.\/staging\// {
        for (i = 1; i <= NF; i++) if ($i == "=>") break
        m = ($(i - 1) ~ /^v[0-9]/) ? $(i - 2) : $(i - 1)
        if (m ~ /^k8s\.io\//) print m }' "$gomod" | sort -u)
[[ -n $go_line && ${#staging[@]} -gt 0 ]] \
    || die "k8s.io/kubernetes@$version's go.mod ($gomod) has no go line or no staging replace"
[[ -n $etcd ]] || die "k8s.io/kubernetes@$version's go.mod requires no go.etcd.io/etcd/server/v3"

mkdir -p "$out"
{
    echo "// Made by tests/controlplane/wrapper.sh from k8s.io/kubernetes@$version's go.mod:"
    echo "// each staging module replaced by its published release; go.sum by \`go mod tidy\`."
    echo "module $module"
    echo
    echo "go $go_line"
    echo
    if [[ ${#godebug[@]} -gt 0 ]]; then
        echo "godebug ("
        printf '\t%s\n' "${godebug[@]}"
        echo ")"
        echo
    fi
    printf 'require (\n\tgo.etcd.io/etcd/server/v3 %s\n\tk8s.io/kubernetes %s\n)\n\n' "$etcd" "$version"
    echo "replace ("
    for m in "${staging[@]}"; do printf '\t%s => %s %s\n' "$m" "$m" "$published"; done
    echo ")"
} >"$out/go.mod"
if [[ $# -gt 0 ]]; then
    {
        printf '//go:build tools\n\n// Package tools pins the commands build.sh builds from this module (made by wrapper.sh).\npackage tools\n\nimport (\n'
        printf '%s\n' "$@" | sort -u | sed 's/^/\t_ "/; s/$/"/'
        echo ")"
    } >"$out/tools.go"
fi
log "wrapper module for k8s.io/kubernetes@$version: ${#staging[@]} staging modules at $published, etcd $etcd, go $go_line"
