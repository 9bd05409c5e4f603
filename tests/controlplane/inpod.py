"""A command run as in a Pod: the ServiceAccount files where in-cluster clients look.

Upstream's binary knows only the in-cluster configuration, so the benchmarks and the tests
that run it put a token and the CA at the ServiceAccount path in a private mount namespace:
a tmpfs over that directory (or over /var/run when it does not exist, so nothing is created
on the real filesystem), the files copied in, then the command exec'd (the same PID as the
Popen: unshare and sh both exec). Needs root.
"""

from __future__ import annotations

from pathlib import Path

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
_SCRIPT = r"""
set -e
sa="$1"; token="$2"; ca="$3"; shift 3
if [ -d "$sa" ]; then
  mount -t tmpfs -o size=1m,mode=0755 cpa-sa "$sa"
else
  base=$(readlink -f /var/run)
  mount -t tmpfs -o size=1m,mode=0755 cpa-run "$base"
  mkdir -p "$sa"
fi
cp "$token" "$sa/token"
cp "$ca" "$sa/ca.crt"
exec "$@"
"""


def in_pod(token: Path, ca_file: Path) -> list[str]:
    """The argv prefix that runs a command with the ServiceAccount files in place."""
    return ["unshare", "-m", "--propagation", "private", "sh", "-c", _SCRIPT, "sh", SA_DIR,
            str(token), str(ca_file)]
