"""Connection config: kubeconfig fields, in-cluster files, token re-reading."""

from __future__ import annotations

import base64
import ssl
import subprocess
from pathlib import Path

import pytest
import yaml

from cpa.kube import config as kubeconfig
from cpa.kube.config import ConfigError, FileToken, from_kubeconfig, in_cluster


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A self-signed cert/key pair (openssl CLI), usable as CA and as client cert."""
    d = tmp_path_factory.mktemp("tls")
    key, crt = d / "tls.key", d / "tls.crt"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=test", "-keyout", str(key), "-out", str(crt)],
                   check=True, capture_output=True)
    return {"key": key, "crt": crt}


def write_config(tmp_path: Path, cluster: dict[str, object], user: dict[str, object]) -> Path:
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": "c",
           "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}},
                        {"name": "other", "context": {"cluster": "x", "user": "y"}}],
           "clusters": [{"name": "k", "cluster": cluster}],
           "users": [{"name": "u", "user": user}]}
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_token_and_ca_file(tmp_path: Path, tls: dict[str, Path]) -> None:
    path = write_config(tmp_path, {"server": "https://127.0.0.1:6443/",
                                   "certificate-authority": str(tls["crt"])},
                        {"token": "abc"})
    conn = from_kubeconfig(str(path))
    assert conn.server == "https://127.0.0.1:6443"
    assert conn.authorization() == "Bearer abc"
    assert isinstance(conn.ssl_context, ssl.SSLContext)
    assert conn.ssl_context.verify_mode == ssl.CERT_REQUIRED


def test_inline_data_and_client_cert(tmp_path: Path, tls: dict[str, Path]) -> None:
    b64 = {k: base64.b64encode(p.read_bytes()).decode() for k, p in tls.items()}
    path = write_config(tmp_path, {"server": "https://h:1", "certificate-authority-data":
                                   b64["crt"]},
                        {"client-certificate-data": b64["crt"], "client-key-data": b64["key"]})
    conn = from_kubeconfig(str(path))
    assert conn.authorization() is None
    assert conn.ssl_context is not None


def test_relative_paths_resolve_against_the_kubeconfig(tmp_path: Path,
                                                       tls: dict[str, Path]) -> None:
    (tmp_path / "ca.crt").write_bytes(tls["crt"].read_bytes())
    (tmp_path / "token").write_text("from-file\n")
    path = write_config(tmp_path, {"server": "https://h:1", "certificate-authority": "ca.crt"},
                        {"tokenFile": "token"})
    assert from_kubeconfig(str(path)).authorization() == "Bearer from-file"


def test_insecure_skip_verify(tmp_path: Path) -> None:
    path = write_config(tmp_path, {"server": "https://h:1", "insecure-skip-tls-verify": True},
                        {"username": "a", "password": "b"})
    conn = from_kubeconfig(str(path))
    assert conn.ssl_context is not None and conn.ssl_context.verify_mode == ssl.CERT_NONE
    assert conn.authorization() == "Basic " + base64.b64encode(b"a:b").decode()


@pytest.mark.parametrize("mutate,fragment", [
    (lambda d: d.pop("current-context"), "current-context"),
    (lambda d: d["contexts"][0]["context"].update(cluster="nope"), "nope"),
    (lambda d: d["clusters"][0]["cluster"].pop("server"), "server"),
])
def test_broken_kubeconfigs(tmp_path: Path, mutate: object, fragment: str) -> None:
    path = write_config(tmp_path, {"server": "https://h:1"}, {"token": "t"})
    doc = yaml.safe_load(path.read_text())
    mutate(doc)  # type: ignore[operator]
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError, match=fragment):
        from_kubeconfig(str(path))


def test_missing_kubeconfig_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read kubeconfig"):
        from_kubeconfig(str(tmp_path / "absent"))


def test_not_in_cluster_says_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(ConfigError, match="--kubeconfig"):
        in_cluster()


def test_in_cluster_reads_service_account_files(monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path, tls: dict[str, Path]) -> None:
    (tmp_path / "token").write_text("t1")
    (tmp_path / "ca.crt").write_bytes(tls["crt"].read_bytes())
    monkeypatch.setattr(kubeconfig, "SA_DIR", tmp_path)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    conn = in_cluster()
    assert conn.server == "https://[fd00::1]:443"
    assert conn.authorization() == "Bearer t1"


def test_rotated_token_is_picked_up(tmp_path: Path) -> None:
    """Projected service-account tokens rotate; the file is re-read every minute."""
    clock = [1000.0]
    token_file = tmp_path / "token"
    token_file.write_text("old")
    source = FileToken(token_file, clock=lambda: clock[0])
    assert source() == "Bearer old"
    token_file.write_text("new")
    clock[0] += 30
    assert source() == "Bearer old"  # cached within the minute
    clock[0] += 31
    assert source() == "Bearer new"
    token_file.unlink()
    clock[0] += 61
    assert source() == "Bearer new"  # a vanished file keeps the last good token


def test_exec_plugin_without_the_official_client_says_what_to_install(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The container image has no kubernetes client; an exec kubeconfig must not end in
    an ImportError traceback."""
    import sys

    monkeypatch.setitem(sys.modules, "kubernetes", None)  # makes `import kubernetes` fail
    path = write_config(tmp_path, {"server": "https://127.0.0.1:6443"},
                        {"exec": {"apiVersion": "client.authentication.k8s.io/v1",
                                  "command": "get-token"}})
    with pytest.raises(ConfigError, match=r"exec or auth-provider plugin.*pip install kubernetes"):
        from_kubeconfig(str(path))
