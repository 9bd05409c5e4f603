#!/usr/bin/env bash
# Build CoreDNS from its Go module into .cache/tools/coredns-<version>/coredns and print
# the binary's path on stdout (progress on stderr). A no-op once built.
#
# Why: `make cluster-e2e` runs the real CoreDNS as the `coredns` Deployment it scales (its
# `prometheus :9153` plugin is what the load axis scrapes), and the kind end-to-end test
# runs it too; like the control plane, it comes from the Go module proxy only:
#   scripts/build-coredns.sh                 # COREDNS_VERSION, default below
#   COREDNS_VERSION=v1.14.7 scripts/build-coredns.sh
# Built with CoreDNS's default plugins (its plugin.cfg, prometheus included), statically
# (CGO_ENABLED=0: the image it goes into is FROM scratch). `go install module@version`
# works because CoreDNS's go.mod has no replace or exclude directive. `.cache/tools` may be
# shared between checkouts: the build holds a lock in that directory, and the second
# caller finds the first one's binary.
set -euo pipefail

# v1.13.1: the version kubeadm v1.35 deploys (the kind node image needs exactly it), so
# one build serves the kind node image and make cluster-e2e.
COREDNS_VERSION="${COREDNS_VERSION:-v1.13.1}"
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tools_dir="${repo_root}/.cache/tools"
out_dir="${tools_dir}/coredns-${COREDNS_VERSION}"
coredns_bin="${out_dir}/coredns"

have() {   # the binary is there and is that version (`coredns -version`: "CoreDNS-1.13.1")
  [[ -x "${coredns_bin}" ]] && "${coredns_bin}" -version 2>/dev/null \
    | grep -q "^CoreDNS-${COREDNS_VERSION#v}$"
}

if have; then
  echo "${coredns_bin}"
  exit 0
fi
if ! command -v go >/dev/null 2>&1; then
  echo "build-coredns: 'go' not found; install the Go toolchain CoreDNS ${COREDNS_VERSION}'s go.mod asks for" >&2
  exit 1
fi

mkdir -p "${tools_dir}"
exec 9>"${tools_dir}/.coredns.lock"
flock 9
if have; then
  echo "${coredns_bin}"
  exit 0
fi

echo "build-coredns: building CoreDNS ${COREDNS_VERSION} with $(go version)" >&2
start=${SECONDS}
# Into a temp dir, then moved into place: a reader never sees a half-written binary.
tmp="$(mktemp -d "${tools_dir}/.coredns-build.XXXXXX")"
trap 'rm -rf "${tmp}"' EXIT
GOTOOLCHAIN=local GOBIN="${tmp}" CGO_ENABLED=0 GOFLAGS=-mod=mod \
  go install -trimpath -ldflags "-s -w" "github.com/coredns/coredns@${COREDNS_VERSION}"
mkdir -p "${out_dir}"
mv -f "${tmp}/coredns" "${coredns_bin}"
"${coredns_bin}" -version >&2
echo "build-coredns: built in $((SECONDS - start)) s" >&2
echo "${coredns_bin}"
