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
from collections.abc import Callable, Mapping

__all__ = ["DATA_LINK", "ConfigDir", "ConfigDirError"]

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

    @property
    def label(self) -> str:
        return f"--config-dir {self.path}"

    @property
    def log_fields(self) -> dict[str, str]:
        return {"config_dir": self.path}

    def read(self, known: str | None) -> tuple[str, Mapping[str, str] | None]:
        """The parameters source (:class:`~cpa.daemon.paramscache.ParamsSource`): one
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
        try:
            with open(os.path.join(directory, name), "rb") as f:
                raw = f.read()
        except IsADirectoryError:
            raise ConfigDirError(
                f"--config-dir: {os.path.join(directory, name)} is a directory, not a key's "
                "file: mount the ConfigMap without items paths that nest keys") from None
        except PermissionError as exc:
            raise ConfigDirError(
                f"--config-dir: cannot read {os.path.join(directory, name)}: "
                f"{exc.strerror or exc} (the volume's defaultMode must let the autoscaler's "
                "user read it)") from exc
        data[name] = raw.decode("utf-8", "surrogateescape")
    return data
