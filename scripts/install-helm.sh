#!/usr/bin/env bash
# Build helm from its Go module into .cache/bin/helm (idempotent).
#
# Only the Go module proxy is needed (no release-site download):
#   scripts/install-helm.sh            # builds HELM_VERSION once; later runs are no-ops
#   HELM_VERSION=v3.22.0 scripts/install-helm.sh
# Prints the binary path (stdout); progress on stderr: one line to start, a line a minute
# while Go builds (scripts/heartbeat.sh), one when done. Go's `go: downloading` lines are
# counted, not listed.
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
echo "install-helm: building helm ${HELM_VERSION} from its Go module with $(go version) (once; cached in ${bin_dir})" >&2
. "${repo_root}/scripts/heartbeat.sh"
heartbeat_start "install-helm: building helm ${HELM_VERSION}"
trap heartbeat_stop EXIT
# GOBIN is where `go install` puts the binary; GOTOOLCHAIN=local never downloads a Go
# toolchain. The -X flag stamps the version `helm version` reports.
GOTOOLCHAIN=local GOBIN="${bin_dir}" CGO_ENABLED=0 \
  go install -trimpath \
  -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=${HELM_VERSION}" \
  "helm.sh/helm/v3/cmd/helm@${HELM_VERSION}" 2>&1 \
  | bash "${repo_root}/scripts/go-quiet.sh" install-helm >&2
heartbeat_stop

echo "install-helm: built ${helm_bin} ($("${helm_bin}" version --template '{{.Version}}'))" >&2
echo "${helm_bin}"
