#!/usr/bin/env bash
# Build (once) a Go tool the image and workflow checks need, from its Go module, cached by
# name and version in .cache/tools/<name>-<version>/<name>; prints the binary's path.
#   cosign      signs and attests the image index, verifies both (make sign / verify)
#   actionlint  lints .github/workflows/ (make lint)
# Only the Go module proxy is used; GOTOOLCHAIN=local never downloads a toolchain. Two
# callers at once (another checkout sharing .cache/tools) serialize on a lock per tool.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tool="${1:?usage: go-tool.sh cosign|actionlint}"

case "$tool" in
    cosign)
        # v2: `--tlog-upload=false` signs with a key and no network at all; v3 fetches a
        # signing config from the public TUF repository unless given one.
        version="v2.6.5"
        package="github.com/sigstore/cosign/v2/cmd/cosign"
        ldflags="-s -w -X sigs.k8s.io/release-utils/version.gitVersion=$version"
        ;;
    actionlint)
        version="v1.7.12"
        package="github.com/rhysd/actionlint/cmd/actionlint"
        ldflags="-s -w -X github.com/rhysd/actionlint.version=$version"
        ;;
    *)
        echo "go-tool.sh: unknown tool $tool (cosign, actionlint)" >&2
        exit 2
        ;;
esac

dir="$repo/.cache/tools/$tool-$version"
bin="$dir/$tool"
if [[ ! -x $bin ]]; then
    command -v go >/dev/null 2>&1 || {
        echo "go-tool.sh: 'go' not found; install Go (go.dev/doc/install) to build $tool $version" >&2
        exit 1
    }
    mkdir -p "$repo/.cache/tools"
    exec 9>"$repo/.cache/tools/.$tool-$version.lock"
    flock 9
    if [[ ! -x $bin ]]; then
        start=$SECONDS
        printf '[go-tool] building %s %s from its Go module\n' "$tool" "$version" >&2
        tmp="$dir.tmp.$$"
        rm -rf "$tmp" && mkdir -p "$tmp"
        GOTOOLCHAIN=local GOBIN="$tmp" GOFLAGS="-trimpath -buildvcs=false" CGO_ENABLED=0 \
            nice -n 10 go install -ldflags="$ldflags" "$package@$version" >&2
        rm -rf "$dir" && mv "$tmp" "$dir"
        printf '[go-tool] %s %s built in %ss\n' "$tool" "$version" $((SECONDS - start)) >&2
    fi
fi
echo "$bin"
