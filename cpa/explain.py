"""``cpa explain``: what the autoscaler would do, and why, without writing anything.

It runs the same parsing and the same :func:`cpa.formulas.decide` as the daemon, so its
answer is the daemon's answer; only the source of counts and parameters differs.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cpa.formulas import ClusterCounts, Decision
from cpa.modes import decide, parse_configmap_data
from cpa.params import Params, ParamsError, default_params_to_data
from cpa.quantity import QuantityError, cores_rounded_up, cpu_millicores


class ExplainError(Exception):
    """Bad input to explain; exit 1 with this message."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="cpa explain", allow_abbrev=False,
        description="Compute the replicas the autoscaler would write, step by step. "
                    "Nothing is written to the cluster.")
    src = p.add_argument_group("parameters (one of)")
    src.add_argument("--data", metavar="JSON",
                     help='the ConfigMap\'s data as a JSON object of strings, e.g. '
                          '\'{"linear": "{\\"nodesPerReplica\\": 16}"}\'')
    src.add_argument("--configmap-file", metavar="PATH", help="a ConfigMap manifest (YAML/JSON)")
    src.add_argument("--default-params", metavar="JSON",
                     help="the --default-params flag's value; with --from-cluster, used only "
                          "when the ConfigMap does not exist (as the daemon would create it)")
    cl = p.add_argument_group("cluster")
    cl.add_argument("--nodes", type=int, help="total nodes")
    cl.add_argument("--cores", help="total allocatable cores (a quantity: 1536, 3920m)")
    cl.add_argument("--schedulable-nodes", type=int, help="default: --nodes")
    cl.add_argument("--schedulable-cores", help="default: --cores")
    cl.add_argument("--from-cluster", action="store_true",
                    help="read Nodes and the ConfigMap from the cluster (read-only)")
    cl.add_argument("--configmap", default="", help="with --from-cluster")
    cl.add_argument("--namespace", default="", help="with --from-cluster")
    cl.add_argument("--nodelabels", default="", help="with --from-cluster")
    cl.add_argument("--kubeconfig", default="", help="with --from-cluster (default $KUBECONFIG, "
                                                      "else in-cluster)")
    p.add_argument("--output", "-o", choices=("text", "json"), default="text")
    return p


def _cores(text: str, flag: str) -> int:
    try:
        return cores_rounded_up(cpu_millicores(text))
    except QuantityError as exc:
        raise ExplainError(f"{flag}: {exc}") from exc


