"""What ``cpa explain`` and ``cpa simulate`` read from their command lines, and how they
answer: the parameter flags and their resolution into :class:`~cpa.decide.modes.mode.Params`
(from ``--data``, ``--configmap-file`` or ``--default-params``), and :func:`answer`, which
prints a tool's output or one line saying what is wrong.

Both tools take the same parameters as the daemon's ConfigMap and parse them with the
daemon's own code, so what they show is what the daemon would do.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from cpa.decide.defaults import default_params_to_data
from cpa.decide.modes.mode import Params
from cpa.decide.modes.registry import parse_configmap_data
from cpa.decide.params import ParamsError

__all__ = ["InputError", "add_parameter_arguments", "answer", "data_from_file",
           "data_from_json", "defaults", "explicit_params", "parameters_from_flags",
           "parse_params"]


class InputError(Exception):
    """Bad input to a tool: exit 1 with this message."""


def add_parameter_arguments(p: argparse.ArgumentParser) -> None:
    """The parameter flags, shared by ``explain`` and ``simulate``."""
    src = p.add_argument_group("parameters (one of)")
    src.add_argument("--data", metavar="JSON",
                     help='the ConfigMap\'s data as a JSON object of strings, e.g. '
                          '\'{"linear": "{\\"nodesPerReplica\\": 16}"}\'')
    src.add_argument("--configmap-file", metavar="PATH", help="a ConfigMap manifest (YAML/JSON)")
    src.add_argument("--default-params", metavar="JSON",
                     help="the --default-params flag's value; with --from-cluster, used only "
                          "when the ConfigMap does not exist (as the daemon would create it)")


def data_from_file(path: str) -> dict[str, str] | None:
    """The data of a ConfigMap manifest (YAML or JSON), as the daemon would read it."""
    import yaml

    try:
        doc = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(f"--configmap-file: cannot read {path}: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("kind", "ConfigMap") != "ConfigMap":
        raise InputError(f"--configmap-file: {path} is not a ConfigMap manifest")
    data = doc.get("data")
    if data is None:
        return None
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise InputError(f"--configmap-file: {path}: data must map keys to strings")
    return {str(k): v for k, v in data.items()}


def data_from_json(text: str) -> dict[str, str]:
    """``--data``: the ConfigMap's data as a JSON object of strings."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InputError(f"--data: not JSON: {exc}") from exc
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise InputError('--data: expected a JSON object of strings, e.g. '
                           '{"linear": "{\\"nodesPerReplica\\":16}"}')
    return data


def defaults(text: str) -> dict[str, str]:
    """``--default-params``: the data the daemon would create the ConfigMap with."""
    try:
        return default_params_to_data(text)
    except ValueError as exc:
        raise InputError(f"--default-params: {exc}") from exc


def explicit_params(args: argparse.Namespace) -> tuple[dict[str, str] | None, str] | None:
    """Parameters given on the command line (``--data`` or ``--configmap-file``), if any."""
    if args.data is not None and args.configmap_file is not None:
        raise InputError("give only one of --data and --configmap-file")
    if args.data is not None:
        return data_from_json(args.data), "--data"
    if args.configmap_file is not None:
        return data_from_file(args.configmap_file), args.configmap_file
    return None


def parse_params(data: dict[str, str] | None, origin: str) -> Params:
    """The daemon's parsing of a ConfigMap's data; ``origin`` says where it came from."""
    try:
        return parse_configmap_data(data)
    except ParamsError as exc:
        raise InputError(f"invalid parameters from {origin}: {exc}") from exc


def parameters_from_flags(args: argparse.Namespace) -> tuple[Params, str]:
    """The parameters from ``--data``, ``--configmap-file`` or ``--default-params`` (no
    cluster), and where they came from."""
    source = explicit_params(args)
    if source is None and args.default_params is not None:
        source = defaults(args.default_params), "--default-params"
    if source is None:
        raise InputError("give the parameters: --data, --configmap-file or --default-params")
    return parse_params(*source), source[1]


def answer(prog: str, output: str, verb: str, compute: Callable[[], tuple[str, int]]) -> int:
    """Print what ``compute`` returns (the output and the exit code). Any error is one line
    instead, exit 1: ``{"error": ...}`` on stdout with ``-o json``, else ``prog: ...`` on
    stderr. Never a traceback, whatever the input: an operator pastes ConfigMaps and
    timelines from anywhere into these tools."""
    try:
        out, code = compute()
    except InputError as exc:
        return _fail(prog, output, str(exc))
    except Exception as exc:
        return _fail(prog, output,
                     f"cannot {verb} this input: {type(exc).__name__}: {exc}"[:2000])
    print(out)
    return code


def _fail(prog: str, output: str, message: str) -> int:
    if output == "json":
        print(json.dumps({"error": message}))
    else:
        print(f"{prog}: {message}", file=sys.stderr)
    return 1
