#!/usr/bin/env bash
# Build the images of the cluster e2e as OCI image layouts, which the cluster fixture
# pushes to a local registry (tests/image/registry.py) for containerd to PULL, by digest,
# as a real node does:
#
#   ours: the multi-platform index of `make image` (image/build.sh; reused when built for
#         this commit), .cache/image/out/layout
#   the pod sandbox ("pause") and a stand-in web server (answers /health and /ready): one
#         static Go binary (standin/, CGO_ENABLED=0) in images made FROM scratch with
#         buildah, saved as OCI layouts .cache/cluster/images/{pause,standin}/; their tags
#         are a digest of standin/'s sources, so an edit gives new images and a warm run
#         rebuilds nothing;
#   CoreDNS itself: the static binary of scripts/build-coredns.sh (its default plugins,
#         prometheus included) in an image made FROM scratch, .cache/cluster/images/coredns/,
#         tagged with its version and the binary's digest.
#
# Output: .cache/cluster/images/images.env (paths and names as shell assignments, read by
# tests/cluster). Progress on stderr.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
# shellcheck source=image/env.sh
source "$repo/image/env.sh"
out="$repo/.cache/cluster/images"
mkdir -p "$out"
log() { printf '[cluster-images] %s\n' "$*" >&2; }

bash "$repo/image/build.sh" >/dev/null
image_setup                        # CONTAINERS_CONF for the podman/buildah calls below

hash="$(cat "$here/standin/go.mod" "$here/standin/main.go" | sha256sum | cut -c1-12)"
pause="localhost/cpa-e2e/pause:$hash"
standin="localhost/cpa-e2e/standin:$hash"

if podman image exists "$pause" && podman image exists "$standin"; then
    log "stand-in images $hash already built"
else
    bin_dir="$repo/.cache/cluster/standin"
    mkdir -p "$bin_dir"
    log "building the stand-in binary (static Go, no dependencies)"
    (cd "$here/standin" && GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly \
        go build -trimpath -ldflags "-s -w" -o "$bin_dir/standin" .)
    for spec in "pause:$pause" "serve:$standin"; do
        mode="${spec%%:*}" ref="${spec#*:}"
        ctr="$(buildah from scratch)"
        buildah copy --quiet "$ctr" "$bin_dir/standin" /standin >/dev/null
        buildah config --entrypoint "[\"/standin\", \"$mode\"]" --cmd '' \
            --user 65534:65534 --label "org.opencontainers.image.title=cpa-e2e-$mode" "$ctr"
        buildah commit --quiet --rm "$ctr" "$ref" >/dev/null
        log "built $ref"
    done
fi

coredns_bin="$(bash "$repo/scripts/build-coredns.sh")"
coredns_version="$("$coredns_bin" -version | sed -n 's/^CoreDNS-//p')"
coredns="localhost/cpa-e2e/coredns:$coredns_version-$(sha256sum "$coredns_bin" | cut -c1-12)"
if podman image exists "$coredns"; then
    log "CoreDNS image $coredns already built"
else
    ctr="$(buildah from scratch)"
    buildah copy --quiet "$ctr" "$coredns_bin" /coredns >/dev/null
    buildah config --entrypoint '["/coredns"]' --cmd '' --user 65534:65534 \
        --port 53/udp --port 9153/tcp --label "org.opencontainers.image.title=coredns" "$ctr"
    buildah commit --quiet --rm "$ctr" "$coredns" >/dev/null
    log "built $coredns"
fi

save_layout() {   # name ref: podman save as an OCI layout unless it holds this image already
    local dir="$out/$1" ref="$2" id
    id="$(podman image inspect --format '{{.Id}}' "$ref")"
    if [[ -d $dir && -f $dir.id && "$(cat "$dir.id")" == "$id" ]]; then
        return
    fi
    rm -rf "$dir"
    podman save --quiet --format oci-dir -o "$dir" "$ref"
    echo "$id" >"$dir.id"
    log "saved $ref -> $dir"
}
save_layout pause "$pause"
save_layout standin "$standin"
save_layout coredns "$coredns"

cat >"$out/images.env" <<ENV
AUTOSCALER_LAYOUT=$image_cache/out/layout
PAUSE_LAYOUT=$out/pause
STANDIN_LAYOUT=$out/standin
COREDNS_LAYOUT=$out/coredns
ENV
log "images ready: $image_cache/out/layout $pause $standin $coredns"
