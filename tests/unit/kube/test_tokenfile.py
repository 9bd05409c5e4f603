"""A token file's cache rules: read again after a 401 (once) and every 60 s; never an
empty token while a good one is known. The client sends a request refused with 401 once
more when the file then holds another token."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpa import logs
from cpa.kube import tokenfile
from cpa.kube.api import ApiError
from cpa.kube.client import KubeApi
from cpa.kube.clientconfig import Connection
from cpa.kube.tokenfile import (
    TOKEN_REREAD_SECONDS,
    FileToken,
    TokenFileError,
    reason_to_read,
    token_of,
)
from tests.unit.http.test_transport import Server, answer, read_request


@pytest.mark.parametrize(("cached", "refused", "age", "reason"), [
    (False, False, 0.0, "first"),  # also while the file has never held a good token
    (False, True, 0.0, "first"),
    (True, True, 0.0, "refused"),
    (True, False, 0.0, None),
    (True, False, TOKEN_REREAD_SECONDS - 0.001, None),
    (True, False, TOKEN_REREAD_SECONDS, "period"),
    (True, True, TOKEN_REREAD_SECONDS, "refused"),
])
def test_when_the_file_is_read(cached: bool, refused: bool, age: float, reason: str | None
                               ) -> None:
    assert reason_to_read(cached=cached, refused=refused, age=age) == reason


@pytest.mark.parametrize(("data", "token"), [
    (b"abc\n", "abc"), (b"  abc \r\n", "abc"), (b"", ""), (b"\n\n \t", ""),
])
def test_surrounding_whitespace_is_not_part_of_the_token(data: bytes, token: str) -> None:
    assert token_of(data) == (token, None)


@pytest.mark.parametrize(("data", "problem"), [
    (b"s3cr3t-token\n# rotated by ops\n", "contains a line break at byte 12"),
    (b"\n  s3cr3t\r\nX-Injected: 1", "contains a line break at byte 9"),
    (b"s3cr3t\x00more", "contains a control character (0x00) at byte 6"),
    (b"s3cr3t\x7fmore", "contains a control character (0x7f) at byte 6"),
    ("s3cr3t\u00e9".encode(), "contains a character that is not ASCII at byte 6"),
    (b"\xff\xfe", "contains a character that is not ASCII at byte 0"),
])
def test_a_token_that_cannot_be_sent_is_named_by_its_byte(data: bytes, problem: str) -> None:
    assert token_of(data)[1] == problem


def test_a_token_with_a_second_line_is_refused_and_the_last_good_one_kept(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """client-go trims the file and Go refuses a header with a line break: here the file
    is refused by name and byte, the last good token is sent meanwhile, and the file's
    content is never shown."""
    logs.configure(0, "json")
    path = tmp_path / "token"
    canary = "CANARYtokenFirst0123456789"
    path.write_text(canary + "\n")
    clock = [1000.0]
    source = FileToken(path, clock=lambda: clock[0])
    assert source() == f"Bearer {canary}"
    path.write_text("CANARYtokenSecond0123456789\n# rotated by ops\n")
    clock[0] += TOKEN_REREAD_SECONDS
    assert source() == f"Bearer {canary}"  # the last good token
    err = capsys.readouterr().err
    assert "token.file_unusable" in err and "contains a line break at byte 27" in err
    assert "CANARY" not in err
    path.write_text("CANARYtokenThird0123456789\n")
    clock[0] += TOKEN_REREAD_SECONDS
    assert source() == "Bearer CANARYtokenThird0123456789"  # recovers by itself


def test_a_token_file_that_never_held_a_sendable_token_says_why(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("CANARYabcdef\nsecond line")
    with pytest.raises(TokenFileError) as info:
        FileToken(path)()
    assert "contains a line break at byte 12" in str(info.value)
    assert "CANARY" not in str(info.value)


@pytest.mark.parametrize("kind", ["fifo", "directory", "huge"])
def test_a_token_path_that_is_not_a_small_regular_file_is_refused_at_once(
        tmp_path: Path, kind: str) -> None:
    path = tmp_path / "token"
    if kind == "fifo":
        os.mkfifo(path)  # opened for reading, a FIFO would wait for a writer
    elif kind == "directory":
        path.mkdir()
    else:
        path.write_bytes(b"a" * (tokenfile.MAX_TOKEN_BYTES + 10))
    with pytest.raises(TokenFileError, match=r"not a regular file|larger than"):
        FileToken(path)()


def kubelet_swap(root: Path, token: str, serial: int) -> None:
    """The kubelet's AtomicWriter: a new timestamped dir, ``..data`` renamed onto it."""
    new = root / f"..2026_12_02_06_00_{serial:02d}.000000000"
    new.mkdir()
    (new / "token").write_text(token)
    tmp = root / "..data_tmp"
    tmp.symlink_to(new.name)
    old = os.readlink(root / "..data") if (root / "..data").is_symlink() else None
    os.replace(tmp, root / "..data")
    if not (root / "token").is_symlink():
        (root / "token").symlink_to("..data/token")
    if old is not None:
        for child in (root / old).iterdir():
            child.unlink()
        (root / old).rmdir()


