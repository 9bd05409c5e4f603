"""A Debian mirror caught between two syncs: a signed Release whose listed size and hash of
one architecture's package index are not those of the index the mirror serves.

apt refuses such an index ("File has unexpected size ... Mirror sync in progress?"), and so
the whole extraction, though the index it would read is a consistent one, only not the one
the Release names (seen here for bookworm-security's armhf and ppc64el indexes, every other
index matching). The build does not wait for the mirror: it lets apt read that index
through a proxy of ours on 127.0.0.1 that serves the suite's Release with the served index's
size and SHA-256 in place of the listed ones, unsigned (that source is marked
``trusted=yes``), and passes everything else through unchanged.

What is still checked: the Release is the mirror's, its signature verified (``gpgv``,
Debian's archive keyring) before a line of it is changed; only the index files found
inconsistent are vouched for by their served bytes; apt checks every ``.deb`` against
the index; and every package of the image against ``image/lock.json`` (``make image``), so
a package the lock did not pin fails the build as before. :func:`unsynced` finds what to
vouch for; :class:`Proxy` serves it.
"""

from __future__ import annotations

import hashlib
import http.server
import lzma
import re
import subprocess
import tempfile
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
TIMEOUT = 60.0


class Suite:
    """One ``deb URL SUITE COMPONENTS`` line: its Release text (verified) and the index
    files whose served bytes are not the ones the Release lists (path -> size, sha256)."""

    def __init__(self, line: str, release: str, served: dict[str, tuple[int, str]]) -> None:
        self.line = line
        self.dists = dists_of(line)
        self.release = release
        self.served = served

    def vouched_release(self) -> str:
        """The Release with the served files' size and SHA-256 (other hashes of theirs
        dropped), and without ``Acquire-By-Hash`` (their by-hash names are not served)."""
        out = []
        for section, line, parts in _lines(self.release):
            if line.startswith("Acquire-By-Hash:"):
                continue
            if len(parts) == 3 and parts[2] in self.served:
                if section != "SHA256":
                    continue
                size, digest = self.served[parts[2]]
                line = f" {digest} {size:>16} {parts[2]}"
            out.append(line)
        return "\n".join(out) + "\n"


def dists_of(line: str) -> str:
    """The ``dists/SUITE/`` URL of a ``deb URL SUITE COMPONENTS`` line."""
    _, url, name, *_ = line.split()
    return f"{url.rstrip('/')}/dists/{name}/"


def _lines(release: str) -> Iterator[tuple[str, str, list[str]]]:
    """A Release's lines, each with the section it is in (``SHA256``, ...: the field a
    file list continues) and, for a file list's line, its words (hash, size, path)."""
    section = ""
    for line in release.splitlines():
        if line.startswith(" "):
            yield section, line, line.split()
        else:
            section = line.partition(":")[0]
            yield section, line, []


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=TIMEOUT) as answer:
        data: bytes = answer.read()
    return data


def verified_release(inrelease: bytes, keyring: Path = KEYRING) -> str:
    """The signed text of an InRelease, after ``gpgv`` verified its signature."""
    with tempfile.TemporaryDirectory() as tmp:
        signed, text = Path(tmp) / "InRelease", Path(tmp) / "Release"
        signed.write_bytes(inrelease)
        done = subprocess.run(["gpgv", "--keyring", str(keyring), "--output", str(text),
                               str(signed)], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"ocibuild: the mirror's InRelease does not verify: "
                             f"{done.stderr.strip()[-300:]}")
        return text.read_text()


def listed(release: str, arch: str) -> dict[str, tuple[int, str]]:
    """The SHA-256 section's ``Packages.xz`` files of ``arch`` (path -> size, sha256)."""
    found: dict[str, tuple[int, str]] = {}
    for section, _line, parts in _lines(release):
        if section == "SHA256" and len(parts) == 3 and \
                re.fullmatch(rf"[^/]+/binary-{re.escape(arch)}/Packages\.xz", parts[2]):
            found[parts[2]] = (int(parts[1]), parts[0])
    return found


def unsynced(sources: tuple[str, ...], arch: str) -> list[Suite]:
    """The sources whose ``arch`` package index is not the one their Release lists, each
    with what the mirror serves instead (the ``.xz`` and the index it unpacks to); []
    when every index matches (the failure was something else)."""
    suites = []
    for line in sources:
        dists = dists_of(line)
        release = verified_release(_get(dists + "InRelease"))
        served: dict[str, tuple[int, str]] = {}
        for path, (size, digest) in listed(release, arch).items():
            try:
                data = _get(dists + path)
            except urllib.error.HTTPError:
                continue  # apt's own error says what is missing
            got = (len(data), hashlib.sha256(data).hexdigest())
            if got != (size, digest):
                served[path] = got
                # apt checks the index it unpacked against the Release too
                plain = lzma.decompress(data)
                served[path.removesuffix(".xz")] = (len(plain),
                                                    hashlib.sha256(plain).hexdigest())
        if served:
            suites.append(Suite(line, release, served))
    return suites


def trusted(line: str) -> str:
    """A ``deb URL ...`` line marked ``[trusted=yes]``: its Release is ours, unsigned."""
    kind, rest = line.split(None, 1)
    return f"{kind} [trusted=yes] {rest}"


class Proxy:
    """An HTTP proxy on 127.0.0.1 for apt (``Acquire::http::Proxy``): the vouched Release
    of each unsynced suite (its InRelease and Release.gpg answered 404, so apt reads the
    unsigned Release of a ``trusted=yes`` source), everything else fetched as asked."""

    def __init__(self, suites: list[Suite]) -> None:
        own: dict[str, bytes | None] = {}
        for suite in suites:
            own[suite.dists + "InRelease"] = None
            own[suite.dists + "Release.gpg"] = None
            own[suite.dists + "Release"] = suite.vouched_release().encode()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = self.path
                if url in own:
                    body = own[url]
                    if body is None:
                        self._answer(404, b"")
                    else:
                        self._answer(200, body)
                    return
                try:
                    with urllib.request.urlopen(url, timeout=TIMEOUT) as answer:
                        self._answer(answer.status, answer.read())
                except urllib.error.HTTPError as exc:
                    self._answer(exc.code, b"")
                except OSError:
                    self._answer(502, b"")

            def _answer(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args: Any) -> None:
                return

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> Proxy:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
