"""``--config-dir`` (ours): the parameters from a mounted ConfigMap instead of the API.

Why: GitOps users and locked-down clusters want the autoscaler to read its parameters from a
``configMap`` volume, with no ConfigMap right at all (upstream #16). The kubelet writes such
a volume atomically (its ``AtomicWriter``): every key is a file in a timestamped directory
``..2026_12_02_06_00_00.123456789``, the symlink ``..data`` points at it, and each key's
visible name is a symlink ``KEY -> ..data/KEY``. An update writes a new timestamped
directory, makes a ``..data_tmp`` symlink to it and renames that over ``..data`` (the one
atomic step), then fixes the visible symlinks and removes the old directory.

So the version is where ``..data`` points (one ``readlink`` a poll: nothing else is read
while it is unchanged), and the keys are read from that directory itself, never through the
visible symlinks, which lag behind the rename for a moment. A directory without ``..data``
(a hostPath, a test) is read the same way, its version being every file's identity and
modification time.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Mapping

__all__ = ["DATA_LINK", "ConfigDir", "ConfigDirError", "file_kind"]

DATA_LINK = "..data"
_READ_ATTEMPTS = 3
"""A read that meets a directory the kubelet just removed (a swap between our readlink and
our reads) starts again at the new ``..data``; a third swap in one read is a failure."""


class ConfigDirError(Exception):
    """The directory cannot be read; the message says what to fix."""


class ConfigDir:
    """The directory ``path`` as ConfigMap data, re-read only when its version changed."""

    def __init__(self, path: str, *, readlink: Callable[[str], str] = os.readlink) -> None:
        self.path = path
        self._readlink = readlink
        self.label = f"--config-dir {path}"
        self.log_fields = {"config_dir": path}

    def read(self, known: str | None) -> tuple[str, Mapping[str, str] | None]:
        """The parameters source (:class:`~cpa.horizontal.daemon.paramscache.ParamsSource`): one
        readlink while the version is ``known``, the files only when it changed."""
        version = self.version()
        if version == known:
            return version, None
        return self.read_version(version)

    def version(self) -> str:
        """Where ``..data`` points; without it, a fingerprint of the files. Raises
        :class:`ConfigDirError` when there is no such directory."""
        try:
            return self._readlink(os.path.join(self.path, DATA_LINK))
        except FileNotFoundError:
            pass
        except OSError as exc:
            if not os.path.isdir(self.path):
                raise self._missing(exc) from exc
            if exc.errno != errno.EINVAL:  # EINVAL: a ..data that is no symlink: a plain dir
                raise ConfigDirError(f"{self.label}: cannot read {DATA_LINK}: "
                                     f"{exc.strerror or exc}") from exc
        return self._fingerprint()

    def read_version(self, version: str) -> tuple[str, dict[str, str]]:
        """The data of ``version`` (as :meth:`version` gave it), or of a newer one when the
        kubelet swapped meanwhile: (the version read, key -> value)."""
        for _ in range(_READ_ATTEMPTS):
            if not version.startswith("files:"):
                try:
                    return version, _read_keys(os.path.join(self.path, version), "..")
                except FileNotFoundError:
                    version = self.version()  # swapped while we read: the new one
                    continue
            try:
                data = _read_keys(self.path, ".")
            except FileNotFoundError:
                version = self.version()
                continue
            return version, data
        raise ConfigDirError(f"{self.label}: its contents changed under every read "
                             f"({_READ_ATTEMPTS} attempts); trying again at the next poll")

    def _fingerprint(self) -> str:
        try:
            entries = sorted(os.scandir(self.path), key=lambda e: e.name)
        except FileNotFoundError as exc:
            raise self._missing(exc) from exc
        except OSError as exc:
            raise ConfigDirError(f"{self.label}: cannot list it: {exc.strerror or exc}") from exc
        parts = []
        for entry in entries:
            if entry.name.startswith("."):
                continue
            try:
                info = entry.stat()
            except OSError:
                continue  # removed meanwhile: the read says what is there
            parts.append(f"{entry.name}:{info.st_ino}:{info.st_mtime_ns}:{info.st_size}")
        return "files:" + ",".join(parts)

    def _missing(self, exc: OSError) -> ConfigDirError:
        return ConfigDirError(
            f"{self.label}: no such directory ({exc.strerror or exc}): mount the ConfigMap "
            "with the parameters there (a configMap volume, see "
            "manifests/examples/config-dir.yaml), or drop --config-dir to read it from the API")


def _read_keys(directory: str, hidden: str) -> dict[str, str]:
    """Every key file of ``directory`` (names starting ``hidden`` are the kubelet's own, or
    an editor's), as text. FileNotFoundError when the directory (or a file) went away."""
    data: dict[str, str] = {}
    with os.scandir(directory) as entries:
        names = sorted(e.name for e in entries if not e.name.startswith(hidden))
    for name in names:
        path = os.path.join(directory, name)
        try:
            raw = _read_regular(path)
        except PermissionError as exc:
            raise ConfigDirError(
                f"--config-dir: cannot read {path}: "
                f"{exc.strerror or exc} (the volume's defaultMode must let the autoscaler's "
                "user read it)") from exc
        data[name] = raw.decode("utf-8", "surrogateescape")
    return data


def _read_regular(path: str) -> bytes:
    """The content of ``path`` (its symlinks followed), which must be a regular file.

    Why not a plain open(): opening a FIFO no writer opens waits for one for ever, and the
    poll loop (and the health answers that follow it) with it; a device or a socket is no
    value either. The kind is checked before the open, and again on what was opened (a swap
    in between); the open does not wait (O_NONBLOCK, which a regular file's reads ignore).
    """
    _check_regular(path, os.stat(path).st_mode)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with open(fd, "rb") as f:
        _check_regular(path, os.fstat(fd).st_mode)
        return f.read()


def _check_regular(path: str, mode: int) -> None:
    if stat.S_ISREG(mode):
        return
    if stat.S_ISDIR(mode):
        raise ConfigDirError(
            f"--config-dir: {_named(path)} is a directory, not a key's file: mount the "
            "ConfigMap without items paths that nest keys")
    raise ConfigDirError(
        f"--config-dir: {_named(path)} is {file_kind(mode)}, not a regular file: each key "
        "must be a file holding its value, as the kubelet writes a configMap volume; "
        "replace it with one")


def _named(path: str) -> str:
    """``path``, and where its symlinks lead when that is elsewhere (the kubelet's own
    links inside the volume aside: its timestamped directory is named already)."""
    return f"{path} (-> {os.path.realpath(path)})" if os.path.islink(path) else path


def file_kind(mode: int) -> str:
    """What a file of ``mode`` (``st_mode``) is, in words for an error message."""
    for test, words in ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a directory"),
                        (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
                        (stat.S_ISCHR, "a character device"),
                        (stat.S_ISBLK, "a block device"), (stat.S_ISLNK, "a symlink")):
        if test(mode):
            return words
    return "not a regular file"
