#!/usr/bin/env bash
# `make push IMAGE=registry/name:tag`: push the index that `make image` wrote (every
# platform, the index digest unchanged) to any OCI registry with crane. Credentials: crane
# reads ~/.docker/config.json (`crane auth login`, or `docker login`). Prints the pushed
# reference by digest.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target="${1:?usage: push.sh registry/name:tag}"
layout="${CPA_IMAGE_OUT:-$repo/.cache/image/out}/layout"
if [[ ! -f $layout/index.json ]]; then
    echo "[push] no image at $layout: run \`make image\` first" >&2
    exit 2
fi
tools="$(bash "$repo/image/tools.sh")"
"$tools/crane" push "$layout" "$target" >&2
digest="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["index"])' \
    "$(dirname "$layout")/digests.json")"
echo "${target%:*}@$digest"
