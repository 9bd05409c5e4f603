"""``--config-file``: CPVA's ``readConfigFileIfChanged`` (autoscaler_server.go:169-187).

The file is looked at once per poll, after the Node counts (CPVA reads nothing when the
Node list fails). It counts as changed when ``stat`` shows another file than last time --
device and inode, Go's ``os.SameFile`` -- which is what a mounted ConfigMap's update is
(the kubelet swaps a symlink to a new directory). A file rewritten in place keeps its
inode and is not re-read, as in CPVA. The identity is recorded *before* the read, so a
read that fails is reported once and the file then counts as seen (CPVA's order).

Bytes that are not UTF-8 are kept as lone surrogates, which the Go-json reader turns into
U+FFFD per byte, as Go does.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from cpa.vertical.decide.state import UNCHANGED, FileRead

__all__ = ["ConfigFile"]


class ConfigFile:
    """One ``--config-file`` path (or none) and the identity of the file last read."""

    def __init__(self, path: str, *, stat: Callable[[str], os.stat_result] = os.stat,
                 read: Callable[[str], bytes] | None = None) -> None:
        self.path = path
        self._stat = stat
        self._read = read or _read_bytes
        self._last: tuple[int, int] | None = None

    def poll(self) -> FileRead:
        """This poll's news of the file, as :class:`~cpa.vertical.decide.state.VerticalState`
        takes it."""
        if not self.path:
            return UNCHANGED
        try:
            info = self._stat(self.path)
        except OSError as exc:
            return FileRead(error=f"can't stat file {self.path}: {exc.strerror or exc}")
        identity = (info.st_dev, info.st_ino)
        if identity == self._last:
            return UNCHANGED
        self._last = identity
        try:
            data = self._read(self.path)
        except OSError as exc:
            return FileRead(error=f"can't read file {self.path}: {exc.strerror or exc}")
        return FileRead(content=data.decode("utf-8", "surrogateescape"))


def _read_bytes(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()
