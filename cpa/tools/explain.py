"""``cpa explain``: what the autoscaler would do, and why, without writing anything.

It runs the same parsing and the same :func:`cpa.horizontal.decide.decision.decide` as the daemon,
so
its answer is the daemon's answer; only the source of counts and parameters differs. With a
``behavior`` (ours) and the target's current replicas it also runs the daemon's
:func:`cpa.horizontal.decide.behavior.apply`, for one poll with no history (the daemon has history;
explain cannot know it, and says so).

With a ``load`` key (ours) the load axis is shown too, from rates given on the command line
(``--stable-rate``, ``--panic-rate``, ``--ready-pods``) or, with ``--from-cluster
--target``, measured now: the target's Ready Pods scraped twice a scrape interval apart
(or the Prometheus query run once), as one reading for both windows. The daemon averages
over its windows and remembers its panic; explain has one reading and no history, and
says so.

With ``capToPlaceable`` (ours) and ``--from-cluster --target`` the last step is the cap: the
target's required self anti-affinity and the Nodes (or zones) its Pods can be placed on,
read now, as the daemon reads them.

The parameter flags and their resolution are shared with ``cpa simulate``
(:mod:`cpa.tools.inputs`).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from cpa.horizontal.decide.behavior import BehaviorState, Outcome, apply
from cpa.horizontal.decide.decision import Decision, decide
from cpa.horizontal.decide.modes.mode import Params
from cpa.horizontal.decide.params import CAP_KEY, PLACEMENT_KEY
from cpa.horizontal.decide.placeable import Room, cap_replicas
from cpa.horizontal.decide.steps import Step, plural
from cpa.horizontal.decide.windows import LoadAxis, PanicState, Reading, scale
from cpa.horizontal.scrape.scraper import Scraper
from cpa.kube import configmap
from cpa.kube.api import ApiError
from cpa.kube.client import KubeApi
from cpa.kube.clientconfig import ConfigError, load_like_kubectl
from cpa.kube.discovery import ResolveError, resolve
from cpa.kube.fieldowners import last_foreign_writer
from cpa.kube.targets import Current, Target, object_path, parse_targets, scale_path
from cpa.kube.template import NoTemplate, pod_template
from cpa.kube.writers import read_current, writer_for
from cpa.nodes.counts import ClusterCounts
from cpa.nodes.placement import Placement, placement_of, self_anti_affinity_keys
from cpa.nodes.store import NodeStore
from cpa.nodes.watch import NodeReflector
from cpa.tools.explain_vertical import explain_vertical_main
from cpa.tools.inputs import (
    InputError,
    ToolParser,
    add_flags,
    add_object_arguments,
    add_parameter_arguments,
    cluster_counts,
    defaults,
    explicit_params,
    given_objects,
    listed_objects,
    parameters_from_flags,
    parse_params,
    replica_count,
    run_command,
)

if TYPE_CHECKING:
    from cpa.horizontal.scrape.scraper import ScrapeStatus
    from cpa.kube.client import KubeApi
    from cpa.nodes.store import NodeStore

COUNT_FLAGS = ("--nodes", "--cores", "--schedulable-nodes", "--schedulable-cores", "--zones",
               "--schedulable-zones")


def _parser() -> ToolParser:
    p = ToolParser(
        prog="cpa explain",
        description="Compute the replicas the autoscaler would write, step by step. "
                    "Nothing is written to the cluster.")
    add_parameter_arguments(p, from_cluster=True)
    cl = p.add_argument_group("cluster (--nodes and --cores, or --from-cluster)")
    add_flags(
        cl.add_argument,
        ("--nodes", "N", "total nodes"),
        ("--cores", "CPU",
         "total allocatable cores, a quantity (1536, 3920m); rounded up once, as the daemon "
         "rounds the sum of its Nodes'"),
        ("--schedulable-nodes", "N", "default: --nodes"),
        ("--schedulable-cores", "CPU", "default: --cores"),
        ("--zones", "N", "zones the Nodes are in (for parameters with a zones key)"),
        ("--schedulable-zones", "N", "zones the schedulable Nodes are in (default: --zones)"))
    add_object_arguments(cl.add_argument, "parameters with a Pods axis",
                         "parameters with a Services axis")
    add_flags(cl.add_argument, ("--from-cluster", "",
                                "read Nodes and the ConfigMap from the cluster (read-only)"))
    cl.add_argument("--namespace", default="", help="with --from-cluster")
    cl.add_argument("--nodelabels", default="", help="with --from-cluster")
    cl.add_argument("--kubeconfig", default="", metavar="PATH",
                    help="with --from-cluster; found as kubectl finds it: this flag, else "
                         "$KUBECONFIG, else ~/.kube/config, else in-cluster")
    cl.add_argument("--context", default="", metavar="NAME",
                    help="with --from-cluster: the kubeconfig context (default: its "
                         "current-context)")
    add_flags(cl.add_argument, ("--current-replicas", "N",
                                "the target's replicas now: shows what a behavior in the "
                                "parameters would do this poll"))
    cl.add_argument("--target", default="", metavar="KIND/NAME",
                    help="with --from-cluster: read the current replicas from this target's "
                         "scale (read-only)")
    ld = p.add_argument_group("the load axis (parameters with a load key)")
    add_flags(
        ld.add_argument,
        ("--stable-rate", "RATE", "the load's rate (per second) over the stable window"),
        ("--panic-rate", "RATE", "over the panic window (default: --stable-rate)"),
        ("--ready-pods", "N",
         "the target's Ready Pods (default: --current-replicas, or the target's replicas)"))
    p.add_output_argument()
    add_flags(p.add_argument, ("--vertical", "",
                               "explain what /cpvpa, the vertical autoscaler, would write "
                               "instead: it takes /cpvpa's flags (cpa explain --vertical "
                               "--help)"))
    return p


def _connect(args: argparse.Namespace) -> KubeApi:
    """The API client, with the kubeconfig found as kubectl finds it."""
    try:
        return KubeApi(load_like_kubectl(args.kubeconfig, args.context))
    except ConfigError as exc:
        raise InputError(str(exc)) from None


class CapView(NamedTuple):
    """Ours, ``capToPlaceable`` read from the cluster: the mode and the target's room
    (None: no required self anti-affinity, or nothing bounds it)."""

    mode: str
    room: Room | None


def _from_cluster(args: argparse.Namespace, source: tuple[dict[str, str] | None, str] | None
                  ) -> tuple[NodeStore, Params, str, dict[str, int], CapView | None]:
    """The parameters (``source``, else the ConfigMap, else the defaults the daemon would
    create it with), then the Nodes from a one-off list, counted as those parameters say
    (the list reads the zones' label when there is one). Reads only."""
    if source is None and (not args.configmap or not args.namespace):
        raise InputError("--from-cluster needs --configmap and --namespace")
    api = _connect(args)
    try:
        if source is None:
            try:
                cm = configmap.fetch(api, args.namespace, args.configmap)
                source = (cm.data, f"ConfigMap {args.namespace}/{args.configmap} "
                                   f"(resourceVersion {cm.resource_version})")
            except ApiError as exc:
                if not (exc.not_found and args.default_params):
                    raise
                source = (defaults(args.default_params), (
                    f"--default-params (ConfigMap {args.namespace}/{args.configmap} does not "
                    "exist; the daemon would create it with these)"))
        params = parse_params(*source)
        store = NodeStore()
        store.set_policy(params.shared.policy())  # count as the daemon would
        found = _placement(args, api, params)
        if found is not None:
            store.set_placements([found[0]])  # every label and taint read by the list
        NodeReflector(api, store, args.nodelabels).list_once()
        return store, params, source[1], listed_objects(api, params.object_kinds()), _cap_view(
            store, params, found)
    except ApiError as exc:
        raise InputError(str(exc)) from None


class PlacementView(NamedTuple):
    """Ours, ``targetPlacement``: the target's placement and what each rule kept off."""

    placement: Placement
    counts: ClusterCounts
    excluded: dict[str, int]


def _placement(args: argparse.Namespace, api: KubeApi, params: Params
               ) -> tuple[Placement, tuple[str, ...]] | None:
    """With ``targetPlacement`` (or ``capToPlaceable`` and ``--target``): the placement of
    ``--target``'s real Pod template, and its self anti-affinity's topology keys."""
    shared = params.shared
    if not shared.target_placement and (shared.cap_to_placeable is None or not args.target):
        return None
    if not args.target:
        raise InputError("the parameters have targetPlacement: add --target KIND/NAME, whose "
                         "Pod template decides which Nodes count")
    key = PLACEMENT_KEY if shared.target_placement else CAP_KEY
    try:
        target = resolve(api, _one_target(args.target))
        template = pod_template(api, args.namespace, target, key)
    except (ResolveError, NoTemplate) as exc:
        raise InputError(f"{key}: {exc}") from None
    return (placement_of(template["spec"]),
            self_anti_affinity_keys(template, args.namespace))


def _cap_view(store: NodeStore, params: Params,
              found: tuple[Placement, tuple[str, ...]] | None) -> CapView | None:
    """The target's room as the daemon finds it: the fewest domains among its keys."""
    mode = params.shared.cap_to_placeable
    if mode is None or found is None:
        return None
    rooms = []
    for key in found[1]:
        domains = store.domains(found[0], key)
        if domains is not None and domains.bounded:
            rooms.append(Room(key, domains.distinct))
    return CapView(mode, min(rooms, key=lambda r: r.domains) if rooms else None)


def _one_target(text: str) -> Target:
    """``--target``: one kind/name."""
    targets, problems = parse_targets(text)
    if problems or len(targets) != 1:
        raise InputError("; ".join(problems) or "--target: give exactly one kind/name")
    return targets[0]


def placed(store: NodeStore, params: Params) -> PlacementView | None:
    """The target's own counts and the Nodes each rule excluded (after the list)."""
    if not params.shared.target_placement or not store.placements:
        return None
    placement = store.placements[0]
    counts, excluded = store.counts_for(placement), store.placement_exclusions(placement)
    assert counts is not None and excluded is not None  # the list read every label
    return PlacementView(placement, counts, excluded)


def _given_counts(args: argparse.Namespace) -> ClusterCounts:
    if args.nodes is None or args.cores is None:
        raise InputError("give --nodes and --cores (or --from-cluster)")
    return cluster_counts(args.nodes, args.cores, args.schedulable_nodes,
                          args.schedulable_cores, args.zones, args.schedulable_zones,
                          names=COUNT_FLAGS)


def gather(args: argparse.Namespace
           ) -> tuple[ClusterCounts, Params, str, PlacementView | None, CapView | None]:
    """Resolve the counts and the parameters from the arguments (with ``targetPlacement``
    and ``--from-cluster``: the target's own counts, and its placement)."""
    if not args.from_cluster:
        counts = _given_counts(args)
        params, origin = parameters_from_flags(args)
        counts = counts._replace(**given_objects(args, lambda kind: (
            f"the parameters have a {kind} axis" if kind in params.object_kinds() else None)))
        if params.shared.zones is not None and counts.total_zones is None:
            raise InputError("the parameters have a zones key: give --zones N (the zones the "
                             "Nodes are in), or use --from-cluster")
        return counts, params, origin, None, None
    if any(v is not None for v in (args.nodes, args.cores, args.schedulable_nodes,
                                   args.schedulable_cores, args.zones,
                                   args.schedulable_zones, args.pods, args.services)):
        raise InputError("--from-cluster reads the counts; drop --nodes/--cores/--zones, "
                         "--pods/--services and the --schedulable ones")
    store, params, origin, objects, cap = _from_cluster(args, explicit_params(args))
    view = placed(store, params)
    counts = (store.counts() if view is None else view.counts)._replace(**objects)
    return counts, params, origin, view, cap


class TargetView(NamedTuple):
    """``--target`` as read from the cluster: the target (resolved through discovery when
    it is ``RESOURCE.GROUP``) and its replicas now (an HPA: its minReplicas and
    maxReplicas)."""

    target: Target
    current: Current
    writer: str | None = None
    """The field manager other than ours that wrote the count last (managedFields)."""


def read_target(args: argparse.Namespace) -> TargetView | None:
    """With ``--from-cluster --target``: the target and what it holds now (reads only)."""
    if not args.target:
        return None
    if not args.from_cluster:
        raise InputError("--target reads the scale from the cluster: add --from-cluster, "
                           "or give --current-replicas instead")
    target = _one_target(args.target)
    if not args.namespace:
        raise InputError("--target needs --namespace")
    try:
        api = _connect(args)
        target = resolve(api, target)
        return TargetView(target, read_current(api, args.namespace, target),
                          _last_writer(api, args.namespace, target))
    except ResolveError as exc:
        raise InputError(str(exc)) from None
    except ApiError as exc:
        raise InputError(f"cannot read the scale of {target}: {exc}") from None


def _last_writer(api: KubeApi, namespace: str, target: Target) -> str | None:
    """Who else wrote the target's count last; None when it was us, or when the object
    cannot be read (only its scale may be: the writer is then not said)."""
    try:
        return last_foreign_writer(api.get_json(object_path(namespace, target)), target)
    except ApiError:
        return None


def current_replicas(args: argparse.Namespace, view: TargetView | None = None) -> int | None:
    """``--current-replicas``, or with ``--from-cluster --target`` the target's scale."""
    if args.current_replicas is not None:
        return replica_count(args.current_replicas, "--current-replicas")
    return view.current.replicas if view is not None else None


def target_steps(view: TargetView | None, replicas: int) -> tuple[int, list[Step]]:
    """What writing ``replicas`` to the target means for its kind (ours): an HPA floor is
    clamped to 1..maxReplicas; a ``RESOURCE.GROUP`` target is what discovery found."""
    if view is None:
        return replicas, []
    written, step = writer_for(view.target).explain(view.target, view.current, replicas)
    steps = [] if step is None else [Step(*step)]
    if view.writer is not None:
        steps.append(Step("target.writer", (
            f"The count the target has now was written last by field manager {view.writer} "
            "(its managedFields), not by this autoscaler: another writer. --watch-targets "
            "answers it at once and names it; one that keeps undoing ours is contended "
            "(docs/targets.md, Other writers).")))
    return written, steps


def behave(params: Params, decision: Decision, current: int | None) -> Outcome | None:
    """The daemon's behavior stage for one poll with no history, if it applies."""
    if params.shared.behavior is None or current is None or decision.error is not None:
        return None
    return apply(params.shared.behavior, BehaviorState(), decision.replicas, current, 0.0,
                 decision.floor)


_NO_HISTORY = ("for one poll with no history: explain knows no earlier recommendations or "
               "writes; the running daemon keeps them, so its windows may hold for longer")


def render_text(counts: ClusterCounts, decision: Decision, origin: str,
                params: Params | None = None, current: int | None = None,
                view: TargetView | None = None) -> str:
    zones = ("" if counts.total_zones is None else
             f" The Nodes are in {counts.total_zones} zones, the schedulable ones in "
             f"{counts.schedulable_zones}.")
    lines = [
        f"Cluster: {counts.total_nodes} nodes with {counts.total_cores} cores in total; "
        f"{counts.schedulable_nodes} schedulable nodes with {counts.schedulable_cores} cores."
        + zones + _objects_text(counts),
        f"Parameters: {decision.mode} mode, from {origin}.",
    ]
    lines += [f"{i}. {step.text}" for i, step in enumerate(decision.steps, 1)]
    if params is not None and params.shared.load is not None and decision.proportional is None:
        lines.append("The parameters have a load key, not shown: give --stable-rate (and "
                     "--panic-rate, --ready-pods), or --from-cluster --target KIND/NAME to "
                     "measure it now. The count above is the proportional one, the floor of "
                     "what the daemon writes.")
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
        return "\n".join(lines)
    count = outcome.replicas if outcome is not None else decision.replicas
    written, steps = target_steps(view, count)
    first = len(decision.steps) + (len(outcome.steps) if outcome is not None else 0) + 1
    lines += [f"{i}. {step.text}" for i, step in enumerate(steps, first)]
    unit = writer_for(view.target).unit if view is not None else "replicas"
    if outcome is not None and outcome.shaped:
        lines.append(f"=> {written} {unit} (the formula says {decision.replicas}; "
                     f"{outcome.reason})")
    elif written != decision.replicas:
        lines.append(f"=> {written} {unit} (the formula says {decision.replicas})")
    else:
        lines.append(f"=> {written} {unit}")
    return "\n".join(lines)


def _objects_text(counts: ClusterCounts) -> str:
    """Ours: the Pods and Services counted, when the parameters count them."""
    parts = [f"{value} {kind}" for kind, value in (("Pods", counts.pods),
                                                   ("Services", counts.services))
             if value is not None]
    return f" Counted: {' and '.join(parts)}." if parts else ""


def render_json(counts: ClusterCounts, params: Params, decision: Decision,
                origin: str, current: int | None = None,
                view: TargetView | None = None) -> dict[str, Any]:
    doc = _render_json(counts, params, decision, origin, current)
    if decision.error is None and view is not None:
        written, steps = target_steps(view, doc["replicas"])
        doc["steps"] += [{"key": s.key, "text": s.text} for s in steps]
        kind, writer = view.target.api, writer_for(view.target)
        doc["target"] = {"target": str(view.target), "kind": kind.name,
                         "api_version": kind.api_version, "writes": writer.writes,
                         "current": view.current.replicas, "replicas": written,
                         **({"last_writer": view.writer} if view.writer else {})}
        if writer.bounded:
            doc["target"]["max_replicas"] = view.current.max_replicas
        if written != doc["replicas"]:
            doc.setdefault("desired", decision.replicas)
            doc["replicas"] = written
    return doc


def _render_json(counts: ClusterCounts, params: Params, decision: Decision,
                 origin: str, current: int | None) -> dict[str, Any]:
    doc = _decision_json(counts, params, decision, origin)
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


def _decision_json(counts: ClusterCounts, params: Params, decision: Decision,
                   origin: str) -> dict[str, Any]:
    doc: dict[str, Any] = {
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
    if decision.proportional is not None:  # ours, with a load key shown
        doc["proportional"] = decision.proportional
        doc["load"] = decision.load
    for kind, value in (("pods", counts.pods), ("services", counts.services)):
        if value is not None:  # ours, with a Pods or Services axis
            doc["counts"][kind] = value
    if counts.total_zones is not None:  # ours, with a zones key
        doc["counts"]["total_zones"] = counts.total_zones
        doc["counts"]["schedulable_zones"] = counts.schedulable_zones
        doc["zone_floor"] = decision.floor
    return doc


def explain_main(argv: Sequence[str]) -> int:
    """Exit 0 with the answer; 1 with one line saying what is wrong (also when the
    parameters give a count the API cannot hold: the answer then says why).

    ``--vertical`` anywhere hands the command line to ``cpa explain --vertical``, whose
    flags are /cpvpa's."""
    if "--vertical" in argv:
        return explain_vertical_main([a for a in argv if a != "--vertical"])
    return run_command(_parser(), argv, _explain)


def _rate(text: str, flag: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"{flag} {text[:40]!r} is not a number") from None
    if not value >= 0 or value == float("inf"):
        raise InputError(f"{flag} {text[:40]}: give a rate of 0 or more per second")
    return value


def measured_step(status: ScrapeStatus) -> Step:
    """What the measuring scrape read: the Pods that gave a rate, and those it left out
    with the reason (a Pod's bad page leaves it out, never the others' load)."""
    text = f"Measured now: {status.answered} of {plural(status.ready, 'Ready Pod')} gave a rate"
    if status.left_out:
        text += "; left out: " + ", ".join(f"{pod} ({reason})" for pod, reason in
                                           status.left_out)
    return Step("load.measured", text + ".")


def _measure(args: argparse.Namespace, params: Params, view: TargetView
             ) -> tuple[Reading, Step | None]:
    """One reading of the load now: two scrapes of the target's Ready Pods a scrape
    interval apart (a counter needs two), or one query of the Prometheus source; with the
    Pods', what the scrape read of them."""
    load = params.shared.load
    assert load is not None
    scraper = Scraper(_connect(args), args.namespace, scale_path(args.namespace, view.target),
                      str(view.target), load)
    sample = scraper.scrape_once()
    if sample is None or load.prometheus is None:
        time.sleep(load.scrape_interval_seconds)
        sample = scraper.scrape_once()
    if sample is None:
        where = ("its query's URL" if load.prometheus is not None
                 else "its Pods, at their IPs,")
        raise InputError(f"cannot measure the load of {view.target}: "
                         f"{scraper.status().fault}; this scrape reaches {where} from where "
                         "cpa explain runs, often out of reach outside the cluster: give the "
                         "rate your monitoring shows instead, --stable-rate RATE")
    step = measured_step(scraper.status()) if load.prometheus is None else None
    return Reading(sample.rate, sample.rate, sample.ready, 1, 1, 0.0), step


def load_axis(args: argparse.Namespace, params: Params, view: TargetView | None,
              current: int | None) -> LoadAxis | None:
    """The load axis for one poll with no history, or None when it cannot be shown."""
    load = params.shared.load
    given = args.stable_rate is not None or args.panic_rate is not None
    if load is None:
        if given or args.ready_pods is not None:
            raise InputError("--stable-rate, --panic-rate and --ready-pods are for "
                             "parameters with a load key, and these have none")
        return None
    if given:
        if args.stable_rate is None:
            raise InputError("--panic-rate needs --stable-rate too")
        stable = _rate(args.stable_rate, "--stable-rate")
        panic = _rate(args.panic_rate, "--panic-rate") if args.panic_rate else stable
        ready = (replica_count(args.ready_pods, "--ready-pods") if args.ready_pods
                 else current if current is not None else 1)
        reading, measured = Reading(stable, panic, ready, 1, 1, 0.0), None
    elif args.from_cluster and view is not None:
        reading, measured = _measure(args, params, view)
    else:
        return None
    outcome = scale(load, PanicState(begun=True), reading, 0.0)
    note = Step("load.history", (
        "The load axis here has one reading and no history: the daemon averages its "
        "windows over many scrapes and keeps a panic's count until the panic ends, so it "
        "may hold more."))
    first = () if measured is None else (measured,)
    return LoadAxis(outcome.replicas, (*first, *outcome.steps, note), outcome)


def _explain(args: argparse.Namespace) -> tuple[str, int]:
    counts, params, origin, where, cap = gather(args)
    view = read_target(args)
    current = current_replicas(args, view)
    axis = load_axis(args, params, view, current)
    decision = decide(params, counts, axis)
    if args.output == "json":
        doc = render_json(counts, params, decision, origin, current, view)
        if where is not None:
            doc["placement"] = placement_json(where)
        elif params.shared.target_placement:
            doc["placement"] = {"note": _GIVEN_AS_PLACED}
        if params.shared.cap_to_placeable is not None and decision.error is None:
            _cap_json(doc, cap)
        out = json.dumps(doc, indent=2)
    else:
        out = render_text(counts, decision, origin, params, current, view)
        if where is not None:
            out = placement_text(where) + "\n" + out
        elif params.shared.target_placement:
            out = (f"Placement (targetPlacement): {_GIVEN_AS_PLACED}\n") + out
        if params.shared.cap_to_placeable is not None and decision.error is None:
            out += "\n" + _cap_text(params, decision, current, view, cap)
    return out, 0 if decision.error is None else 1


_CAP_NOT_READ = ("capToPlaceable: not judged here; --from-cluster --target KIND/NAME reads "
                 "the Pod template's anti-affinity and the Nodes its Pods can be placed on")


def _cap_text(params: Params, decision: Decision, current: int | None,
              view: TargetView | None, cap: CapView | None) -> str:
    """The last step, ``capToPlaceable``, on what the steps above write."""
    if cap is None:
        return _CAP_NOT_READ + "."
    outcome = behave(params, decision, current)
    wanted, _ = target_steps(view, outcome.replicas if outcome is not None
                             else decision.replicas)
    capped = cap_replicas(wanted, cap.mode, cap.room)
    if capped is None:
        return ("capToPlaceable: the Pod template has no required anti-affinity against its "
                "own Pods on a key every Node it fits carries: nothing to cap.")
    return f"{capped.step.text}\n=> {capped.replicas} replicas"


def _cap_json(doc: dict[str, Any], cap: CapView | None) -> None:
    """``capToPlaceable`` in the JSON answer: the room, and the count it leaves."""
    if cap is None:
        doc["placeable"] = {"note": _CAP_NOT_READ}
        return
    capped = cap_replicas(int(doc["replicas"]), cap.mode, cap.room)
    if capped is None:
        doc["placeable"] = {"mode": cap.mode, "topology_key": None, "domains": None}
        return
    doc["placeable"] = {"mode": cap.mode, "topology_key": capped.room.key,
                        "domains": capped.room.domains, "wanted": capped.wanted,
                        "unplaceable": capped.unplaceable}
    doc["steps"].append({"key": capped.step.key, "text": capped.step.text})
    if capped.replicas != capped.wanted:
        doc.setdefault("desired", capped.wanted)
        doc["replicas"] = capped.replicas


_GIVEN_AS_PLACED = ("the counts given are taken as the Nodes the target's Pod template fits "
                    "on; --from-cluster --target KIND/NAME reads the template and counts them")


def placement_json(view: PlacementView) -> dict[str, Any]:
    p = view.placement
    return {"node_selector": dict(p.node_selector),
            "affinity_terms": None if p.required is None else len(p.required),
            "tolerations": len(p.tolerations), "nodes": view.counts.total_nodes,
            "excluded": view.excluded}


def placement_text(view: PlacementView) -> str:
    """Which Nodes the target's template fits on, and what kept the others off."""
    rules = ", ".join(f"{n} by {rule}" for rule, n in sorted(view.excluded.items()))
    return (f"Placement (targetPlacement): the target's Pod template fits "
            f"{view.counts.total_nodes} of the counted Nodes"
            + (f"; excluded: {rules}." if rules else "; none excluded."))
