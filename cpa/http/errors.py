"""What a request through :mod:`cpa.http` can fail with, and how a caller tells a
connection that broke (worth sending a GET again) from a server that answered badly."""

from __future__ import annotations

import ssl

__all__ = ["ConnectError", "DeadlineExceeded", "HeaderError", "IncompleteBody",
           "ProtocolError", "ReadTimeoutError", "RemoteDisconnected", "Unanswered",
           "closed_before_answer", "probable_eof"]


class ReadTimeoutError(TimeoutError):
    """A read that got no bytes within the read timeout (a silent or dead connection)."""


class DeadlineExceeded(TimeoutError):
    """A request still unfinished at its deadline (connect to last byte); its connection
    was cut."""


class ConnectError(OSError):
    """The connection could not be made, or broke before the server answered."""

    def __init__(self, message: str, before_answer: bool = False,
                 reused: bool = False, broken: bool = False) -> None:
        super().__init__(message)
        self.before_answer = before_answer  # closed or reset before any response byte
        self.reused = reused  # on a kept-alive connection that had served a request
        self.broken = broken  # reset or closed under us (not refused, not a timeout)

    @property
    def retryable(self) -> bool:
        """Go's rule (net/http ``shouldRetryRequest``) for an idempotent request: a
        kept-alive connection that failed before a single byte of the answer came back;
        the server or a middlebox dropped it as we sent, so the request was not handled."""
        return self.before_answer and self.reused


class ProtocolError(Exception):
    """The server's answer is not HTTP/1.x as this transport reads it: a bad status line
    or header, a body cut short (what ``http.client`` calls ``HTTPException``)."""


class IncompleteBody(ProtocolError):
    """The connection ended before the body did (short of its Content-Length, or inside
    a chunked body)."""


class RemoteDisconnected(ConnectionResetError):
    """The server closed the connection without a byte of an answer (an idle kept-alive
    connection it had dropped, most often)."""




class HeaderError(ValueError):
    """A header field that cannot be sent; the message names the field, not its value."""


class Unanswered(ConnectionError):
    """The connection broke while we waited for the first byte of the answer."""


def closed_before_answer(exc: BaseException) -> bool:
    """The connection was closed or reset under us (not a timeout)."""
    return isinstance(exc, (RemoteDisconnected, ConnectionResetError,
                            BrokenPipeError, ConnectionAbortedError, ssl.SSLEOFError))


def probable_eof(exc: BaseException) -> bool:
    """client-go's ``IsConnectionReset || IsProbableEOF``: the connection was reset or
    closed at any point, the answer's body included (not refused, not a timeout)."""
    return (closed_before_answer(exc) or isinstance(exc, IncompleteBody)
            or (isinstance(exc, ConnectError) and exc.broken))