def _data_from_file(path: str) -> dict[str, str] | None:
    import yaml

    try:
        doc = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ExplainError(f"--configmap-file: cannot read {path}: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("kind", "ConfigMap") != "ConfigMap":
        raise ExplainError(f"--configmap-file: {path} is not a ConfigMap manifest")
    data = doc.get("data")
    if data is None:
        return None
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise ExplainError(f"--configmap-file: {path}: data must map keys to strings")
    return {str(k): v for k, v in data.items()}


def _data_from_json(text: str) -> dict[str, str]:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ExplainError(f"--data: not JSON: {exc}") from exc
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise ExplainError('--data: expected a JSON object of strings, e.g. '
                           '{"linear": "{\\"nodesPerReplica\\":16}"}')
    return data


def _defaults(text: str) -> dict[str, str]:
    try:
        return default_params_to_data(text)
    except ValueError as exc:
        raise ExplainError(f"--default-params: {exc}") from exc


def _explicit_params(args: argparse.Namespace) -> tuple[dict[str, str] | None, str] | None:
    """Parameters given on the command line (``--data`` or ``--configmap-file``), if any."""
    if args.data is not None and args.configmap_file is not None:
        raise ExplainError("give only one of --data and --configmap-file")
    if args.data is not None:
        return _data_from_json(args.data), "--data"
    if args.configmap_file is not None:
        return _data_from_file(args.configmap_file), args.configmap_file
    return None


def _from_cluster(args: argparse.Namespace, read_configmap: bool
                  ) -> tuple[ClusterCounts, tuple[dict[str, str] | None, str] | None]:
    """Counts from a one-off node list and, when asked, the parameters from the ConfigMap
    (or the defaults the daemon would create it with). Reads only."""
    from cpa import configmap
    from cpa.kubeapi import ApiError, KubeApi
    from cpa.kubeconfig import ConfigError, load
    from cpa.nodestore import NodeStore
    from cpa.nodewatch import NodeReflector

    if read_configmap and (not args.configmap or not args.namespace):
        raise ExplainError("--from-cluster needs --configmap and --namespace")
    try:
        api = KubeApi(load(args.kubeconfig))
        store = NodeStore()
        NodeReflector(api, store, args.nodelabels).list_once()
        counts = store.counts()
        if not read_configmap:
            return counts, None
        try:
            cm = configmap.fetch(api, args.namespace, args.configmap)
            return counts, (cm.data, f"ConfigMap {args.namespace}/{args.configmap} "
                                     f"(resourceVersion {cm.resource_version})")
        except ApiError as exc:
            if exc.not_found and args.default_params:
                return counts, (_defaults(args.default_params), (
                    f"--default-params (ConfigMap {args.namespace}/{args.configmap} does not "
                    "exist; the daemon would create it with these)"))
            raise
    except (ApiError, ConfigError) as exc:
        raise ExplainError(str(exc)) from exc


def _given_counts(args: argparse.Namespace) -> ClusterCounts:
    if args.nodes is None or args.cores is None:
        raise ExplainError("give --nodes and --cores (or --from-cluster)")
    cores = _cores(args.cores, "--cores")
    return ClusterCounts(
        total_nodes=args.nodes, total_cores=cores,
        schedulable_nodes=args.nodes if args.schedulable_nodes is None
        else args.schedulable_nodes,
        schedulable_cores=cores if args.schedulable_cores is None
        else _cores(args.schedulable_cores, "--schedulable-cores"))


def gather(args: argparse.Namespace) -> tuple[ClusterCounts, Params, str]:
    """Resolve the counts and the parameters from the arguments."""
    source = _explicit_params(args)
    if args.from_cluster:
        if args.nodes is not None or args.cores is not None:
            raise ExplainError("--from-cluster reads the counts; drop --nodes/--cores")
        counts, from_cluster = _from_cluster(args, read_configmap=source is None)
        source = source or from_cluster
    else:
        counts = _given_counts(args)
        if source is None and args.default_params is not None:
            source = _defaults(args.default_params), "--default-params"
    if source is None:
        raise ExplainError("give the parameters: --data, --configmap-file or --default-params")
    data, origin = source
    if min(counts.total_nodes, counts.total_cores, counts.schedulable_nodes,
           counts.schedulable_cores) < 0:
        raise ExplainError("node and core counts cannot be negative")
    try:
        params = parse_configmap_data(data)
    except ParamsError as exc:
        raise ExplainError(f"invalid parameters from {origin}: {exc}") from exc
    return counts, params, origin


def render_text(counts: ClusterCounts, decision: Decision, origin: str) -> str:
    lines = [
        f"Cluster: {counts.total_nodes} nodes with {counts.total_cores} cores in total; "
        f"{counts.schedulable_nodes} schedulable nodes with {counts.schedulable_cores} cores.",
        f"Parameters: {decision.mode} mode, from {origin}.",
    ]
    lines += [f"{i}. {step.text}" for i, step in enumerate(decision.steps, 1)]
    if decision.error is not None:
        lines.append(f"=> error: {decision.error}")
    else:
        lines.append(f"=> {decision.replicas} replicas")
    return "\n".join(lines)


def render_json(counts: ClusterCounts, params: Params, decision: Decision,
                origin: str) -> dict[str, Any]:
    return {
        "mode": decision.mode,
        "replicas": decision.replicas,
        "nodes": decision.nodes,
        "cores": decision.cores,
        "counts": {"total_nodes": counts.total_nodes, "total_cores": counts.total_cores,
                   "schedulable_nodes": counts.schedulable_nodes,
                   "schedulable_cores": counts.schedulable_cores},
        "params": params.fields(),
        "source": origin,
        "steps": [{"key": s.key, "text": s.text} for s in decision.steps],
        **({"error": decision.error} if decision.error is not None else {}),
    }


def _fail(args: argparse.Namespace, message: str) -> int:
    if args.output == "json":
        print(json.dumps({"error": message}))
    else:
        print(f"cpa explain: {message}", file=sys.stderr)
    return 1


def explain_main(argv: Sequence[str]) -> int:
    """Exit 0 with the answer; 1 with one line saying what is wrong (never a traceback,
    whatever the input: an operator pastes ConfigMaps from anywhere into this)."""
    args = _parser().parse_args(list(argv))
    try:
        counts, params, origin = gather(args)
        decision = decide(params, counts)
        if args.output == "json":
            out = json.dumps(render_json(counts, params, decision, origin), indent=2)
        else:
            out = render_text(counts, decision, origin)
    except ExplainError as exc:
        return _fail(args, str(exc))
    except Exception as exc:  # the contract is "no traceback", whatever the input
        return _fail(args, f"cannot explain this input: {type(exc).__name__}: {exc}"[:2000])
    print(out)
    return 0 if decision.error is None else 1
