"""Wheels the package index lacks for an architecture, cross-compiled from the sdist."""

from __future__ import annotations

from pathlib import Path

from ocibuild.platforms import Platform


def cross_build(plat: Platform, requirement: str, tree: Path, work: Path) -> Path:
    raise SystemExit(f"ocibuild: the package index has no {plat.name} wheel of "
                     f"{requirement}, and cross-building it is not supported yet")
