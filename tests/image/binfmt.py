"""Run other architectures' executables here: qemu-user-static through binfmt_misc.

The kernel runs a foreign ELF file with the interpreter registered for its magic bytes.
Debian's qemu-user-static ships the static interpreters and their binfmt lines in
/usr/lib/binfmt.d/; we register a line with the interpreter path changed to the static
binary and the flags set to ``F`` (the kernel opens the interpreter at registration, so it
works inside containers, whose root has no qemu). Only what this object registered (or
mounted) is removed again: an entry that was already there belongs to someone else.

Changes the host: hold /work/locks/host.lock (or run on a machine of your own, as CI).
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from pathlib import Path

MISC = Path("/proc/sys/fs/binfmt_misc")
CONF = Path("/usr/lib/binfmt.d")


def interpreter(qemu: str) -> str:
    path = shutil.which(f"qemu-{qemu}-static")
    if path is None:
        raise RuntimeError(f"qemu-{qemu}-static missing: apt-get install qemu-user-static "
                           "(image/env.sh image_setup installs it)")
    return path


def register_line(qemu: str) -> str:
    """Debian's binfmt line for ``qemu`` with the static interpreter and flag F."""
    text = (CONF / f"qemu-{qemu}.conf").read_text().strip()
    fields = text.split(":")  # :name:type:offset:magic:mask:interpreter:flags
    if len(fields) != 8:
        raise RuntimeError(f"unexpected binfmt line in qemu-{qemu}.conf: {text!r}")
    fields[6] = interpreter(qemu)
    fields[7] = "F"
    return ":".join(fields)


class Binfmt:
    """Context manager: the given qemu architectures runnable for its duration."""

    def __init__(self, qemus: list[str]) -> None:
        self.qemus = qemus
        self.mounted = False
        self.registered: list[str] = []

    def __enter__(self) -> Binfmt:
        try:
            if not (MISC / "register").exists():
                subprocess.run(["mount", "-t", "binfmt_misc", "binfmt_misc", str(MISC)],
                               check=True, capture_output=True)
                self.mounted = True
            for qemu in self.qemus:
                if (MISC / f"qemu-{qemu}").exists():
                    continue
                (MISC / "register").write_text(register_line(qemu))
                self.registered.append(qemu)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for qemu in self.registered:
            with contextlib.suppress(OSError):
                (MISC / f"qemu-{qemu}").write_text("-1")
        self.registered = []
        if self.mounted:
            subprocess.run(["umount", str(MISC)], check=False, capture_output=True)
            self.mounted = False

    def leftovers(self) -> list[str]:
        return [q for q in self.qemus if q in self.registered and
                (MISC / f"qemu-{q}").exists()]
