#!/usr/bin/env bash
# Build helm from its Go module into .cache/bin/helm (idempotent).
#
# Only the Go module proxy is needed (no release-site download):
#   scripts/install-helm.sh            # builds HELM_VERSION once; later runs are no-ops
#   HELM_VERSION=v3.22.0 scripts/install-helm.sh
# Takes ~2-3 minutes cold on 2 cores (plus module downloads); prints the binary path.
# tests/repo/test_chart.py uses .cache/bin/helm (or a helm on PATH) and skips without one.
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-v3.22.0}"
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin_dir="${repo_root}/.cache/bin"
helm_bin="${bin_dir}/helm"

if [[ -x "${helm_bin}" ]] && "${helm_bin}" version --template '{{.Version}}' 2>/dev/null \
    | grep -qx "${HELM_VERSION}"; then
  echo "${helm_bin}"
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  echo "install-helm: 'go' not found; install Go >= 1.24 or put helm ${HELM_VERSION} on PATH" >&2
  exit 1
fi

mkdir -p "${bin_dir}"
echo "install-helm: building helm ${HELM_VERSION} with $(go version)" >&2
# GOBIN is where `go install` puts the binary; GOTOOLCHAIN=local never downloads a Go
# toolchain. The -X flag stamps the version `helm version` reports.
GOTOOLCHAIN=local GOBIN="${bin_dir}" CGO_ENABLED=0 \
  go install -trimpath \
  -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=${HELM_VERSION}" \
  "helm.sh/helm/v3/cmd/helm@${HELM_VERSION}"

"${helm_bin}" version --template '{{.Version}}' >&2
echo >&2
echo "${helm_bin}"
