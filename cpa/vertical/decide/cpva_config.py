"""CPVA's configuration: the model, and a decoder with Go ``encoding/json`` semantics.

Why not :mod:`json` plus a schema: CPVA decodes ``--default-config`` and ``--config-file``
with ``json.Unmarshal`` into ``map[string]ContainerScaleConfig`` (cpva
pkg/autoscaler/autoscaler_server.go:250-292), and a drop-in must accept and reject the same
text and read it the same way. The rules that matter, all reproduced here:

* field names match case-insensitively (Go's fold: ``BASE``, ``coresperstep``); unknown
  keys are ignored, even with malformed-looking values; there are no struct tags;
* ``base``/``max``/``step`` are ``*resource.Quantity``: its ``UnmarshalJSON`` gets the raw
  JSON text, strips one pair of quotes and surrounding white space and calls
  ``ParseQuantity``. So a JSON number works (``"base": 100``), ``true`` or an object is an
  error, and a string written with any escape (``"10\\u006d"``) is an error because the
  backslash reaches the parser;
* ``coresPerStep``/``nodesPerStep`` are ``*int``: integer literals only (``1.0`` and
  ``"1"`` are errors); negative values are accepted;
* ``null`` sets a pointer or map to nil; ``null`` for a container or a resource still
  creates that entry, with every field unset (which computes to 0);
* duplicate keys: the last wins, except that two ``requests`` (or ``Requests``) members of
  one container *merge*, because Go decodes the second into the map the first created;
* decoding into an existing map (the file onto a copy of the default config) replaces
  whole container entries and keeps the default's other containers;
* a top-level ``null`` yields a nil map (:data:`None` here), which CPVA's poll loop treats
  specially (see :mod:`cpa.vertical.decide.state`).

Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Final, TypeAlias

from cpa.go.json import (
    GoJsonError,
    JsonObject,
    JsonValue,
    Number,
    describe,
    go_int,
    match_field,
    parse,
)
from cpa.go.quantity import Quantity, QuantityError, go_trim_space

__all__ = [
    "ConfigError",
    "ContainerScaleConfig",
    "ResourceScaleConfig",
    "ScaleConfig",
    "config_string",
    "decode_config",
    "object_kinds",
    "target_blocks",
]


class ConfigError(ValueError):
    """A configuration CPVA's ``json.Unmarshal`` would refuse."""


@dataclass(frozen=True, slots=True)
class ResourceScaleConfig:
    """One resource's coefficients (``ResourceScaleConfig``); None is Go's nil pointer."""

    base: Quantity | None = None
    max: Quantity | None = None
    step: Quantity | None = None
    cores_per_step: int | None = None
    nodes_per_step: int | None = None
    pods_per_step: int | None = None
    """Ours, opt-in: one ``step`` per this many Pods in the cluster (None: off)."""
    services_per_step: int | None = None
    """Ours, opt-in: one ``step`` per this many Services (None: off)."""


@dataclass(frozen=True, slots=True)
class ContainerScaleConfig:
    """One container's ``requests`` and ``limits`` by resource name; None is a nil map."""

    requests: Mapping[str, ResourceScaleConfig] | None = None
    limits: Mapping[str, ResourceScaleConfig] | None = None


ScaleConfig: TypeAlias = Mapping[str, ContainerScaleConfig]
"""Container name -> its config. A decoded top-level ``null`` is ``None`` instead."""

_CONTAINER_FIELDS: Final = ("Requests", "Limits")
_CONTAINER_EXPECTED: Final = 'an object with "requests" and/or "limits"'
_RESOURCES_EXPECTED: Final = 'an object of resource names such as "cpu" and "memory"'
_RESOURCE_EXPECTED: Final = "an object with base, max, step, coresPerStep and nodesPerStep"
_RESOURCE_FIELDS: Final = ("Base", "Max", "Step", "CoresPerStep", "NodesPerStep",
                            "PodsPerStep", "ServicesPerStep")
_OBJECT_FIELDS: Final = ("PodsPerStep", "ServicesPerStep")  # ours: whole numbers > 0

