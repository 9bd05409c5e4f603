"""A kubeconfig ``exec`` credential plugin, run as client-go runs it.

Why our own: the official Python client (which we used to hand such kubeconfigs to) logs
``ERROR:root:exec: process returned 1`` when the plugin fails and carries on without
credentials, until the API server answers 401; and it is not in the container image. Here
a plugin that fails at start is an error at start naming the plugin and its stderr, and the
protocol is client-go's (``client.authentication.k8s.io`` ``ExecCredential``):

* the plugin runs with the kubeconfig's ``args`` and ``env`` on top of ours, and
  ``KUBERNETES_EXEC_INFO`` (the ExecCredential request; ``interactive`` is always false:
  a daemon has no terminal);
* it prints an ExecCredential of the configured ``apiVersion`` whose ``status`` holds a
  ``token`` (or a client certificate and key) and an optional ``expirationTimestamp``;
* the credential is cached until it expires, and dropped when the API server answers 401
  to it (:meth:`ExecPlugin.unauthorized`), so the next request runs the plugin again.

A client certificate the plugin returns is loaded into the TLS context at start; a token
is refreshed as above.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cpa import redact
from cpa.http.message import field_value_problem

API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
INTERACTIVE_MODES = ("Never", "IfAvailable", "Always")
RUN_SECONDS = 60.0  # a plugin that has not answered in a minute is stuck


class PluginError(Exception):
    """The plugin is misconfigured, could not run, or answered something unusable; the
    message names it and says why in one line."""


@dataclass(frozen=True, slots=True)
class ExecConfig:
    """A kubeconfig user's ``exec`` stanza, typed as client-go types it."""

    command: str
    args: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    api_version: str
    install_hint: str
    provide_cluster_info: bool
    interactive_mode: str
    where: str  # e.g. users["me"].user.exec, for messages


@dataclass(frozen=True, slots=True)
class Credential:
    token: str
    cert_pem: bytes | None
    key_pem: bytes | None
    expires: datetime | None


def _one_line(text: str, limit: int = 400) -> str:
    line = " | ".join(part.strip() for part in text.strip().splitlines() if part.strip())
    return line if len(line) <= limit else line[:limit - 3] + "..."


def validate(config: ExecConfig) -> None:
    """client-go's checks of an exec stanza (clientcmd's validateAuthInfo)."""
    if not config.command:
        raise PluginError(f"{config.where}.command must be given to use an exec plugin")
    if not config.api_version:
        raise PluginError(f"{config.where}.apiVersion must be given to use an exec plugin "
                          f"(e.g. {API_VERSIONS[0]})")
    if config.api_version not in API_VERSIONS:
        raise PluginError(f"{config.where}.apiVersion {config.api_version!r} is not one of "
                          f"{', '.join(API_VERSIONS)}")
    if not config.interactive_mode:
        raise PluginError(f"{config.where}.interactiveMode must be given to use an exec "
                          f"plugin of {config.api_version} (Never, for a daemon)")
    if config.interactive_mode not in INTERACTIVE_MODES:
        raise PluginError(f"{config.where}.interactiveMode {config.interactive_mode!r} is not "
                          f"one of {', '.join(INTERACTIVE_MODES)}")
    if config.interactive_mode == "Always":
        raise PluginError(f"exec plugin {config.command!r} wants a terminal "
                          "(interactiveMode: Always), which a daemon does not have: use a "
                          "plugin that can run without one")
    for name, _ in config.env:
        if not name:
            raise PluginError(f"{config.where}.env: every variable needs a name")


