"""What ``cpa explain`` and ``cpa simulate`` read from their command lines, and how they
answer: the parameter flags and their resolution into
:class:`~cpa.horizontal.decide.modes.mode.Params`
(from ``--data``, ``--configmap-file`` or ``--default-params``), the ONE validator of
hand-given cluster counts (:func:`cluster_counts`), the argument parser both use
(:class:`ToolParser`: flag syntax errors are one line and exit 2, as pflag's) and
:func:`answer`, which prints a tool's output or one line saying what is wrong.

Both tools take the same parameters as the daemon's ConfigMap and parse them with the
daemon's own code, so what they show is what the daemon would do; and they take the same
counts with the same rules, so an input one accepts the other accepts too.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Sequence
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from pathlib import Path
from typing import Any, Final, NoReturn

import yaml

from cpa import redact
from cpa.failures import internal_error, missing_module
from cpa.go.pflag import MAX_SUGGESTIONS, suggest
from cpa.go.quantity import CpuQuantityError, cores_rounded_up, cpu_millicores
from cpa.horizontal.decide.defaults import default_params_to_data
from cpa.horizontal.decide.modes.mode import Params
from cpa.horizontal.decide.modes.registry import parse_configmap_data
from cpa.horizontal.decide.params import ParamsError
from cpa.kube.api import ApiError, StreamingApi
from cpa.nodes.counts import ClusterCounts
from cpa.objects.watch import KINDS, ObjectWatch, rule

__all__ = ["COUNT_MAX", "REPLICAS_MAX", "InputError", "ToolParser", "UsageError",
           "add_object_arguments", "add_parameter_arguments", "answer", "cluster_counts",
           "count", "data_from_file", "data_from_json", "defaults", "explicit_params",
           "flag_names", "given_objects", "listed_objects", "object_count",
           "parameters_from_flags", "parse_params", "read_text", "replica_count",
           "unknown_argument"]

COUNT_MAX: Final = 2**63 - 1
"""The most nodes or cores a hand-given count may name: Kubernetes reads a quantity as a
whole number into an int64 (``Quantity.Value()``), so no cluster can report more."""
REPLICAS_MAX: Final = 2**31 - 1
"""A scale subresource's ``spec.replicas`` is an int32."""


class InputError(Exception):
    """Bad input to a tool: exit 1 with this message."""


class UsageError(Exception):
    """A command line that cannot be parsed (unknown flag, missing value): exit 2."""


class ToolParser(argparse.ArgumentParser):
    """argparse with pflag's manners: a syntax error is one line (no usage block) and exit 2
    (:class:`UsageError`, turned into that line by :func:`answer`'s caller), in our words:
    an unknown flag names the nearest ones (as the daemons do), before any complaint about
    a required flag (the typo is the real problem); a flag without its value, or a value
    outside its choices, says so plainly.

    ``required`` and ``choices`` given to :meth:`add_argument` are checked here, after the
    whole command line is read, for that order and those words; the help shows them as
    argparse would. A flag is never abbreviated (as pflag does not)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self.required_flags: list[argparse.Action] = []
        self.flag_choices: list[tuple[argparse.Action, tuple[str, ...]]] = []

    def add_output_argument(self) -> None:
        """``--output``/``-o``: text or json, as :func:`answer` writes it."""
        self.add_argument("--output", "-o", choices=("text", "json"), default="text")

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        choices = kwargs.pop("choices", None)
        if choices is not None:
            choices = tuple(choices)
            kwargs.setdefault("metavar", "{" + ",".join(choices) + "}")
        action = super().add_argument(*args, **kwargs)
        if action.required:
            self.required_flags.append(action)
        if choices is not None:
            self.flag_choices.append((action, choices))
        return action

    def parse_flags(self, argv: Sequence[str], *, rest: bool = False
                    ) -> tuple[argparse.Namespace, list[str]]:
        """The flags, and (``rest``: for another parser to read) what this one does not
        know; without ``rest`` that is an error naming the nearest flags."""
        try:
            args, extra = self.parse_known_args(list(argv))
        except UsageError:
            if not self.required_flags:
                raise
            # A required flag is missing: read again without that rule, for a mistyped flag
            # (--timline for --timeline) is the problem to name, else the missing one.
            args, extra = self._without_required(argv)
            if not extra or rest:
                missing = [_long(a) for a in self.required_flags
                           if getattr(args, a.dest) is None]
                raise UsageError(f"{' and '.join(missing)} "
                                 f"{'is' if len(missing) == 1 else 'are'} required") from None
        if extra and not rest:
            raise UsageError(unknown_argument(extra[0], self.known_flags()))
        for action, choices in self.flag_choices:
            value = getattr(args, action.dest)
            if value is not None and value not in choices:
                raise UsageError(f"{_long(action)} {_shown(value)!r}: give "
                                 f"{', '.join(choices[:-1])} or {choices[-1]}")
        return args, extra

    def known_flags(self) -> list[str]:
        """The long flags this parser defines, without dashes, in their order."""
        return flag_names(self._without_required([])[0]) + (["help"] if self.add_help else [])

    def _without_required(self, argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
        for action in self.required_flags:
            action.required = False
        try:
            return self.parse_known_args(list(argv))
        finally:
            for action in self.required_flags:
                action.required = True

    def error(self, message: str) -> NoReturn:
        raise UsageError(_our_words(message))


def _long(action: argparse.Action) -> str:
    """The flag's long name (``--output`` of ``-o``/``--output``)."""
    return next((o for o in action.option_strings if o.startswith("--")),
                action.option_strings[0] if action.option_strings else action.dest)


