"""Connection config: kubeconfig fields, in-cluster files, token re-reading."""

from __future__ import annotations

import base64
import json
import os
import ssl
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cpa.kube import clientconfig as kubeconfig
from cpa.kube.clientconfig import ConfigError, from_kubeconfig, in_cluster
from cpa.kube.tokenfile import TokenFileError


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


@pytest.mark.parametrize(("content", "problem"), [
    ("\n", "is empty"), ("CANARY-sa-token\n# rotated by ops\n", "line break at byte 15")])
def test_an_unusable_service_account_token_is_said_by_each_request_until_it_is_fixed(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tls: dict[str, Path],
        content: str, problem: str) -> None:
    """The daemon starts, and every request fails naming the file and why (never its
    content), until the kubelet writes a good token; then that one is used at once."""
    (tmp_path / "token").write_text(content)
    (tmp_path / "ca.crt").write_bytes(tls["crt"].read_bytes())
    monkeypatch.setattr(kubeconfig, "SA_DIR", tmp_path)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    conn = in_cluster()
    with pytest.raises(TokenFileError, match=problem) as info:
        conn.authorization()
    assert "CANARY" not in str(info.value)
    (tmp_path / "token").write_text("good-token-0123\n")
    assert conn.authorization() == "Bearer good-token-0123"


def test_file_tokens_are_told_of_a_401(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                       tls: dict[str, Path]) -> None:
    """In a Pod and in a kubeconfig's tokenFile alike, a 401 makes the next request read
    the file again (a rewrite stat cannot see: same size, mtime put back)."""
    (tmp_path / "ca.crt").write_bytes(tls["crt"].read_bytes())
    token = tmp_path / "token"
    token.write_text("aaa")
    monkeypatch.setattr(kubeconfig, "SA_DIR", tmp_path)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    path = write_config(tmp_path, {"server": "https://h:1", "certificate-authority": "ca.crt"},
                        {"tokenFile": "token"})
    for conn in (in_cluster(), from_kubeconfig(str(path))):
        token.write_text("aaa")
        assert conn.authorization() == "Bearer aaa"
        before = token.stat()
        token.write_text("bbb")
        os.utime(token, ns=(before.st_atime_ns, before.st_mtime_ns))
        assert conn.authorization() == "Bearer aaa"
        assert conn.unauthorized is not None
        conn.unauthorized("Bearer aaa")
        assert conn.authorization() == "Bearer bbb"


