"""What a Pod or Service count keeps: per object its uid and whether it counts, nothing else.

Why a module of its own: the watch (:mod:`cpa.objects.watch`) feeds it from one thread and
the poll reads it from another, so the one shared piece is small and plain. A poll reads
:attr:`Tally.count`, an int kept current on every change (O(1), no walk over the objects).

A uid is kept as the 128-bit integer it spells when it is a UUID (every uid the API server
makes), which takes less memory than its 36-character string; anything else is kept as it
is.
"""

from __future__ import annotations

import threading

__all__ = ["Tally", "uid_key"]


def uid_key(uid: str) -> int | str:
    """The key an object is kept under: its UUID as an integer, else its uid as given."""
    if len(uid) == 36 and uid.count("-") == 4:
        try:
            return int(uid.replace("-", ""), 16)
        except ValueError:
            return uid
    return uid


class Tally:
    """The objects of one kind: those that count and those listed that do not (a Pod being
    deleted), so an event that moves one from one side to the other changes the count."""

    __slots__ = ("_counted", "_lock", "_other", "count")

    def __init__(self) -> None:
        self._counted: set[int | str] = set()
        self._other: set[int | str] = set()
        self._lock = threading.Lock()
        self.count = 0
        """How many objects count now; read without the lock (one int)."""

    def __len__(self) -> int:
        return len(self._counted) + len(self._other)

    def put(self, uid: str, counts: bool) -> None:
        """An object added or changed: it counts or not."""
        key = uid_key(uid)
        with self._lock:
            if counts:
                self._other.discard(key)
                self._counted.add(key)
            else:
                self._counted.discard(key)
                self._other.add(key)
            self.count = len(self._counted)

    def remove(self, uid: str) -> None:
        """An object deleted, or gone out of the list's selection (a Pod that finished)."""
        key = uid_key(uid)
        with self._lock:
            self._counted.discard(key)
            self._other.discard(key)
            self.count = len(self._counted)

    def adopt(self, listed: Tally) -> None:
        """A complete list, gathered into ``listed``: these objects and no others."""
        with self._lock:
            self._counted, self._other = listed._counted, listed._other
            self.count = len(self._counted)
