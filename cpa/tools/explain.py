"""``cpa explain``: what the autoscaler would do, and why, without writing anything.

It runs the same parsing and the same :func:`cpa.decide.decision.decide` as the daemon, so
its answer is the daemon's answer; only the source of counts and parameters differs. With a
``behavior`` (ours) and the target's current replicas it also runs the daemon's
:func:`cpa.decide.behavior.apply`, for one poll with no history (the daemon has history;
explain cannot know it, and says so).

The parameter flags and their resolution are shared with ``cpa simulate``
(:mod:`cpa.tools.inputs`).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from cpa.decide.behavior import BehaviorState, Outcome, apply
from cpa.decide.decision import Decision, decide
from cpa.decide.modes.mode import Params
from cpa.nodes.counts import ClusterCounts
from cpa.tools.inputs import (
    InputError,
    ToolParser,
    add_parameter_arguments,
    answer,
    cluster_counts,
    defaults,
    explicit_params,
    parameters_from_flags,
    parse_command_line,
    parse_params,
    replica_count,
)

if TYPE_CHECKING:
    from cpa.kube.client import KubeApi
    from cpa.nodes.store import NodeStore

COUNT_FLAGS = ("--nodes", "--cores", "--schedulable-nodes", "--schedulable-cores")


def _parser() -> ToolParser:
    p = ToolParser(
        prog="cpa explain", allow_abbrev=False,
        description="Compute the replicas the autoscaler would write, step by step. "
                    "Nothing is written to the cluster.")
    add_parameter_arguments(p)
    cl = p.add_argument_group("cluster (--nodes and --cores, or --from-cluster)")
    cl.add_argument("--nodes", metavar="N", help="total nodes")
    cl.add_argument("--cores", metavar="CPU",
                    help="total allocatable cores, a quantity (1536, 3920m); rounded up once, "
                         "as the daemon rounds the sum of its Nodes'")
    cl.add_argument("--schedulable-nodes", metavar="N", help="default: --nodes")
    cl.add_argument("--schedulable-cores", metavar="CPU", help="default: --cores")
    cl.add_argument("--from-cluster", action="store_true",
                    help="read Nodes and the ConfigMap from the cluster (read-only)")
    cl.add_argument("--namespace", default="", help="with --from-cluster")
    cl.add_argument("--nodelabels", default="", help="with --from-cluster")
    cl.add_argument("--kubeconfig", default="", metavar="PATH",
                    help="with --from-cluster; found as kubectl finds it: this flag, else "
                         "$KUBECONFIG, else ~/.kube/config, else in-cluster")
    cl.add_argument("--context", default="", metavar="NAME",
                    help="with --from-cluster: the kubeconfig context (default: its "
                         "current-context)")
    cl.add_argument("--current-replicas", metavar="N",
                    help="the target's replicas now: shows what a behavior in the parameters "
                         "would do this poll")
    cl.add_argument("--target", default="", metavar="KIND/NAME",
                    help="with --from-cluster: read the current replicas from this target's "
                         "scale (read-only)")
    p.add_argument("--output", "-o", choices=("text", "json"), default="text")
    return p


def _connect(args: argparse.Namespace) -> KubeApi:
    """The API client, with the kubeconfig found as kubectl finds it."""
    from cpa.kube.client import KubeApi
    from cpa.kube.config import ConfigError, load_like_kubectl

    try:
        return KubeApi(load_like_kubectl(args.kubeconfig, args.context))
    except ConfigError as exc:
        raise InputError(str(exc)) from None


def _from_cluster(args: argparse.Namespace, read_configmap: bool
                  ) -> tuple[NodeStore, tuple[dict[str, str] | None, str] | None]:
    """The Nodes from a one-off list and, when asked, the parameters from the ConfigMap
    (or the defaults the daemon would create it with). Reads only."""
    from cpa.kube import configmap
    from cpa.kube.api import ApiError
    from cpa.nodes.store import NodeStore
    from cpa.nodes.watch import NodeReflector

    if read_configmap and (not args.configmap or not args.namespace):
        raise InputError("--from-cluster needs --configmap and --namespace")
    api = _connect(args)
    try:
        store = NodeStore()
        NodeReflector(api, store, args.nodelabels).list_once()
        if not read_configmap:
            return store, None
        try:
            cm = configmap.fetch(api, args.namespace, args.configmap)
            return store, (cm.data, f"ConfigMap {args.namespace}/{args.configmap} "
                                    f"(resourceVersion {cm.resource_version})")
        except ApiError as exc:
            if exc.not_found and args.default_params:
                return store, (defaults(args.default_params), (
                    f"--default-params (ConfigMap {args.namespace}/{args.configmap} does not "
                    "exist; the daemon would create it with these)"))
            raise
    except ApiError as exc:
        raise InputError(str(exc)) from None


def _given_counts(args: argparse.Namespace) -> ClusterCounts:
    if args.nodes is None or args.cores is None:
        raise InputError("give --nodes and --cores (or --from-cluster)")
    return cluster_counts(args.nodes, args.cores, args.schedulable_nodes,
                          args.schedulable_cores, names=COUNT_FLAGS)


def gather(args: argparse.Namespace) -> tuple[ClusterCounts, Params, str]:
    """Resolve the counts and the parameters from the arguments."""
    if not args.from_cluster:
        return (_given_counts(args), *parameters_from_flags(args))
    if any(v is not None for v in (args.nodes, args.cores, args.schedulable_nodes,
                                   args.schedulable_cores)):
        raise InputError("--from-cluster reads the counts; drop --nodes/--cores and the "
                         "--schedulable ones")
    source = explicit_params(args)
    store, from_cluster = _from_cluster(args, read_configmap=source is None)
    source = source or from_cluster
    assert source is not None
    params = parse_params(*source)
    store.set_policy(params.shared.counting.policy())  # count as the daemon would
    return store.counts(), params, source[1]


def current_replicas(args: argparse.Namespace) -> int | None:
    """``--current-replicas``, or with ``--from-cluster --target`` the target's scale."""
    if args.current_replicas is not None:
        return replica_count(args.current_replicas, "--current-replicas")
    if not args.target:
        return None
    if not args.from_cluster:
        raise InputError("--target reads the scale from the cluster: add --from-cluster, "
                           "or give --current-replicas instead")
    from cpa.kube.api import ApiError
    from cpa.kube.scale import parse_targets, read_replicas

    targets, problems = parse_targets(args.target)
    if problems or len(targets) != 1:
        raise InputError("; ".join(problems) or "--target: give exactly one kind/name")
    if not args.namespace:
        raise InputError("--target needs --namespace")
    try:
        return read_replicas(_connect(args), args.namespace, targets[0])
    except ApiError as exc:
        raise InputError(f"cannot read the scale of {targets[0]}: {exc}") from None


