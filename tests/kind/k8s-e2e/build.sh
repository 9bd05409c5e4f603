#!/usr/bin/env bash
# Build Kubernetes' own end-to-end test binary for the DNS-autoscaling spec `make e2e` runs
# (main_test.go here is its entry point; the spec is test/e2e/autoscaling/dns_autoscaling.go
# of the k8s.io/kubernetes module, used from the module).
#
# The module around main_test.go is made per Kubernetes release under
# <repo>/.cache/k8s-e2e/<version>/module: its go.mod by tests/controlplane/wrapper.sh from
# that release's own go.mod (the staging modules replaced by their published releases),
# go.sum by `go mod tidy`. The binary, .cache/k8s-e2e/<version>/e2e.test, is built once per
# release and entry point (a few minutes cold, mostly the suite's framework and its cloud
# providers' SDKs); the last line on stdout is its path, progress goes to stderr.
#
# Environment: K8S_VERSION (default: the version tests/controlplane/go/go.mod pins; the kind
# cluster's, which scripts/e2e-kind.sh passes).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
log() { printf '[k8s-e2e] %s\n' "$*" >&2; }

export GOTOOLCHAIN=local
default_version="$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ {print $2; exit}' \
    "$repo/tests/controlplane/go/go.mod")"
version="${K8S_VERSION:-$default_version}"
[[ $version =~ ^v1\.[0-9]+\.[0-9]+$ ]] || { log "ERROR: K8S_VERSION=$version is not like v1.37.2"; exit 2; }
command -v go >/dev/null || { log "ERROR: 'go' is not on PATH"; exit 2; }

out="$repo/.cache/k8s-e2e/$version"
bin="$out/e2e.test"
inputs="$(cat "$here/main_test.go" "$repo/tests/controlplane/wrapper.sh" | sha256sum | cut -c1-16)"
mkdir -p "$out"
exec 9>"$out/.build.lock"
flock 9
if [[ -x $bin && "$(cat "$out/.inputs" 2>/dev/null)" == "$inputs" ]]; then
    log "Kubernetes $version e2e binary cached: $bin"
    echo "$bin"
    exit 0
fi

start=$SECONDS
mod="$out/module"
rm -rf "$mod"
bash "$repo/tests/controlplane/wrapper.sh" --module cpa-tests/k8s-e2e "$version" "$mod"
cp "$here/main_test.go" "$mod/"
log "go mod tidy (Kubernetes $version's e2e framework; downloads its modules once)"
(cd "$mod" && GOFLAGS='' go mod tidy) >&2 \
    || { log "ERROR: go mod tidy failed in $mod (every module the e2e framework imports must be served)"; exit 1; }
minor="${version#v1.}"
minor="${minor%%.*}"
vpkg="k8s.io/component-base/version"
log "building the e2e test binary (go test -c; a few minutes cold)"
(cd "$mod" && GOFLAGS=-mod=readonly go test -c -trimpath -o "$bin.tmp" \
    -ldflags "-s -w -X $vpkg.gitVersion=$version -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=$minor" .) >&2
mv -f "$bin.tmp" "$bin"
echo "$inputs" >"$out/.inputs"
log "built $bin in $((SECONDS - start))s"
echo "$bin"
