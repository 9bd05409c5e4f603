"""``--watch-targets`` (ours, opt-in): the targets' workloads watched, so that another
writer's replica count is answered at once rather than a poll period later.

One metadata-only list + watch per kind and namespace (:class:`~cpa.objects.watch.
ObjectWatch`, the Pods' and Services' machinery), started when a poll first has a target of
that kind and stopped when none is left. Metadata is enough: ``metadata.managedFields``
says who last wrote the replicas (:mod:`cpa.kube.fieldowners`), so neither the spec nor the
status of any workload is sent or kept.

When the manager that last wrote a target's replicas is not ours and that write is new
(its manager, time or the object's generation changed), the poll loop is woken (a fresh
decision and write) unless the target is contended
(:mod:`cpa.horizontal.daemon.contention`). The poll, which reads the replicas, decides
whether it was a foreign write at all (a writer that rewrote our own count changed
nothing) and asks :meth:`TargetWatches.writer` whom to name.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, Protocol

from cpa import logs
from cpa.horizontal.daemon.contention import Contention
from cpa.kube.api import StreamingApi
from cpa.kube.fieldowners import OUR_MANAGERS, count_field, latest_owner
from cpa.kube.targets import Target, object_path
from cpa.objects.watch import Kind, ObjectWatch, Seen

__all__ = ["RBAC_VERBS", "TargetWatches", "watch_kind"]

RBAC_VERBS = "get, list, watch"


class Watch(Protocol):
    """What is needed of a watch (:class:`~cpa.objects.watch.ObjectWatch`)."""

    @property
    def error(self) -> str | None: ...

    @property
    def forbidden(self) -> bool: ...

    def start(self) -> None: ...

    def stop(self, timeout: float = ...) -> None: ...


class _Seen(NamedTuple):
    """What the watch saw of a target: the last writer of its replicas other than ours
    (kept after our own write undid it: the poll that answers names it after writing), and
    what tells a new foreign write from an old one (None while ours is the last)."""

    writer: str | None
    key: tuple[str, str, int] | None


def watch_kind(namespace: str, target: Target) -> Kind:
    """The list + watch of ``target``'s kind in ``namespace``: its collection's path."""
    api = target.api
    path = object_path(namespace, target).rpartition("/")[0]
    return Kind(api.plural, path,
                rbac=f"{api.rbac_rule(RBAC_VERBS)} to the autoscaler's Role or ClusterRole",
                doing=f"--watch-targets: watching the {api.plural}")


class TargetWatches:
    """The watches of the targets' kinds, and what they saw of each target."""

    def __init__(self, api: StreamingApi, namespace: str, contention: Contention,
                 make: Callable[[Kind, Seen], Watch] | None = None) -> None:
        self._namespace = namespace
        self.answer: Callable[[], None] = lambda: None
        """Wakes the poll loop: a foreign write to answer at once (set by the daemon)."""
        self.contention = contention
        """Which targets are contended (shared with the poll, which records the writes)."""
        self._make: Callable[[Kind, Seen], Watch] = make or (
            lambda kind, seen: ObjectWatch(api, kind, rng=random.Random(), seen=seen))
        self._lock = threading.Lock()
        self._watches: dict[str, Watch] = {}  # by collection path
        self._targets: dict[tuple[str, str], Target] = {}  # (path, name) -> target
        self._seen: dict[Target, _Seen] = {}
        self._log = logs.get_logger("autoscaler")
        self.answers = 0
        """Polls woken to answer a foreign write."""

    def use(self, targets: tuple[Target, ...]) -> None:
        """Watch the kinds of ``targets`` (this poll's) from now on, and only those."""
        kinds = {(kind := watch_kind(self._namespace, t)).path: kind for t in targets}
        with self._lock:
            self._targets = {(watch_kind(self._namespace, t).path, t.name): t
                             for t in targets}
            gone = [path for path in self._watches if path not in kinds]
            started = [kinds[path] for path in kinds if path not in self._watches]
            stopped = [self._watches.pop(path) for path in gone]
            made = {kind.path: self._make(kind, self._seen_in(kind.path)) for kind in started}
            self._watches.update(made)
        for watch in stopped:
            watch.stop()
        for kind in started:
            made[kind.path].start()
            self._log.info("targets.watch_started", kind=kind.name, path=kind.path)

    def poll(self, targets: tuple[Target, ...]) -> list[str]:
        """A poll's targets watched (:meth:`use`); the watches refused (:meth:`problems`)."""
        self.use(targets)
        return self.problems()

    def writer(self, target: Target) -> str | None:
        """The manager other than ours that last wrote ``target``'s replicas, as the
        watch saw it; None when it has seen none."""
        with self._lock:
            seen = self._seen.get(target)
        return seen.writer if seen is not None else None

    def problems(self) -> list[str]:
        """The watches refused (403), each naming the rule to add."""
        with self._lock:
            watches = list(self._watches.values())
        return [w.error for w in watches if w.forbidden and w.error]

    def stop(self) -> None:
        self.use(())

    def _seen_in(self, path: str) -> Seen:
        return lambda event, obj: self.seen(path, event, obj)

    def seen(self, path: str, event: str, obj: Mapping[str, Any]) -> None:
        """An object of the collection at ``path`` as the watch read it (the watch's
        thread): a new write of a target's replicas by another manager wakes the poll."""
        meta = obj.get("metadata")
        if not isinstance(meta, Mapping):
            return
        with self._lock:
            target = self._targets.get((path, str(meta.get("name"))))
            if target is None:
                return
            if event == "DELETED":
                self._seen.pop(target, None)
                return
            before = self._seen.get(target)
            now = _seen(meta, target, before.writer if before is not None else None)
            self._seen[target] = now
        if before is None or now.key is None or now.key == before.key:
            return  # the first sight, ours, or no new write of the replicas
        if self.contention.is_contended(target):  # a fight: answered at the poll period
            if logs.v(2):
                self._log.info("target.answer_deferred", target=str(target),
                               manager=now.writer)
            return
        self.answers += 1
        self.answer()


def _seen(meta: Mapping[str, Any], target: Target, writer: str | None) -> _Seen:
    owner = latest_owner(meta.get("managedFields"), count_field(target))
    if owner is None or owner.manager in OUR_MANAGERS:
        return _Seen(writer, None)
    generation = meta.get("generation")
    return _Seen(owner.manager, (owner.manager, owner.time,
                                 generation if isinstance(generation, int) else 0))