def test_a_401_reads_the_file_again_before_the_next_request_once(tmp_path: Path) -> None:
    clock = [1000.0]
    path = tmp_path / "token"
    path.write_text("old1")
    source = FileToken(path, clock=lambda: clock[0])
    assert source() == "Bearer old1"
    path.write_text("new2")
    assert source() == "Bearer old1"  # within the minute: the cached token serves
    source.unauthorized("Bearer old1")
    assert source() == "Bearer new2"  # read again after the 401
    path.write_text("new3")
    # A request sent with old1 before the read comes back 401 too: new2 was read since, so
    # that 401 costs no read (at most one read per refused token).
    source.unauthorized("Bearer old1")
    assert source() == "Bearer new2"
    source.unauthorized("Bearer new2")
    assert source() == "Bearer new3"
    assert source() == "Bearer new3"


def test_a_401_to_a_file_that_did_not_change_reads_it_once_per_401(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("revoked")
    reads: list[int] = []
    source = FileToken(path)

    real = tokenfile.read_regular_file

    def counting(file: str, limit: int) -> bytes:
        reads.append(1)
        return real(file, limit)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tokenfile, "read_regular_file", counting)
        source()
        for _ in range(3):
            source.unauthorized("Bearer revoked")
            source()
            source()  # no 401 in between: the cached token, no read
    assert len(reads) == 1 + 3


def test_the_kubelets_swap_is_used_within_the_minute(tmp_path: Path) -> None:
    """The old token stays valid after the kubelet's rotation: it is sent until the minute
    is up (client-go's period), through the symlinks, then the new one."""
    clock = [1000.0]
    kubelet_swap(tmp_path, "first", 1)
    source = FileToken(tmp_path / "token", clock=lambda: clock[0])
    assert source() == "Bearer first"
    kubelet_swap(tmp_path, "second", 2)
    clock[0] += TOKEN_REREAD_SECONDS - 1
    assert source() == "Bearer first"
    clock[0] += 1
    assert source() == "Bearer second"
    kubelet_swap(tmp_path, "third", 3)
    clock[0] += 1
    assert source() == "Bearer second"  # the minute counts from the last read


def events(capsys: pytest.CaptureFixture[str], name: str) -> list[dict[str, Any]]:
    return [doc for doc in (json.loads(line) for line in capsys.readouterr().err.splitlines()
                            if line.startswith("{")) if doc["event"] == name]


