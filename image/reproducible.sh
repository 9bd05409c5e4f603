#!/usr/bin/env bash
# `make image-reproducible`: the whole index is reproducible, checked without a second
# build. `make image` compares its debian and python layers (and every input they are made
# of) with image/lock.json, written on another machine; here the code layer, the manifests
# and the index are made again from a fresh wheel of the project, a fresh tree and a fresh
# layout, and must give the same digests (seconds, not a second build of minutes).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here/.."
out="${CPA_IMAGE_OUT:-.cache/image/out}"
bash image/build.sh >/dev/null       # reuses `make image`'s output for this commit
PYTHONPATH="$here" python3 -m ocibuild check-code --repo . \
    --work "${CPA_IMAGE_WORK:-.cache/image/work}" --out "$out"
