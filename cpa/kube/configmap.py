"""The parameters ConfigMap: GET it, and create it from ``--default-params`` when absent."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from cpa import logs
from cpa.kube.api import Api, ApiError
from cpa.kube.objects import decode_configmap


@dataclass(frozen=True, slots=True)
class ConfigMapData:
    """What a poll needs of the ConfigMap: its version (to skip re-parsing) and its data."""

    resource_version: str
    data: dict[str, str] | None
    would_create: bool = False
    """A dry run found no ConfigMap: these are the defaults it would have created it with."""


def _path(namespace: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{namespace}/configmaps" + (f"/{name}" if name else "")


def _from_doc(doc: dict[str, object], where: str) -> ConfigMapData:
    """Decoded by type (:mod:`cpa.kube.objects`): a value that is not a string is refused,
    as client-go refuses it, rather than turned into one."""
    read = decode_configmap(doc, where)
    return ConfigMapData(read.resource_version, read.data)


def fetch(api: Api, namespace: str, name: str) -> ConfigMapData:
    """GET the ConfigMap; raises ApiError (404 when it does not exist; a malformed answer
    is :class:`~cpa.kube.objects.MalformedObject`)."""
    path = _path(namespace, name)
    return _from_doc(api.get_json(path), f"GET {path}")


def get_or_create(api: Api, namespace: str, name: str,
                  defaults: Mapping[str, str] | None, create: bool = True) -> ConfigMapData:
    """GET the ConfigMap; on NotFound create it from the defaults (lazily, every time it is
    missing, so a deleted ConfigMap comes back on the next poll).

    Upstream creates on any GET error; we only do so on NotFound (ours): creating after,
    say, a 403 or a timeout would just fail again or race an existing object. With
    ``create`` False (a dry run) the defaults are returned as what would have been created.
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
    body = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace}, "data": dict(defaults)}
    try:
        created = _from_doc(api.send_json("POST", _path(namespace), body),
                            f"POST {_path(namespace)}")
    except ApiError as exc:
        if exc.conflict:  # created by someone else since our GET
            return fetch(api, namespace, name)
        raise ApiError(exc.status, exc.reason,
                       f"cannot create ConfigMap {namespace}/{name} from --default-params: "
                       f"{exc.message}") from exc
    logs.get_logger("configmap").info("configmap.created", namespace=namespace, name=name,
                                      data=dict(defaults))
    return created
