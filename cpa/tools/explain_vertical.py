"""``cpa explain --vertical``: what ``/cpvpa`` would write, and why, step by step.

It takes ``/cpvpa``'s own flags (the same parser: ``--default-config``, ``--config-file``,
``--target``, ``--namespace``, ``--kubeconfig``, ``--resize-mode``) plus the cluster size,
given (``--nodes N --cores C``) or read (``--from-cluster``: one Node list, CPVA's
capacity sum, and with ``--target`` a GET of the target and, in in-place mode, of its Pods).
It runs the daemon's decoding and :func:`cpa.vertical.decide.formula.steps`, so its answer is the
daemon's. Nothing is written.

For each container and resource it shows CPVA's ``calculate``: base, step and the two
per-step counts, the steps by cores and by nodes, each side before and after the cap, the
larger, and the quantity as CPVA formats it (``memory`` in bytes, DecimalSI; everything
else BinarySI). Then the PATCH body CPVA would send and, from the cluster, what it would
change in the template (and in each Pod, in-place).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from typing import Any

from cpa.go.quantity import Format, Quantity
from cpa.kube.api import ApiError
from cpa.kube.client import KubeApi
from cpa.kube.clientconfig import ConfigError as KubeConfigError
from cpa.kube.clientconfig import load
from cpa.nodes.records import NodeInfo
from cpa.nodes.watch import NodeReflector
from cpa.tools.inputs import (
    InputError,
    ToolParser,
    UsageError,
    add_object_arguments,
    answer,
    count,
    given_objects,
    listed_objects,
    unknown_argument,
)
from cpa.vertical import cpvpa_flags as options
from cpa.vertical.decide.cpva_config import (
    ConfigError,
    ResourceScaleConfig,
    ScaleConfig,
    config_string,
    decode_config,
    object_kinds,
)
from cpa.vertical.decide.formula import (
    CoresError,
    CountsUnavailable,
    MilliRangeError,
    Steps,
    cluster_cores,
    compute,
    guess_format,
    steps,
)
from cpa.vertical.decide.patch import (
    Difference,
    PatchTarget,
    differences,
    patch_body,
    target_path,
    template_containers,
)
from cpa.vertical.decide.resize import label_selector, plan_pod

__all__ = ["explain_vertical_main"]

PROG = "cpa explain --vertical"


def _parser() -> ToolParser:
    p = ToolParser(
        prog=PROG, add_help=False,
        description="Compute what /cpvpa would write, step by step; writes nothing. "
                    "Takes /cpvpa's flags too (--default-config, --config-file, --target, "
                    "--namespace, --kubeconfig, --resize-mode).")
    p.add_argument("--nodes", metavar="N", help="the cluster's Node count")
    p.add_argument("--cores", metavar="N",
                   help="the cluster's cores (summed capacity cpu, a whole number)")
    add_object_arguments(p.add_argument, "a config with podsPerStep",
                         "a config with servicesPerStep")
    p.add_argument("--from-cluster", action="store_true",
                   help="count the Nodes as /cpvpa does; with --target, compare the target "
                        "(read-only)")
    p.add_output_argument()
    p.add_argument("--help", "-h", action="store_true")
    return p


def _fmt(milli: int, resource: str) -> str:
    return str(Quantity.from_milli(milli, guess_format(resource)))


def _config(opts: options.VerticalOptions) -> tuple[ScaleConfig | None, str]:
    # Several targets: the first one's share of a per-target config (as /cpvpa reads it).
    key = opts.target_keys[0] if opts.patch_targets else None
    try:
        config = (decode_config(opts.default_config, target=key, targets=opts.target_keys)
                  if opts.default_config else {})
        origin = "--default-config" if opts.default_config else ""
        if opts.config_file:
            try:
                with open(opts.config_file, "rb") as f:
                    text = f.read().decode("utf-8", "surrogateescape")
            except OSError as exc:
                raise InputError(f"--config-file: {exc}") from exc
            if text:  # CPVA ignores an empty file
                config = decode_config(text, onto=config, target=key,
                                       targets=opts.target_keys)
                origin = f"--config-file {opts.config_file}" + (
                    " over --default-config" if opts.default_config else "")
    except ConfigError as exc:
        raise InputError(f"invalid config: {exc}") from exc
    if not origin:
        raise InputError("give the config: --default-config or --config-file")
    return config, origin


def _from_cluster(opts: options.VerticalOptions) -> tuple[int, int, list[str], Any]:
    """(nodes, cores, odd Nodes, api) from one Node list, summed as CPVA sums."""
    class Sink:
        def __init__(self) -> None:
            self.nodes: dict[str, NodeInfo] = {}

        def upsert(self, node: NodeInfo) -> None:
            self.nodes[node.name] = node

        def delete(self, name: str) -> None:
            self.nodes.pop(name, None)

        def retain(self, names: Any) -> None:
            keep = set(names)
            self.nodes = {k: v for k, v in self.nodes.items() if k in keep}

        def __len__(self) -> int:
            return len(self.nodes)

        def synced_fields(self) -> dict[str, int]:
            return {"nodes": len(self.nodes)}

    try:
        api = KubeApi(load(opts.kubeconfig))
        sink = Sink()
        NodeReflector(api, sink, capacity=True).list_once()
    except (ApiError, KubeConfigError) as exc:
        raise InputError(str(exc)) from exc
    ordered = sorted(sink.nodes.items())
    odd = [f"{name}={node.capacity_cpu}" for name, node in ordered
           if node.capacity_cpu is not None and not _whole(node.capacity_cpu)]
    try:
        cores = cluster_cores(node.capacity_cpu for _, node in ordered)
    except (CoresError, ValueError) as exc:
        raise InputError(f"CPVA's core count fails: {exc}; Nodes whose cpu capacity is "
                         f"not whole: {', '.join(odd) or 'none'}") from exc
    return len(ordered), cores, odd, api


def _whole(text: str) -> bool:
    try:
        q = Quantity.parse(text)
    except ValueError:
        return False
    return q.as_int64()[1] or q.is_zero()


def _step_lines(s: Steps, rc: ResourceScaleConfig, resource: str) -> list[str]:
    def q(milli: int) -> str:
        return _fmt(milli, resource)

    def written(value: Quantity | None) -> str:
        return "unset (0)" if value is None else str(value)

    cap = f", max {rc.max}" if s.max > 0 else (
        ", no max" if rc.max is None else f", max {rc.max} (not positive: no cap)")
    lines = [f"base {written(rc.base)}, step {written(rc.step)}, coresPerStep "
             f"{s.cores_per_step}, nodesPerStep {s.nodes_per_step}{cap}"]
    for side, per, inc, value, capped in (
            ("cores", s.cores_per_step, s.cores_increments, s.by_cores, s.capped_by_cores),
            ("nodes", s.nodes_per_step, s.nodes_increments, s.by_nodes, s.capped_by_nodes)):
        how = ("no steps (per step 0)" if per == 0 else
               f"{inc} step{'s' if inc != 1 else ''} (ceil of {side} / {per})")
        lines.append(f"by {side}: {how} -> base + {inc} x step = "
                     f"{q(value if not capped else s.base + s.step * inc)}"
                     + (f", capped at max {q(s.max)}" if capped else ""))
    fmt = guess_format(resource)
    why = ("memory and storage print in plain units, bytes" if fmt is Format.DECIMAL_SI
           else "every resource but memory and storage; Ki, Mi... only for multiples of 1024")
    for o in s.by_objects:  # ours: podsPerStep, servicesPerStep
        lines.append(f"by {o.kind}: {o.increments} step{'s' if o.increments != 1 else ''} "
                     f"(ceil of {o.count} {o.kind} / {o.per_step}) -> base + "
                     f"{o.increments} x step = {q(s.base + s.step * o.increments)}"
                     + (f", capped at max {q(s.max)}" if o.capped else ""))
    which = "the largest" if s.by_objects else "the larger"
    lines.append(f"{which}: {q(s.want)} ({fmt.value}: {why})")
    return lines


def _steps_json(s: Steps) -> dict[str, Any]:
    out: dict[str, Any] = {f: getattr(s, f) for f in s.__slots__ if f != "by_objects"}
    if s.by_objects:  # ours
        out["by_objects"] = [{f: getattr(o, f) for f in o.__slots__} for o in s.by_objects]
    return out


def _report(opts: options.VerticalOptions, config: ScaleConfig | None, origin: str,
            nodes: int, cores: int, source: str, api: Any,
            objects: dict[str, int]) -> tuple[str, dict[str, Any]]:
    try:
        computed = compute(config, nodes, cores, objects)
    except (MilliRangeError, CountsUnavailable) as exc:
        raise InputError(str(exc)) from exc
    doc: dict[str, Any] = {"nodes": nodes, "cores": cores, "counts_from": source,
                           "config_from": origin, "config": config_string(config),
                           "values": []}
    counted = "".join(f", {n} {kind}" for kind, n in sorted(objects.items()))
    doc.update(objects)
    text = [f"cluster: {nodes} nodes, {cores} cores{counted} ({source})",
            f"config ({origin}): {config_string(config)}"]
    for name, container in (config or {}).items():
        for kind, resources in (("requests", container.requests or {}),
                                ("limits", container.limits or {})):
            for res, rc in resources.items():
                s = steps(rc, nodes, cores, objects)
                value = computed[name].requests[res] if kind == "requests" else (
                    computed[name].limits[res])
                text.append(f"{name} {kind}[{res}] = {value}")
                text.extend(f"    {line}" for line in _step_lines(s, rc, res))
                doc["values"].append({"container": name, "kind": kind, "resource": res,
                                      "value": str(value), "format": guess_format(res).value,
                                      "steps": _steps_json(s)})
    target = opts.patch_target or PatchTarget("Deployment", "name")
    body = patch_body(target, computed)
    doc["patch"] = json.loads(body)
    text += ["PATCH (application/strategic-merge-patch+json), as CPVA sends it"
             + ("" if opts.patch_target else " (no --target: shown for deployment/name)")
             + ":", f"    {body}"]
    if len(opts.patch_targets) > 1:  # several targets: this is the first one's share
        doc["target"] = opts.target_keys[0]
        text.append(f"(several targets: shown for the first, {opts.target_keys[0]}; put "
                    "another first in --target to see its share)")
    if api is not None and opts.patch_target is not None and opts.namespace:
        text += _compare(api, opts, computed, doc)
    return "\n".join(text), doc


def _compare(api: Any, opts: options.VerticalOptions, computed: Any, doc: dict[str, Any]
             ) -> list[str]:
    target = opts.patch_target
    assert target is not None
    where = f"{target.kind}/{target.name} in {opts.namespace}"
    try:
        obj = api.get_json(target_path(opts.namespace, target))
    except ApiError as exc:
        return [f"target {where}: cannot read it ({exc})"]
    found = differences(template_containers(obj), computed)
    doc["template_changes"] = [_change(d) for d in found]
    lines = [f"template of {where}: " + ("already has these values" if not found else
                                          f"{len(found)} value(s) would change")]
    lines += [f"    {_line(d)}" for d in found]
    if opts.resize_mode == "in-place":
        selector = label_selector((obj.get("spec") or {}).get("selector") or {})
        try:
            pods = api.get_json(f"/api/v1/namespaces/{opts.namespace}/pods",
                                {"labelSelector": selector}).get("items") or []
        except ApiError as exc:
            return [*lines, f"Pods: cannot list them ({exc})"]
        doc["pods"] = []
        for pod in pods:
            plan = plan_pod(pod, computed)
            verdict = (f"cannot resize in place ({plan.refusal}: {plan.message})"
                       if plan.refusal else "resize in place" if plan.body else "up to date")
            lines.append(f"Pod {plan.name}: {verdict}")
            lines += [f"    {_line(d)}" for d in plan.differences]
            doc["pods"].append({"name": plan.name, "refusal": plan.refusal,
                                "body": plan.body,
                                "changes": [_change(d) for d in plan.differences]})
    return lines


def _change(d: Difference) -> dict[str, Any]:
    return {"container": d.container, "kind": d.kind, "resource": d.resource,
            "current": d.current, "wanted": str(d.wanted)}


def _line(d: Difference) -> str:
    return f"{d.container} {d.kind}[{d.resource}]: {d.current or '(none)'} -> {d.wanted}"


def explain_vertical_main(argv: Sequence[str]) -> int:
    parser = _parser()
    try:
        args, rest = parser.parse_flags(argv, rest=True)
        opts = options.parse(rest)
    except (UsageError, options.UsageError) as exc:  # one line and exit 2, as the others
        print(f"{PROG}: {_nearest(str(exc), parser)} (see --help)", file=sys.stderr)
        return 2
    if args.help or opts.help:
        print(_parser().format_help().rstrip())
        print("\n/cpvpa's flags:\n" + options.usage("cpvpa").split("\n", 1)[1])
        return 0
    return answer(PROG, args.output, lambda: _explain(args, opts))


def _nearest(message: str, parser: ToolParser) -> str:
    """/cpvpa's parser names the nearest of its own flags for a mistyped one; this command
    has a few more (--nodes, --cores, --from-cluster, --output): the nearest of all."""
    typed = re.fullmatch(r"unknown flag: --(\S+)", message)
    if typed is None:
        return message
    return unknown_argument(f"--{typed.group(1)}", [f.name for f in options.TABLE.flags]
                            + parser.known_flags())


def _explain(args: argparse.Namespace, opts: options.VerticalOptions) -> tuple[str, int]:
    if opts.target:
        problems = [p for p in options.validate(opts) if "target" in p]
        if problems:
            raise InputError("; ".join(problems))
    if not args.from_cluster and (args.nodes is None or args.cores is None):
        raise InputError("give --nodes and --cores (or --from-cluster)")
    config, origin = _config(opts)
    kinds = object_kinds(config)
    if args.from_cluster:
        if any(v is not None for v in (args.nodes, args.cores, args.pods, args.services)):
            raise InputError("--from-cluster reads the counts; drop --nodes/--cores/--pods/"
                             "--services")
        nodes, cores, _odd, api = _from_cluster(opts)
        objects = listed_objects(api, kinds)
        source = "from the cluster: every Node, capacity cpu summed as CPVA sums it"
    else:
        nodes, cores = count(args.nodes, "--nodes"), count(args.cores, "--cores")
        objects = given_objects(args, lambda kind: (
            f"the config has {kind[:-1]}sPerStep" if kind in kinds else None))
        api = None
        source = "given"
    text, doc = _report(opts, config, origin, nodes, cores, source, api, objects)
    return (json.dumps(doc, indent=2) if args.output == "json" else text), 0