def behave(params: Params, decision: Decision, current: int | None) -> Outcome | None:
    """The daemon's behavior stage for one poll with no history, if it applies."""
    if params.shared.behavior is None or current is None or decision.error is not None:
        return None
    return apply(params.shared.behavior, BehaviorState(), decision.replicas, current, 0.0)


_NO_HISTORY = ("for one poll with no history: explain knows no earlier recommendations or "
               "writes; the running daemon keeps them, so its windows may hold for longer")


def render_text(counts: ClusterCounts, decision: Decision, origin: str,
                params: Params | None = None, current: int | None = None) -> str:
    lines = [
        f"Cluster: {counts.total_nodes} nodes with {counts.total_cores} cores in total; "
        f"{counts.schedulable_nodes} schedulable nodes with {counts.schedulable_cores} cores.",
        f"Parameters: {decision.mode} mode, from {origin}.",
    ]
    lines += [f"{i}. {step.text}" for i, step in enumerate(decision.steps, 1)]
    outcome = behave(params, decision, current) if params is not None else None
    if outcome is not None:
        lines.append(f"Behavior, {_NO_HISTORY}. The target has {current} replicas now.")
        lines += [f"{i}. {step.text}"
                  for i, step in enumerate(outcome.steps, len(decision.steps) + 1)]
    elif params is not None and params.shared.behavior is not None and decision.error is None:
        lines.append("Behavior is set, but the target's current replicas are not known: give "
                     "--current-replicas N (or --from-cluster --target KIND/NAME) to see what "
                     "it would write.")
    if decision.error is not None:
        lines.append(f"=> error: {decision.error}")
    elif outcome is not None and outcome.shaped:
        lines.append(f"=> {outcome.replicas} replicas (the formula says {decision.replicas}; "
                     f"{outcome.reason})")
    else:
        lines.append(f"=> {decision.replicas} replicas")
    return "\n".join(lines)


def render_json(counts: ClusterCounts, params: Params, decision: Decision,
                origin: str, current: int | None = None) -> dict[str, Any]:
    doc = _render_json(counts, params, decision, origin)
    if params.shared.behavior is None or decision.error is not None:
        return doc
    outcome = behave(params, decision, current)
    doc["desired"] = decision.replicas
    if outcome is None:
        doc["behavior"] = {"current_replicas": None, "note": "give --current-replicas to see "
                           "what the behavior would write"}
        return doc
    doc["replicas"] = outcome.replicas
    doc["behavior"] = {"current_replicas": current, "history": _NO_HISTORY,
                       "reason": outcome.reason,
                       "steps": [{"key": s.key, "text": s.text} for s in outcome.steps]}
    return doc


def _render_json(counts: ClusterCounts, params: Params, decision: Decision,
                 origin: str) -> dict[str, Any]:
    return {
        "mode": decision.mode,
        "replicas": decision.replicas,
        "nodes": decision.nodes,
        "cores": decision.cores,
        "counts": {"total_nodes": counts.total_nodes, "total_cores": counts.total_cores,
                   "schedulable_nodes": counts.schedulable_nodes,
                   "schedulable_cores": counts.schedulable_cores,
                   "excluded_nodes": counts.excluded_nodes,
                   "capped_nodes": counts.capped_nodes},
        "params": params.fields(),
        "source": origin,
        "steps": [{"key": s.key, "text": s.text} for s in decision.steps],
        **({"error": decision.error} if decision.error is not None else {}),
    }


def explain_main(argv: Sequence[str]) -> int:
    """Exit 0 with the answer; 1 with one line saying what is wrong (also when the
    parameters give a count the API cannot hold: the answer then says why)."""
    args = parse_command_line(_parser(), argv)
    if isinstance(args, int):
        return args
    return answer("cpa explain", args.output, lambda: _explain(args))


def _explain(args: argparse.Namespace) -> tuple[str, int]:
    counts, params, origin = gather(args)
    current = current_replicas(args)
    decision = decide(params, counts)
    if args.output == "json":
        out = json.dumps(render_json(counts, params, decision, origin, current), indent=2)
    else:
        out = render_text(counts, decision, origin, params, current)
    return out, 0 if decision.error is None else 1