class Ticking:
    """A clock a minute ahead at each call: every call of the source reads the file."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        self.now += TOKEN_REREAD_SECONDS
        return self.now


@pytest.fixture
def good_token(tmp_path: Path) -> tuple[Path, FileToken]:
    """A token file that held "good" when read, read again at each call, JSON logs on:
    the token to keep once the file goes bad."""
    logs.configure(0, "json")
    path = tmp_path / "token"
    path.write_text("good")
    source = FileToken(path, clock=Ticking())
    assert source() == "Bearer good"
    return path, source


def test_an_emptied_file_keeps_the_last_good_token_and_says_so_once(
        good_token: tuple[Path, FileToken], capsys: pytest.CaptureFixture[str]) -> None:
    path, source = good_token
    path.write_text("")
    for _ in range(3):
        assert source() == "Bearer good"
    path.write_text("\n")  # written again, still no token: no second warning
    source.unauthorized("Bearer good")  # and a 401 meanwhile: read again, still empty
    assert source() == "Bearer good"
    err = capsys.readouterr().err
    warned = [json.loads(line) for line in err.splitlines() if "token.file_unusable" in line]
    assert len(warned) == 1, err
    assert warned[0]["level"] == "warning" and warned[0]["component"] == "credentials"
    assert warned[0]["error"] == f"token file {path} is empty"
    path.write_text("better")
    assert source() == "Bearer better"
    [back] = events(capsys, "token.file_usable")
    assert back["after"] == f"token file {path} is empty"


def test_a_vanished_file_keeps_the_last_good_token(
        good_token: tuple[Path, FileToken], capsys: pytest.CaptureFixture[str]) -> None:
    path, source = good_token
    path.unlink()
    assert source() == "Bearer good"
    assert source() == "Bearer good"
    [warned] = events(capsys, "token.file_unusable")
    assert "cannot read token file" in warned["error"]


def test_a_file_that_never_held_a_token_is_an_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text(" \n")
    source = FileToken(path)
    with pytest.raises(TokenFileError, match=f"token file {path} is empty: write"):
        source()
    path.write_text("late")
    assert source() == "Bearer late"  # read again at once: there is nothing to keep


OPS = st.lists(st.one_of(
    st.tuples(st.just("swap"), st.sampled_from(["", "\n", "aaaa", "bbbb", "cc"])),
    st.tuples(st.just("rm"), st.just("")),
    st.tuples(st.just("401"), st.just("")),
    st.tuples(st.just("tick"), st.sampled_from(["1", "30", "60"])),
), max_size=25)


class Model:
    """What the header must be, by the rules in words: the file is read at a 401 to the
    token held and once a minute has passed since the last read; a read that finds a
    token (not an empty file, not a missing one) makes it the token held."""

    def __init__(self, now: float) -> None:
        self.held, self.read_at, self.refused = "init", now, False

    def header(self, now: float, content: str | None) -> str:
        if self.refused or now - self.read_at >= TOKEN_REREAD_SECONDS:
            self.read_at, self.refused = now, False
            self.held = (content or "").strip() or self.held
        return f"Bearer {self.held}"


@settings(max_examples=60, deadline=None)
@given(ops=OPS)
def test_the_header_is_never_empty_and_follows_the_file_by_the_rules(
        tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, str]]) -> None:
    """Any sequence of kubelet swaps (to empty files too), removals, 401s and time: every
    header carries a token the file held, never an empty one, and the newest the file
    holds after a 401 or once the minute is up."""
    root = tmp_path_factory.mktemp("tok")
    clock = [1000.0]
    kubelet_swap(root, "init", 0)
    source = FileToken(root / "token", clock=lambda: clock[0])
    assert source() == "Bearer init"
    model, content = Model(clock[0]), "init"
    for serial, (op, arg) in enumerate(ops, start=1):
        if op == "swap":
            kubelet_swap(root, arg, serial)
            content = arg
        elif op == "rm":
            (root / "token").unlink(missing_ok=True)
            assert source() == model.header(clock[0], None)
            (root / "token").symlink_to("..data/token")
        elif op == "401":  # a request sent with the header, refused
            sent = source()
            assert sent == model.header(clock[0], content)
            source.unauthorized(sent)
            model.refused = True
        else:
            clock[0] += float(arg)
        assert source() == model.header(clock[0], content)


# --- the client tells the token which header was refused -----------------------------------


@pytest.fixture
def refusing(tmp_path: Path) -> Iterator[tuple[KubeApi, Path, set[str], list[str]]]:
    """A KubeApi whose token comes from a file, against a scripted server that answers 401
    to the tokens in ``revoked``; ``seen`` lists the tokens it was sent, in order."""
    revoked: set[str] = set()
    seen: list[str] = []

    def handler(conn: socket.socket, _index: int) -> None:
        while head := read_request(conn).decode():
            auth = next(line for line in head.split("\r\n")
                        if line.startswith("Authorization: "))
            seen.append(auth.removeprefix("Authorization: Bearer "))
            if seen[-1] in revoked:
                answer(conn, b'{"kind":"Status","reason":"Unauthorized"}', "401 Unauthorized")
            else:
                answer(conn, b"{}")

    server = Server(handler)
    try:
        path = tmp_path / "token"
        path.write_text("old1")
        source = FileToken(path)
        client = KubeApi(Connection(server.url, None, source, "test",
                                    unauthorized=source.unauthorized))
        client.get_json("/api/v1/x")
        yield client, path, revoked, seen
    finally:
        server.close()


@pytest.mark.parametrize("method", ["GET", "PUT"])
def test_a_request_refused_401_is_sent_again_once_with_the_token_the_file_holds_now(
        refusing: tuple[KubeApi, Path, set[str], list[str]], method: str) -> None:
    """A token rotated within the minute, then revoked: the request that carried it is
    sent once more, with the new token, and succeeds (a write too: the server did nothing
    with the refused one)."""
    client, path, revoked, seen = refusing
    path.write_text("new2")
    revoked.add("old1")
    client.send_json(method, "/api/v1/x", {}) if method == "PUT" else client.get_json("/x")
    assert seen[1:] == ["old1", "new2"]


def test_a_401_to_the_token_the_file_still_holds_fails_once_without_a_second_send(
        refusing: tuple[KubeApi, Path, set[str], list[str]]) -> None:
    client, _path, revoked, seen = refusing
    revoked.add("old1")
    with pytest.raises(ApiError) as refused:
        client.get_json("/api/v1/x")
    assert refused.value.status == 401 and seen[1:] == ["old1"]


def test_a_401_to_the_new_token_too_is_not_sent_a_third_time(
        refusing: tuple[KubeApi, Path, set[str], list[str]]) -> None:
    client, path, revoked, seen = refusing
    path.write_text("new2")
    revoked.update({"old1", "new2"})
    with pytest.raises(ApiError) as refused:
        client.get_json("/api/v1/x")
    assert refused.value.status == 401 and seen[1:] == ["old1", "new2"]
    path.write_text("new3")
    client.get_json("/api/v1/x")  # the same rule: refused, the file read, sent again
    assert seen[3:] == ["new2", "new3"]


def test_a_watch_refused_401_fails_and_the_next_carries_what_the_file_holds(
        refusing: tuple[KubeApi, Path, set[str], list[str]]) -> None:
    """A watch is not sent again by the client: its caller's loop opens the next one."""
    client, path, revoked, seen = refusing
    path.write_text("new2")
    revoked.add("old1")
    with pytest.raises(ApiError) as refused:
        client.stream("/api/v1/x", {}, 2).release_conn()
    assert refused.value.status == 401
    client.stream("/api/v1/x", {}, 2).release_conn()
    assert seen[1:] == ["old1", "new2"]
