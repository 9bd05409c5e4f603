"""A real OCI registry on loopback, for tests that pull as a cluster pulls.

go-containerregistry's ``registry`` (in memory, built from its Go module by
image/tools.sh) listens on 127.0.0.1 on a free port; ``push`` sends the OCI layout of
``make image`` with crane, so the index and every platform's manifest keep their digests.
The process is stopped by its PID in ``close()``.
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / ".cache" / "image" / "out"


def tools() -> Path:
    out = subprocess.run(["bash", str(REPO / "image" / "tools.sh")], check=True,
                         capture_output=True, text=True).stdout
    return Path(out.strip().splitlines()[-1])


def built() -> dict[str, object]:
    """digests.json of the index `make image` wrote."""
    path = OUT / "digests.json"
    if not path.exists():
        raise RuntimeError(f"{path} missing: run `make image` first")
    doc: dict[str, object] = json.loads(path.read_text())
    return doc


class Registry:
    def __init__(self) -> None:
        self.bin = tools()
        self.log = Path(tempfile.mkstemp(prefix="cpa-registry-", suffix=".log")[1])
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0

    def start(self) -> Registry:
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen([str(self.bin / "registry"), "-port", "0"],
                                         stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            match = re.search(r"serving on port (\d+)", self.log.read_text())
            if match:
                self.port = int(match.group(1))
                return self
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        self.close()
        raise RuntimeError(f"the registry did not start: {self.log.read_text()}")

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def crane(self, *args: str) -> str:
        proc = subprocess.run([str(self.bin / "crane"), *args], capture_output=True,
                              text=True, check=False, timeout=300)
        if proc.returncode != 0:
            raise RuntimeError(f"crane {' '.join(args)} failed: {proc.stderr}")
        return proc.stdout

    def push(self, repository: str, tag: str, layout: Path = OUT / "layout") -> str:
        """Push the layout's index as ``repository:tag``; returns ``repository@digest``
        (the index digest the registry reports, which must be the one built)."""
        self.crane("push", str(layout), f"{self.host}/{repository}:{tag}")
        digest = self.crane("digest", f"{self.host}/{repository}:{tag}").strip()
        return f"{self.host}/{repository}@{digest}"

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None
        self.log.unlink(missing_ok=True)

    def __enter__(self) -> Registry:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