def flag_names(args: argparse.Namespace) -> list[str]:
    """The long flags a parsed command line could have used (every flag has a value in the
    namespace, its default when not given), in the order they were defined."""
    return [name.replace("_", "-") for name in vars(args)]


def unknown_argument(arg: str, names: Sequence[str]) -> str:
    """What is wrong with an argument no flag takes: a flag nobody defined (with the
    nearest ones, as the daemons suggest), or a word that is not a flag's value."""
    if not arg.startswith("-") or arg == "-":
        return (f"unexpected argument {_shown(arg)!r}: every input is a flag's value "
                "(--flag VALUE or --flag=VALUE)")
    typed = arg.lstrip("-").partition("=")[0]
    found = suggest(typed, names)[:MAX_SUGGESTIONS]
    hint = f" (did you mean {' or '.join('--' + n for n in found)}?)" if found else ""
    return f"unknown flag: {_shown(arg.partition('=')[0])}{hint}"


_MESSAGES: Final[tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], str]], ...]] = (
    # argparse's words (stable from Python 3.11 on) and ours.
    (re.compile(r"argument (\S+): expected one argument"),
     lambda m: f"flag needs an argument: {_flag_of(m.group(1))}"),
    (re.compile(r"argument (\S+): ignored explicit argument (.*)"),
     lambda m: f"{_flag_of(m.group(1))} takes no value (given {m.group(2)})"),
)


def _flag_of(names: str) -> str:
    """``--output`` of argparse's ``--output/-o``."""
    return next((n for n in names.split("/") if n.startswith("--")), names)


def _our_words(message: str) -> str:
    for pattern, words in _MESSAGES:
        match = pattern.fullmatch(message)
        if match:
            return words(match)
    return message


def run_command(parser: ToolParser, argv: Sequence[str],
                compute: Callable[[argparse.Namespace], tuple[str, int]]) -> int:
    """A tool's whole command: parse ``argv`` (exit 0 after ``--help``, 2 after a syntax
    error), then print what ``compute`` returns, as :func:`answer`."""
    args = parse_command_line(parser, argv)
    if isinstance(args, int):
        return args
    return answer(parser.prog, args.output, lambda: compute(args))


def parse_command_line(parser: ToolParser, argv: Sequence[str]) -> argparse.Namespace | int:
    """The parsed arguments, or the exit code when there is nothing to run: 0 after
    ``--help``, 2 after a syntax error (one line on stderr)."""
    try:
        return parser.parse_flags(argv)[0]
    except UsageError as exc:
        print(f"{parser.prog}: {exc} (see --help)", file=sys.stderr)
        return 2
    except SystemExit as exc:  # --help printed its text
        return exc.code if isinstance(exc.code, int) else 0


