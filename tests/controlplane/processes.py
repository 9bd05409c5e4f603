"""Small helpers for the processes the harness starts: a free port, death with the
parent, a log's tail, the ServiceAccount signing key."""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
from pathlib import Path
from typing import Any, Self


def free_port(address: str = "127.0.0.1") -> int:
    """A currently free TCP port on ``address`` (small race, acceptable for tests)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((address, 0))
        port: int = sock.getsockname()[1]
        return port


def die_with_parent() -> None:
    """preexec_fn: ask Linux to SIGTERM the child if the test process dies (e.g. SIGKILL)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def tail(path: Path, lines: int = 40) -> str:
    """The last ``lines`` lines of a log file (for error messages)."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as exc:
        return f"<no log: {exc}>"


def terminate(proc: subprocess.Popen[Any], grace: float, after_kill: float = 10.0
              ) -> int | None:
    """SIGTERM to this PID only (Popen signals its own), SIGKILL after ``grace`` seconds;
    returns the exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(after_kill)
    return proc.returncode


class StartStop:
    """``with it:`` starts it and stops it however the block ends (the control plane and
    the cluster; ``stop()`` undoes whatever part of ``start()`` ran)."""

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class Started:
    """A process the tests started (``proc``), signalled and stopped by its PID only."""

    proc: subprocess.Popen[Any]

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None


def pid_alive(pid: int) -> bool:
    """Whether a process with this PID exists (signal 0 checks without sending)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def generate_sa_key(key: Path, pub: Path) -> None:
    """RSA key pair for signing ServiceAccount tokens (openssl CLI, else `cryptography`)."""
    if shutil.which("openssl"):
        subprocess.run(
            ["openssl", "genrsa", "-out", str(key), "2048"], check=True, capture_output=True
        )
        subprocess.run(
            ["openssl", "rsa", "-in", str(key), "-pubout", "-out", str(pub)],
            check=True,
            capture_output=True,
        )
        return
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa
    except ImportError as exc:
        raise RuntimeError("need the openssl CLI or the cryptography package") from exc
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    key.write_bytes(
        private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    pub.write_bytes(
        private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )


