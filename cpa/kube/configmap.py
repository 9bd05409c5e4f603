"""The parameters ConfigMap: GET it, create it from ``--default-params`` when absent, and
(ours, ``--update-configmap-from-defaults``) replace its data with new defaults."""

from __future__ import annotations

import enum
import functools
import hashlib
import json
from collections.abc import Callable, Mapping
from typing import NamedTuple

from cpa import logs
from cpa.kube.api import Api, ApiError, get_decoded
from cpa.kube.objects import decode_configmap

__all__ = ["AUTOSCALER_MANAGERS", "DEFAULTS_ANNOTATION", "SUPERSEDED_ANNOTATION",
           "SUPERSEDED_KEPT", "ConfigMapData", "DefaultsState", "data_hash", "data_writers",
           "defaults_state", "fetch", "get_or_create", "object_path", "replace_data",
           "superseded_after", "superseded_hashes", "written_by_autoscalers"]


class ConfigMapData(NamedTuple):
    """What a poll needs of the ConfigMap: its version (to skip re-parsing) and its data."""

    resource_version: str
    data: dict[str, str] | None
    would_create: bool = False
    """A dry run found no ConfigMap: these are the defaults it would have created it with."""
    metadata: Mapping[str, object] | None = None
    """The object's metadata as read (annotations, labels, resourceVersion): what a PUT of
    new data must carry back unchanged."""
    others: Mapping[str, object] | None = None
    """The object's other top-level fields as read (``binaryData``, ``immutable``, any
    later one): the autoscaler owns none of them, so a PUT carries them back as they were."""

    @property
    def immutable(self) -> bool:
        """``immutable: true``: the API server refuses any change of the data."""
        return (self.others or {}).get("immutable") is True

    def annotation(self, key: str) -> str | None:
        """One annotation's value, None when absent."""
        annotations = (self.metadata or {}).get("annotations")
        value = annotations.get(key) if isinstance(annotations, dict) else None
        return value if isinstance(value, str) else None


def object_path(namespace: str, name: str = "") -> str:
    """The ConfigMap's path (without a name: the namespace's ConfigMaps)."""
    return f"/api/v1/namespaces/{namespace}/configmaps" + (f"/{name}" if name else "")


def _from_doc(doc: dict[str, object], where: str) -> ConfigMapData:
    """Decoded by type (:mod:`cpa.kube.objects`): a value that is not a string is refused,
    as client-go refuses it, rather than turned into one."""
    read = decode_configmap(doc, where)
    meta = doc.get("metadata")
    others = {key: value for key, value in doc.items() if key not in _OWN_FIELDS}
    return ConfigMapData(read.resource_version, read.data,
                         metadata=meta if isinstance(meta, dict) else None,
                         others=others or None)


_OWN_FIELDS = frozenset({"apiVersion", "kind", "metadata", "data"})
"""The fields a PUT of new defaults writes itself (the metadata as read, with our
annotations added); every other field is the object's as read."""


@functools.lru_cache(maxsize=64)
def _decoder(path: str) -> Callable[[dict[str, object]], ConfigMapData]:
    """One decoder per path: the client keeps a decoded answer for the same decoder."""
    return lambda doc: _from_doc(doc, f"GET {path}")


def fetch(api: Api, namespace: str, name: str) -> ConfigMapData:
    """GET the ConfigMap; raises ApiError (404 when it does not exist; a malformed answer
    is :class:`~cpa.kube.objects.MalformedObject`). The value may be the last poll's (the
    same bytes came): nobody changes a ConfigMapData, its data or its metadata."""
    path = object_path(namespace, name)
    return get_decoded(api, path, _decoder(path))