def add_flags(add_argument: Callable[..., argparse.Action],
              *rows: tuple[str, str, str]) -> None:
    """Flags without a default, one row each: the flag, its metavar ("" for a switch, which
    is False unless given) and its help; added with a parser's or a group's
    ``add_argument``."""
    for flag, metavar, text in rows:
        if metavar:
            add_argument(flag, metavar=metavar, help=text)
        else:
            add_argument(flag, action="store_true", help=text)


def add_parameter_arguments(p: argparse.ArgumentParser, *, from_cluster: bool = False) -> None:
    """The parameter flags, shared by ``explain`` and ``simulate``; ``from_cluster``: the
    command also has ``--from-cluster`` (explain), which these flags' help then mentions."""
    src = p.add_argument_group("parameters (one of)")
    add_flags(
        src.add_argument,
        ("--data", "JSON",
         'the ConfigMap\'s data as a JSON object of strings, e.g. '
         '\'{"linear": "{\\"nodesPerReplica\\": 16}"}\''),
        ("--configmap-file", "PATH",
         "a file with the ConfigMap (YAML or JSON; in a multi-document file, the ConfigMap "
         "named by --configmap when there are several)"),
        ("--default-params", "JSON",
         "the --default-params flag's value" + (
             "; with --from-cluster, used only when the ConfigMap does not exist (as the "
             "daemon would create it)" if from_cluster else "")))
    src.add_argument("--configmap", default="", metavar="NAME",
                     help="the ConfigMap's name: which one --configmap-file picks"
                          + (" (with --from-cluster: which one is read)" if from_cluster
                             else ""))


# ----------------------------------------------------------------------------- files


def read_text(path: str, flag: str) -> str:
    """A file's text for ``flag``, or one line saying why it cannot be read."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"{flag}: cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:  # a path no file can have ("embedded null byte")
        raise InputError(f"{flag}: cannot read {path!r}: {exc}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{flag}: {path} is not UTF-8 text (byte {exc.start} is "
                         f"0x{raw[exc.start]:02x}); save it as UTF-8") from None


def _yaml_documents(text: str, path: str) -> list[object]:
    try:
        return [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        detail = " ".join(str(exc).split())
        raise InputError(f"--configmap-file: {path} is not YAML or JSON: {detail}") from None
    except RecursionError:
        raise InputError(f"--configmap-file: {path} is nested too deeply") from None


def _name_of(doc: dict[Any, Any]) -> str:
    meta = doc.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    return name if isinstance(name, str) else ""


def _flag_value(argv: Sequence[object], name: str) -> str | None:
    """The last ``--name=value`` / ``--name value`` of a container's command line, spelled
    as pflag accepts it (``_`` or ``-``)."""
    found: str | None = None
    items = [a for a in argv if isinstance(a, str)]
    for i, arg in enumerate(items):
        flag, equals, value = arg.partition("=")
        if flag.replace("_", "-") != f"--{name}":
            continue
        if equals:
            found = value
        elif i + 1 < len(items):
            found = items[i + 1]
    return found


def _autoscaler_defaults(docs: Sequence[object]) -> list[tuple[str, str]]:
    """(--configmap, --default-params) of every container in the file that runs the
    autoscaler with defaults: the ConfigMap the daemon would create."""
    found: list[tuple[str, str]] = []
    for doc in docs:
        if not isinstance(doc, dict):
            continue
        spec = doc.get("spec")
        template = spec.get("template") if isinstance(spec, dict) else None
        pod = template.get("spec") if isinstance(template, dict) else None
        containers = pod.get("containers") if isinstance(pod, dict) else None
        for c in containers if isinstance(containers, list) else ():
            if not isinstance(c, dict):
                continue
            command, args = c.get("command") or [], c.get("args") or []
            if not isinstance(command, list) or not isinstance(args, list):
                continue
            params = _flag_value([*command, *args], "default-params")
            if params is not None:
                found.append((_flag_value([*command, *args], "configmap") or "", params))
    return found


def data_from_file(path: str, name: str = "") -> tuple[dict[str, str] | None, str]:
    """The data of the ConfigMap in a file (YAML or JSON, one or many documents, a
    ``kind: List`` too), as the daemon would read it, and where it came from.

    With several ConfigMaps, ``name`` (``--configmap``) picks one. A file with no ConfigMap
    but the autoscaler's own Deployment (``manifests/kube-dns-autoscaler.yaml``) gives the
    ConfigMap that Deployment's ``--default-params`` would create."""
    docs = _yaml_documents(read_text(path, "--configmap-file"), path)
    items: list[object] = []
    for doc in docs:
        if isinstance(doc, dict) and doc.get("kind") == "List" \
                and isinstance(doc.get("items"), list):
            items.extend(doc["items"])
        else:
            items.append(doc)
    maps = [d for d in items if isinstance(d, dict)
            and d.get("kind", "ConfigMap") == "ConfigMap"
            and (d.get("kind") == "ConfigMap" or "data" in d)]
    if name:
        maps = [d for d in maps if _name_of(d) == name]
    if len(maps) > 1:
        names = ", ".join(repr(_name_of(d)) for d in maps)
        raise InputError(f"--configmap-file: {path} has {len(maps)} ConfigMaps ({names}): "
                         "pick one with --configmap NAME")
    if maps:
        return _configmap_data(maps[0], path), path
    made = [(cm, params) for cm, params in _autoscaler_defaults(items)
            if not name or cm == name]
    if len(made) == 1:
        cm, params = made[0]
        return defaults(params), (f"--default-params of the autoscaler in {path} (no "
                                  f"ConfigMap {cm!r} in the file; the daemon would create "
                                  "it with these)")
    what = f"no ConfigMap named {name!r}" if name else "no ConfigMap"
    if len(made) > 1:
        raise InputError(f"--configmap-file: {path} has {what} and {len(made)} autoscalers "
                         "with --default-params: pick one with --configmap NAME")
    raise InputError(f"--configmap-file: {path} has {what} (a manifest with kind: ConfigMap "
                     "and a data map is expected)")


