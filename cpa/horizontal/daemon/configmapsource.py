"""The parameters' usual source: the ConfigMap, read every poll (created from
``--default-params`` when missing, as upstream does), and, ours with
``--update-configmap-from-defaults``, its data replaced by new defaults while nobody has
edited what the autoscaler wrote.

Why the annotation: upstream writes the defaults only into a missing ConfigMap, so a
distribution upgrade that changes them never reaches the old ConfigMap
(kubernetes/kubernetes#45851). To tell our own data from an operator's edit, the ConfigMap
we create carries the hash of the data we wrote
(:data:`~cpa.horizontal.decide.defaults.DEFAULTS_ANNOTATION`);
data that still hashes to it is ours to replace, anything else is left alone and said so
once. A ConfigMap without the annotation (upstream's, created years ago) is judged by its
managedFields instead: data that only autoscalers set is ours to replace too
(:func:`~cpa.kube.configmap.written_by_autoscalers`). Each update also records the hash
of the defaults it replaced
(:data:`~cpa.kube.configmap.SUPERSEDED_ANNOTATION`): an autoscaler finding its own defaults
there is the older Pod of a rollout and leaves the newer defaults alone, so two Pods with
different defaults do not write theirs in turn. Without the flag nothing of this runs and
the ConfigMap created is upstream's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from cpa import logs
from cpa.kube import configmap
from cpa.kube.api import Api, ApiError
from cpa.kube.configmap import (
    AUTOSCALER_MANAGERS,
    DEFAULTS_ANNOTATION,
    SUPERSEDED_ANNOTATION,
    ConfigMapData,
    DefaultsState,
    data_hash,
    data_writers,
    defaults_state,
    superseded_after,
)

__all__ = ["ConfigMapSource", "DefaultsReport"]


class DefaultsReport(NamedTuple):
    """What ``--update-configmap-from-defaults`` found (and did) at one poll."""

    state: DefaultsState
    """After this poll: CURRENT once an update is written."""
    replaced: Mapping[str, str] | None = None
    """The data replaced by the defaults at this poll (None: nothing written)."""


class ConfigMapSource:
    """The ConfigMap ``namespace/name`` as a parameters source (see
    :class:`~cpa.horizontal.daemon.paramscache.ParamsCache`)."""

    def __init__(self, api: Api, namespace: str, name: str,
                 default_params: Mapping[str, str] | None, *, dry_run: bool = False,
                 update_from_defaults: bool = False) -> None:
        """``dry_run``: a missing ConfigMap is decided on from ``default_params`` and not
        created, an outdated one not updated (each said once)."""
        self._api = api
        self.namespace = namespace
        self.name = name
        self.label = f"ConfigMap {namespace}/{name}"
        self.log_fields = {"configmap": name}
        self._defaults = default_params
        self._dry_run = dry_run
        self._follow = update_from_defaults and default_params is not None
        self._hash = data_hash(default_params) if self._follow else ""
        self._annotations = {DEFAULTS_ANNOTATION: self._hash} if self._follow else None
        """What the ConfigMap created (and each update) records: the defaults' hash."""
        self._log = logs.get_logger("configmap")
        self._would_create_logged = False
        self._checked: tuple[str, DefaultsState] | None = None  # (resourceVersion, state)
        self._left_alone: DefaultsState | None = None
        """DIVERGED or SUPERSEDED once said (once per episode), else None."""
        self._would_update_logged: str | None = None
        self.defaults: DefaultsReport | None = None
        """This poll's :class:`DefaultsReport` (None without the flag)."""

    def read(self, known: str | None) -> tuple[str, Mapping[str, str] | None]:
        """GET (or create) the ConfigMap, bring it to the defaults when that is ours to do;
        (its resourceVersion, its data). Raises ApiError."""
        self.defaults = None
        cm = configmap.get_or_create(self._api, self.namespace, self.name, self._defaults,
                                     create=not self._dry_run, annotations=self._annotations)
        if cm.would_create != self._would_create_logged:
            self._would_create_logged = cm.would_create
            if cm.would_create:
                self._log.info("configmap.would_create", namespace=self.namespace,
                               name=self.name, data=cm.data,
                               hint="dry run: deciding on --default-params, creating nothing")
        if self._follow and not cm.would_create:
            cm = self._follow_defaults(cm)
        return cm.resource_version, cm.data

    # --- --update-configmap-from-defaults -----------------------------------------------
    def _follow_defaults(self, cm: ConfigMapData) -> ConfigMapData:
        assert self._defaults is not None
        state = self._state(cm)
        replaced: Mapping[str, str] | None = None
        if state is DefaultsState.OUTDATED and self._dry_run:
            if self._would_update_logged != cm.resource_version:
                self._would_update_logged = cm.resource_version
                self._log.info("configmap.would_update", namespace=self.namespace,
                               name=self.name, old=cm.data, new=dict(self._defaults),
                               hint="dry run: the ConfigMap keeps its data")
        elif state is DefaultsState.OUTDATED:
            updated = self._update(cm)
            if updated is None:
                # Written by someone else since our GET: judge what is there now, next poll.
                return configmap.fetch(self._api, self.namespace, self.name)
            replaced, state = cm.data or {}, DefaultsState.CURRENT
            self._checked = (updated.resource_version, state)
            cm = updated
        self._say_left_alone(cm, state)
        self.defaults = DefaultsReport(state, replaced)
        return cm

    def _update(self, cm: ConfigMapData) -> ConfigMapData | None:
        """PUT the defaults over the data as read, recording the defaults replaced (the
        data hashes to its annotation: OUTDATED); None when someone wrote meanwhile."""
        assert self._defaults is not None
        annotations = {DEFAULTS_ANNOTATION: self._hash, SUPERSEDED_ANNOTATION: superseded_after(
            data_hash(cm.data), cm.annotation(SUPERSEDED_ANNOTATION), self._hash)}
        try:
            updated = configmap.replace_data(self._api, self.namespace, self.name, cm,
                                             self._defaults, annotations)
        except ApiError as exc:
            if not exc.conflict:
                raise
            return None
        self._log.info("configmap.defaults_updated", namespace=self.namespace,
                       name=self.name, old=cm.data, new=dict(self._defaults),
                       resource_version=updated.resource_version)
        return updated

    def _state(self, cm: ConfigMapData) -> DefaultsState:
        """The state of this resourceVersion, hashed once per version (a large ladder's
        data is not hashed every poll)."""
        assert self._defaults is not None
        if self._checked is not None and self._checked[0] == cm.resource_version:
            return self._checked[1]
        state = defaults_state(cm.data, cm.annotation(DEFAULTS_ANNOTATION), self._defaults,
                               cm.annotation(SUPERSEDED_ANNOTATION), cm.immutable,
                               (cm.metadata or {}).get("managedFields"))
        self._checked = (cm.resource_version, state)
        return state

    def _say_left_alone(self, cm: ConfigMapData, state: DefaultsState) -> None:
        """Once per episode: a ConfigMap whose data is not our defaults is left alone, and
        why (edited, or newer defaults in force)."""
        left_alone = state if state in (DefaultsState.DIVERGED,
                                         DefaultsState.SUPERSEDED) else None
        if left_alone is not None and left_alone is not self._left_alone:
            if left_alone is DefaultsState.SUPERSEDED:
                self._log.warning(
                    "configmap.defaults_superseded", namespace=self.namespace, name=self.name,
                    data=cm.data,
                    reason="its data replaced this autoscaler's --default-params (they are "
                           f"listed in its {SUPERSEDED_ANNOTATION} annotation): newer "
                           "defaults are in force, as during a rolling update",
                    hint="its data stays in force; to bring these defaults back (a "
                         "rollback), delete the ConfigMap (it is created again from the "
                         "defaults of the autoscaler that finds it missing) or edit it")
            else:
                self._say_diverged(cm)
        self._left_alone = left_alone

    def _say_diverged(self, cm: ConfigMapData) -> None:
        self._log.warning(
            "configmap.defaults_diverged", namespace=self.namespace, name=self.name,
            reason=_diverged_reason(cm),
            hint="its data stays in force; to follow --default-params again, delete the "
                 "ConfigMap (it is created again from the defaults, annotated and not "
                 "immutable)")


def _diverged_reason(cm: ConfigMapData) -> str:
    if cm.immutable:
        return ("immutable: true: frozen by whoever set it, so treated as edited (the API "
                "server would refuse any update of its data)")
    if cm.annotation(DEFAULTS_ANNOTATION) is not None:
        return "edited since the autoscaler wrote it"
    writers = data_writers((cm.metadata or {}).get("managedFields"))
    if writers is None:
        return (f"no {DEFAULTS_ANNOTATION} annotation and no managedFields to tell who wrote "
                "its data, so treated as edited")
    others = ", ".join(sorted(writers - AUTOSCALER_MANAGERS)) or "nobody"
    return (f"no {DEFAULTS_ANNOTATION} annotation, and its data was set by {others} (not "
            "an autoscaler, per managedFields), so treated as edited")
