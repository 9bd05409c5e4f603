# Sourced by the scripts of long steps that are otherwise silent for minutes (a venv's
# packages, a Go build): a line every minute on stderr, so a newcomer sees the step is
# alive and how far it is.
#
#   heartbeat_start "make: installing" ['command printing how far it is']
#   ... the long step ...
#   heartbeat_stop
#
# The ticker is a child of the calling script, stopped by its PID; if the script ends
# first (a failed step under set -e), the ticker sees it gone and ends too. Its sleep holds
# no output pipe open, so a caller reading the output to its end is not kept waiting.

heartbeat_start() {
    local label="$1" probe="${2:-}" owner=$$
    (
        started=$SECONDS
        pause=""
        trap '[[ -n "$pause" ]] && kill "$pause" 2>/dev/null; exit 0' TERM
        while :; do
            sleep 60 </dev/null >/dev/null 2>&1 &
            pause=$!
            wait "$pause"
            pause=""
            kill -0 "$owner" 2>/dev/null || exit 0
            far=""
            [[ -n "$probe" ]] && far="; $(eval "$probe" 2>/dev/null)"
            printf '%s: still running, %d min so far%s\n' "$label" \
                $(( (SECONDS - started) / 60 )) "$far" >&2
        done
    ) &
    HEARTBEAT_PID=$!
}

heartbeat_stop() {
    if [[ -n "${HEARTBEAT_PID:-}" ]]; then
        kill "$HEARTBEAT_PID" 2>/dev/null || true
        wait "$HEARTBEAT_PID" 2>/dev/null || true
        HEARTBEAT_PID=""
    fi
}
