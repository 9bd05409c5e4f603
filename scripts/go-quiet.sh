#!/usr/bin/env bash
# Filters a Go build's stderr for a newcomer's terminal: `go: downloading MODULE VERSION`
# lines (one per module, dozens on a cold module cache) become one line when the first
# comes and a count at the end; every other line (an error above all) passes unchanged.
#
#   go install ... 2>&1 | bash scripts/go-quiet.sh LABEL >&2
set -euo pipefail
label="${1:?usage: go-quiet.sh LABEL}"
awk -v label="$label" '
    /^go: downloading / {
        if (n++ == 0) { print label ": downloading the Go modules it needs"; fflush() }
        next
    }
    { print; fflush() }
    END { if (n > 0) print label ": " n " Go modules downloaded" }
'
