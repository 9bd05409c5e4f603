"""Every command, any command line, any file: an answer or one line, never a traceback.

hypothesis drives every way in (``cpa run``, ``cpa explain``, ``cpa simulate``, the daemon's
own ``cluster-proportional-autoscaler``, ``cpvpa`` and ``cpa explain --vertical``, and
``cpa`` with any words at all) with command lines made of their real
flags, junk flags and junk values, pointing at files with random bytes, random text, and
near-valid ConfigMaps, timelines and kubeconfigs. Each run is checked for: an exit code
pflag and argparse would give (0, 1 or 2), no traceback on stdout or stderr or from any
thread, and no "internal error" line (the guard's last resort: a message that does not say
what to fix).

The commands run in this process: 1,200 examples by default (250 each for explain, simulate
and any argv; 150 each for `cpa run`, the daemon binary and /cpvpa, whose examples also run
`cpa explain --vertical`), so 1,350 command runs in some 30 s. The environment is
hermetic: no KUBECONFIG, no in-cluster variables, HOME in a temp dir; the health port is
always a free one (never upstream's :8080); a daemon that does start (a kubeconfig whose
server refuses connections) is stopped by SIGTERM to itself after a moment, as a kubelet
stops it.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import socket
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from unittest import mock

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from cpa import logs
from cpa.cli import daemon_main, main, vertical_main
from cpa.horizontal import cpa_flags as flags
from cpa.vertical import cpvpa_flags as vertical_options

EXITS = (0, 1, 2)
# Runs per command; CPA_PROPERTY_EXAMPLES=5000 for a longer hunt.
EXAMPLES = int(os.environ.get("CPA_PROPERTY_EXAMPLES", "250"))
DAEMON_STOP_AFTER = 1.5  # seconds a started daemon runs before its SIGTERM

# --- file contents ---------------------------------------------------------------------

_json_bits = st.sampled_from(['{"nodesPerReplica":', '{"coresToReplicas":[[', "[", "]",
                              '"zones":{', '"minPerZone":', '"topologyKey":',
                              '"excludeNodesWithTaints":["@lifecycle"',
                              "{", "}", ",", ":", "1e400", "-1", "9" * 30, "null", '"x"',
                              "true", "0.5", '"behavior":{"scaleDown":{', "2147483648"])
_json_text = st.lists(st.one_of(_json_bits, st.text(max_size=8)), max_size=10).map("".join)
_scalar = st.one_of(st.none(), st.booleans(), st.integers(-10, 10**20),
                    st.floats(allow_nan=True), st.text(max_size=12))


def _configmap() -> st.SearchStrategy[str]:
    data = st.dictionaries(st.sampled_from(["linear", "ladder", "Linear", "other"]),
                           st.one_of(_json_text, _scalar), max_size=2)
    doc = st.fixed_dictionaries({
        "kind": st.sampled_from(["ConfigMap", "ConfigMap", "List", "Deployment", 5]),
        "metadata": st.fixed_dictionaries({"name": st.sampled_from(["a", "b", "", 1])}),
        "data": st.one_of(data, _scalar, st.lists(_scalar, max_size=2))})
    return st.lists(doc, min_size=1, max_size=3).map(
        lambda docs: "\n---\n".join(yaml.safe_dump(d) for d in docs))


def _timeline() -> st.SearchStrategy[str]:
    cell = st.one_of(st.integers(-5, 10**20).map(str), st.sampled_from(
        ["", "3920m", "1.5", "1e400", "nan", "x", "-0", "2k", "1Ki"]), st.text(max_size=5))
    header = st.lists(st.sampled_from(["t", "nodes", "cores", "schedulable_nodes",
                                       "schedulable_cores", "zones", "schedulable_zones",
                                       "pods", "services", "other", ""]),
                      min_size=1, max_size=6)
    csv = st.tuples(header, st.lists(st.lists(cell, max_size=6), max_size=6)).map(
        lambda hr: "\n".join([",".join(hr[0]), *(",".join(r) for r in hr[1])]) + "\n")
    row = st.dictionaries(st.sampled_from(["t", "nodes", "cores", "schedulable_nodes",
                                           "schedulable_cores", "zones",
                                           "schedulable_zones", "pods", "services", "x"]),
                          st.one_of(_scalar, cell), max_size=5)
    as_json = st.lists(st.one_of(row, _scalar), max_size=5).map(json.dumps)
    return st.one_of(csv, as_json)


def _kubeconfig() -> st.SearchStrategy[str]:
    """Kubeconfigs of every shape, none with a server that answers: a server is garbage,
    or 127.0.0.1:1, where nothing listens."""
    server = st.sampled_from(["http://127.0.0.1:1", "https://127.0.0.1:1", "", "not a url",
                              "https://", 5, None])
    user = st.one_of(
        st.fixed_dictionaries({"token": st.one_of(st.text(max_size=8), _scalar)}),
        st.fixed_dictionaries({"tokenFile": st.sampled_from(["/nonexistent", "", "."])}),
        st.fixed_dictionaries({"client-certificate-data": st.sampled_from(["eA==", "!!", ""]),
                               "client-key-data": st.sampled_from(["eA==", "!!", ""])}),
        st.fixed_dictionaries({"username": _scalar, "password": _scalar}),
        _scalar)
    cluster = st.fixed_dictionaries({
        "server": server,
        "certificate-authority-data": st.sampled_from(["", "eA==", "!!", "bm90IGEgY2VydA=="]),
        "insecure-skip-tls-verify": st.booleans()})
    doc = st.fixed_dictionaries({
        "current-context": st.sampled_from(["a", "b", "", None, 3]),
        "contexts": st.one_of(_scalar, st.just([{"name": "a", "context": {"cluster": "k",
                                                                          "user": "u"}}])),
        "clusters": st.one_of(_scalar, cluster.map(lambda c: [{"name": "k", "cluster": c}])),
        "users": st.one_of(_scalar, user.map(lambda u: [{"name": "u", "user": u}]))})
    return doc.map(yaml.safe_dump)


def _good_timeline() -> st.SearchStrategy[str]:
    """Timelines that load, so that the replay and the plot are reached too."""
    row = st.tuples(st.integers(1, 600), st.integers(0, 500), st.integers(0, 5000))
    return st.lists(row, min_size=1, max_size=12).map(lambda rows: "t,nodes,cores\n" + "".join(
        f"{sum(r[0] for r in rows[:i + 1])},{n},{c}\n" for i, (_, n, c) in enumerate(rows)))


_GOOD_CONFIGMAP = yaml.safe_dump({"kind": "ConfigMap", "metadata": {"name": "a"}, "data": {
    "linear": '{"nodesPerReplica":4,"behavior":{"scaleDown":{"stabilizationWindowSeconds":60}}}'}})
_ZONED_CONFIGMAP = yaml.safe_dump({"kind": "ConfigMap", "metadata": {"name": "z"}, "data": {
    "linear": '{"nodesPerReplica":4,"zones":{"minPerZone":2,"roundUpToZones":true}}'}})
_LOAD_CONFIGMAP = yaml.safe_dump({"kind": "ConfigMap", "metadata": {"name": "l"}, "data": {
    "linear": '{"nodesPerReplica":4,"load":{"metric":"m_total","port":9153,'
              '"targetPerReplica":100,"stableWindowSeconds":6,"panicWindowPercentage":50,'
              '"scrapeIntervalSeconds":1}}'}})


def _load_timeline() -> st.SearchStrategy[str]:
    """Timelines with a qps column (some cells empty), for the load axis and advice."""
    row = st.tuples(st.integers(1, 30), st.integers(0, 50),
                    st.one_of(st.just(""), st.integers(0, 10**6).map(str)))
    return st.lists(row, min_size=1, max_size=12).map(lambda rows: "t,nodes,cores,qps\n" + "".join(
        f"{sum(r[0] for r in rows[:i + 1])},{n},{n * 4},{q}\n" for i, (_, n, q) in enumerate(rows)))

_PODS_CONFIGMAP = yaml.safe_dump({"kind": "ConfigMap", "metadata": {"name": "p"}, "data": {
    "linear": '{"nodesPerReplica":4,"podsPerReplica":100,"servicesPerReplica":10}'}})


def _pods_timeline() -> st.SearchStrategy[str]:
    """Timelines with pods and services columns, some cells hostile (negative, not a
    number, huge), for the Pods and Services axes and for advice."""
    cell = st.one_of(st.integers(-3, 10**20).map(str),
                     st.sampled_from(["", "x", "1e400", "nan", "1.5", "-0"]))
    row = st.tuples(st.integers(1, 30), st.integers(0, 50), cell, cell)
    return st.lists(row, min_size=1, max_size=12).map(lambda rows: "t,nodes,cores,qps,pods,"
                                                      "services\n" + "".join(
        f"{sum(r[0] for r in rows[:i + 1])},{n},{n * 4},{n * 10},{p},{v}\n"
        for i, (_, n, p, v) in enumerate(rows)))

_contents = st.one_of(st.binary(max_size=64), st.text(max_size=64), _json_text,
                      _configmap(), _timeline(), _kubeconfig(), _good_timeline(),
                      st.just(_GOOD_CONFIGMAP), st.just(_ZONED_CONFIGMAP),
                      st.just(_LOAD_CONFIGMAP), _load_timeline(), st.just(_PODS_CONFIGMAP),
                      _pods_timeline())

# --- command lines ---------------------------------------------------------------------

EXPLAIN = ["--data", "--configmap-file", "--default-params", "--configmap", "--nodes",
           "--cores", "--schedulable-nodes", "--schedulable-cores", "--zones",
           "--schedulable-zones", "--pods", "--services", "--from-cluster", "--namespace",
           "--nodelabels",
           "--kubeconfig", "--context", "--current-replicas", "--target", "--output", "-o",
           "--stable-rate", "--panic-rate", "--ready-pods", "--vertical"]
SIMULATE = ["--timeline", "--data", "--configmap-file", "--default-params", "--configmap",
            "--start-replicas", "--output", "-o", "--plot", "--compare",
            "--poll-period-seconds", "--all-rows"]
ADVISE = ["--timeline", "--prometheus-url", "--query", "--hours", "--step",
          "--max-per-replica", "--min-replicas", "--poll-period-seconds", "--startup-seconds",
          "--tolerance-percent", "--top", "--output", "-o"]
DAEMON = [f"--{name}" for name in flags.flag_names() if name not in ("health-port", "help")]
JUNK_FLAGS = ["--", "-", "-x", "--nope", "--data=", "--=", "-v", "-vv", "---x", "--h"]
# Command lines that work (with {file} one of the random files), for the random flags after
# them to reach validation, file reading, the parameters and the daemon's start.
EXPLAIN_BASES = [["--data", '{"linear":"{\\"nodesPerReplica\\":2}"}', "--nodes", "4",
                  "--cores", "8"], ["--configmap-file", "{file}", "--nodes", "4", "--cores", "8"],
                 ["--from-cluster", "--namespace=a", "--configmap=b", "--kubeconfig", "{file}"]]
SIMULATE_BASES = [["--timeline", "{file}", "--data", '{"linear":"{\\"nodesPerReplica\\":2}"}'],
                  ["--timeline", "{file}", "--configmap-file", "{last}"], ["--timeline", "{file}"]]
ADVISE_BASES = [["--timeline", "{file}", "--max-per-replica", "1000"],
                ["--timeline", "{file}", "--max-per-replica", "50", "--min-replicas", "2"]]
VERTICAL = [f"--{f.name}" for f in vertical_options.TABLE.flags
            if f.name not in ("health-port", "help")] + ["--nodes", "--cores", "--from-cluster"]
VERTICAL_CONFIG = '{"coredns":{"requests":{"cpu":{"base":"10m","step":"1m","nodesPerStep":1}}}}'
VERTICAL_BASES = [["--target=deployment/coredns", "--namespace=a",
                   f"--default-config={VERTICAL_CONFIG}"],
                  ["--target=deployment/coredns", "--config-file", "{file}"]]
DAEMON_BASES = [["--namespace=a", "--configmap=b", "--target=deployment/c"],
                ["--namespace=a", "--configmap=b", "--target=deployment/c", "--kubeconfig",
                 "{file}"]]


def test_the_command_lines_use_every_flag_of_explain_and_simulate() -> None:
    """A flag added to explain or simulate is drawn here too (-h/--help end the run at
    once; test_cpa_with_anything and test_cli_edges.py cover them)."""
    from cpa.tools import advise, explain, simulate

    for module, drawn in ((explain, EXPLAIN), (simulate, SIMULATE), (advise, ADVISE)):
        options = set(module._parser()._option_string_actions) - {"-h", "--help"}
        assert options == set(drawn), module.__name__


def _values(files: Sequence[str], tmp: str) -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from([*files, tmp, os.path.join(tmp, "absent"), os.path.join(tmp, "p.png"),
                         os.path.join(tmp, "p.txt"), os.path.join(tmp, "p")]),
        st.sampled_from(["", "0", "1", "-1", "3", "1e400", "3920m", "nan", "true", "json",
                         "text", "yaml", "deployment/coredns", "statefulset/", "a=b,c",
                         "hpa/coredns", "widgets.example.com/w",
                         "kube-system", "10s", "0x10", "9223372036854775808", "{}", "null",
                         '{"linear":{"nodesPerReplica":1}}',
                         '{"linear":"{\\"nodesPerReplica\\":1}"}']),
        _json_text, st.text(max_size=16))


def _argv(flag_names: Sequence[str], files: Sequence[str], tmp: str,
          bases: Sequence[Sequence[str]] = ()) -> st.SearchStrategy[list[str]]:
    """Random flags and values, after one of ``bases`` (a command line that works, so that
    the random part reaches past flag parsing) or nothing."""
    values = _values(files, tmp)
    start = st.sampled_from([[], *map(list, bases)]).flatmap(
        lambda base: st.just([a.replace("{file}", files[0]).replace("{last}", files[-1])
                              for a in base]))
    flag_value = st.tuples(st.sampled_from(flag_names), values)
    pair = st.one_of(  # mostly real flags with values, so the runs get past the parser
        flag_value.map(list), flag_value.map(list), flag_value.map(list),
        flag_value.map(lambda fv: [f"{fv[0]}={fv[1]}"]),
        st.sampled_from(flag_names).map(lambda f: [f]),
        st.sampled_from(JUNK_FLAGS).map(lambda f: [f]),
        values.map(lambda v: [v]))
    rest = st.lists(pair, max_size=5).map(lambda parts: [a for p in parts for a in p])
    return st.tuples(start, rest).map(lambda sr: sr[0] + sr[1])


@contextlib.contextmanager
def _hermetic(home: str) -> Iterator[None]:
    """No kubeconfig or cluster from the machine running the tests."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT",
                        "MY_POD_NAMESPACE", "HOSTNAME")}
    env["HOME"] = home
    with mock.patch.dict(os.environ, env, clear=True):
        yield