def test_an_auth_provider_without_the_official_client_says_what_to_install(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The container image has no kubernetes client; an auth-provider kubeconfig must not
    end in an ImportError traceback."""
    monkeypatch.setitem(sys.modules, "kubernetes", None)  # makes `import kubernetes` fail
    path = write_config(tmp_path, {"server": "https://127.0.0.1:6443"},
                        {"auth-provider": {"name": "oidc", "config": {}}})
    with pytest.raises(ConfigError, match=r"auth-provider plugin.*pip install kubernetes"):
        from_kubeconfig(str(path))


# --- client-go's types and refusals ------------------------------------------------------
@pytest.mark.parametrize(("cluster", "user", "fragment"), [
    ({"insecure-skip-tls-verify": "false"}, {"token": "t"},
     r'clusters\["k"\]\.cluster\.insecure-skip-tls-verify must be a bool .* not a string '
     r"\('false'\)"),
    ({"insecure-skip-tls-verify": 1}, {"token": "t"}, "must be a bool .* not a number \\(1\\)"),
    ({"server": 6443}, {"token": "t"}, r"cluster\.server must be a string, not a number"),
    ({"tls-server-name": True}, {"token": "t"}, "tls-server-name must be a string"),
    ({"certificate-authority-data": "%%%"}, {"token": "t"},
     "certificate-authority-data is not valid base64"),
    ({"certificate-authority-data": base64.b64encode(b"not a certificate").decode()},
     {"token": "t"}, "certificate-authority-data holds no usable PEM certificate"),
    ({"certificate-authority": "/nonexistent/ca.crt"}, {"token": "t"},
     "cannot read certificate-authority /nonexistent/ca.crt"),
    ({"insecure-skip-tls-verify": True, "certificate-authority-data":
      base64.b64encode(b"x").decode()}, {"token": "t"},
     "root certificates file with the insecure flag is not allowed"),
    ({"certificate-authority": "/a", "certificate-authority-data":
      base64.b64encode(b"x").decode()}, {"token": "t"}, "are both given"),
    ({}, {"token": "t", "username": "a", "password": "b"}, "more than one authentication"),
    ({}, {"client-certificate-data": base64.b64encode(b"x").decode()},
     "client-key-data or client-key must be given"),
    ({}, {"token": "t", "as": "admin"}, r"\.as: impersonation is not supported"),
    ({}, {"token": 5}, r'users\["u"\]\.user\.token must be a string'),
    ({}, {"exec": {"command": "x", "apiVersion": "client.authentication.k8s.io/v1",
                   "interactiveMode": "Never"}, "auth-provider": {"name": "oidc"}},
     "auth-provider cannot be given with an exec plugin"),
])
def test_client_go_refuses_these_and_so_do_we(tmp_path: Path, cluster: dict[str, object],
                                               user: dict[str, object], fragment: str) -> None:
    path = write_config(tmp_path, {"server": "https://h:1", **cluster}, user)
    with pytest.raises(ConfigError, match=fragment) as caught:
        from_kubeconfig(str(path))
    assert "\n" not in str(caught.value)


def test_a_client_certificate_that_is_not_pem_is_one_line(tmp_path: Path) -> None:
    junk = base64.b64encode(b"junk").decode()
    path = write_config(tmp_path, {"server": "https://h:1"},
                        {"client-certificate-data": junk, "client-key-data": junk})
    with pytest.raises(ConfigError, match="not a usable PEM certificate and key"):
        from_kubeconfig(str(path))


def test_tls_server_name_is_handed_to_the_connection(tmp_path: Path) -> None:
    path = write_config(tmp_path, {"server": "https://10.0.0.1:443",
                                   "tls-server-name": "kubernetes"}, {"token": "t"})
    assert from_kubeconfig(str(path)).server_name == "kubernetes"
    path = write_config(tmp_path, {"server": "https://10.0.0.1:443"}, {"token": "t"})
    assert from_kubeconfig(str(path)).server_name is None


def test_a_yaml_error_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text("clusters: [\n  - name: a\n  bad: {\n")
    with pytest.raises(ConfigError, match="cannot read kubeconfig") as caught:
        from_kubeconfig(str(path))
    assert "\n" not in str(caught.value)


# --- exec plugins ------------------------------------------------------------------------
def plugin(tmp_path: Path, body: str, name: str = "get-token") -> str:
    path = tmp_path / name
    path.write_text(f"#!{sys.executable}\nimport json, os, sys\n{body}")
    path.chmod(0o755)
    return str(path)


def exec_user(command: str, **extra: object) -> dict[str, object]:
    return {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": command,
                     "interactiveMode": "Never", **extra}}


def credential(token: str, expires: str | None = None) -> str:
    status: dict[str, str] = {"token": token}
    if expires:
        status["expirationTimestamp"] = expires
    return json.dumps({"apiVersion": "client.authentication.k8s.io/v1",
                       "kind": "ExecCredential", "status": status})


def test_a_failing_exec_plugin_names_itself_and_its_stderr(tmp_path: Path) -> None:
    command = plugin(tmp_path, "print('line one', file=sys.stderr)\n"
                               "print('token expired: run get-token login', file=sys.stderr)\n"
                               "sys.exit(3)\n")
    path = write_config(tmp_path, {"server": "https://h:1"}, exec_user(command))
    with pytest.raises(ConfigError) as caught:
        from_kubeconfig(str(path))
    message = str(caught.value)
    assert "get-token" in message and "exit code 3" in message
    assert "line one | token expired: run get-token login" in message
    assert "\n" not in message


def test_a_missing_exec_plugin_gives_its_install_hint(tmp_path: Path) -> None:
    path = write_config(tmp_path, {"server": "https://h:1"},
                        exec_user("no-such-login-plugin",
                                  installHint="brew install no-such-login-plugin"))
    with pytest.raises(ConfigError, match="'no-such-login-plugin' not found: brew install"):
        from_kubeconfig(str(path))


@pytest.mark.parametrize(("body", "fragment"), [
    ("print('hello')\n", "printed 6 bytes that are not ExecCredential JSON"),
    ("print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1beta1', "
     "'status': {'token': 't'}}))\n", "configured for API version"),
    ("print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1', 'status': {}}))\n",
     "neither a token nor a client certificate"),
])
def test_an_unusable_exec_answer_is_an_error_at_start(tmp_path: Path, body: str,
                                                       fragment: str) -> None:
    path = write_config(tmp_path, {"server": "https://h:1"},
                        exec_user(plugin(tmp_path, body)))
    with pytest.raises(ConfigError, match=fragment):
        from_kubeconfig(str(path))


def test_exec_plugin_stanza_checks(tmp_path: Path) -> None:
    for stanza, fragment in (
            ({"command": "x"}, "apiVersion must be given"),
            ({"command": "x", "apiVersion": "client.authentication.k8s.io/v1"},
             "interactiveMode must be given"),
            ({"command": "x", "apiVersion": "client.authentication.k8s.io/v1",
              "interactiveMode": "Always"}, "wants a terminal"),
            ({"command": "x", "apiVersion": "client.authentication.k8s.io/v1",
              "interactiveMode": "Never", "env": [{"value": "v"}]}, "needs a name")):
        path = write_config(tmp_path, {"server": "https://h:1"}, {"exec": stanza})
        with pytest.raises(ConfigError, match=fragment):
            from_kubeconfig(str(path))


def test_an_exec_token_is_used_cached_and_fetched_again_when_refused(
        tmp_path: Path) -> None:
    counter = tmp_path / "runs"
    body = (f"runs = int(open({str(counter)!r}).read()) + 1 "
            f"if os.path.exists({str(counter)!r}) else 1\n"
            f"open({str(counter)!r}, 'w').write(str(runs))\n"
            "info = json.loads(os.environ['KUBERNETES_EXEC_INFO'])\n"
            "assert info['spec']['interactive'] is False, info\n"
            "assert os.environ['FROM_KUBECONFIG'] == 'yes'\n"
            "assert sys.argv[1:] == ['--flag']\n"
            f"print({credential('SECRET')!r}.replace('SECRET', f'tok{{runs}}'))\n")
    user = exec_user(plugin(tmp_path, body), args=["--flag"],
                     env=[{"name": "FROM_KUBECONFIG", "value": "yes"}])
    conn = from_kubeconfig(str(write_config(tmp_path, {"server": "https://h:1"}, user)))
    assert conn.authorization() == "Bearer tok1"
    assert conn.authorization() == "Bearer tok1", "cached: no expiry given"
    assert conn.unauthorized is not None
    conn.unauthorized("Bearer tok1")  # the API server answered 401 to it
    assert conn.authorization() == "Bearer tok2"
    conn.unauthorized("Bearer tok1")  # a request sent before tok2: no run for that 401
    assert conn.authorization() == "Bearer tok2"


def test_an_expired_exec_token_is_fetched_again(tmp_path: Path) -> None:
    past = "2020-01-01T00:00:00Z"
    command = plugin(tmp_path, f"print({credential('old', past)!r})\n")
    conn = from_kubeconfig(str(write_config(tmp_path, {"server": "https://h:1"},
                                            exec_user(command))))
    assert conn.authorization() == "Bearer old"
    (tmp_path / "get-token").write_text(f"#!{sys.executable}\nprint({credential('new')!r})\n")
    assert conn.authorization() == "Bearer new"


def test_v1beta1_plugins_default_to_if_available(tmp_path: Path) -> None:
    answer = credential("t").replace("/v1", "/v1beta1")
    command = plugin(tmp_path, f"print({answer!r})\n")
    user: dict[str, object] = {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1",
                                        "command": command}}
    conn = from_kubeconfig(str(write_config(tmp_path, {"server": "https://h:1"}, user)))
    assert conn.authorization() == "Bearer t"


# --- credentials never shown (issue 47, defect 1) -------------------------------------------

CANARY = "CANARYsecret0123456789"


@pytest.mark.parametrize(("user", "fragment"), [
    ({"token": CANARY + "\n# rotated by ops"}, "token contains a line break at byte 22"),
    ({"token": CANARY + "\x01"}, "token contains a control character (0x01) at byte 22"),
    ({"token": 1234567890123}, "token must be a string, not a number"),
    ({"password": 1234567890123, "username": "u"}, "password must be a string, not a number"),
    ({"client-key-data": ["CANARY"]}, "client-key-data must be a string, not an array"),
])
def test_a_kubeconfig_credential_that_cannot_be_used_is_named_never_shown(
        tmp_path: Path, user: dict[str, object], fragment: str) -> None:
    path = write_config(tmp_path, {"server": "https://127.0.0.1:6443"}, user)
    with pytest.raises(ConfigError) as info:
        kubeconfig.load(str(path))
    message = str(info.value)
    assert fragment in message
    assert "CANARY" not in message and "1234567890123" not in message


def test_a_kubeconfig_that_is_not_yaml_is_named_without_its_lines(tmp_path: Path) -> None:
    """PyYAML quotes the line it stopped at; that line may be a token's."""
    path = tmp_path / "config"
    path.write_text(f"users:\n- name: u\n  user:\n    token: {CANARY}\n      bad: [\n")
    with pytest.raises(ConfigError, match=r"at line \d+, column \d+") as info:
        kubeconfig.load(str(path))
    assert "CANARY" not in str(info.value)


@pytest.mark.parametrize("body", [
    f"print('{{\"status\": {{\"token\": \"{CANARY}')\n",  # JSON cut short
    "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1', "
    f"'kind': 'ExecCredential', 'status': {{'token': '{CANARY}\\n# second line'}}}}))\n",
])
def test_an_exec_plugins_unusable_token_is_refused_without_showing_it(
        tmp_path: Path, body: str) -> None:
    path = write_config(tmp_path, {"server": "https://h:1"}, exec_user(plugin(tmp_path, body)))
    with pytest.raises(ConfigError) as info:
        from_kubeconfig(str(path))
    assert "CANARY" not in str(info.value)
    assert "not ExecCredential JSON" in str(info.value) or \
        "status.token that contains a line break at byte 22" in str(info.value)
