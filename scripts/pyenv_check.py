"""Is this interpreter's environment ready for this checkout? (scripts/pyenv.sh asks.)

Ready means: this checkout's package is installed editable, from this very directory (not
another checkout's, which a copied or moved venv would still point at, and not a copy
made by ``pip install .``, which edits would not reach), and every
requirement pyproject.toml lists for the given extras is installed. Versions are not
compared: pyenv.sh reinstalls whenever pyproject.toml changes. Standard library only, and
no import of the packages themselves: it runs before every target and takes ~50 ms.

Usage: python scripts/pyenv_check.py CHECKOUT EXTRA...; prints what is missing, exit 1
when anything is, 0 when ready.
"""

from __future__ import annotations

import json
import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse


def missing(checkout: Path, extras: list[str]) -> list[str]:
    project = tomllib.loads((checkout / "pyproject.toml").read_text())["project"]
    wanted = list(project["dependencies"])
    for extra in extras:
        wanted += project["optional-dependencies"][extra]
    out = []
    try:
        dist = metadata.distribution(project["name"])
    except metadata.PackageNotFoundError:
        out.append(f"{project['name']} (this checkout)")
    else:
        direct = json.loads(dist.read_text("direct_url.json") or "{}")
        url = direct.get("url", "")
        source = Path(unquote(urlparse(url).path)) if url.startswith("file:") else None
        if source is None or source.resolve() != checkout.resolve():
            out.append(f"{project['name']} installed from {url or 'an index'}, "
                       "not from this checkout")
        elif not direct.get("dir_info", {}).get("editable"):
            # A copy of the checkout as it was (pip install .): the tests would run that
            # copy, not the code being edited.
            out.append(f"{project['name']} copied from this checkout, not editable")
    for requirement in wanted:
        name = re.match(r"[A-Za-z0-9._-]+", requirement)
        if name is None:
            continue
        try:
            metadata.distribution(name.group(0))
        except metadata.PackageNotFoundError:
            if name.group(0) not in out:  # an extra may repeat a requirement
                out.append(name.group(0))
    return out


def main() -> int:
    absent = missing(Path(sys.argv[1]), sys.argv[2:])
    if absent:
        print(", ".join(absent))
    return 1 if absent else 0


if __name__ == "__main__":
    sys.exit(main())
