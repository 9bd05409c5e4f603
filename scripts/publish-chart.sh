#!/usr/bin/env bash
# `make chart-publish CHART_REPO=oci://registry/path`: the chart packaged (its Chart.yaml
# version) and pushed as an OCI artifact with helm (built from its Go module once,
# scripts/install-helm.sh); credentials: `helm registry login` or the Docker config.
# HELM_PLAIN_HTTP=1 pushes over plain HTTP (a registry on loopback, as make image-test
# runs it). Prints the pushed reference, oci://registry/path/<chart>@sha256:...
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target="${1:?usage: publish-chart.sh oci://registry/path}"
[[ $target == oci://* ]] || { echo "[chart] $target: an oci:// reference, please" >&2; exit 2; }
helm="$(bash "$repo/scripts/install-helm.sh")"
dist="$(mktemp -d)"
trap 'rm -rf "$dist"' EXIT
"$helm" package "$repo/charts/cluster-proportional-autoscaler" --destination "$dist" >&2
plain=()
[[ -n ${HELM_PLAIN_HTTP:-} ]] && plain=(--plain-http)
out="$("$helm" push "$dist"/*.tgz "$target" "${plain[@]}" 2>&1)"
echo "$out" >&2
pushed="$(sed -n 's/^Pushed: //p' <<<"$out")"
digest="$(sed -n 's/^Digest: //p' <<<"$out")"
echo "oci://${pushed%:*}@$digest"