# In a valid JSON text every '"' outside a string opens one, so this finds every string
# token (keys included) in document order.
_STRING_TOKEN: Final = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)


def decode_config(text: str, onto: ScaleConfig | None = None, *, target: str | None = None,
                  targets: tuple[str, ...] = ()) -> ScaleConfig | None:
    """``json.Unmarshal([]byte(text), &cfg)`` where ``cfg`` starts as ``onto``.

    CPVA decodes ``--default-config`` onto an empty map and the config file onto a copy of
    the default config. Returns the new map (``onto`` is not modified), or None for a
    top-level ``null``. Raises :class:`ConfigError` where Go returns an error.

    ``target`` (ours, several targets per instance): the ``kind/name`` this config is
    for, ``targets`` every target of the instance. A document of per-target blocks (see
    :func:`target_blocks`) then gives only that target's block(s), decoded in document
    order onto ``onto``, as a file over the default; a target without a block gets
    ``onto`` unchanged. A document in CPVA's format applies to every target alike.
    """
    try:
        tree = parse(text)
    except GoJsonError as exc:
        raise ConfigError(f"the config is not valid JSON: {exc}") from exc
    decoder = _Decoder(text)
    if target is not None and target_blocks(tree, targets) is not None:
        return decoder.blocks(tree, target, onto)
    return decoder.top(tree, onto)


def _block_key(key: str) -> str:
    """A block's key as ``--target`` reads a target: lower-cased whole, as CPVA does."""
    return key.lower()


def target_blocks(tree: JsonValue, targets: tuple[str, ...]) -> list[str] | None:
    """The targets a parsed config names, if it is in the per-target format; else None.

    The format (ours): a JSON object whose every key is a target as ``--target`` spells
    one (``deployment/metrics-server``) and whose values are CPVA configs. A key with a
    ``/`` cannot be a container name (a DNS label), so a CPVA config is never read as
    blocks. Raises :class:`ConfigError` for a document that mixes both kinds of key, or
    names a target the instance does not have (``targets``; a typo would otherwise leave
    the target with the default alone, silently).
    """
    if not isinstance(tree, JsonObject) or not tree.members:
        return None
    keys = [key for key, _ in tree.members]
    slashed = [key for key in keys if "/" in key]
    if not slashed:
        return None
    if len(slashed) != len(keys):
        plain = sorted({key for key in keys if "/" not in key})
        raise ConfigError(
            "the config mixes per-target blocks (" + ", ".join(map(repr, sorted(set(slashed))))
            + ") with container names (" + ", ".join(map(repr, plain)) + "): put every "
            'container inside its target\'s block, e.g. {"deployment/a": {"c": {...}}}')
    unknown = sorted({_block_key(key) for key in slashed} - set(targets))
    if unknown:
        raise ConfigError(
            f"the config has a block for {', '.join(map(repr, unknown))}, which is not one "
            f"of --target ({', '.join(targets)}): fix the block's key or add the target")
    return [_block_key(key) for key in keys]


