"""image/lock.json: the expected digests of what does not change with our code.

Why not the index's or the manifests' digests: the image holds the autoscaler, so those
change with every commit to cpa/, and a lock of them would need updating on every code
commit. What the lock pins instead, per platform, is what a build consumes and what it
makes of it before our code comes in:

- the inputs: every shipped Debian package (version and the .deb's sha256: the Python
  runtime is one of them), every wheel (the file's sha256, or for a cross-built one the
  sdist's, the cross compiler's version, the build tools and the sysroot's packages), and
  the standard-library modules the program imports (which decide what is dropped);
- the two layers made only of them (``debian`` and ``python``, written with a fixed
  epoch): their content digest (``diff_id``) and their compressed digest.

A build on any machine compares itself with the lock, so one build in CI proves that the
inputs and the layers made of them come out the same as on the machine that wrote the
lock. The third layer (our code) is checked by ``ocibuild check-code``, which makes it
again from a fresh wheel in seconds: together, the whole index is reproducible.

When an input changes on purpose (a new pin, a Debian security update, a new import of a
standard-library module), ``make image-lock`` rewrites the lock from a build; commit it.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

LAYERS = ("debian", "python")
ABOUT = ("Expected inputs and layer digests of the image, per platform "
         "(image/ocibuild/lock.py says what and why). Written by `make image-lock`; "
         "`make image` fails when a build differs from it.")


def from_build(inputs: dict[str, Any]) -> dict[str, Any]:
    """The lock's content from a build's inputs.json."""
    return {
        "about": ABOUT,
        "stdlib": inputs["stdlib"],
        "zlib": zlib.ZLIB_RUNTIME_VERSION,
        "platforms": {name: {"debian": p["debian"], "wheels": p["wheels"],
                             "layers": {k: p["layers"][k] for k in LAYERS}}
                      for name, p in sorted(inputs["platforms"].items())},
    }


def _diff(kind: str, want: Any, have: Any) -> list[str]:
    if want == have:
        return []
    if isinstance(want, dict) and isinstance(have, dict):
        out = []
        for key in sorted(set(want) | set(have)):
            if key not in have:
                out.append(f"{kind} {key}: {want[key]} in the lock, not in this build")
            elif key not in want:
                out.append(f"{kind} {key}: {have[key]} in this build, not in the lock")
            else:
                out += _diff(f"{kind} {key}", want[key], have[key])
        return out
    if isinstance(want, list) and isinstance(have, list):
        added = sorted(set(have) - set(want))
        gone = sorted(set(want) - set(have))
        return [f"{kind}: {'+' + ' +'.join(added) if added else ''}"
                f"{' ' if added and gone else ''}{'-' + ' -'.join(gone) if gone else ''}"]
    return [f"{kind}: {want} in the lock, {have} here"]


def compare(lock: dict[str, Any], build: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(changed inputs, unreproduced layers) of a build (``from_build``) against the lock,
    for the platforms the build made. Layers are judged only where the inputs match."""
    changed = _diff("standard library kept", lock["stdlib"], build["stdlib"])
    broken: list[str] = []
    for name, have in build["platforms"].items():
        want = lock["platforms"].get(name)
        if want is None:
            changed.append(f"{name}: not in the lock")
            continue
        mine = _diff(f"{name} debian", want["debian"], have["debian"])
        mine += _diff(f"{name} wheel", want["wheels"], have["wheels"])
        changed += mine
        if mine or changed:
            continue
        for layer in LAYERS:
            w, h = want["layers"][layer], have["layers"][layer]
            if w["diff_id"] != h["diff_id"]:
                broken.append(f"{name} {layer} layer: content {h['diff_id']}, the lock's "
                              f"{w['diff_id']}")
            elif w["digest"] != h["digest"]:
                broken.append(f"{name} {layer} layer: the same content, compressed to "
                              f"{h['digest']} here and {w['digest']} in the lock (zlib "
                              f"{zlib.ZLIB_RUNTIME_VERSION} here, {lock.get('zlib')} there)")
    return changed, broken


def update(lock_path: Path, build: dict[str, Any]) -> None:
    """Write the build's entries into the lock (other platforms' entries kept)."""
    old = json.loads(lock_path.read_text()) if lock_path.exists() else {"platforms": {}}
    new = {**build, "platforms": {**old.get("platforms", {}), **build["platforms"]}}
    lock_path.write_text(json.dumps(new, indent=1, sort_keys=True) + "\n")
