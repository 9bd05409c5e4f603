"""``--config-dir``: a mounted ConfigMap read as the kubelet lays it out, re-read only when
``..data`` moves, and every way it can be wrong failing the poll with what to fix."""

from __future__ import annotations

import json
import os
import socket
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cpa.horizontal.cpa_flags import parse_args, validate
from cpa.horizontal.daemon.configdir import ConfigDir, ConfigDirError, file_kind
from cpa.horizontal.daemon.cpa_loop import Autoscaler
from cpa.horizontal.daemon.cpa_main import loop_config
from cpa.nodes.counts import ClusterCounts
from tests.configvolume import kubelet_write
from tests.fakes import FakeApi

LINEAR = '{"nodesPerReplica":2}'
LADDER = '{"nodesToReplicas":[[1,1],[4,7]]}'
COREDNS = "/apis/apps/v1/namespaces/kube-system/deployments/coredns/scale"


def test_reads_the_kubelet_layout(tmp_path: Path) -> None:
    name = kubelet_write(tmp_path, {"linear": LINEAR})
    source = ConfigDir(str(tmp_path))
    assert source.version() == name
    assert source.read(None) == (name, {"linear": LINEAR})
    assert sorted(os.listdir(tmp_path)) == sorted(["..data", name, "linear"])


def test_unchanged_is_one_readlink_and_no_read(tmp_path: Path) -> None:
    name = kubelet_write(tmp_path, {"linear": LINEAR})
    looked: list[str] = []

    def readlink(path: str) -> str:
        looked.append(path)
        return os.readlink(path)

    source = ConfigDir(str(tmp_path), readlink=readlink)
    os.chmod(tmp_path / name / "linear", 0)  # a read would fail now (as non-root)
    assert source.read(name) == (name, None)
    assert looked == [str(tmp_path / "..data")]


def test_a_swap_is_seen_and_read_from_the_new_directory(tmp_path: Path) -> None:
    first = kubelet_write(tmp_path, {"linear": LINEAR})
    source = ConfigDir(str(tmp_path))
    seen: list[tuple[str, object]] = []
    # Between the rename and the visible links' fix-up a reader sees the new ..data and
    # the old visible "linear" link (dangling once the old directory goes): the data must
    # be the new directory's, whole.
    second = kubelet_write(tmp_path, {"ladder": LADDER},
                           after_rename=lambda: seen.append(source.read(first)))
    assert seen == [(second, {"ladder": LADDER})]
    assert source.read(first) == (second, {"ladder": LADDER})
    assert not (tmp_path / first).exists() and not (tmp_path / "linear").exists()


def test_a_swap_during_the_read_reads_the_newer_version(tmp_path: Path) -> None:
    first = kubelet_write(tmp_path, {"linear": LINEAR})
    source = ConfigDir(str(tmp_path))
    version = source.version()
    second = kubelet_write(tmp_path, {"linear": '{"nodesPerReplica":3}'})  # first is gone
    assert version == first
    assert source.read_version(version) == (second, {"linear": '{"nodesPerReplica":3}'})


def test_a_plain_directory_is_read_and_its_version_follows_its_files(tmp_path: Path) -> None:
    (tmp_path / "linear").write_text(LINEAR)
    (tmp_path / ".hidden").write_text("editor swap file")
    source = ConfigDir(str(tmp_path))
    version, data = source.read(None)
    assert data == {"linear": LINEAR}
    assert source.read(version) == (version, None)
    (tmp_path / "linear").unlink()
    (tmp_path / "linear").write_text('{"nodesPerReplica":9}')
    version2, data2 = source.read(version)
    assert version2 != version and data2 == {"linear": '{"nodesPerReplica":9}'}


