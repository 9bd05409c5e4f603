"""An answer's status line and header, read from bytes that came whole and the same bytes
that came a byte at a time: the same fields, the same refusals, hostile bytes included,
and the body left for its reader."""

from __future__ import annotations

import io
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpa.http.errors import ProtocolError, RemoteDisconnected
from cpa.http.message import MAX_FIELDS, Answer, field_value_problem, read_head


class Dribble(io.RawIOBase):
    """A socket that gives ``step`` bytes a read: a header that comes in pieces."""

    def __init__(self, data: bytes, step: int) -> None:
        self._data = data
        self._step = step

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        piece, self._data = self._data[:self._step], self._data[self._step:]
        buffer[:len(piece)] = piece
        return len(piece)


def whole(data: bytes) -> io.BufferedReader:
    return io.BufferedReader(io.BytesIO(data), 8192)


def pieces(data: bytes) -> io.BufferedReader:
    return io.BufferedReader(Dribble(data, 1), 8192)


def outcome(reader: io.BufferedReader) -> tuple[Any, ...]:
    """What read_head made of the reader (or the error), and the bytes left for the body."""
    try:
        version, status, reason, fields = read_head(reader)
    except (ProtocolError, RemoteDisconnected) as exc:
        return type(exc).__name__, str(exc)
    return (version, status, reason.strip(), dict(fields),
            [(k, fields.get_all(k)) for k in fields], reader.read())


def both(data: bytes) -> tuple[Any, ...]:
    block, lines = outcome(whole(data)), outcome(pieces(data))
    assert block == lines
    return block


def test_a_header_is_read_with_the_body_left() -> None:
    data = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nAudit-Id: a\r\n"
            b"Warning: one\r\nwarning: two\r\nX-Folded: a\r\n  b\r\nContent-Length: 2\r\n"
            b"\r\n{}")
    version, status, reason, fields, _all, body = both(data)
    assert (version, status, reason) == ("HTTP/1.1", 200, "OK")
    assert fields == {"content-type": "application/json", "audit-id": "a",
                      "warning": "one", "x-folded": "a b", "content-length": "2"}
    assert body == b"{}"


@pytest.mark.parametrize("data", [
    b"HTTP/1.1 200 OK\nContent-Length: 0\n\n",  # bare LF line ends
    b"HTTP/1.1 200 OK\r\nX-A: 1\nX-B: 2\r\n\r\n",  # a bare LF inside a CRLF header
    b"HTTP/1.1 200 OK\r\nX-A: 1\n\r\nX-B: 2\r\n\r\n",  # a bare LF line ends it early
    b"HTTP/1.1 200 OK\r\nX-A: a\rX-B: b\r\n\r\n",  # a lone CR is part of the value
    b"HTTP/1.1 200 OK\r\nX-A: \x00\x7f\xff\r\nno colon\r\n\tfolded\r\n\r\n",
    b"HTTP/1.1 200 OK\r\n: empty name\r\nX-Sp : v \r\n\r\n",
])
def test_hostile_line_ends_and_bytes_read_the_same_whole_or_in_pieces(data: bytes) -> None:
    result = both(data)
    assert result[1] == 200 or result[0] == "ProtocolError", result


@pytest.mark.parametrize(("data", "error"), [
    (b"", "RemoteDisconnected"),
    (b"\r\n\r\n", "not an HTTP status line"),
    (b"SSH-2.0-OpenSSH\r\n\r\n", "not an HTTP status line"),
    (b"HTTP/1.1 OK\r\n\r\n", "not an HTTP status line"),
    (b"HTTP/1.1 99 Low\r\n\r\n", "not an HTTP status line"),
    (b"HTTP/1.1 200 OK\r\n" + b"X-A: 1\r\n" * (MAX_FIELDS + 1) + b"\r\n",
     f"more than {MAX_FIELDS} headers"),
])
def test_a_malformed_head_is_refused_either_way(data: bytes, error: str) -> None:
    result = both(data)
    assert error in " ".join(map(str, result[:2]))


def test_exactly_the_limit_of_fields_is_read() -> None:
    data = b"HTTP/1.1 200 OK\r\n" + b"X-A: 1\r\n" * MAX_FIELDS + b"\r\n"
    assert both(data)[1] == 200


def test_header_lines_are_bounded_while_read_not_after() -> None:
    """An endless header is refused at the limit, not read into memory to its end."""
    reader = pieces(b"HTTP/1.1 200 OK\r\n" + b"X-A: 1\r\n" * 10_000)
    with pytest.raises(ProtocolError, match="more than"):
        read_head(reader)
    assert len(reader.read()) > 9_000 * 8


def test_a_100_continue_then_the_answer_from_one_buffer() -> None:
    answer = Answer(whole(b"HTTP/1.1 100 Continue\r\nX-Ignored: 1\r\n\r\n"
                          b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}"), "POST")
    answer.begin()
    assert answer.status == 201 and answer.headers is not None
    assert "x-ignored" not in answer.headers
    assert answer.read() == b"{}"


_LINE = st.binary(max_size=40).filter(lambda b: b"\n" not in b)
_HEAD = st.lists(st.one_of(_LINE, st.sampled_from([
    b"Content-Length: 3", b"Transfer-Encoding: chunked", b"Connection: close", b" folded",
    b"X-A: a\r", b"X-B:\tb"])), max_size=12)


@settings(max_examples=300, deadline=None)
@given(status=st.sampled_from([b"HTTP/1.1 200 OK", b"HTTP/1.0 404 Not Found", b"junk"]),
       lines=_HEAD, ends=st.sampled_from([b"\r\n", b"\n"]), body=st.binary(max_size=8))
def test_any_header_reads_the_same_whole_or_in_pieces(
        status: bytes, lines: list[bytes], ends: bytes, body: bytes) -> None:
    data = ends.join([status, *lines]) + ends + ends + body
    both(data)


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=30))
def test_a_value_is_judged_the_same_as_text_or_bytes(value: str) -> None:
    """A str value (from a kubeconfig) is judged as its bytes (from a file) are."""
    assert field_value_problem(value) == \
        field_value_problem(value.encode("utf-8", "surrogateescape"))