class _Decoder:
    """Walks the parsed tree in document order, alongside the raw text's string tokens.

    Why the raw tokens: Go hands a Quantity its raw JSON text, so a string quantity with an
    escape fails to parse even when its decoded value would not. The parsed tree holds
    decoded strings only; counting string tokens (keys and values, skipped members too)
    tells for each string value whether its raw form had a backslash.
    """

    def __init__(self, text: str) -> None:
        self._escaped = [("\\" in match.group()) for match in _STRING_TOKEN.finditer(text)]
        self._next = 0

    def _take(self, count: int = 1) -> bool:
        """Consume ``count`` string tokens; whether the last one had an escape."""
        self._next += count
        return self._escaped[self._next - 1] if count else False

    def _known(self, value: JsonObject, names: tuple[str, ...]
               ) -> Iterator[tuple[str, str, JsonValue]]:
        """Each member whose key decodes into one of the fields ``names`` (by Go's rules):
        its key, that field and its value; the others are skipped, as Go ignores them."""
        for key, member in value.members:
            self._take()
            field = match_field(key, names)
            if field is None:
                self._skip(member)
            else:
                yield key, field, member

    def _skip(self, value: JsonValue) -> None:
        """Consume the string tokens of a member Go ignores (iteratively: any depth)."""
        count = 0
        pending: list[JsonValue] = [value]
        while pending:
            item = pending.pop()
            if isinstance(item, str):
                count += 1
            elif isinstance(item, JsonObject):
                count += len(item.members)
                pending.extend(member for _, member in item.members)
            elif isinstance(item, tuple):
                pending.extend(item)
        self._take(count)

    def top(self, tree: JsonValue, onto: ScaleConfig | None, where: str = ""
            ) -> ScaleConfig | None:
        if tree is None:
            return None
        if not isinstance(tree, JsonObject):
            raise ConfigError(
                (f"the block {where.strip()!r}: " if where else "")
                + "the config must be a JSON object of container names, e.g. "
                '{"my-container": {"requests": {"cpu": {"base": "10m", "step": "1m", '
                f'"coresPerStep": 1}}}}}}; got {describe(tree)}')
        result: dict[str, ContainerScaleConfig] = dict(onto or {})
        for name, value in tree.members:
            self._take()
            result[name] = self.container(value, f"{where}[{name!r}]")
        return result

    def blocks(self, tree: JsonValue, target: str, onto: ScaleConfig | None
               ) -> ScaleConfig | None:
        """The per-target document's blocks for ``target``, each decoded over the last."""
        assert isinstance(tree, JsonObject)
        result = onto
        for key, value in tree.members:
            self._take()
            if _block_key(key) != target:
                self._skip(value)
                continue
            result = self.top(value, result, where=f"{key} ")
        return result

    def container(self, value: JsonValue, where: str) -> ContainerScaleConfig:
        value = _object(value, f"container {where}", _CONTAINER_EXPECTED)
        if value is None:
            return ContainerScaleConfig()
        maps: dict[str, dict[str, ResourceScaleConfig] | None] = {}
        for key, field, member in self._known(value, _CONTAINER_FIELDS):
            maps[field] = self.resources(member, maps.get(field), f"{where}.{key}")
        return ContainerScaleConfig(requests=maps.get("Requests"), limits=maps.get("Limits"))

    def resources(self, value: JsonValue, existing: dict[str, ResourceScaleConfig] | None,
                  where: str) -> dict[str, ResourceScaleConfig] | None:
        value = _object(value, where, _RESOURCES_EXPECTED)
        if value is None:
            return None
        result = existing if existing is not None else {}
        for name, member in value.members:
            self._take()
            result[name] = self.resource(member, f"{where}[{name!r}]")
        return result

    def resource(self, value: JsonValue, where: str) -> ResourceScaleConfig:
        value = _object(value, where, _RESOURCE_EXPECTED)
        if value is None:
            return ResourceScaleConfig()
        fields: dict[str, Quantity | int | None] = {}
        for key, field, member in self._known(value, _RESOURCE_FIELDS):
            if field in ("CoresPerStep", "NodesPerStep"):
                fields[field] = self.integer(member, f"{where}.{key}")
            elif field in _OBJECT_FIELDS:
                fields[field] = _positive(self.integer(member, f"{where}.{key}"),
                                          f"{where}.{key}")
            else:
                fields[field] = self.quantity(member, f"{where}.{key}")
        return ResourceScaleConfig(
            base=_quantity_or_none(fields.get("Base")),
            max=_quantity_or_none(fields.get("Max")),
            step=_quantity_or_none(fields.get("Step")),
            cores_per_step=_int_or_none(fields.get("CoresPerStep")),
            nodes_per_step=_int_or_none(fields.get("NodesPerStep")),
            pods_per_step=_int_or_none(fields.get("PodsPerStep")),
            services_per_step=_int_or_none(fields.get("ServicesPerStep")),
        )

    def quantity(self, value: JsonValue, where: str) -> Quantity | None:
        """``Quantity.UnmarshalJSON`` over the member's raw text."""
        if value is None:
            return None
        if isinstance(value, str):
            escaped = self._take()
            raw = value
        elif isinstance(value, Number):
            escaped, raw = False, value.literal
        elif isinstance(value, bool):
            escaped, raw = False, "true" if value else "false"
        else:
            raise ConfigError(f"{where}: expected a quantity such as \"100m\" or \"64Mi\", "
                              f"got {describe(value)}")
        if escaped:
            raise ConfigError(f"{where}: the quantity {describe(value)} is written with a "
                              "JSON escape (\\...), which CPVA's parser refuses; write it "
                              "plainly, e.g. \"100m\"")
        try:
            return Quantity.parse(go_trim_space(raw))
        except QuantityError as exc:
            raise ConfigError(f"{where}: {exc}") from exc

    def integer(self, value: JsonValue, where: str) -> int | None:
        if value is None:
            return None
        try:
            return go_int(value, where)
        except GoJsonError as exc:
            raise ConfigError(f"{exc} (a whole number of cores or nodes per step)") from exc