@pytest.mark.parametrize("kind", ["absent", "a file"])
def test_a_missing_directory_says_what_to_mount(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "params"
    if kind == "a file":
        path.write_text("x")
    with pytest.raises(ConfigDirError) as caught:
        ConfigDir(str(path)).read(None)
    message = str(caught.value)
    assert f"--config-dir {path}: no such directory" in message
    assert "configMap volume" in message


def test_a_nested_key_is_refused(tmp_path: Path) -> None:
    (tmp_path / "linear").mkdir()
    with pytest.raises(ConfigDirError, match="is a directory"):
        ConfigDir(str(tmp_path)).read(None)


def _fifo(path: Path) -> None:
    os.mkfifo(path)


@pytest.fixture
def not_a_file() -> Iterator[Callable[[str, Path], str]]:
    """Make ``path`` a ``kind`` of thing that is not a regular file; the words the error
    must use for it."""
    sockets: list[socket.socket] = []

    def make(kind: str, path: Path) -> str:
        if kind == "fifo":
            _fifo(path)
            return "a FIFO (named pipe)"
        if kind == "socket":
            sockets.append(socket.socket(socket.AF_UNIX))
            sockets[-1].bind(str(path))
            return "a socket"
        assert kind == "device"
        path.symlink_to("/dev/null")
        return "a character device"

    yield make
    for sock in sockets:
        sock.close()


@pytest.mark.timeout(20)  # a read that blocks on the FIFO fails here, not forever
@pytest.mark.parametrize("kind", ["fifo", "socket", "device"])
def test_a_key_that_is_not_a_regular_file_fails_without_blocking(
        tmp_path: Path, kind: str, not_a_file: Callable[[str, Path], str]) -> None:
    """No writer ever opens a FIFO in a ConfigMap volume: opening one to read it would
    block the poll loop for good (and the health answers with it)."""
    words = not_a_file(kind, tmp_path / "linear")
    source = ConfigDir(str(tmp_path))
    for _ in range(2):  # every poll, until fixed
        with pytest.raises(ConfigDirError) as caught:
            source.read(None)
        message = str(caught.value)
        assert f"{tmp_path / 'linear'}" in message and words in message
        assert "not a regular file" in message
    (tmp_path / "linear").unlink()
    (tmp_path / "linear").write_text(LINEAR)
    assert source.read(None)[1] == {"linear": LINEAR}


@pytest.mark.timeout(20)
def test_a_fifo_behind_the_kubelets_links_is_named_with_its_target(tmp_path: Path) -> None:
    name = kubelet_write(tmp_path / "vol", {"linear": LINEAR})
    real = tmp_path / "vol" / name / "linear"
    real.unlink()
    _fifo(tmp_path / "elsewhere")
    real.symlink_to(tmp_path / "elsewhere")
    source = ConfigDir(str(tmp_path / "vol"))
    with pytest.raises(ConfigDirError) as caught:
        source.read(None)
    assert f"{real} (-> {tmp_path / 'elsewhere'}) is a FIFO (named pipe)" in str(caught.value)
    second = kubelet_write(tmp_path / "vol", {"linear": LINEAR})  # the fix: a new version
    assert source.read(name) == (second, {"linear": LINEAR})


@pytest.mark.parametrize(("mode", "words"), [
    (stat.S_IFIFO, "a FIFO (named pipe)"), (stat.S_IFSOCK, "a socket"),
    (stat.S_IFCHR, "a character device"), (stat.S_IFBLK, "a block device"),
    (stat.S_IFDIR, "a directory"), (stat.S_IFREG, "a regular file"),
])
def test_file_kind(mode: int, words: str) -> None:
    assert file_kind(mode | 0o644) == words


# --- the poll, with the directory as its parameters ------------------------------------

def make(api: FakeApi, directory: Path, nodes: int = 8) -> Autoscaler:
    opts = parse_args(["--namespace=kube-system", "--target=deployment/coredns",
                       f"--config-dir={directory}"], {})
    assert validate(opts) == []
    return Autoscaler(loop_config(opts), api, lambda: ClusterCounts(nodes, nodes, nodes, nodes))


def test_the_poll_follows_the_directory_and_makes_no_configmap_request(
        tmp_path: Path) -> None:
    api = FakeApi()
    api.add_scale(COREDNS, 1)
    kubelet_write(tmp_path, {"linear": LINEAR})
    a = make(api, tmp_path)
    assert a.poll_once().error is None and api.replicas(COREDNS) == 4
    kubelet_write(tmp_path, {"ladder": LADDER})
    assert a.poll_once().error is None and api.replicas(COREDNS) == 7
    assert not [call for call in api.calls if "configmaps" in call[1]]


@pytest.mark.parametrize(("data", "fragment"), [
    ({"linear": LINEAR, "ladder": LADDER}, 'found "ladder", "linear"'),
    ({}, "found no keys"),
    ({"quadratic": LINEAR}, 'found "quadratic"'),
    ({"linear": '{"nodesPerReplica": 1,}'}, "linear"),
])
def test_both_neither_or_bad_keys_fail_the_poll_and_write_nothing(
        tmp_path: Path, data: dict[str, str], fragment: str) -> None:
    api = FakeApi()
    api.add_scale(COREDNS, 1)
    kubelet_write(tmp_path, data)
    a = make(api, tmp_path)
    for _ in range(2):  # invalid on every poll until the directory changes
        result = a.poll_once()
        assert result.error is not None and fragment in result.error
        assert result.error.startswith(f"invalid --config-dir {tmp_path} (version ..")
        assert result.params_invalid == result.error
    assert api.replicas(COREDNS) == 1 and ("PUT", COREDNS) not in api.calls
    kubelet_write(tmp_path, {"linear": json.dumps({"nodesPerReplica": 4})})
    assert a.poll_once().error is None and api.replicas(COREDNS) == 2


def test_a_missing_directory_fails_the_poll_until_it_is_mounted(tmp_path: Path) -> None:
    api = FakeApi()
    api.add_scale(COREDNS, 1)
    a = make(api, tmp_path / "later")
    result = a.poll_once()
    assert result.error is not None and "no such directory" in result.error
    assert api.replicas(COREDNS) == 1
    kubelet_write(tmp_path / "later", {"linear": LINEAR})
    assert a.poll_once().error is None and api.replicas(COREDNS) == 4


@pytest.mark.timeout(20)
def test_a_fifo_fails_the_poll_and_writes_nothing_until_replaced(tmp_path: Path) -> None:
    api = FakeApi()
    api.add_scale(COREDNS, 1)
    (tmp_path / "linear").write_text(LINEAR)
    a = make(api, tmp_path)
    assert a.poll_once().error is None and api.replicas(COREDNS) == 4
    (tmp_path / "linear").unlink()
    _fifo(tmp_path / "linear")
    result = a.poll_once()
    assert result.error is not None and "is a FIFO (named pipe)" in result.error
    assert api.replicas(COREDNS) == 4
    (tmp_path / "linear").unlink()
    (tmp_path / "ladder").write_text(LADDER)
    assert a.poll_once().error is None and api.replicas(COREDNS) == 7


@pytest.mark.parametrize("value", [
    '{"nodesPerReplica":2,"behavior":{"scaleDown":{"stabilizationWindowSeconds":60}}}',
    '{"nodesPerReplica":2,"zones":{"minPerZone":1}}',
    '{"nodesPerReplica":2,"excludeNodesWithTaints":["@lifecycle"],"maxCoresPerNode":8}',
    '{"nodesPerReplica":2,"min":-1}',
])
def test_the_directory_is_parsed_exactly_as_the_configmap(tmp_path: Path, value: str) -> None:
    """Our keys inside the value (behavior, zones, counting) and the validation are the
    ConfigMap's: the same data gives the same parameters, or the same refusal."""
    from cpa.horizontal.decide.modes.registry import parse_configmap_data

    kubelet_write(tmp_path / "dir", {"linear": value})
    api = FakeApi()
    api.add_scale(COREDNS, 1)
    api.set_configmap("/api/v1/namespaces/kube-system/configmaps/kube-dns-autoscaler",
                      {"linear": value})
    from_dir = make(api, tmp_path / "dir").poll_once()
    opts = parse_args(["--namespace=kube-system", "--target=deployment/coredns",
                       "--configmap=kube-dns-autoscaler"], {})
    from_cm = Autoscaler(loop_config(opts), api,
                         lambda: ClusterCounts(8, 8, 8, 8)).poll_once()
    assert from_dir.params == from_cm.params
    assert (from_dir.params_invalid is None) == (from_cm.params_invalid is None)
    if from_cm.params_invalid is not None:
        assert from_dir.params_invalid is not None
        reason = from_cm.params_invalid.split("): ", 1)[1]
        assert from_dir.params_invalid.endswith(reason)
    else:
        assert from_dir.params == parse_configmap_data({"linear": value})
