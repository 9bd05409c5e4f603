"""The daemon's start-up order, a measured goal (docs/performance.md): the first Node list
goes out (the very request the reflector then makes) before the reflector, the store, the
decoder, the health server and the first poll's code are imported (they load while the API
server prepares the list), and nothing on the way to the first write imports what costs
start-up time for no use there (``urllib.parse`` with ``ipaddress``, the IDNA codec,
``fractions`` and ``decimal``, the modules of opt-in keys the parameters do not have).
``dataclasses`` is loaded: the command line's options are a dataclass, declared once.

Run in a fresh interpreter, in-cluster as in a Pod (the ServiceAccount directory moved to a
temporary one), against an address where nothing listens: the request is attempted, which
is what is observed."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parents[4]

PROBE = r"""
import json, os, sys
import cpa.kube.clientconfig as config
config.SA_DIR = sys.argv[1]
import cpa.nodes.listing as listing
import cpa.horizontal.daemon.cpa_main as main
seen = {}
send = listing.send_first_list
def spy(api, selector):
    seen["at_send"] = sorted(sys.modules)
    ahead = api.send_stream_ahead
    def record(path, query, read_timeout, accept):
        seen["ahead"] = [path, dict(query), read_timeout, accept]
        ahead(path, query, read_timeout, accept)
    api.send_stream_ahead = record
    send(api, selector)
    import cpa.nodes.watch as watch
    class First:  # the reflector's first request, recorded and not made
        def stream(self, path, query, read_timeout, accept, deadline=None, pace=0.0):
            seen["first_stream"] = [path, dict(query), read_timeout, accept, deadline, pace]
            raise KeyboardInterrupt
    def start(self):  # only the main thread's imports count: no thread
        self._api = First()
        try:
            self._sync()
        except KeyboardInterrupt:
            pass
    watch.NodeReflector.start = start
listing.send_first_list = spy
ready = main._ready
def stop(*args, **kwargs):
    import gc
    seen["at_wait"] = sorted(sys.modules)
    seen["gc_at_wait"] = gc.isenabled()
    print(json.dumps(seen), flush=True)
    os._exit(0)
main._ready = stop
sys.exit(main.run(sys.argv[2:]))
"""

LATER = ("cpa.nodes.store", "cpa.nodes.watch", "cpa.nodes.proto", "cpa.runtime.health",
         "cpa.horizontal.daemon.cpa_loop", "cpa.horizontal.decide.decision")
NEVER = ("urllib.parse", "ipaddress", "encodings.idna",
         "cpa.kube.selector", "structlog", "prometheus_client", "fractions", "decimal",
         "fnmatch", "random",
         # the opt-in keys' modules, without those keys in the parameters:
         "cpa.horizontal.decide.behavior", "cpa.horizontal.decide.windows",
         "cpa.horizontal.decide.load", "cpa.horizontal.decide.zones",
         "cpa.nodes.placement")


def test_the_list_goes_out_first_and_nothing_costly_is_loaded(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("t")
    (tmp_path / "namespace").write_text("kube-system")
    (tmp_path / "ca.crt").write_bytes(_ca())
    port, health = free_port(), free_port()  # nothing listens on the first
    # -S and the package found by PYTHONPATH, as the image's regular install finds it: a
    # development install's .pth hooks would load pathlib and urllib.parse before any of
    # ours.
    env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(port),
           "PATH": "/usr/bin:/bin",
           "PYTHONPATH": os.pathsep.join([str(REPO), sysconfig.get_paths()["purelib"]])}
    out = subprocess.run(
        [sys.executable, "-S", "-c", PROBE, str(tmp_path), "--namespace=kube-system",
         "--configmap=cm", "--target=deployment/coredns", f"--health-port={health}",
         '--default-params={"linear":{"nodesPerReplica":16}}'],
        capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path, check=False)
    assert out.returncode == 0 and out.stdout, out.stderr
    seen = json.loads(out.stdout.splitlines()[-1])
    at_send, at_wait = set(seen["at_send"]), set(seen["at_wait"])
    assert "cpa.nodes.listing" in at_send
    assert [m for m in LATER if m in at_send] == [], "loaded before the list went out"
    assert [m for m in LATER if m not in at_wait] == [], "loaded while the list is read"
    assert [m for m in NEVER if m in at_wait] == []
    assert seen["gc_at_wait"] is False  # no collection passes until the first poll is done
    # The reflector's first request is the one sent ahead (else its answer is never taken).
    assert seen["first_stream"] == seen["ahead"] + [None, 0.0]
    assert seen["ahead"][1] == {"limit": "5000"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ca() -> bytes:
    """A self-signed CA certificate, for a TLS context to load (made with openssl)."""
    done = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                           "-keyout", "/dev/null", "-subj", "/CN=test-ca", "-days", "1"],
                          capture_output=True, check=True)
    return done.stdout
