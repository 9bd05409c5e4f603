#!/usr/bin/env bash
# `make test`'s first lines: what it will build before the tests run (only what is not
# cached yet, each once, from Go modules) and how long a cold and a warm run took when
# measured, read from the README's table (the one place those times are written).
#
#   scripts/test-plan.sh WORKERS
set -euo pipefail
workers="${1:-3}"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

say() { printf 'make test: %s\n' "$*" >&2; }

k8s="$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ {print $2; exit}' \
    tests/controlplane/go/go.mod 2>/dev/null || true)"
plane="${CPA_CONTROLPLANE_BIN:-.cache/controlplane/${k8s:-none}/bin}"
built() { [[ -x "$1" ]]; }

todo=()
[[ -e .venv/.cpa-installed ]] || todo+=("the venv .venv (the package and its test tools)")
if command -v go >/dev/null 2>&1; then
    built "$plane/kube-apiserver" && built "$plane/etcd" || todo+=("kube-apiserver + etcd")
    built .cache/bin/helm || todo+=("helm")
    built .cache/bin/promtool || todo+=("promtool")
    built "$plane/kubectl" || todo+=("kubectl and the node components it is built with \
(kube-controller-manager, kube-scheduler, kube-proxy, kubelet), for the migration and deploy \
tests")
else
    say "no Go on PATH: the tests that need the control plane, helm or promtool are skipped"
fi

if (( ${#todo[@]} )); then
    say "builds first, once (cached in .cache/), what is not built yet:"
    for item in "${todo[@]}"; do say "  - $item"; done
else
    say "everything it needs is built (.cache/)"
fi
say "then the unit and integration tests, in ${workers} processes (TEST_WORKERS)"

# The README's row: | `make test` | cold | warm |
row="$(awk -F'|' '$2 ~ /`make test`/ {gsub(/^ +| +$/, "", $3); gsub(/^ +| +$/, "", $4);
    print $3 "|" $4; exit}' README.md)"
if [[ -n "$row" ]]; then
    say "measured (README.md, The two commands): ${row%%|*} cold, ${row#*|} warm"
fi
