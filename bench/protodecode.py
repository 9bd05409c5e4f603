"""``python -m bench.protodecode``: the candidate Node decoders side by side, on real bytes.

Starts a control plane, creates N GKE-sized benchmark nodes, records one NodeList and one
streaming list (``sendInitialEvents``) in protobuf and in JSON, then measures each
candidate in a fresh interpreter (so import costs are its own):

* ``json``: msgspec structs naming only the fields we count (:mod:`cpa.nodes.jsondecode`, the
  decoder before protobuf);
* ``proto-reader``: the hand-written protobuf wire reader (:mod:`cpa.nodes.proto`);
* ``proto-upb``: the ``protobuf`` package (upb backend) with a trimmed schema that has
  Kubernetes' field numbers for the same fields (built as a FileDescriptorProto, so no
  protoc), when the package is installed (``pip install protobuf``).

For each: import time and RSS of the decoder, microseconds per Node for a list and per
watch event for the streaming list, and the peak RSS over decoding the whole list once.
Writes ``bench/results/protodecode.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import nodes
from bench.run import RESULTS, log
from tests.controlplane import ControlPlane, ensure_binaries

PROTO = "application/vnd.kubernetes.protobuf"
STREAMING = ("watch=1&sendInitialEvents=true&allowWatchBookmarks=true"
             "&resourceVersionMatch=NotOlderThan&timeoutSeconds=5")

# Runs in a fresh interpreter: argv = candidate, list file, stream file.
_CANDIDATE = r'''
import json, sys, time
def rss():
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * 4096 / 2**20
def hwm():
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM"):
                return int(line.split()[1]) / 1024
import msgspec, urllib3  # the daemon imports these anyway: not the candidate's cost
from cpa.nodes.records import NodeInfo
name, list_file, stream_file = sys.argv[1:4]
r0, t0 = rss(), time.perf_counter()
if name == "json":
    from cpa.nodes import jsondecode as nodejson
    decode_list = nodejson.decode_list_page
    def events(data):
        return [nodejson.decode_event(line) for line in data.split(b"\n") if line]
elif name == "proto-reader":
    from cpa.nodes import proto as nodeproto
    decode_list = nodeproto.decode_list_page
    def frames(data):
        pos = 0
        while pos < len(data):
            n = int.from_bytes(data[pos:pos + 4], "big")
            yield data[pos + 4:pos + 4 + n]
            pos += 4 + n
    def events(data):
        return [nodeproto.decode_event(f) for f in frames(data)]
else:
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    F = descriptor_pb2.FieldDescriptorProto
    fd = descriptor_pb2.FileDescriptorProto(name="trim.proto", package="t", syntax="proto2")
    OPT, REP = F.LABEL_OPTIONAL, F.LABEL_REPEATED
    S, B, BOOL, M = F.TYPE_STRING, F.TYPE_BYTES, F.TYPE_BOOL, F.TYPE_MESSAGE
    def msg(mname, fields, entries=()):
        m = fd.message_type.add(name=mname)
        for fname, num, typ, label, tname in fields:
            f = m.field.add(name=fname, number=num, type=typ, label=label)
            if tname:
                f.type_name = tname
        for ename, vtype, vname in entries:
            e = m.nested_type.add(name=ename)
            e.options.map_entry = True
            e.field.add(name="key", number=1, type=S, label=OPT)
            v = e.field.add(name="value", number=2, type=vtype, label=OPT)
            if vname:
                v.type_name = vname
    msg("TypeMeta", [("apiVersion", 1, S, OPT, ""), ("kind", 2, S, OPT, "")])
    msg("Unknown", [("typeMeta", 1, M, OPT, ".t.TypeMeta"), ("raw", 2, B, OPT, "")])
    msg("ListMeta", [("resourceVersion", 2, S, OPT, ""), ("continue", 3, S, OPT, "")])
    msg("ObjectMeta", [("name", 1, S, OPT, ""), ("resourceVersion", 6, S, OPT, ""),
                       ("annotations", 12, M, REP, ".t.ObjectMeta.AnnotationsEntry")],
        [("AnnotationsEntry", S, "")])
    msg("Taint", [("key", 1, S, OPT, "")])
    msg("NodeSpec", [("unschedulable", 4, BOOL, OPT, ""), ("taints", 5, M, REP, ".t.Taint")])
    msg("Quantity", [("string", 1, S, OPT, "")])
    msg("NodeCondition", [("type", 1, S, OPT, ""), ("status", 2, S, OPT, "")])
    msg("NodeStatus", [("allocatable", 2, M, REP, ".t.NodeStatus.AllocatableEntry"),
                       ("conditions", 4, M, REP, ".t.NodeCondition")],
        [("AllocatableEntry", M, ".t.Quantity")])
    msg("Node", [("metadata", 1, M, OPT, ".t.ObjectMeta"), ("spec", 2, M, OPT, ".t.NodeSpec"),
                 ("status", 3, M, OPT, ".t.NodeStatus")])
    msg("NodeList", [("metadata", 1, M, OPT, ".t.ListMeta"), ("items", 2, M, REP, ".t.Node")])
    msg("RawExtension", [("raw", 1, B, OPT, "")])
    msg("WatchEvent", [("type", 1, S, OPT, ""), ("object", 2, M, OPT, ".t.RawExtension")])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    C = {n: message_factory.GetMessageClass(pool.FindMessageTypeByName("t." + n))
         for n in ("Unknown", "NodeList", "Node", "WatchEvent")}
    def info(n):
        st = n.status
        cpu = st.allocatable["cpu"].string if "cpu" in st.allocatable else None
        ready = any(c.type == "Ready" and c.status == "True" for c in st.conditions)
        return NodeInfo(n.metadata.name, n.metadata.resourceVersion, n.spec.unschedulable,
                        ready, cpu, tuple(t.key for t in n.spec.taints))
    def decode_list(body):
        u = C["Unknown"](); u.ParseFromString(memoryview(body)[4:])
        nl = C["NodeList"](); nl.ParseFromString(u.raw)
        return [info(n) for n in nl.items]
    def events(data):
        out, pos = [], 0
        while pos < len(data):
            n = int.from_bytes(data[pos:pos + 4], "big")
            e = C["WatchEvent"](); e.ParseFromString(data[pos + 4:pos + 4 + n])
            u = C["Unknown"](); u.ParseFromString(memoryview(e.object.raw)[4:])
            node = C["Node"](); node.ParseFromString(u.raw)
            out.append(info(node) if e.type != "BOOKMARK" else None)
            pos += 4 + n
        return out
t1, r1 = time.perf_counter(), rss()
body = open(list_file, "rb").read()
stream = open(stream_file, "rb").read()
hwm0 = hwm()
result = decode_list(bytearray(body))
items = len(getattr(result, "items", result))
del result
list_peak = hwm() - hwm0
best_list = best_events = 1e9
for _ in range(5):
    t = time.perf_counter()
    decode_list(bytearray(body))
    best_list = min(best_list, time.perf_counter() - t)
    t = time.perf_counter()
    n_events = len(events(stream))
    best_events = min(best_events, time.perf_counter() - t)
print(json.dumps({"import_ms": round((t1 - t0) * 1000, 1), "import_rss_mib": round(r1 - r0, 2),
                  "list_us_per_node": round(best_list / items * 1e6, 2),
                  "event_us": round(best_events / n_events * 1e6, 2),
                  "list_decode_peak_extra_mib": round(list_peak, 1),
                  "nodes": items, "events": n_events}))
'''


def record(n: int, threads: int, work: Path) -> dict[str, Any]:
    with ControlPlane(bin_dir=ensure_binaries()) as plane:
        writer = nodes.NodeWriter(plane.server, plane.ca_file, plane.admin_token, threads)
        try:
            writer.create(list(range(n)), progress=False)
        finally:
            writer.close()
        admin = plane.admin()
        sizes: dict[str, Any] = {}
        for enc, accept in (("pb", f"{PROTO}, application/json"), ("json", "application/json")):
            for what, path in (("list", f"/api/v1/nodes?limit={n}"),
                               ("stream", f"/api/v1/nodes?{STREAMING}")):
                status, body = admin.raw("GET", path, headers={"Accept": accept})
                if status != 200:
                    raise RuntimeError(f"GET {path}: {status}")
                (work / f"{what}.{enc}").write_bytes(body)
                sizes[f"{what}_{enc}_bytes_per_node"] = round(len(body) / n)
        return sizes


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.protodecode")
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=8)
    args = ap.parse_args()
    report: dict[str, Any] = {"nodes": args.nodes, "python": sys.version.split()[0]}
    with tempfile.TemporaryDirectory(prefix="cpa-protodecode-") as tmp:
        work = Path(tmp)
        log(f"recording {args.nodes} GKE-sized nodes from a real kube-apiserver")
        report["wire"] = record(args.nodes, args.threads, work)
        log(f"  {report['wire']}")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")])}
        for name in ("json", "proto-reader", "proto-upb"):
            enc = "json" if name == "json" else "pb"
            out = subprocess.run([sys.executable, "-c", _CANDIDATE, name, str(work / f"list.{enc}"),
                                  str(work / f"stream.{enc}")], capture_output=True, text=True,
                                 env=env, check=False)
            if out.returncode != 0:
                last = (out.stderr.strip().splitlines() or ["?"])[-1]
                report[name] = {"error": last}
            else:
                report[name] = json.loads(out.stdout)
            log(f"{name}: {report[name]}")
            time.sleep(0.5)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "protodecode.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
