"""The modes by ConfigMap key, and the parsing of a whole ConfigMap's data.

Upstream's plugin package has the same shape: the ConfigMap's one key names the mode, and
the mode parses its value. Adding a mode is its module (see :mod:`cpa.horizontal.decide.modes.mode`)
and one line in :data:`MODES`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

from cpa.horizontal.decide.modes import ladder, linear
from cpa.horizontal.decide.modes.mode import Params
from cpa.horizontal.decide.params import ParamsError

__all__ = ["MODES", "parse_configmap_data"]

MODES: Final[Mapping[str, Callable[[str], Params]]] = {
    linear.MODE.name: linear.MODE.parse,
    ladder.MODE.name: ladder.MODE.parse,
}
"""ConfigMap key -> its value's parser, in the order the error messages name them."""


def parse_configmap_data(data: Mapping[str, str] | None) -> Params:
    """Pick the mode from the ConfigMap's single key and parse its value."""
    keys = sorted(data or {})
    if len(keys) != 1 or keys[0] not in MODES:
        found = ", ".join(f'"{key}"' for key in keys) if keys else "no keys"
        names = " or ".join(f'"{name}"' for name in MODES)
        raise ParamsError(
            f"the ConfigMap data must have exactly one key, {names}; "
            f"found {found}. Keep only the key for the mode you want"
        )
    assert data is not None
    return MODES[keys[0]](data[keys[0]])
