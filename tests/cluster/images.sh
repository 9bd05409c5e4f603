#!/usr/bin/env bash
# Build the images of the cluster e2e locally (no image registry is reachable here) and
# export each as an OCI archive for `ctr images import` into containerd's k8s.io namespace:
#
#   localhost/cluster-proportional-autoscaler-py:<version>  ours: `make image` (image/build.sh)
#   localhost/cpa-e2e/pause:<hash>      the pod sandbox image: `standin pause`
#   localhost/cpa-e2e/coredns:<hash>    the CoreDNS stand-in: `standin serve` (probes only)
#
# The two stand-ins are one static Go binary (standin/, CGO_ENABLED=0) in an image made
# `FROM scratch` with buildah; <hash> is a digest of standin/'s sources, so an edit gives new
# tags and a warm run rebuilds nothing.
#
# Output: <repo>/.cache/cluster/images/{autoscaler,pause,coredns}.tar and images.env (the
# three references as shell assignments, read by tests/cluster). Progress on stderr.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
# shellcheck source=image/env.sh
source "$repo/image/env.sh"
out="$repo/.cache/cluster/images"
mkdir -p "$out"
log() { printf '[cluster-images] %s\n' "$*" >&2; }

# Our image, exactly as `make image` builds it (layers cached: seconds when warm).
export CPA_ENGINE=buildah          # containerd needs an archive; podman save makes it
autoscaler="$(bash "$repo/image/build.sh" | tail -n 1)"
image_setup                        # CONTAINERS_CONF for the podman/buildah calls below

hash="$(cat "$here/standin/go.mod" "$here/standin/main.go" | sha256sum | cut -c1-12)"
pause="localhost/cpa-e2e/pause:$hash"
coredns="localhost/cpa-e2e/coredns:$hash"

if podman image exists "$pause" && podman image exists "$coredns"; then
    log "stand-in images $hash already built"
else
    bin_dir="$repo/.cache/cluster/standin"
    mkdir -p "$bin_dir"
    log "building the stand-in binary (static Go, no dependencies)"
    (cd "$here/standin" && GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly \
        go build -trimpath -ldflags "-s -w" -o "$bin_dir/standin" .)
    for spec in "pause:$pause" "serve:$coredns"; do
        mode="${spec%%:*}" ref="${spec#*:}"
        ctr="$(buildah from scratch)"
        buildah copy --quiet "$ctr" "$bin_dir/standin" /standin >/dev/null
        buildah config --entrypoint "[\"/standin\", \"$mode\"]" --cmd '' \
            --user 65534:65534 --label "org.opencontainers.image.title=cpa-e2e-$mode" "$ctr"
        buildah commit --quiet --rm "$ctr" "$ref" >/dev/null
        log "built $ref"
    done
fi

export_image() {   # name ref: podman save unless the archive is newer than the image
    local tar="$out/$1.tar" ref="$2" id
    id="$(podman image inspect --format '{{.Id}}' "$ref")"
    if [[ -f "$tar" && -f "$tar.id" && "$(cat "$tar.id")" == "$id" ]]; then
        return
    fi
    rm -f "$tar"
    podman save --quiet --format oci-archive -o "$tar" "$ref"
    echo "$id" >"$tar.id"
    log "exported $ref -> $tar ($(du -h "$tar" | cut -f1))"
}
export_image autoscaler "$autoscaler"
export_image pause "$pause"
export_image coredns "$coredns"

cat >"$out/images.env" <<ENV
AUTOSCALER_IMAGE=$autoscaler
PAUSE_IMAGE=$pause
COREDNS_IMAGE=$coredns
ENV
log "images ready: $autoscaler $pause $coredns"
