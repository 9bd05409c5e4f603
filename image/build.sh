#!/usr/bin/env bash
# `make image`: the multi-platform OCI image index (docs/container-image.md).
#
# image/ocibuild assembles each platform's root filesystem from Debian's packages for that
# architecture and that platform's wheels, without running any of its code, and writes the
# layers, manifests and the index itself: reproducible (SOURCE_DATE_EPOCH = the commit's
# time, sorted entries, fixed owners), compared with image/lock.json, and what `make
# image-reproducible`, `make image-test` and `make sign` read. (`docker buildx build` of
# the Dockerfile runs the same assembly, but writes none of what those targets read.)
#
# Environment:
#   PLATFORMS   comma list (default: all the index holds, see image/ocibuild/platforms.py)
#   IMAGE_NAME  the published name (default: the one in image/name.txt)
#   CPA_IMAGE_OUT  output dir (default .cache/image/out): layout/ (OCI image layout, the
#               index tagged <version>), sbom/<platform>.spdx.json, digests.json
#   COMPRESSION gzip (default) | zstd: the layers' compression (docs/container-image.md)
#   CPA_IMAGE_LOCK  check (default): compare the build with image/lock.json and fail when
#               it differs; update: write the lock from the build (`make image-lock`);
#               off: neither (another compression, a subset of platforms being tried)
# The last line on stdout is the index's reference: oci:<layout dir>:<tag>.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=image/env.sh
source "$here/env.sh"
cd "$image_repo"

version="$(sed -n 's/^version *= *"\(.*\)"/\1/p' pyproject.toml | head -n 1)"
name="${IMAGE_NAME:-$(cat image/name.txt)}"
platforms="${PLATFORMS:-$image_platforms}"
out="${CPA_IMAGE_OUT:-$image_cache/out}"
compression="${COMPRESSION:-gzip}"
lock_mode="${CPA_IMAGE_LOCK:-check}"
[[ $compression == gzip ]] || lock_mode="${CPA_IMAGE_LOCK:-off}"   # the lock pins gzip
revision="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
if [[ $revision != unknown && -n "$(git status --porcelain -- cpa pyproject.toml README.md image Dockerfile LICENSE 2>/dev/null)" ]]; then
    revision="$revision-dirty"
fi
# The commit's time, not the clock: two builds of one commit are byte-identical.
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}"
start=$SECONDS

# Built already for this commit (a clean tree), these platforms and this name: reuse it.
if [[ $revision != *-dirty && $revision != unknown && -z ${CPA_IMAGE_FORCE:-} && -f $out/digests.json ]] \
        && [[ $lock_mode != update ]] \
        && python3 - "$out/digests.json" "$revision" "$name" "$platforms" "$compression" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
same = (doc.get("revision"), doc.get("name"), doc.get("compression")) == (
    sys.argv[2], sys.argv[3], sys.argv[5])
sys.exit(0 if same and sorted(doc["platforms"]) == sorted(sys.argv[4].split(",")) else 1)
PY
then
    image_log "up to date: $out (revision $revision; CPA_IMAGE_FORCE=1 rebuilds)"
    echo "oci:$out/layout:$version"
    exit 0
fi

image_ensure_build_tools "$platforms"
image_log "building $platforms with image/ocibuild (SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH)"
ref="$(PYTHONPATH="$here" python3 -m ocibuild build --repo "$image_repo" \
    --work "${CPA_IMAGE_WORK:-$image_cache/work}" --out "$out" --epoch "$SOURCE_DATE_EPOCH" \
    --name "$name" --version "$version" --tag "$version" --revision "$revision" \
    --source "https://$name" --platforms "$platforms" --compression "$compression" \
    | tail -n 1)"
image_log "built in $((SECONDS - start))s"
case "$lock_mode" in
    check) PYTHONPATH="$here" python3 -m ocibuild lock --out "$out" --lock image/lock.json ;;
    update) PYTHONPATH="$here" python3 -m ocibuild lock --out "$out" --lock image/lock.json \
                --update ;;
    off) image_log "image/lock.json not compared (CPA_IMAGE_LOCK=off)" ;;
    *) image_log "CPA_IMAGE_LOCK=$lock_mode: one of check, update, off"; exit 2 ;;
esac
echo "$ref"
