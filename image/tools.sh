#!/usr/bin/env bash
# Build (once) the registry tools from their Go module, cached by version:
#   .cache/tools/go-containerregistry-<version>/{registry,crane}
#   registry: a small in-memory OCI registry (tests push to it, podman and containerd pull)
#   crane:    pushes an OCI layout's index to any registry (`make push`), inspects indexes
# Prints the directory.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
version="v0.22.1"
dir="$repo/.cache/tools/go-containerregistry-$version"
if [[ ! -x $dir/registry || ! -x $dir/crane ]]; then
    mkdir -p "$dir"
    printf '[tools] building registry and crane %s from their Go module\n' "$version" >&2
    GOTOOLCHAIN=local GOBIN="$dir" GOFLAGS=-trimpath CGO_ENABLED=0 go install -ldflags='-s -w' \
        "github.com/google/go-containerregistry/cmd/registry@$version" \
        "github.com/google/go-containerregistry/cmd/crane@$version" >&2
fi
echo "$dir"
