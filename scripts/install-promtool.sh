#!/usr/bin/env bash
# Build promtool from the Prometheus Go module into .cache/bin/promtool (idempotent).
#
# Why: the alerting rules we ship (monitoring/prometheus-rules.yaml) are checked and unit-
# tested with the real promtool (`check rules`, `test rules`) in tests/repo/test_monitoring.py;
# like helm and the control plane, it comes from the Go module proxy only (no release-site
# download):
#   scripts/install-promtool.sh            # builds PROMTOOL_MODULE_VERSION once; later runs are no-ops
#   PROMTOOL_MODULE_VERSION=v0.316.0 scripts/install-promtool.sh
# Prometheus v3.X.Y is the Go module version v0.3XX.Y (v3.16.0 is v0.316.0). A module
# version whose go.mod has replace or exclude directives cannot be built with `go install
# pkg@version`; v0.316.0 has none. Built with the tag remove_all_sd (Prometheus's own
# build tag): the service-discovery plugins and their cloud SDKs (AWS, Azure, GCE, ...) are
# left out, which `check rules` and `test rules` never use: about a fifth fewer packages and
# half the Go source, and a cold build several times shorter. Prints the binary path on
# stdout, progress on stderr (a line a minute while Go builds). `make test` runs this
# first; the tests skip without promtool only when run directly by pytest.
set -euo pipefail

PROMTOOL_MODULE_VERSION="${PROMTOOL_MODULE_VERSION:-v0.316.0}"
# v0.316.0 -> 3.16.0: what `promtool --version` reports (stamped below, as Prometheus's
# release builds stamp it).
minor_patch="${PROMTOOL_MODULE_VERSION#v0.3}"
prom_version="3.$((10#${minor_patch%%.*})).${minor_patch#*.}"
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin_dir="${repo_root}/.cache/bin"
promtool_bin="${bin_dir}/promtool"

have() {
  [[ -x "${promtool_bin}" ]] && "${promtool_bin}" --version 2>/dev/null \
    | grep -q "^promtool, version ${prom_version} "
}

if have; then
  echo "${promtool_bin}"
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  echo "install-promtool: 'go' not found; install Go >= 1.26.7 or put promtool ${prom_version} on PATH" >&2
  exit 1
fi

mkdir -p "${bin_dir}"
# .cache/bin is shared between checkouts: one build at a time, and the second finds the
# first one's binary.
if command -v flock >/dev/null 2>&1; then
  exec 9>"${bin_dir}/.promtool.lock"
  flock 9
  if have; then
    echo "${promtool_bin}"
    exit 0
  fi
fi

echo "install-promtool: building promtool ${prom_version} (module ${PROMTOOL_MODULE_VERSION}) with $(go version) (once; cached in ${bin_dir})" >&2
. "${repo_root}/scripts/heartbeat.sh"
heartbeat_start "install-promtool: building promtool ${prom_version}"
# Built into a temp dir and moved into place, so a reader never sees a half-written binary.
tmp="$(mktemp -d "${bin_dir}/.promtool-build.XXXXXX")"
trap 'heartbeat_stop; rm -rf "${tmp}"' EXIT
version_pkg="github.com/prometheus/common/version"
GOTOOLCHAIN=local GOBIN="${tmp}" CGO_ENABLED=0 \
  go install -trimpath -tags remove_all_sd \
  -ldflags "-s -w -X ${version_pkg}.Version=${prom_version} -X ${version_pkg}.Branch=HEAD -X ${version_pkg}.Revision=${PROMTOOL_MODULE_VERSION}" \
  "github.com/prometheus/prometheus/cmd/promtool@${PROMTOOL_MODULE_VERSION}" \
  2>&1 \
  | bash "${repo_root}/scripts/go-quiet.sh" install-promtool >&2
heartbeat_stop
mv -f "${tmp}/promtool" "${promtool_bin}"

echo "install-promtool: built ${promtool_bin} ($("${promtool_bin}" --version 2>&1 | head -n 1))" >&2
echo "${promtool_bin}"
