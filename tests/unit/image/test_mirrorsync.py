"""ocibuild.mirrorsync: a mirror between syncs (an index other than its signed Release
lists) is found, and apt is served a Release that vouches for what the mirror serves."""

from __future__ import annotations

import hashlib
import http.server
import lzma
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from ocibuild import mirrorsync

INDEX = b"Package: python3.11-minimal\nVersion: 3.11.2-6+deb12u9\n\n"
SERVED = lzma.compress(INDEX + b"Package: newer\n\n")  # what the mirror serves now
LISTED = lzma.compress(INDEX)  # what its Release lists


def _line(data: bytes, path: str) -> str:
    return f" {hashlib.sha256(data).hexdigest()} {len(data):>16} {path}"


RELEASE = "\n".join([
    "Origin: Debian", "Suite: bookworm-security", "Acquire-By-Hash: yes",
    "MD5Sum:",
    f" {hashlib.md5(LISTED).hexdigest()} {len(LISTED):>16} main/binary-armhf/Packages.xz",
    "SHA256:",
    _line(lzma.decompress(LISTED), "main/binary-armhf/Packages"),
    _line(LISTED, "main/binary-armhf/Packages.xz"),
    _line(b"same", "main/binary-arm64/Packages.xz"),
]) + "\n"


@pytest.fixture
def mirror(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A mirror on 127.0.0.1 serving RELEASE (its signature taken as verified) and the
    armhf index that RELEASE does not list."""
    files = {"/debian-security/dists/bookworm-security/InRelease": RELEASE.encode(),
             "/debian-security/dists/bookworm-security/main/binary-armhf/Packages.xz": SERVED,
             "/debian-security/dists/bookworm-security/main/binary-arm64/Packages.xz": b"same",
             "/debian-security/pool/updates/x.deb": b"a package"}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = files.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *_args: object) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setattr(mirrorsync, "verified_release", lambda data: data.decode())
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/debian-security"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_the_unsynced_index_and_the_one_it_unpacks_to_are_found(mirror: str) -> None:
    line = f"deb {mirror} bookworm-security main"
    assert mirrorsync.unsynced((line,), "arm64") == []  # every arm64 index matches
    (suite,) = mirrorsync.unsynced((line,), "armhf")
    plain = lzma.decompress(SERVED)
    assert suite.line == line and suite.served == {
        "main/binary-armhf/Packages.xz": (len(SERVED), hashlib.sha256(SERVED).hexdigest()),
        "main/binary-armhf/Packages": (len(plain), hashlib.sha256(plain).hexdigest())}


def test_the_vouched_release_lists_what_is_served_and_nothing_else_changes(
        mirror: str) -> None:
    (suite,) = mirrorsync.unsynced((f"deb {mirror} bookworm-security main",), "armhf")
    vouched = suite.vouched_release()
    assert "Acquire-By-Hash" not in vouched and "Origin: Debian" in vouched
    assert mirrorsync.listed(vouched, "armhf") == {
        "main/binary-armhf/Packages.xz": (len(SERVED), hashlib.sha256(SERVED).hexdigest())}
    assert mirrorsync.listed(vouched, "arm64") == mirrorsync.listed(RELEASE, "arm64")
    md5 = vouched.split("MD5Sum:\n", 1)[1].split("SHA256:", 1)[0]
    assert "binary-armhf" not in md5  # an old hash of a vouched file is not kept


def test_the_proxy_serves_the_vouched_release_unsigned_and_passes_the_rest(
        mirror: str) -> None:
    (suite,) = mirrorsync.unsynced((f"deb {mirror} bookworm-security main",), "armhf")
    with mirrorsync.Proxy([suite]) as proxy:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": proxy.url}))

        def get(path: str) -> tuple[int, bytes]:
            try:
                with opener.open(f"{mirror}/{path}", timeout=10) as answer:
                    return answer.status, answer.read()
            except urllib.error.HTTPError as exc:
                return exc.code, b""

        dists = "dists/bookworm-security/"
        assert get(dists + "InRelease")[0] == 404  # apt then reads the unsigned Release
        assert get(dists + "Release.gpg")[0] == 404
        assert get(dists + "Release") == (200, suite.vouched_release().encode())
        assert get(dists + "main/binary-armhf/Packages.xz") == (200, SERVED)
        assert get("pool/updates/x.deb") == (200, b"a package")
        assert get("pool/missing.deb")[0] == 404


def test_a_source_line_is_marked_trusted() -> None:
    assert mirrorsync.trusted("deb http://m/debian-security bookworm-security main") == \
        "deb [trusted=yes] http://m/debian-security bookworm-security main"


def test_an_inrelease_that_does_not_verify_stops_the_build(tmp_path: Path) -> None:
    keyring = tmp_path / "empty.gpg"
    keyring.write_bytes(b"")
    with pytest.raises(SystemExit, match="does not verify"):
        mirrorsync.verified_release(b"-----BEGIN PGP SIGNED MESSAGE-----\nnot signed\n",
                                    keyring)
