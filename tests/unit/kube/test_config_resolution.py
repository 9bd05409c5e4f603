"""`cpa explain --from-cluster` finds the kubeconfig as kubectl does: --kubeconfig, else
KUBECONFIG (a list, merged, first definition wins), else ~/.kube/config, else in-cluster;
--context instead of current-context."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from cpa.kube import clientconfig as kubeconfig
from cpa.kube.clientconfig import ConfigError, kubectl_paths, load_like_kubectl


def kubeconfig_file(path: Path, *, current: str | None = "a",
                    contexts: dict[str, tuple[str, str]] | None = None,
                    clusters: dict[str, dict[str, Any]] | None = None,
                    users: dict[str, dict[str, Any]] | None = None) -> Path:
    doc: dict[str, Any] = {"apiVersion": "v1", "kind": "Config"}
    if current is not None:
        doc["current-context"] = current
    doc["contexts"] = [{"name": n, "context": {"cluster": c, "user": u}}
                       for n, (c, u) in (contexts or {}).items()]
    doc["clusters"] = [{"name": n, "cluster": c} for n, c in (clusters or {}).items()]
    doc["users"] = [{"name": n, "user": u} for n, u in (users or {}).items()]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc))
    return path


def two_clusters(path: Path, current: str = "a") -> Path:
    return kubeconfig_file(
        path, current=current,
        contexts={"a": ("ka", "ua"), "b": ("kb", "ub")},
        clusters={"ka": {"server": "http://a.example:8080"},
                  "kb": {"server": "http://b.example:8080"}},
        users={"ua": {"token": "ta"}, "ub": {"token": "tb"}})


def test_home_kube_config_is_used_without_flag_or_variable(tmp_path: Path) -> None:
    two_clusters(tmp_path / ".kube" / "config")
    conn = load_like_kubectl(environ={}, home=tmp_path)
    assert conn.server == "http://a.example:8080"
    assert conn.authorization() == "Bearer ta"


def test_context_picks_another_context(tmp_path: Path) -> None:
    two_clusters(tmp_path / ".kube" / "config")
    conn = load_like_kubectl(context="b", environ={}, home=tmp_path)
    assert (conn.server, conn.authorization()) == ("http://b.example:8080", "Bearer tb")


def test_unknown_context_says_how_to_list_them(tmp_path: Path) -> None:
    two_clusters(tmp_path / ".kube" / "config")
    with pytest.raises(ConfigError, match=r"no context named 'c'.*get-contexts"):
        load_like_kubectl(context="c", environ={}, home=tmp_path)


def test_flag_wins_over_variable_and_home(tmp_path: Path) -> None:
    two_clusters(tmp_path / ".kube" / "config")
    env_file = two_clusters(tmp_path / "env", current="b")
    flag_file = kubeconfig_file(tmp_path / "flag", contexts={"a": ("k", "u")},
                                clusters={"k": {"server": "http://flag:1"}},
                                users={"u": {"token": "f"}})
    env = {"KUBECONFIG": str(env_file)}
    assert load_like_kubectl(str(flag_file), environ=env, home=tmp_path).server == \
        "http://flag:1"
    assert load_like_kubectl(environ=env, home=tmp_path).server == "http://b.example:8080"


def test_missing_flag_file_is_an_error_not_a_fallback(tmp_path: Path) -> None:
    two_clusters(tmp_path / ".kube" / "config")
    with pytest.raises(ConfigError, match="cannot read kubeconfig"):
        load_like_kubectl(str(tmp_path / "absent"), environ={}, home=tmp_path)


def test_kubeconfig_list_merges_first_definition_wins(tmp_path: Path) -> None:
    """kubectl's merge: current-context from the first file that sets one, each name from
    the first file that defines it; missing files are skipped."""
    first = kubeconfig_file(tmp_path / "one", current="b",
                            contexts={"b": ("shared", "u1")},
                            users={"u1": {"token": "one"}})
    second = kubeconfig_file(tmp_path / "two", current="ignored",
                             contexts={"b": ("nope", "nope")},
                             clusters={"shared": {"server": "http://merged:1"}})
    listed = os.pathsep.join([str(tmp_path / "absent"), str(first), str(second)])
    assert kubectl_paths("", {"KUBECONFIG": listed}, tmp_path) == [first, second]
    conn = load_like_kubectl(environ={"KUBECONFIG": listed}, home=tmp_path)
    assert (conn.server, conn.authorization()) == ("http://merged:1", "Bearer one")
    assert conn.source == os.pathsep.join([str(first), str(second)])


def test_relative_paths_resolve_against_the_file_that_names_them(tmp_path: Path) -> None:
    (tmp_path / "creds").mkdir()
    (tmp_path / "creds" / "token").write_text("from-file\n")
    users = kubeconfig_file(tmp_path / "creds" / "users", current=None,
                            users={"u": {"tokenFile": "token"}})
    main = kubeconfig_file(tmp_path / "main", contexts={"a": ("k", "u")},
                           clusters={"k": {"server": "http://k:1"}})
    env = {"KUBECONFIG": os.pathsep.join([str(main), str(users)])}
    assert load_like_kubectl(environ=env, home=tmp_path).authorization() == "Bearer from-file"


def test_in_cluster_when_no_kubeconfig_exists(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text("pod-token")
    (sa / "ca.crt").write_text("")
    monkeypatch.setattr(kubeconfig, "SA_DIR", sa)
    monkeypatch.setattr(kubeconfig, "_context", lambda *_a: None)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    conn = load_like_kubectl(environ=dict(os.environ), home=tmp_path)
    assert conn.source == "in-cluster" and conn.server == "https://10.0.0.1:443"


def test_nothing_found_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="pass --kubeconfig PATH, or set KUBECONFIG"):
        load_like_kubectl(environ={}, home=tmp_path)
    with pytest.raises(ConfigError, match="--context x: no kubeconfig found"):
        load_like_kubectl(context="x", environ={}, home=tmp_path)


@pytest.mark.parametrize("text", ["- a\n- b\n", "{", "current-context: [1]\n",
                                  "current-context: a\ncontexts: 5\n",
                                  "current-context: a\ncontexts: [{name: a, context: 3}]\n"])
def test_garbage_is_one_config_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "config"
    path.write_text(text)
    with pytest.raises(ConfigError):
        load_like_kubectl(environ={"KUBECONFIG": str(path)}, home=tmp_path)


def test_a_relative_exec_plugin_resolves_against_its_own_file(tmp_path: Path) -> None:
    """Merged from two KUBECONFIG files, a user's ``./bin/login`` is the one beside the file
    that names it (as client-go resolves it), not beside the merged document."""
    plugin = tmp_path / "creds" / "bin" / "login"
    plugin.parent.mkdir(parents=True)
    plugin.write_text("#!/bin/sh\necho '{\"apiVersion\": \"client.authentication.k8s.io/v1\", "
                      "\"kind\": \"ExecCredential\", \"status\": {\"token\": \"from-exec\"}}'\n")
    plugin.chmod(0o755)
    users = kubeconfig_file(tmp_path / "creds" / "users", current=None, users={"u": {"exec": {
        "apiVersion": "client.authentication.k8s.io/v1", "command": "./bin/login",
        "interactiveMode": "Never"}}})
    main = kubeconfig_file(tmp_path / "main", contexts={"a": ("k", "u")},
                           clusters={"k": {"server": "http://k:1"}})
    env = {"KUBECONFIG": os.pathsep.join([str(main), str(users)])}
    conn = load_like_kubectl(environ=env, home=tmp_path)
    assert conn.authorization() == "Bearer from-exec"
