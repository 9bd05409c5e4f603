#!/usr/bin/env bash
# The Go tools of the image's supply chain, at their pinned versions, built once from their
# Go modules by scripts/go-tool.sh into .cache/tools/<name>-<version>/; prints the path.
#   cosign      signs, attests and verifies the index (make sign / verify, make image-test)
#               v2: `--tlog-upload=false` signs with a key and no network at all; v3
#               fetches a signing config from the public TUF repository unless given one.
#               Minutes cold (module downloads included), seconds warm.
#   actionlint  lints .github/workflows (make lint); seconds cold.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
case "${1:?usage: pinned-tool.sh cosign|actionlint}" in
    cosign)
        exec nice -n 10 bash "$here/go-tool.sh" cosign github.com/sigstore/cosign/v2/cmd/cosign \
            v2.6.5 -X sigs.k8s.io/release-utils/version.gitVersion=v2.6.5 ;;
    actionlint)
        exec nice -n 10 bash "$here/go-tool.sh" actionlint \
            github.com/rhysd/actionlint/cmd/actionlint v1.7.12 \
            -X github.com/rhysd/actionlint.version=v1.7.12 ;;
    *) echo "pinned-tool.sh: cosign or actionlint, not $1" >&2; exit 2 ;;
esac
