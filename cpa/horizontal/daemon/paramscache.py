"""The parameters in force: their source read every poll (the ConfigMap, created from
``--default-params`` when missing as upstream does: :mod:`cpa.horizontal.daemon.configmapsource`;
or,
ours, a mounted directory: :mod:`cpa.horizontal.daemon.configdir`), parsed again only when its
version
changed, and the memory a large version took given back once it is gone.

Fail closed: a version whose parameters we refuse (or whose parsing fails in any way) is
invalid on every poll until the ConfigMap changes; older parameters never stay in force.
"""

from __future__ import annotations

import ctypes
import gc
from collections.abc import Callable, Mapping
from typing import Protocol

from cpa import logs
from cpa.horizontal.decide.modes.mode import Params
from cpa.horizontal.decide.modes.registry import parse_configmap_data
from cpa.horizontal.decide.params import ParamsError

__all__ = ["GIVE_BACK_POLLS", "LARGE_PARAMS_BYTES", "TRIM_EVERY_POLLS", "InvalidParams",
           "ParamsCache", "ParamsSource", "return_free_memory"]

LARGE_PARAMS_BYTES = 64 * 1024
"""A ConfigMap this large (a ladder of thousands of steps): the polls after it is loaded,
and after it is replaced, also collect the garbage (see :func:`return_free_memory`)."""
GIVE_BACK_POLLS = 3
TRIM_EVERY_POLLS = 30
"""Between large versions, the free heap is given back after the first poll (the node
list's peak is behind it) and then after every 30th (a relist's passing peak, within 5
minutes at the default period). ``malloc_trim`` walks the heap's free chunks, more of
them with a larger heap: after every poll it would be a noticeable share of a steady poll's
instructions, for pages that a steady poll, allocating and freeing the same few objects,
does not leave."""
_trim: Callable[[int], int] | None = None


def return_free_memory(collect: bool = False) -> None:
    """Give the heap's free pages back to the system (glibc's ``malloc_trim``; nothing
    where there is none), after collecting the garbage when ``collect``.

    Why: glibc keeps freed pages resident, so a passing peak stays in the RSS: a very large
    ladder, parsed once and replaced by a small one, would leave the daemon's memory higher
    for good, against a limit that is small. What remains after the trim are the
    small-object allocator's arenas, which CPython returns only when they are wholly
    free."""
    global _trim
    if collect:
        gc.collect()
    if _trim is None:
        try:
            _trim = getattr(ctypes.CDLL(None), "malloc_trim", None) or (lambda _pad: 0)
        except (OSError, AttributeError):
            _trim = lambda _pad: 0  # noqa: E731 - no libc to ask
    _trim(0)


class InvalidParams(Exception):
    """The ConfigMap's current version has parameters we refuse; the message is what
    /last-poll reports."""


class ParamsSource(Protocol):
    """Where the parameters come from: data with a version that changes with it."""

    label: str
    """How error messages name it: ``ConfigMap NS/NAME``, ``--config-dir DIR``."""
    log_fields: dict[str, str]
    """How log events name it: ``configmap=NAME``, ``config_dir=DIR``."""

    def read(self, known: str | None) -> tuple[str, Mapping[str, str] | None]:
        """(its version, its data); the data may be left unread (anything) when the version
        is ``known``. Raises what the poll reports (ApiError, ConfigDirError)."""
        ...


class ParamsCache:
    """A :class:`ParamsSource` as parameters, one parse per version."""

    def __init__(self, source: ParamsSource) -> None:
        self.source = source
        self._log = logs.get_logger("autoscaler")
        self.version: str | None = None
        """The version last read (the ConfigMap's resourceVersion)."""
        self.params: Params | None = None
        """The parameters of that version (None while it is invalid)."""
        self._error: str | None = None
        self._mode: str | None = None
        """The mode of the last valid parameters: an invalid version in between does not
        change it, so ``mode.changed`` names the mode that was really in force before."""
        self._size = 0  # of the version in force, in characters
        self._give_back = 0  # polls that still end with return_free_memory(collect=True)
        self._until_trim = 1  # polls until the next plain return_free_memory()

    def load(self) -> Params:
        """Read the source; the parameters of its version (raises :class:`InvalidParams`,
        or what the source raises)."""
        version, data = self.source.read(self.version)
        if version == self.version:
            if self._error is not None:
                raise InvalidParams(self._error)
            assert self.params is not None
            return self.params
        return self._parse(version, data)

    def _parse(self, version: str, data: Mapping[str, str] | None) -> Params:
        old = self.params
        self.version = version
        size = sum(len(value) for value in (data or {}).values())
        # The garbage of parsing a large table, and the table replaced, are given back
        # once the old parameters are gone (give_back(), after the poll).
        if size >= LARGE_PARAMS_BYTES or self._size >= LARGE_PARAMS_BYTES:
            self._give_back = GIVE_BACK_POLLS
        self._size = size
        try:
            params = parse_configmap_data(data)
        except Exception as exc:
            # Fail closed on ANY error, unexpected ones included: this version is invalid
            # on every poll until it changes, and older parameters never stay in force.
            reason = str(exc) if isinstance(exc, ParamsError) else (
                f"unexpected {type(exc).__name__} while parsing it: {exc}")
            label = self.source.label
            self.params, self._error = None, (
                f"invalid {label} ({_version_name(label)} {version}): {reason}")
            self._log.error("params.invalid", **self.source.log_fields,
                            resource_version=version, error=reason,
                            hint="fix the ConfigMap; nothing is scaled until then")
            raise InvalidParams(self._error) from exc
        self.params, self._error = params, None
        mode, previous = params.name, self._mode
        self._mode = mode
        if mode != previous and logs.v(1):
            self._log.info("mode.changed", mode=mode, previous=previous)
        if logs.v(2):  # once per resourceVersion, not once per poll
            self._log.info("params.loaded", mode=mode, changed=params != old,
                           resource_version=version, **params.fields())
        return params

    def give_back(self) -> None:
        """After each poll: the garbage collected and the free heap given back to the
        system for a few polls after a large version came or went; otherwise the free
        heap given back every :data:`TRIM_EVERY_POLLS` polls (the first poll's included)."""
        if self._give_back > 0:
            self._give_back -= 1
            self._until_trim = TRIM_EVERY_POLLS
            return_free_memory(collect=True)
            return
        self._until_trim -= 1
        if self._until_trim <= 0:
            self._until_trim = TRIM_EVERY_POLLS
            return_free_memory()


def _version_name(label: str) -> str:
    return "resourceVersion" if label.startswith("ConfigMap") else "version"