@pytest.fixture(autouse=True, scope="module")
def _restore_process_state() -> Iterator[None]:
    """The daemon installs signal handlers and configures logging: put both back."""
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    yield
    for sig, handler in handlers.items():
        signal.signal(sig, handler)
    logs.configure(0, "text")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(call: Callable[[], int], daemon: bool) -> tuple[int, str]:
    """Run one command; its exit code and everything it printed (any thread)."""
    out, err = io.StringIO(), io.StringIO()
    thread_errors: list[str] = []
    old_hook = threading.excepthook
    threading.excepthook = lambda a: thread_errors.append(f"{a.exc_type}: {a.exc_value}")
    stopper: threading.Timer | None = None
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    if daemon:
        # A daemon that starts runs until SIGTERM, as in a Pod; until it installs its own
        # handler, the signal is ignored (it must never reach pytest).
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        stopper = threading.Timer(DAEMON_STOP_AFTER, os.kill, (os.getpid(), signal.SIGTERM))
        stopper.start()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = call()
    finally:
        if stopper is not None:
            stopper.cancel()
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        threading.excepthook = old_hook
    printed = out.getvalue() + err.getvalue() + "\n".join(thread_errors)
    return code, printed


def _check(code: int, printed: str, *, example: bool = True) -> None:
    if example:
        event(f"exit {code}")  # pytest --hypothesis-show-statistics shows the spread
    assert code in EXITS, printed[-2000:]
    assert "Traceback" not in printed, printed[-4000:]
    assert "internal error" not in printed, printed[-2000:]


