"""One poll of the vertical autoscaler as a pure state machine: which config applies, what
it computes, and whether to write.

Why separate from the daemon: CPVA's ``pollAPIServer`` (cpva
pkg/autoscaler/autoscaler_server.go:95-156) mixes three decisions with its I/O, and each has
a quirk a drop-in must keep:

* the config file is re-read only when ``os.Stat`` shows another file (device and inode:
  ``os.SameFile``), which is what a mounted ConfigMap's symlink swap produces; a file
  rewritten in place is not seen, and an empty file counts as unchanged;
* the file is decoded onto a fresh copy of ``--default-config`` (so the default's other
  containers stay); while no config has been set yet, every poll rebuilds it from the
  default. A top-level ``null`` file sets "no config", so that poll writes an empty
  container list and the next one falls back to the default alone;
* an invalid file is logged once and then ignored: the previous config keeps applying
  (or, if there was none yet, the default). This is :attr:`InvalidConfigPolicy.KEEP_PREVIOUS`.
  Issue 23 asks for the opposite by default, :attr:`InvalidConfigPolicy.REFUSE`: an error
  on every poll and no write until the file changes;
* the write decision compares with the last *successful* write (:func:`should_write`).

The daemon does the I/O: it lists or watches Nodes, stats and reads the file, sends the
PATCH, and calls :meth:`VerticalState.written` after a successful (or dry-run) write.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from cpa.vertical.decide.cpva_config import (
    ConfigError,
    ScaleConfig,
    decode_config,
    object_kinds,
)
from cpa.vertical.decide.formula import (
    ContainerRequirements,
    CountsUnavailable,
    MilliRangeError,
    Requirements,
    compute,
)
from cpa.vertical.decide.patch import should_write

__all__ = ["UNCHANGED", "FileRead", "InvalidConfigPolicy", "Plan", "VerticalState"]


class InvalidConfigPolicy(StrEnum):
    """What an invalid config file does to the polls after it."""

    KEEP_PREVIOUS = "keep-previous"  # CPVA v0.8.9: fails open
    REFUSE = "refuse"  # ours: fails closed until the file changes


@dataclass(frozen=True, slots=True)
class FileRead:
    """The outcome of CPVA's ``readConfigFileIfChanged`` for one poll.

    ``content`` is the new file's text when the file is another one than last time; None
    (or an empty text, which CPVA ignores) means unchanged, or no ``--config-file``.
    ``error`` is a failed stat or read: the poll fails and writes nothing.
    """

    content: str | None = None
    error: str | None = None


UNCHANGED = FileRead()


@dataclass(frozen=True, slots=True)
class Plan:
    """What one poll decided."""

    computed: dict[str, ContainerRequirements] | None  # None when the poll failed
    write: bool
    error: str | None = None
    config_set: bool = False  # a config was (re)built this poll: CPVA logs "setting config"
    config: ScaleConfig | None = None  # the config in force after this poll


class VerticalState:
    """The config in force and the last requirements written, across polls."""

    def __init__(self, default_config: ScaleConfig | None,
                 policy: InvalidConfigPolicy = InvalidConfigPolicy.REFUSE, *,
                 target: str | None = None, targets: tuple[str, ...] = ()) -> None:
        """``target`` and ``targets`` (several targets per instance, ours): the
        ``kind/name`` this state is for and every target of the instance, so that a
        config file of per-target blocks gives this target its own block
        (:func:`cpa.vertical.decide.cpva_config.decode_config`); ``default_config`` is then this
        target's share of ``--default-config``."""
        self.default_config = default_config
        self.policy = policy
        self.target = target
        self.targets = targets
        self.current: ScaleConfig | None = None  # Go's s.currentConfig; None is nil
        self.last_written: Requirements | None = None  # Go's s.lastReqs
        self.config_error: str | None = None  # REFUSE: the invalid file's error

    def plan(self, nodes: int, cores: int, file: FileRead = UNCHANGED,
             objects: Callable[[frozenset[str]], Mapping[str, int]] | None = None) -> Plan:
        """Decide this poll from the cluster counts and the config file's news.
        ``objects`` (ours): the Pods and Services counts of the kinds asked for, for a
        config that names them; it raises :class:`CountsUnavailable` when they are not
        counted."""
        if file.error is not None:
            return Plan(None, False, error=f"failed to read the config file: {file.error}",
                        config=self.current)
        changed = bool(file.content)
        if self.config_error is not None and not changed:
            return Plan(None, False, error=self.config_error, config=self.current)
        config_set = False
        if self.current is None or changed:
            config: ScaleConfig | None = dict(self.default_config or {})
            if changed:
                assert file.content is not None
                try:
                    config = decode_config(file.content, onto=config, target=self.target,
                                           targets=self.targets)
                except ConfigError as exc:
                    message = f"invalid config file: {exc}"
                    if self.policy is InvalidConfigPolicy.REFUSE:
                        self.config_error = (
                            f"{message} (nothing is written until the file changes)")
                    return Plan(None, False, error=message, config=self.current)
            self.current = config
            self.config_error = None
            config_set = True
        if len(self.targets) > 1 and not self.current:
            return Plan(None, False, error=(
                f"no config for {self.target}: give it a block in --default-config or the "
                f'config file, e.g. {{"{self.target}": {{"<container>": {{"requests": ...}}}}}}'),
                config_set=config_set, config=self.current)
        try:
            kinds = object_kinds(self.current)
            counted = (objects(kinds) if kinds and objects is not None else {})
            computed = compute(self.current, nodes, cores, counted)
        except (MilliRangeError, CountsUnavailable) as exc:
            return Plan(None, False, error=str(exc), config_set=config_set,
                        config=self.current)
        return Plan(computed, should_write(self.last_written, computed),
                    config_set=config_set, config=self.current)

    def written(self, computed: Requirements) -> None:
        """Record a successful write (CPVA also counts a dry run as one)."""
        self.last_written = computed
