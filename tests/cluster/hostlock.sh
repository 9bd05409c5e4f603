# shellcheck shell=bash
# The test cluster's host lock (tests/cluster/hostlock.py) for shell scripts: `make e2e`'s
# kind cluster changes what `make cluster-e2e`'s node changes (sysctls, iptables chains,
# cgroups), and its host check removes and restores them; two at once would take each
# other's for their own. Source this file, then:
#
#   host_lock_claim WHAT   # holds the lock until the shell exits, or fails naming the holder
#   host_lock_release      # optional: empties the holder's record (the exit frees the lock)
#
# The lock is flock(2) on the file, as hostlock.py takes it, so each sees the other.
HOST_LOCK="${HOST_LOCK:-/run/cpa-test-cluster.lock}"

host_lock_claim() {   # host_lock_claim WHAT: WHAT names this run to a second one
    local holder
    exec {host_lock_fd}>>"$HOST_LOCK"
    if ! flock -n "$host_lock_fd"; then
        holder="$(cat "$HOST_LOCK" 2>/dev/null)"
        exec {host_lock_fd}>&-
        printf 'another test cluster holds %s (%s); wait for it to stop, or stop that process\n' \
            "$HOST_LOCK" "${holder:-unknown}" >&2
        return 1
    fi
    printf '{"pid": %d, "workdir": "%s"}' "$$" "$1" >"$HOST_LOCK"
}

host_lock_release() {
    [[ -n ${host_lock_fd:-} ]] || return 0
    : >"$HOST_LOCK"
    exec {host_lock_fd}>&-
    host_lock_fd=""
}
