#!/usr/bin/env bash
# `make image-reproducible`: two builds of this commit must give the same digests, per
# platform and for the index. The first is `make image`'s output (built now if missing);
# the second starts from nothing: a fresh work dir, fresh downloads, another output dir.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
first=".cache/image/out"
second=".cache/image/rebuild"
bash image/build.sh >/dev/null       # reuses `make image`'s output for this commit
rm -rf "$second" .cache/image/rework
CPA_IMAGE_FORCE=1 CPA_IMAGE_OUT="$second" CPA_IMAGE_WORK=.cache/image/rework \
    bash image/build.sh >/dev/null
echo "[reproducible] first build:  $(tr -d '\n ' <"$first/digests.json")"
echo "[reproducible] second build: $(tr -d '\n ' <"$second/digests.json")"
if cmp -s "$first/digests.json" "$second/digests.json"; then
    echo "[reproducible] same digests: the build is reproducible"
    rm -rf "$second" .cache/image/rework
else
    echo "[reproducible] DIFFERENT digests; compare $first/layout and $second/layout" >&2
    exit 1
fi
