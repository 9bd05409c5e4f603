#!/usr/bin/env bash
# Build one command from its Go module into .cache/tools/<name>-<version>/<name> and print
# the binary's path on stdout (progress on stderr). A no-op once built.
#
#   scripts/go-tool.sh kind sigs.k8s.io/kind v0.33.0
#   scripts/go-tool.sh crictl sigs.k8s.io/cri-tools/cmd/crictl v1.34.0 \
#       -X sigs.k8s.io/cri-tools/pkg/version.Version=v1.34.0
#
# Arguments after the version are extra -ldflags. Static (CGO_ENABLED=0): the binaries go
# into the kind node image as well as onto this machine. `go install package@version`
# needs a module without replace directives (kind's and cri-tools' have none). Only the Go
# module proxy is used. `.cache/tools` may be shared between checkouts: the build holds a
# lock in that directory, and a second caller finds the first one's binary.
set -euo pipefail

if [[ $# -lt 3 ]]; then
    echo "usage: go-tool.sh NAME PACKAGE VERSION [LDFLAG...]" >&2
    exit 2
fi
name="$1" package="$2" version="$3"
shift 3
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tools_dir="${repo_root}/.cache/tools"
out_dir="${tools_dir}/${name}-${version}"
bin="${out_dir}/${name}"

if [[ -x $bin ]]; then
    echo "$bin"
    exit 0
fi
if ! command -v go >/dev/null 2>&1; then
    echo "go-tool: 'go' not found; install a Go toolchain to build $name $version" >&2
    exit 1
fi
mkdir -p "$tools_dir"
exec 9>"$tools_dir/.$name.lock"
flock 9
if [[ -x $bin ]]; then
    echo "$bin"
    exit 0
fi

echo "go-tool: building $name $version ($package) with $(go version)" >&2
start=$SECONDS
tmp="$(mktemp -d "$tools_dir/.$name-build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
GOTOOLCHAIN=local GOBIN="$tmp" CGO_ENABLED=0 GOFLAGS=-mod=mod \
    go install -trimpath -ldflags "-s -w $*" "$package@$version"
mkdir -p "$out_dir"
mv -f "$tmp/$(basename "$package")" "$bin"
echo "go-tool: built $name $version in $((SECONDS - start)) s" >&2
echo "$bin"
