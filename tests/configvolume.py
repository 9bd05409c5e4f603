"""A ConfigMap volume written as the kubelet writes it (``AtomicWriter``,
pkg/volume/util/atomic_writer.go), for the unit and integration tests of ``--config-dir``.

The kubelet's steps, in its order: the new data in a new timestamped directory
``..2026_12_02_06_00_00.123456789``; a symlink ``..data_tmp`` to it, renamed over ``..data``
(the one atomic step); a visible symlink ``KEY -> ..data/KEY`` for each new key; the old
timestamped directory removed; the visible symlinks of keys that are gone removed.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path

__all__ = ["kubelet_write"]

_SEQUENCE = itertools.count()


def kubelet_write(directory: Path, data: Mapping[str, str],
                  after_rename: Callable[[], None] | None = None) -> str:
    """Write ``data`` into ``directory`` as the kubelet updates a ConfigMap volume; return
    the new timestamped directory's name. ``after_rename`` runs right after ``..data``
    points at the new data, before the visible symlinks are fixed (the moment a reader
    can see both)."""
    directory.mkdir(parents=True, exist_ok=True)
    data_link = directory / "..data"
    old = os.readlink(data_link) if data_link.is_symlink() else None
    stamp = time.strftime("%Y_%m_%d_%H_%M_%S", time.gmtime())
    name = f"..{stamp}.{time.time_ns() % 10**9:09d}{next(_SEQUENCE)}"
    new = directory / name
    new.mkdir(mode=0o755)
    for key, value in data.items():
        (new / key).write_text(value)
        (new / key).chmod(0o644)
    tmp = directory / "..data_tmp"
    os.symlink(name, tmp)
    os.rename(tmp, data_link)
    if after_rename is not None:
        after_rename()
    for key in data:
        visible = directory / key
        if not visible.is_symlink():
            os.symlink(f"..data/{key}", visible)
    if old is not None:
        for leftover in (directory / old).iterdir():
            leftover.unlink()
        (directory / old).rmdir()
    for entry in directory.iterdir():
        if not entry.name.startswith("..") and entry.name not in data and entry.is_symlink():
            entry.unlink()
    return name