def _configmap_data(doc: dict[Any, Any], path: str) -> dict[str, str] | None:
    data = doc.get("data")
    if data is None:
        return None
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise InputError(f"--configmap-file: {path}: data must map keys to strings (quote "
                         "the JSON with |- as in manifests/examples/linear-configmap.yaml)")
    return {str(k): v for k, v in data.items()}


def data_from_json(text: str) -> dict[str, str]:
    """``--data``: the ConfigMap's data as a JSON object of strings."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InputError(f"--data: not JSON: {exc}") from None
    except RecursionError:
        raise InputError("--data: nested too deeply to be a ConfigMap's data") from None
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise InputError('--data: expected a JSON object of strings, e.g. '
                         '{"linear": "{\\"nodesPerReplica\\":16}"}')
    return data


def defaults(text: str) -> dict[str, str]:
    """``--default-params``: the data the daemon would create the ConfigMap with."""
    try:
        return default_params_to_data(text)
    except ValueError as exc:
        raise InputError(f"--default-params: {exc}") from None


def explicit_params(args: argparse.Namespace) -> tuple[dict[str, str] | None, str] | None:
    """Parameters given on the command line (``--data`` or ``--configmap-file``), if any."""
    if args.data is not None and args.configmap_file is not None:
        raise InputError("give only one of --data and --configmap-file")
    if args.data is not None:
        return data_from_json(args.data), "--data"
    if args.configmap_file is not None:
        return data_from_file(args.configmap_file, args.configmap)
    return None


def parse_params(data: dict[str, str] | None, origin: str) -> Params:
    """The daemon's parsing of a ConfigMap's data; ``origin`` says where it came from."""
    try:
        return parse_configmap_data(data)
    except ParamsError as exc:
        raise InputError(f"invalid parameters from {origin}: {exc}") from None


def parameters_from_flags(args: argparse.Namespace) -> tuple[Params, str]:
    """The parameters from ``--data``, ``--configmap-file`` or ``--default-params`` (no
    cluster), and where they came from."""
    source = explicit_params(args)
    if source is None and args.default_params is not None:
        source = defaults(args.default_params), "--default-params"
    if source is None:
        raise InputError("give the parameters: --data, --configmap-file or --default-params")
    return parse_params(*source), source[1]


# ----------------------------------------------------------------------------- counts


def _shown(value: object) -> str:
    """A value as the operator wrote it, cut short when it is long."""
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"


def _whole(value: object, what: str, limit: int) -> int:
    """A count: a whole number from 0 to ``limit``, given as text (``"12"``, ``"1e3"``)
    or a JSON number; exact (never through a float)."""
    if isinstance(value, bool) or value is None or value == "":
        raise InputError(f"{what} is {'missing' if value in (None, '') else value}; give a "
                         "whole number")
    if isinstance(value, int):
        number = Decimal(value)
    elif isinstance(value, float | str):
        try:
            number = Decimal(value.strip() if isinstance(value, str) else repr(value))
        except InvalidOperation:
            raise InputError(f"{what} is {_shown(value)!r}, not a number") from None
    else:
        raise InputError(f"{what} is {_shown(value)}, not a number")
    if not number.is_finite():
        raise InputError(f"{what} is {_shown(value)}; give a finite number")
    if number < 0:
        raise InputError(f"{what} is {_shown(value)}; it cannot be negative")
    if number > limit:
        raise InputError(f"{what} is {_shown(value)}, more than {limit}; give at most {limit}")
    if number != number.to_integral_value():
        raise InputError(f"{what} is {_shown(value)}; give a whole number")
    return int(number)


def _millicores(value: object, what: str) -> int | Fraction:
    """Cores as a Kubernetes quantity (``"1536"``, ``"3920m"``, ``"1.5"``) or a JSON
    number, in exact millicores, at least 0 and at most ``COUNT_MAX`` cores."""
    if isinstance(value, bool) or value is None or value == "":
        raise InputError(f"{what} is {'missing' if value in (None, '') else value}; give a "
                         "number of cores such as 16 or 3920m")
    if isinstance(value, int):
        text = str(value)
    elif isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise InputError(f"{what} is {value}; give a finite number")
        text = repr(value)
    elif isinstance(value, str):
        text = value.strip()
    else:
        raise InputError(f"{what} is {_shown(value)}, not a number")
    try:
        millis = cpu_millicores(text)
    except CpuQuantityError:
        raise InputError(f"{what} is {_shown(value)!r}, not a number of cores (write e.g. "
                         "16, 1.5 or 3920m)") from None
    if millis < 0:
        raise InputError(f"{what} is {_shown(value)}; it cannot be negative")
    if cores_rounded_up(millis) > COUNT_MAX:
        raise InputError(f"{what} is {_shown(value)}, more than {COUNT_MAX} cores; give at "
                         f"most {COUNT_MAX}")
    return millis


def cluster_counts(nodes: object, cores: object, schedulable_nodes: object = None,
                   schedulable_cores: object = None, zones: object = None,
                   schedulable_zones: object = None, *,
                   names: Sequence[str] = ("nodes", "cores", "schedulable_nodes",
                                           "schedulable_cores", "zones", "schedulable_zones"),
                   where: str = "") -> ClusterCounts:
    """The counts the daemon would have counted, from values an operator typed: nodes
    whole, cores a quantity summed exactly and rounded up once (as the daemon rounds the
    sum of the Nodes' allocatable CPU), zones whole and only when given, the schedulable
    ones (default: all) no more than the totals. ``names`` are the flags or columns,
    ``where`` prefixes every message."""
    prefix = f"{where}: " if where else ""
    total_nodes = _whole(nodes, prefix + names[0], COUNT_MAX)
    total_millis = _millicores(cores, prefix + names[1])
    sched_nodes = total_nodes if schedulable_nodes in (None, "") \
        else _whole(schedulable_nodes, prefix + names[2], COUNT_MAX)
    sched_millis = total_millis if schedulable_cores in (None, "") \
        else _millicores(schedulable_cores, prefix + names[3])
    if sched_nodes > total_nodes:
        raise InputError(f"{prefix}more schedulable than total: {names[2]} is {sched_nodes}, "
                         f"{names[0]} {total_nodes} (the schedulable ones are counted in "
                         "the total)")
    if sched_millis > total_millis:
        raise InputError(f"{prefix}more schedulable than total: {names[3]} is "
                         f"{_shown(schedulable_cores)}, {names[1]} {_shown(cores)} (the "
                         "schedulable ones are counted in the total)")
    total_zones = None if zones in (None, "") else _whole(zones, prefix + names[4], COUNT_MAX)
    sched_zones = total_zones
    if schedulable_zones not in (None, ""):
        if total_zones is None:
            raise InputError(f"{prefix}{names[5]} without {names[4]}: give {names[4]} too "
                             "(the zones all the Nodes are in)")
        sched_zones = _whole(schedulable_zones, prefix + names[5], COUNT_MAX)
        if sched_zones > total_zones:
            raise InputError(f"{prefix}more schedulable than total: {names[5]} "
                             f"{sched_zones} is more than {names[4]} {total_zones} (the "
                             "schedulable ones are counted in the total)")
    return ClusterCounts(total_nodes, cores_rounded_up(total_millis), sched_nodes,
                         cores_rounded_up(sched_millis), total_zones=total_zones,
                         schedulable_zones=sched_zones)


def count(value: str, flag: str) -> int:
    """A whole count typed on the command line (``--nodes 40``), 0 to ``COUNT_MAX``."""
    return _whole(value, flag, COUNT_MAX)


def object_count(value: object, what: str) -> int | None:
    """Ours: a ``pods`` or ``services`` cell of a timeline, a whole count from 0 to
    ``COUNT_MAX``; None when the cell is empty or absent (not counted at that row)."""
    return None if value is None or value == "" else _whole(value, what, COUNT_MAX)


def replica_count(value: str, flag: str) -> int:
    """``--current-replicas`` / ``--start-replicas``: a scale's replicas (0 to 2^31-1)."""
    return _whole(value, flag, REPLICAS_MAX)


def add_object_arguments(add_argument: Callable[..., argparse.Action], pods: str,
                         services: str) -> None:
    """Ours: ``--pods``/``--services`` of ``explain`` (read by :func:`given_objects`), added
    with a parser's or a group's ``add_argument``; ``pods`` and ``services`` name what needs
    each count."""
    add_argument("--pods", metavar="N", help=f"Pods in the cluster, not finished (for {pods})")
    add_argument("--services", metavar="N", help=f"Services in the cluster (for {services})")


def given_objects(args: argparse.Namespace, needs: Callable[[str], str | None]
                  ) -> dict[str, int]:
    """Ours: ``--pods``/``--services`` of ``explain``; ``needs(kind)`` says why the
    parameters (or the config) require that count, or None when they do not."""
    given: dict[str, int] = {}
    for kind in ("pods", "services"):
        value = getattr(args, kind)
        why = needs(kind)
        if value is not None:
            given[kind] = count(value, f"--{kind}")
        elif why is not None:
            raise InputError(f"{why}: give --{kind} N (the {kind} in the cluster), or use "
                             "--from-cluster")
    return given


def listed_objects(api: StreamingApi, kinds: frozenset[str]) -> dict[str, int]:
    """Ours: the Pods and Services of ``kinds``, listed once (metadata only)."""
    listed: dict[str, int] = {}
    for kind in sorted(kinds):
        try:
            listed[kind] = ObjectWatch(api, KINDS[kind]).list_once()
        except ApiError as exc:
            grant = f": grant it with {rule(kind)}" if exc.forbidden else ""
            raise InputError(f"counting {kind}: {exc}{grant}") from None
    return listed


# ----------------------------------------------------------------------------- the answer


def answer(prog: str, output: str, compute: Callable[[], tuple[str, int]]) -> int:
    """Print what ``compute`` returns (the output and the exit code). Any error is one line
    instead, exit 1: ``{"error": ...}`` on stdout with ``-o json``, else ``prog: ...`` on
    stderr. Never a traceback, whatever the input: an operator pastes ConfigMaps and
    timelines from anywhere into these tools. An exception that is not an
    :class:`InputError` is a bug of ours; it is still one line, and says so."""
    try:
        out, code = compute()
    except InputError as exc:
        return _fail(prog, output, str(exc))
    except (RecursionError, MemoryError):
        return _fail(prog, output, "the input is too large or nested too deeply to handle")
    except ModuleNotFoundError as exc:
        return _fail(prog, output, missing_module(exc))
    except Exception as exc:
        return _fail(prog, output, internal_error(exc))
    print(redact.scrub(out))
    return code


def _fail(prog: str, output: str, message: str) -> int:
    message = redact.scrub(message)
    if output == "json":
        print(json.dumps({"error": message}))
    else:
        print(f"{prog}: {message}", file=sys.stderr)
    return 1
