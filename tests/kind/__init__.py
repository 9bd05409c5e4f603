"""`make e2e` (scripts/e2e-kind.sh): the host check of the kind end-to-end run."""
