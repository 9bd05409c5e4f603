# shellcheck shell=bash
# The test cluster's host lock (tests/cluster/hostlock.py) for shell scripts: `make e2e`'s
# kind cluster changes what `make cluster-e2e`'s node changes (sysctls, iptables chains,
# cgroups), and its host check removes and restores them; two at once would take each
# other's for their own. Source this file, then:
#
#   host_lock_claim WHAT   # holds the host until this shell exits, or fails naming the holder
#   host_lock_release      # gives it back earlier
#
# A Python process holds the lock for this shell (`hostlock.py hold`): a descriptor of the
# shell's own would be inherited by what it starts, podman's conmon and aardvark-dns among
# them, which outlive it. It also clears what a killed cluster run left, as every claim does.
HOST_LOCK="${HOST_LOCK:-/run/cpa-test-cluster.lock}"
host_lock_repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
host_lock_pid=""

host_lock_claim() {   # host_lock_claim WHAT: WHAT names this run to a second one
    local out
    out="$(mktemp)"
    (cd "$host_lock_repo" && exec python3 -m tests.cluster.hostlock hold "$$" "$1" \
        --lock "$HOST_LOCK" ${HOST_LOCK_BRIDGE:+--bridge "$HOST_LOCK_BRIDGE"}) >"$out" 2>&1 &
    host_lock_pid=$!
    # Until the holder says it holds the host, or has exited refusing.
    while kill -0 "$host_lock_pid" 2>/dev/null && ! grep -qx held "$out"; do sleep 0.1; done
    if grep -qx held "$out"; then
        grep -vx held "$out" >&2 || true
        rm -f "$out"
        return 0
    fi
    wait "$host_lock_pid" || true
    host_lock_pid=""
    cat "$out" >&2
    rm -f "$out"
    return 1
}

host_lock_release() {
    [[ -n $host_lock_pid ]] || return 0
    kill "$host_lock_pid" 2>/dev/null || true
    wait "$host_lock_pid" 2>/dev/null || true
    host_lock_pid=""
}