def _positive(value: int | None, where: str) -> int | None:
    """Ours: a Pods or Services per step is a whole number > 0 (null: the count is off)."""
    if value is not None and value <= 0:
        raise ConfigError(f"{where}: {value}; it must be a whole number greater than 0 "
                          "(remove the key to leave that count out)")
    return value


def object_kinds(config: ScaleConfig | None) -> frozenset[str]:
    """Ours: the kinds of object (``"pods"``, ``"services"``) a config counts."""
    kinds: set[str] = set()
    for container in (config or {}).values():
        for resources in (container.requests, container.limits):
            for rc in (resources or {}).values():
                if rc.pods_per_step is not None:
                    kinds.add("pods")
                if rc.services_per_step is not None:
                    kinds.add("services")
    return frozenset(kinds)


def _quantity_or_none(value: Quantity | int | None) -> Quantity | None:
    return value if isinstance(value, Quantity) else None


def _int_or_none(value: Quantity | int | None) -> int | None:
    return value if isinstance(value, int) else None


# --- CPVA's log rendering ("setting config = %s") ------------------------------------------


def _resource_string(rc: ResourceScaleConfig) -> str:
    parts = ["{ "]
    if rc.base is not None:
        parts.append(f"base={rc.base} ")
    if rc.max is not None:
        parts.append(f"max={rc.max} ")
    if rc.step is not None:
        parts.append(f"incr={rc.step} ")
    if rc.cores_per_step is not None:
        parts.append(f"cores_incr={rc.cores_per_step} ")
    if rc.nodes_per_step is not None:
        parts.append(f"nodes_incr={rc.nodes_per_step} ")
    if rc.pods_per_step is not None:  # ours
        parts.append(f"pods_incr={rc.pods_per_step} ")
    if rc.services_per_step is not None:  # ours
        parts.append(f"services_incr={rc.services_per_step} ")
    parts.append("}")
    return "".join(parts)


def config_string(config: ScaleConfig | None) -> str:
    """The text CPVA logs for a config (its ``String()`` methods, autoscaler_server.go
    :294-338), with map keys sorted where Go's order is random. Note Go's quirks: limits
    have no separator between entries, and ``step`` is shown as ``incr``."""
    parts = ["{ "]
    for name in sorted(config or {}):
        container = (config or {})[name]
        requests = "".join(f"[{res}]: {_resource_string(rc)}, "
                           for res, rc in sorted((container.requests or {}).items()))
        limits = "".join(f"[{res}]: {_resource_string(rc)}"
                         for res, rc in sorted((container.limits or {}).items()))
        parts.append(f"[{name}]: {{ requests: {{ {requests}}}, limits: {{ {limits}}} }}, ")
    parts.append("}")
    return "".join(parts)


def _object(value: JsonValue, where: str, expected: str) -> JsonObject | None:
    """``value`` as an object; None for JSON null (Go leaves the field zero); anything else
    is a :class:`ConfigError` saying what was ``expected`` and what came."""
    if value is None or isinstance(value, JsonObject):
        return value
    raise ConfigError(f"{where}: expected {expected}, got {describe(value)}")
