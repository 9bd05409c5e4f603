"""A bearer token read from a file: the in-cluster ServiceAccount token, a kubeconfig's
``tokenFile``, the Prometheus source's ``bearerTokenFile``.

Such a file changes under a running daemon. The kubelet rotates a projected token (at 80%
of its life) by swapping its ``..data`` symlink to a new directory; the old token stays
valid until it expires, so picking the new one up within a minute is soon enough. A revoked
token (its Pod, Secret or ServiceAccount deleted) is refused at once, with a 401. The rules
are client-go's for a file token source: the file is read again every minute and after the
server answers 401 to the token held (``tokenSourceTransport``, ``ResetTokenOlderThan``),
and an empty file ("read empty token from file") keeps the last good token. The clients
add one step client-go leaves out: a request answered 401 is sent once more when the file
then holds another token (:meth:`cpa.kube.client.KubeApi.request`), so a token rotated and
then revoked costs no failed poll.

The rules are :func:`reason_to_read`, pure; :class:`FileToken` does the I/O.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
import time
from collections.abc import Callable
from typing import Any

from cpa import logs, redact
from cpa.http.message import field_value_problem

TOKEN_REREAD_SECONDS = 60.0  # client-go's period for a file token source
MAX_TOKEN_BYTES = 64 * 1024
"""A token file larger than this is not a token (a wrong path, a log file): refused, not
read whole into every request's header."""


class TokenFileError(Exception):
    """The file holds no usable token and there is no earlier one to keep using."""


def reason_to_read(*, cached: bool, refused: bool, age: float) -> str | None:
    """Why the file must be read before this request, or None when the cached token serves.

    ``cached``: a good token is held; ``refused``: the API server answered 401 to it since
    it was read; ``age``: seconds since the last read."""
    if not cached:
        return "first"
    if refused:
        return "refused"
    if age >= TOKEN_REREAD_SECONDS:
        return "period"
    return None


def token_of(data: bytes) -> tuple[str, str | None]:
    """The token a file's bytes hold, stripped of surrounding whitespace as client-go does
    (empty when the file holds none), and why it cannot be sent, else None: a second line
    (a comment written under the token) or any other control character would end the
    header early, so it is refused by the byte where it is, never sent and never shown."""
    token = data.strip()
    problem = field_value_problem(token, offset=len(data) - len(data.lstrip()))
    return token.decode("ascii", "replace"), problem


def read_regular_file(path: str, limit: int) -> bytes:
    """Up to ``limit`` bytes of the regular file at ``path`` (symlinks followed). Anything
    else is refused at once rather than read: a FIFO would block the reader until someone
    writes to it, a device could be endless."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read(limit)
    finally:
        os.close(fd)


def _problem(path: str, token: str, unsendable: str | None) -> str | None:
    """Why the token read from ``path`` is not usable, in the operator's words."""
    if unsendable is not None:
        return (f"token file {path} {unsendable}: it must hold the token alone (no second "
                "line, no comment)")
    if len(token) > MAX_TOKEN_BYTES:
        return f"token file {path} is larger than {MAX_TOKEN_BYTES} bytes: not a token"
    if not token:
        return f"token file {path} is empty"
    return None


class FileToken:
    """The ``Authorization`` header for a token file, read again when the rules say so.

    Call it for each request's header; tell :meth:`unauthorized` the header of a request
    the API server answered 401. Thread-safe: the poll, the node watch and the Lease share
    one."""

    def __init__(self, path: str | os.PathLike[str],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._path = os.fspath(path)
        self._clock = clock
        self._lock = threading.Lock()
        self._header = ""  # "Bearer <the last good token>"; empty until one was read
        self._read_at = 0.0
        self._refused = False
        self._unusable: str | None = None  # why the file is not usable now (said once)
        self._log: Any = None

    @property
    def path(self) -> str:
        return self._path

    def __call__(self) -> str:
        """``Bearer <token>``; raises :class:`TokenFileError` when the file has never held
        a usable token."""
        with self._lock:
            now = self._clock()
            reason = reason_to_read(cached=bool(self._header), refused=self._refused,
                                    age=now - self._read_at)
            if reason is None:
                return self._header
            said: list[dict[str, str]] = []
            self._read(now, said)
            header = self._header
            problem = self._unusable
        self._say(said)
        if not header:
            raise TokenFileError(f"{problem}: write the bearer token into it (the Pod's "
                                 "projected service-account token, or a kubeconfig's "
                                 "tokenFile)")
        return header

    def unauthorized(self, refused: str | None) -> None:
        """The API server answered 401 to a request sent with the header ``refused``: read
        the file again before the next request, unless the token held now is another one
        (read since that request went out), so one 401 costs at most one read."""
        with self._lock:
            if self._header and refused == self._header:
                self._refused = True

    def _read(self, now: float, said: list[dict[str, str]]) -> None:
        """Read the file (under the lock); keep the last good token when it holds none.
        What to log goes in ``said`` (a field ``became``: usable or unusable), written
        after the lock is let go."""
        self._read_at, self._refused = now, False
        problem: str | None
        try:
            token, unsendable = token_of(read_regular_file(self._path, MAX_TOKEN_BYTES + 1))
        except OSError as exc:
            token, problem = "", f"cannot read token file {self._path}: {exc.strerror or exc}"
        else:
            problem = _problem(self._path, token, unsendable)
        if problem is None:
            redact.remember(token)
            if self._unusable is not None:
                said.append({"became": "usable", "after": self._unusable})
            self._header, self._unusable = f"Bearer {token}", None
            return
        if self._unusable is None and self._header:
            said.append({"became": "unusable", "error": problem})
        self._unusable = problem

    def _say(self, said: list[dict[str, str]]) -> None:
        for change in said:
            if self._log is None:
                self._log = logs.get_logger("credentials")
            if change["became"] == "unusable":
                self._log.warning("token.file_unusable", path=self._path,
                                  error=change["error"], hint="the last good token is sent "
                                  "until the file holds one again")
            else:
                self._log.info("token.file_usable", path=self._path,
                               after=change["after"])