def get_or_create(api: Api, namespace: str, name: str,
                  defaults: Mapping[str, str] | None, create: bool = True,
                  annotations: Mapping[str, str] | None = None) -> ConfigMapData:
    """GET the ConfigMap; on NotFound create it from the defaults (lazily, every time it is
    missing, so a deleted ConfigMap comes back on the next poll).

    Upstream creates on any GET error; we only do so on NotFound (ours): creating after,
    say, a 403 or a timeout would just fail again or race an existing object. With
    ``create`` False (a dry run) the defaults are returned as what would have been created.
    ``annotations`` (ours, only with ``--update-configmap-from-defaults``) go on the object
    created; without them the object is exactly upstream's (name, namespace, data).
    """
    try:
        return fetch(api, namespace, name)
    except ApiError as exc:
        if not exc.not_found:
            raise ApiError(exc.status, exc.reason,
                           f"cannot get ConfigMap {namespace}/{name}: {exc.message}") from exc
        if defaults is None:
            raise ApiError(404, "NotFound",
                           f"ConfigMap {namespace}/{name} not found and no --default-params "
                           "given: create the ConfigMap or pass --default-params") from exc
    if not create:
        return ConfigMapData("", dict(defaults), would_create=True)
    metadata: dict[str, object] = {"name": name, "namespace": namespace}
    if annotations:
        metadata["annotations"] = dict(annotations)
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata,
            "data": dict(defaults)}
    try:
        created = _from_doc(api.send_json("POST", object_path(namespace), body),
                            f"POST {object_path(namespace)}")
    except ApiError as exc:
        if exc.conflict:  # created by someone else since our GET
            return fetch(api, namespace, name)
        raise ApiError(exc.status, exc.reason,
                       f"cannot create ConfigMap {namespace}/{name} from --default-params: "
                       f"{exc.message}") from exc
    logs.get_logger("configmap").info("configmap.created", namespace=namespace, name=name,
                                      data=dict(defaults))
    return created


def replace_data(api: Api, namespace: str, name: str, read: ConfigMapData,
                 data: Mapping[str, str], annotations: Mapping[str, str]) -> ConfigMapData:
    """PUT ``data`` (and ``annotations`` added to the object's) over the ConfigMap as
    ``read``: its resourceVersion makes the API server refuse the write (409) when someone
    changed the object since, so an edit made meanwhile is never overwritten. Labels, every
    other annotation and every other field (``binaryData``) are kept: a PUT replaces the
    whole object, and what it leaves out is deleted. Raises ApiError; a 403 names the RBAC
    rule to add."""
    metadata = dict(read.metadata or {})
    metadata.update(name=name, namespace=namespace, resourceVersion=read.resource_version)
    old = metadata.get("annotations")
    metadata["annotations"] = {**(old if isinstance(old, dict) else {}), **annotations}
    metadata.pop("managedFields", None)  # the server keeps them; a PUT need not echo them
    body = {**(read.others or {}), "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": metadata, "data": dict(data)}
    try:
        return _from_doc(api.send_json("PUT", object_path(namespace, name), body),
                         f"PUT {object_path(namespace, name)}")
    except ApiError as exc:
        hint = (" Grant update on configmaps in this namespace (apiGroups [\"\"], resources "
                "[\"configmaps\"], verbs [\"update\"]: manifests/examples/"
                "configmap-update-rbac.yaml), or drop --update-configmap-from-defaults"
                if exc.forbidden else "")
        raise ApiError(exc.status, exc.reason,
                       f"cannot update ConfigMap {namespace}/{name} to the new "
                       f"--default-params: {exc.message}.{hint}") from exc


# --- --update-configmap-from-defaults (ours, opt-in) -----------------------------------

DEFAULTS_ANNOTATION = "cpa-py.github.io/defaults-sha256"
"""On a ConfigMap the autoscaler created (only with ``--update-configmap-from-defaults``):
the hash of the data it wrote. Data that still hashes to it was not edited by anyone."""