class ExecPlugin:
    """Runs the plugin when a credential is needed and none is cached (or it expired)."""

    def __init__(self, config: ExecConfig, cluster: Mapping[str, Any] | None = None,
                 now: Callable[[], datetime] = lambda: datetime.now(UTC),
                 run: Callable[..., subprocess.CompletedProcess[bytes]] = subprocess.run
                 ) -> None:
        """``cluster`` is the ExecCredential's ``spec.cluster`` (sent only when the stanza
        sets ``provideClusterInfo``)."""
        validate(config)
        self.config = config
        self._cluster = cluster if config.provide_cluster_info else None
        self._now = now
        self._run = run
        self._lock = threading.Lock()
        self._cached: Credential | None = None

    @property
    def name(self) -> str:
        return self.config.command

    def credential(self) -> Credential:
        """The cached credential, or a fresh one from the plugin (raises PluginError)."""
        with self._lock:
            cached = self._cached
            if cached is None or (cached.expires is not None and cached.expires <= self._now()):
                cached = self._cached = self._fetch()
            return cached

    def authorization(self) -> str | None:
        token = self.credential().token
        return f"Bearer {token}" if token else None

    def unauthorized(self, refused: str | None = None) -> None:
        """The API server refused the credential sent as the header ``refused``: run the
        plugin again next time, unless the credential held now is another one (fetched
        since), as client-go's ``maybeRefreshCreds``."""
        with self._lock:
            cached = self._cached
            if cached is not None and refused is not None and cached.token \
                    and refused != f"Bearer {cached.token}":
                return
            self._cached = None

    # --- running it --------------------------------------------------------------------
    def _request(self) -> str:
        spec: dict[str, Any] = {"interactive": False}
        if self._cluster is not None:
            spec["cluster"] = dict(self._cluster)
        return json.dumps({"apiVersion": self.config.api_version, "kind": "ExecCredential",
                           "spec": spec})

    def _fetch(self) -> Credential:
        cfg = self.config
        env = dict(os.environ)
        env.update(dict(cfg.env))
        env["KUBERNETES_EXEC_INFO"] = self._request()
        try:
            done = self._run([cfg.command, *cfg.args], env=env, stdin=subprocess.DEVNULL,
                             capture_output=True, timeout=RUN_SECONDS, check=False)
        except FileNotFoundError:
            hint = _one_line(cfg.install_hint) or f"install it, or fix {cfg.where}.command"
            raise PluginError(f"exec plugin {cfg.command!r} not found: {hint}") from None
        except subprocess.TimeoutExpired:
            raise PluginError(f"exec plugin {cfg.command!r} did not finish within "
                              f"{RUN_SECONDS:.0f}s") from None
        except OSError as exc:
            raise PluginError(f"exec plugin {cfg.command!r} could not run: {exc}") from None
        stderr = _one_line(done.stderr.decode("utf-8", "replace"))
        if done.returncode != 0:
            raise PluginError(f"exec plugin {cfg.command!r} failed with exit code "
                              f"{done.returncode}: {stderr or 'it wrote nothing to stderr'}")
        return self._parse(done.stdout)

    def _parse(self, stdout: bytes) -> Credential:
        name = repr(self.config.command)
        try:
            doc = json.loads(stdout)
        except ValueError as exc:
            # Not what it printed: a credential cut short is still a credential.
            raise PluginError(f"exec plugin {name} printed {len(stdout)} bytes that are not "
                              f"ExecCredential JSON ({exc})") from None
        if not isinstance(doc, dict):
            raise PluginError(f"exec plugin {name} printed JSON that is not an object")
        if doc.get("apiVersion") != self.config.api_version:
            raise PluginError(f"exec plugin {name} is configured for API version "
                              f"{self.config.api_version} but answered "
                              f"{doc.get('apiVersion')!r}")
        status = doc.get("status")
        if not isinstance(status, dict):
            raise PluginError(f"exec plugin {name} answered an ExecCredential without status")
        token = status.get("token") or ""
        cert, key = status.get("clientCertificateData"), status.get("clientKeyData")
        if not isinstance(token, str):
            raise PluginError(f"exec plugin {name}: status.token must be a string")
        redact.remember(token)
        redact.remember(key if isinstance(key, str) else None)
        problem = field_value_problem(token)
        if problem is not None:
            raise PluginError(f"exec plugin {name} answered a status.token that {problem}: "
                              "it cannot be sent")
        if bool(cert) != bool(key) or not (token or cert):
            raise PluginError(f"exec plugin {name} returned neither a token nor a client "
                              "certificate and key")
        if (cert and not isinstance(cert, str)) or (key and not isinstance(key, str)):
            raise PluginError(f"exec plugin {name}: clientCertificateData and clientKeyData "
                              "must be PEM strings")
        return Credential(token, cert.encode() if cert else None,
                          key.encode() if key else None,
                          self._expiry(status.get("expirationTimestamp"), name))

    @staticmethod
    def _expiry(value: object, name: str) -> datetime | None:
        if value in (None, ""):
            return None
        if not isinstance(value, str):
            raise PluginError(f"exec plugin {name}: expirationTimestamp must be an RFC 3339 "
                              "string")
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise PluginError(f"exec plugin {name}: expirationTimestamp {value!r} is not "
                              "RFC 3339") from None
        return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def resolve_command(command: str, base: Path) -> str:
    """client-go resolves a relative command that names a path (``./bin/login``) against the
    kubeconfig's folder, and looks a bare name up in PATH."""
    if os.sep in command and not os.path.isabs(command):
        return str(base / command)
    return command