def _exit_code(entry: Callable[[], object], argv0: str, argv: list[str]) -> int:
    """The exit code of a console-script entry point run as ``argv0 argv...``."""
    with mock.patch("sys.argv", [argv0, *argv]):
        try:
            entry()
        except SystemExit as exc:
            return exc.code if isinstance(exc.code, int) else 1
    raise AssertionError(f"{argv0}'s entry point returned without exiting")


def _daemon(argv: list[str]) -> int:
    return _exit_code(daemon_main, "cluster-proportional-autoscaler", argv)


def _files(tmp: str, contents: Sequence[str | bytes]) -> list[str]:
    paths = []
    for i, content in enumerate(contents):
        path = Path(tmp, f"f{i}.yaml" if i % 2 else f"f{i}.csv")
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8", errors="surrogatepass")
        paths.append(str(path))
    return paths


def _settings(examples: int) -> settings:
    """Hypothesis settings of these runs: ``examples`` of them, no deadline (a daemon's
    run takes what it takes), large drawn files allowed."""
    return settings(max_examples=max(1, examples), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


_SETTINGS = _settings(EXAMPLES)
_DAEMON_SETTINGS = _settings(EXAMPLES * 3 // 5)  # each example starts a daemon: fewer


_FILES = st.lists(_contents, min_size=1, max_size=3)


@pytest.mark.parametrize(("command", "flags", "bases"), [
    ("explain", EXPLAIN, EXPLAIN_BASES), ("simulate", SIMULATE, SIMULATE_BASES)])
@_SETTINGS
@given(_FILES, st.data())
def test_cpa_explain_and_simulate(command: str, flags: list[str], bases: list[list[str]],
                                  contents: list[str | bytes], data: st.DataObject) -> None:
    _check_command(contents, data, command, flags, bases)


@_settings(EXAMPLES // 5)
@given(_FILES, st.data())
def test_cpa_advise(contents: list[str | bytes], data: st.DataObject) -> None:
    _check_command(contents, data, "advise", ADVISE, ADVISE_BASES)


@_DAEMON_SETTINGS
@given(_FILES, st.data())
def test_cpa_run(contents: list[str | bytes], data: st.DataObject) -> None:
    _check_daemon(contents, data, lambda args: main(["run", *args]))


@_DAEMON_SETTINGS
@given(_FILES, st.data())
def test_the_daemon_binary(contents: list[str | bytes], data: st.DataObject) -> None:
    _check_daemon(contents, data, _daemon)


def _check_command(contents: list[str | bytes], data: st.DataObject, command: str,
                   flags: Sequence[str], bases: Sequence[Sequence[str]]) -> None:
    """``cpa command`` with its flags drawn from ``flags`` onto ``contents`` as files."""
    with tempfile.TemporaryDirectory() as tmp, _hermetic(tmp):
        argv = data.draw(_argv(flags, _files(tmp, contents), tmp, bases))
        _check(*_run(lambda: main([command, *argv]), daemon=False))


def _check_daemon(contents: list[str | bytes], data: st.DataObject,
                  start: Callable[[list[str]], int]) -> None:
    """The daemon's flags drawn onto ``contents`` as files, on a free health port, given to
    ``start`` (``cpa run`` or the daemon's own entry point: the same daemon)."""
    with tempfile.TemporaryDirectory() as tmp, _hermetic(tmp):
        argv = data.draw(_argv(DAEMON, _files(tmp, contents), tmp, DAEMON_BASES))
        port = f"--health-port={_free_port()}"
        _check(*_run(lambda: start([port, *argv]), daemon=True))


@_DAEMON_SETTINGS
@given(_FILES, st.data())
def test_cpvpa_and_explain_vertical(contents: list[str | bytes], data: st.DataObject) -> None:
    """/cpvpa (the vertical autoscaler, its health port off by default) and
    `cpa explain --vertical`, which takes the same flags."""
    with tempfile.TemporaryDirectory() as tmp, _hermetic(tmp):
        argv = data.draw(_argv(VERTICAL, _files(tmp, contents), tmp, VERTICAL_BASES))

        _check(*_run(lambda: _exit_code(vertical_main, "cpvpa", argv), daemon=True))
        _check(*_run(lambda: main(["explain", "--vertical", *argv]), daemon=False))


@_SETTINGS
@given(st.lists(st.text(max_size=20), max_size=6))
def test_cpa_with_anything(argv: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp, _hermetic(tmp):
        if argv[:1] == ["run"]:
            argv = ["run", f"--health-port={_free_port()}", *argv[1:]]
        _check(*_run(lambda: main(argv), daemon=argv[:1] == ["run"]))


def test_a_daemon_that_starts_is_stopped_cleanly(tmp_path: Path) -> None:
    """The case the property runs rarely hit on purpose: valid flags and a kubeconfig
    whose server refuses; the daemon waits for its Node list, SIGTERM ends it with 0."""
    config = tmp_path / "config"
    config.write_text(yaml.safe_dump({
        "current-context": "a", "contexts": [{"name": "a", "context": {"cluster": "k"}}],
        "clusters": [{"name": "k", "cluster": {"server": "http://127.0.0.1:1"}}]}))
    with _hermetic(str(tmp_path)):
        code, printed = _run(lambda: main(
            ["run", f"--health-port={_free_port()}", "--namespace=a", "--configmap=b",
             "--target=deployment/c", f"--kubeconfig={config}"]), daemon=True)
    _check(code, printed, example=False)
    assert code == 0, printed