def data_hash(data: Mapping[str, str] | None) -> str:
    """The SHA-256 of a ConfigMap's data, key order and JSON spacing aside: the same data
    hashes the same whoever wrote it (the API server keeps ``data`` as a map). The imports
    are here: only --update-configmap-from-defaults hashes, and this module is on the path
    of every daemon's first poll."""
    text = json.dumps(dict(data or {}), sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


SUPERSEDED_ANNOTATION = "cpa-py.github.io/defaults-superseded"
"""Written with each update of the data to new defaults: the hashes of the defaults that
were replaced, newest first, comma-separated, at most :data:`SUPERSEDED_KEPT`. An
autoscaler whose defaults are listed is an older one still running (a rolling update's old
Pod): newer defaults are in force and it leaves them alone, rather than writing its own back
and fighting the newer Pod for as long as both run."""
SUPERSEDED_KEPT = 8
"""How many replaced defaults the annotation remembers: enough for the Pods of several
rollouts still running at once, and a bound on an annotation that grows with each update."""


def superseded_hashes(value: str | None) -> tuple[str, ...]:
    """The hashes :data:`SUPERSEDED_ANNOTATION` lists (none when absent or empty)."""
    return tuple(part for part in (value or "").split(",") if part)


def superseded_after(replaced: str, listed: str | None, new: str) -> str:
    """The annotation's value once the defaults hashing to ``replaced`` give way to those
    hashing to ``new``: ``replaced`` first, then those listed before, without ``new`` (it is
    in force now, not superseded), without repeats, at most :data:`SUPERSEDED_KEPT`."""
    kept: list[str] = []
    for digest in (replaced, *superseded_hashes(listed)):
        if digest != new and digest not in kept:
            kept.append(digest)
    return ",".join(kept[:SUPERSEDED_KEPT])


class DefaultsState(enum.Enum):
    """What ``--update-configmap-from-defaults`` makes of the ConfigMap as read."""

    CURRENT = "current"
    """The data is the defaults already: nothing to do."""
    OUTDATED = "outdated"
    """Nobody edited what we wrote and the defaults changed: replace the data."""
    DIVERGED = "diverged"
    """Someone edited the data (or we never wrote it: no annotation): leave it alone."""
    SUPERSEDED = "superseded"
    """Nobody edited the data, and it replaced our defaults: newer defaults are in force
    (we are the older autoscaler of a rollout): leave them alone."""


AUTOSCALER_MANAGERS = frozenset({"cluster-proportional-autoscaler",
                                 "cluster-proportional-autoscaler-py"})
"""The field managers whose writes of ``f:data`` leave a ConfigMap untouched: upstream's
binary (client-go names the manager after the program, as its User-Agent does) and ours
(:data:`cpa.kube.client.USER_AGENT`'s program). Every other manager (``kubectl-edit``,
``kubectl-client-side-apply``, ``kubectl-create``, ``helm``, a GitOps tool...) that set
``f:data`` made it edited."""


def data_writers(managed_fields: object) -> frozenset[str] | None:
    """The managers of the ``metadata.managedFields`` entries that own ``f:data``, or None
    when those entries cannot be judged (absent, as on an object older than server-side
    apply's bookkeeping, or not of the shape the API server writes): then nobody can say
    who wrote the data, and it counts as edited."""
    if not isinstance(managed_fields, list) or not managed_fields:
        return None
    writers: set[str] = set()
    for entry in managed_fields:
        if not isinstance(entry, dict):
            return None
        fields = entry.get("fieldsV1")
        if fields is None:
            continue
        manager, operation = entry.get("manager"), entry.get("operation")
        if (not isinstance(fields, dict) or not isinstance(manager, str)
                or operation not in ("Update", "Apply")):
            return None
        if "f:data" in fields and entry.get("subresource") in (None, ""):
            writers.add(manager)
    return frozenset(writers)


def written_by_autoscalers(managed_fields: object) -> bool:
    """Whether ``f:data`` was set by autoscalers only (:data:`AUTOSCALER_MANAGERS`), by
    ``Update`` or ``Apply``, and by nobody else: a ConfigMap without our annotation that an
    autoscaler created and nobody edited since."""
    writers = data_writers(managed_fields)
    return bool(writers) and writers is not None and writers <= AUTOSCALER_MANAGERS


def defaults_state(data: Mapping[str, str] | None, recorded: str | None,
                   defaults: Mapping[str, str], superseded: str | None = None,
                   immutable: bool = False, managed_fields: object = None) -> DefaultsState:
    """Whether the ConfigMap's data may follow the defaults.

    ``recorded`` is the annotation's value (None without it), ``superseded`` the
    :data:`SUPERSEDED_ANNOTATION`'s. Only data that still hashes to what we recorded is ours
    to replace: an edited one no longer matches its hash. An ``immutable`` one is an edit too:
    someone froze it, and the API server would refuse the update anyway. And defaults once
    replaced never replace the data again by themselves: two autoscalers with different
    defaults would otherwise write theirs in turn every poll.

    Without the annotation, ``managed_fields`` (the object's ``metadata.managedFields``)
    decide: data set by autoscalers only (:func:`written_by_autoscalers`: upstream's
    ConfigMap, created from its defaults and never edited) follows the defaults too.
    """
    if dict(data or {}) == dict(defaults):
        return DefaultsState.CURRENT
    if immutable:
        return DefaultsState.DIVERGED
    if recorded is None:
        return (DefaultsState.OUTDATED if written_by_autoscalers(managed_fields)
                else DefaultsState.DIVERGED)
    if recorded != data_hash(data):
        return DefaultsState.DIVERGED
    if data_hash(defaults) in superseded_hashes(superseded):
        return DefaultsState.SUPERSEDED
    return DefaultsState.OUTDATED
