"""Where the API server is and how to authenticate to it.

In a pod (upstream's only mode) this reads the service-account files. Outside a cluster it
reads a kubeconfig, as client-go reads one: each field has client-go's type (a string where
a bool belongs is an error naming the field, never Python's truthiness), client-go's
refusals apply (``insecure-skip-tls-verify`` with a CA, two auth methods, a certificate
without its key), ``tls-server-name`` is the name verified, and a broken CA or key is one
line saying which field. ``exec`` plugins run here (:mod:`cpa.kube.execplugin`); only
``auth-provider`` goes to the official ``kubernetes`` client's loader: that package is
not in the image (it is large, and needed only there), so it is imported on that path
alone.
"""

from __future__ import annotations

import base64
import binascii
import os
import ssl
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from cpa import redact
from cpa.http.message import field_value_problem
from cpa.kube import execplugin
from cpa.kube.objects import json_type
from cpa.kube.tokenfile import FileToken

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"

_T = TypeVar("_T")


class ConfigError(Exception):
    """No usable API server configuration; the message says what to provide."""


@dataclass(slots=True, eq=False)
class Connection:
    """Everything an HTTP client needs to reach the API server."""

    server: str
    ssl_context: ssl.SSLContext | None
    authorization: Callable[[], str | None]  # the Authorization header value, or None
    source: str  # "in-cluster" or the kubeconfig path, for logs
    server_name: str | None = None
    """The name the server's certificate must carry, when not the server's host (a
    kubeconfig's ``tls-server-name``); also sent as SNI."""
    unauthorized: Callable[[str | None], None] | None = None
    """Told the ``Authorization`` header of a request the API server answered 401: a
    token file is read again, an exec plugin run again, before the next request."""


def _context(ca_file: str | None, ca_data: bytes | None, insecure: bool,
             what: str = "certificate-authority") -> ssl.SSLContext:
    """A TLS context trusting ``ca_file`` or ``ca_data`` (PEM), or verifying nothing;
    unreadable or broken CA certificates are a one-line :class:`ConfigError`."""
    try:
        cadata = ca_data.decode("ascii") if ca_data is not None else None
    except UnicodeDecodeError:
        raise ConfigError(f"{what} holds no PEM certificate (binary data)") from None
    try:
        ctx = ssl.create_default_context(cafile=ca_file, cadata=cadata)
    except FileNotFoundError as exc:
        raise ConfigError(f"cannot read {what} {ca_file}: {exc.strerror}") from None
    except (ssl.SSLError, ValueError) as exc:
        raise ConfigError(f"{what} holds no usable PEM certificate: {_ssl_reason(exc)}"
                          ) from None
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {ca_file}: {exc}") from None
    if insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


def _ssl_reason(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None)
    text = str(reason or exc)
    return " ".join(text.split())


def in_cluster() -> Connection:
    """Service-account config, exactly the files and variables client-go uses in a pod."""
    host = os.environ.get("KUBERNETES_SERVICE_HOST", "")
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise ConfigError(
            "not running in a cluster (KUBERNETES_SERVICE_HOST/PORT are unset): pass "
            "--kubeconfig or set KUBECONFIG to run outside a cluster")
    token_path = os.path.join(SA_DIR, "token")
    ca_path = os.path.join(SA_DIR, "ca.crt")
    if not os.path.exists(token_path) or not os.path.exists(ca_path):
        raise ConfigError(
            f"service-account files missing in {SA_DIR}: is automountServiceAccountToken "
            "disabled for this pod?")
    if ":" in host:
        host = f"[{host}]"
    token = FileToken(token_path)
    # A token file that holds no usable token is not fatal: each request says why it has
    # no credentials (and /last-poll with it), and the first good token is used at once.
    return Connection(f"https://{host}:{port}",
                      _context(ca_path, None, False, f"the service account's {ca_path}"),
                      token, "in-cluster", unauthorized=token.unauthorized)


def _resolve(base: Path, path: str) -> str:
    p = Path(os.path.expanduser(path))
    return str(p if p.is_absolute() else base / p)


_SECRET_FIELDS = frozenset({"token", "password", "client-key-data", "value"})
"""Fields whose value an error never shows, only its type (an exec plugin's ``env``
``value`` may hold a secret too)."""


def _parse_yaml(text: str, shown: Path) -> Any:
    """A kubeconfig's document. PyYAML loads here, not at the top: a Pod reads its
    ServiceAccount files and never a kubeconfig, and the parser is a large part of the
    daemon's memory (docs/architecture.md, Measured exceptions)."""
    import yaml
    try:
        return yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"cannot read kubeconfig {shown}: {yaml_problem(exc)}") from None


def yaml_problem(exc: Exception) -> str:
    """A YAML error's problem and where it is, without the snippet of the file PyYAML
    quotes (that line may hold a token)."""
    problem = getattr(exc, "problem", None)
    mark = getattr(exc, "problem_mark", None)
    if not problem:
        return "it is not valid YAML"
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"{problem}{where}"


class _Fields:
    """One object of a kubeconfig (the file, a cluster, a user, a context), its fields read
    with the types client-go's ``clientcmd/api/v1`` gives them. client-go refuses a file
    whose field has the wrong type (``insecure-skip-tls-verify: "false"`` is a string, not
    a bool), and so do we: Python's truthiness would read that string as true."""

    def __init__(self, doc: dict[str, Any], where: str, file: Path) -> None:
        self._doc = doc
        self.where = where
        self.file = file

    def error(self, message: str) -> ConfigError:
        return ConfigError(f"kubeconfig {self.file}: {message}")

    def _at(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def _wrong(self, key: str, want: str, value: object) -> ConfigError:
        shown = json_type(value, shown=key not in _SECRET_FIELDS)
        return self.error(f"{self._at(key)} must be {want}, not {shown} "
                          "(client-go refuses this kubeconfig too)")

    def has(self, key: str) -> bool:
        return self._doc.get(key) is not None

    def _get(self, key: str, kind: type[_T], want: str, items: type | None = None
             ) -> _T | None:
        """The value at ``key`` when it is a ``kind`` (of ``items``), None when absent or
        null (the caller gives Go's zero value); anything else is an error naming ``want``."""
        value = self._doc.get(key)
        if value is None:
            return None
        if not isinstance(value, kind) or (items is not None and isinstance(value, list)
                                           and not all(isinstance(v, items) for v in value)):
            raise self._wrong(key, want, value)
        return value

    def string(self, key: str) -> str:
        return self._get(key, str, "a string") or ""

    def boolean(self, key: str) -> bool:
        return self._get(key, bool, "a bool (true or false, without quotes)") or False

    def data(self, key: str) -> bytes | None:
        """A ``[]byte`` field: base64 in the file, as Go's encoding/json writes it."""
        text = self.string(key)
        if not text:
            return None
        try:
            return base64.b64decode(text.replace("\n", "").replace("\r", ""), validate=True)
        except (binascii.Error, ValueError) as exc:
            raise self.error(f"{self._at(key)} is not valid base64 ({exc})") from None

    def strings(self, key: str) -> list[str]:
        return list(self._get(key, list, "a list of strings", str) or [])

    def mapping(self, key: str) -> _Fields | None:
        value = self._get(key, dict, "a map")
        return None if value is None else _Fields(value, self._at(key), self.file)

    def mappings(self, key: str) -> list[_Fields]:
        value = self._get(key, list, "a list of maps", dict) or []
        return [_Fields(v, f"{self._at(key)}[{i}]", self.file) for i, v in enumerate(value)]


def _named(top: _Fields, key: str, name: str, what: str) -> _Fields:
    """The ``what`` inside the item named ``name`` of the list ``key`` (clusters, ...)."""
    for item in top.mappings(key):
        if item.string("name") == name:
            inner = item.mapping(what)
            where = f'{key}["{name}"].{what}'
            return _Fields(inner._doc if inner is not None else {}, where, top.file)
    raise top.error(f"no {what} named {name!r}")


_IMPERSONATION = ("as", "as-uid", "as-groups", "as-user-extra")


def _check_user(user: _Fields) -> None:
    """client-go's refusals of a user entry (clientcmd's validateAuthInfo), and ours of
    impersonation, which we do not send: acting as the wrong identity silently is worse than
    not starting."""
    methods = [m for m, keys in (("token", ("token",)), ("basicAuth", ("username", "password")))
               if any(user.string(k) for k in keys)]
    if len(methods) > 1:
        raise user.error(f"{user.where}: more than one authentication method found "
                         f"({', '.join(methods)}); only one is allowed")
    if user.string("client-certificate") and user.data("client-certificate-data"):
        raise user.error(f"{user.where}: client-certificate and client-certificate-data are "
                         "both given; keep one")
    if user.string("client-key") and user.data("client-key-data"):
        raise user.error(f"{user.where}: client-key and client-key-data are both given; "
                         "keep one")
    has_cert = bool(user.string("client-certificate") or user.data("client-certificate-data"))
    has_key = bool(user.string("client-key") or user.data("client-key-data"))
    if has_cert and not has_key:
        raise user.error(f"{user.where}: client-key-data or client-key must be given to use a "
                         "client certificate")
    if user.has("exec") and user.has("auth-provider"):
        raise user.error(f"{user.where}: auth-provider cannot be given with an exec plugin")
    user.string("tokenFile")
    user.string("username")
    user.string("password")
    for key in _IMPERSONATION:
        if user.has(key):
            raise user.error(f"{user.where}.{key}: impersonation is not supported by this "
                             "autoscaler; remove it, or grant the rights to the user itself")


def _check_cluster(cluster: _Fields) -> tuple[str | None, bytes | None, bool]:
    """client-go's refusals of a cluster entry: (CA file, CA data, insecure)."""
    ca_file = cluster.string("certificate-authority") or None
    ca_data = cluster.data("certificate-authority-data")
    insecure = cluster.boolean("insecure-skip-tls-verify")
    cluster.string("tls-server-name")
    cluster.string("proxy-url")
    cluster.boolean("disable-compression")
    if ca_file and ca_data:
        raise cluster.error(f"{cluster.where}: certificate-authority-data and "
                            "certificate-authority are both given; keep one")
    if insecure and (ca_file or ca_data):
        raise cluster.error(f"{cluster.where}: specifying a root certificates file with the "
                            "insecure flag is not allowed (insecure-skip-tls-verify with "
                            "certificate-authority; client-go refuses it too): drop one")
    return ca_file, ca_data, insecure


def from_kubeconfig(path: str, context_name: str = "") -> Connection:
    """Load the current context of a kubeconfig file (``context_name``, when given,
    instead)."""
    file = Path(os.path.expanduser(path.split(os.pathsep)[0]))
    try:
        doc = _parse_yaml(file.read_text(), file)
    except OSError as exc:
        raise ConfigError(f"cannot read kubeconfig {file}: {exc}") from exc
    if not isinstance(doc, dict):
        raise ConfigError(f"kubeconfig {file} is not a map of fields ({json_type(doc)})")
    top = _Fields(doc, "", file)
    ctx_name = context_name or top.string("current-context")
    if not ctx_name:
        raise ConfigError(f"kubeconfig {file} has no current-context")
    context = _named(top, "contexts", ctx_name, "context")
    cluster = _named(top, "clusters", context.string("cluster"), "cluster")
    user_name = context.string("user")
    user = _named(top, "users", user_name, "user") if user_name \
        else _Fields({}, "user", file)
    _check_user(user)
    ca_file, ca_data, insecure = _check_cluster(cluster)
    if user.has("auth-provider"):
        return _via_official_client(str(file), cluster._doc)
    server = cluster.string("server").rstrip("/")
    if not server:
        raise ConfigError(f"kubeconfig {file}: cluster of context {ctx_name!r} has no server")
    base = file.parent
    ssl_ctx: ssl.SSLContext | None = None
    if server.startswith("https://"):
        where = f"kubeconfig {file}: {cluster.where}"
        try:
            ssl_ctx = _context(_resolve(base, ca_file) if ca_file else None, ca_data,
                               insecure, "certificate-authority" if ca_file
                               else "certificate-authority-data")
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        _load_client_cert(ssl_ctx, user, base)
    conn = Connection(server, ssl_ctx, lambda: None, str(file),
                      server_name=cluster.string("tls-server-name") or None)
    _authenticate(conn, user, cluster, base)
    return conn


def _authenticate(conn: Connection, user: _Fields, cluster: _Fields, base: Path) -> None:
    """The user's credentials for ``conn``: an exec plugin, a token, a token file or basic
    authentication (a client certificate is the TLS context's); none, if it has none."""
    exec_stanza = user.mapping("exec")
    if exec_stanza is not None:
        _use_exec_plugin(conn, exec_stanza, cluster, base)
    elif user.string("token"):
        header = f"Bearer {_sendable(user, 'token')}"
        conn.authorization = lambda: header
    elif user.string("tokenFile"):
        source = FileToken(_resolve(base, user.string("tokenFile")))
        conn.authorization, conn.unauthorized = source, source.unauthorized
    elif user.string("username") or user.string("password"):
        redact.remember(user.string("password"))
        basic = base64.b64encode(
            f"{user.string('username')}:{user.string('password')}".encode()).decode()
        header = f"Basic {basic}"
        conn.authorization = lambda: header


def _sendable(user: _Fields, key: str) -> str:
    """A credential of the kubeconfig, remembered for :func:`cpa.redact.scrub`; one that
    cannot be sent in a header is an error naming the field and the byte, not the value."""
    value = user.string(key)
    redact.remember(value)
    problem = field_value_problem(value)
    if problem is not None:
        raise user.error(f"{user.where}.{key} {problem}: it must be the token alone")
    return value


def _use_exec_plugin(conn: Connection, stanza: _Fields, cluster: _Fields, base: Path) -> None:
    """Run the exec plugin once now: a plugin that fails is an error at start."""
    env: list[tuple[str, str]] = []
    for item in stanza.mappings("env"):
        env.append((item.string("name"), item.string("value")))
    api_version = stanza.string("apiVersion")
    mode = stanza.string("interactiveMode")
    if not mode and api_version.endswith(("/v1beta1", "/v1alpha1")):
        mode = "IfAvailable"  # client-go's default for the older versions
    config = execplugin.ExecConfig(
        command=execplugin.resolve_command(stanza.string("command"), base),
        args=tuple(stanza.strings("args")), env=tuple(env), api_version=api_version,
        install_hint=stanza.string("installHint"),
        provide_cluster_info=stanza.boolean("provideClusterInfo"),
        interactive_mode=mode, where=stanza.where)
    info: dict[str, Any] = {"server": conn.server}
    for key in ("tls-server-name", "proxy-url"):
        if cluster.string(key):
            info[key] = cluster.string(key)
    if cluster.boolean("insecure-skip-tls-verify"):
        info["insecure-skip-tls-verify"] = True
    if cluster.string("certificate-authority-data"):
        info["certificate-authority-data"] = cluster.string("certificate-authority-data")
    try:
        plugin = execplugin.ExecPlugin(config, info)
        first = plugin.credential()
    except execplugin.PluginError as exc:
        raise ConfigError(f"kubeconfig {conn.source}: {exc}") from None
    if first.cert_pem is not None and first.key_pem is not None and conn.ssl_context:
        _load_pair(conn.ssl_context, first.cert_pem, first.key_pem,
                   f"kubeconfig {conn.source}: the exec plugin's client certificate")

    def authorization() -> str | None:
        try:
            return plugin.authorization()
        except execplugin.PluginError as exc:
            raise ConfigError(str(exc)) from None

    conn.authorization = authorization
    conn.unauthorized = plugin.unauthorized


def _load_client_cert(ctx: ssl.SSLContext, user: _Fields, base: Path) -> None:
    what = f"kubeconfig {user.file}: {user.where}"
    cert_file = user.string("client-certificate")
    key_file = user.string("client-key")
    cert_data = user.data("client-certificate-data")
    key_data = user.data("client-key-data")
    if cert_file and key_file:
        try:
            ctx.load_cert_chain(_resolve(base, cert_file), _resolve(base, key_file))
        except FileNotFoundError as exc:
            raise ConfigError(f"{what}: cannot read {exc.filename}: {exc.strerror}") from None
        except (ssl.SSLError, OSError) as exc:
            raise ConfigError(f"{what}: client-certificate and client-key are not a usable "
                              f"PEM certificate and key: {_ssl_reason(exc)}") from None
        return
    if (cert_file or cert_data) and (key_file or key_data):
        cert = cert_data if cert_data is not None else _read(base, cert_file, what)
        key = key_data if key_data is not None else _read(base, key_file, what)
        _load_pair(ctx, cert, key, f"{what}: the client certificate and key")


def _read(base: Path, name: str, what: str) -> bytes:
    try:
        with open(_resolve(base, name), "rb") as fh:
            return fh.read()
    except OSError as exc:
        raise ConfigError(f"{what}: cannot read {name}: {exc.strerror or exc}") from None


def _load_pair(ctx: ssl.SSLContext, cert: bytes, key: bytes, what: str) -> None:
    """ssl can only load a key pair from files; keep them only as long as loading takes."""
    with tempfile.TemporaryDirectory() as tmp:
        cert_path, key_path = Path(tmp, "tls.crt"), Path(tmp, "tls.key")
        cert_path.write_bytes(cert)
        key_path.write_bytes(key)
        key_path.chmod(0o600)
        try:
            ctx.load_cert_chain(str(cert_path), str(key_path))
        except (ssl.SSLError, OSError) as exc:
            raise ConfigError(f"{what} are not a usable PEM certificate and key: "
                              f"{_ssl_reason(exc)}") from None


def _via_official_client(path: str, cluster: dict[str, Any]) -> Connection:
    """auth-provider users (oidc, ...): let the official client run and refresh them."""
    try:
        from kubernetes import client, config  # heavy import, only on this path
    except ImportError as exc:  # the container image leaves the client out
        raise ConfigError(
            f"{path} authenticates with an auth-provider plugin, which needs the "
            "official kubernetes Python client: install it (pip install kubernetes), or use "
            "a kubeconfig with a token, a client certificate or an exec plugin") from exc

    cfg = client.Configuration()
    config.load_kube_config(config_file=path, client_configuration=cfg)  # type: ignore[no-untyped-call]

    def token() -> str | None:
        if cfg.refresh_api_key_hook is not None:
            cfg.refresh_api_key_hook(cfg)
        value = cfg.api_key.get("authorization") or cfg.api_key.get("BearerToken")
        if not value:
            return None
        value = str(value)
        return value if value.startswith(("Bearer ", "Basic ")) else f"Bearer {value}"

    ctx = _context(cfg.ssl_ca_cert, None, not cfg.verify_ssl)
    if cfg.cert_file and cfg.key_file:
        ctx.load_cert_chain(cfg.cert_file, cfg.key_file)
    return Connection(str(cfg.host).rstrip("/"), ctx, token, path)


def load(kubeconfig: str) -> Connection:
    """``--kubeconfig`` / ``KUBECONFIG`` if given, else the in-cluster service account."""
    if kubeconfig:
        return checked(kubeconfig, lambda: from_kubeconfig(kubeconfig))
    return in_cluster()


# --- kubectl's way of finding the kubeconfig (cpa explain --from-cluster) ---------------
# The daemon keeps upstream's rule (in-cluster unless --kubeconfig/KUBECONFIG say otherwise:
# a Pod never has a ~/.kube/config); a command an operator types at a workstation should
# find the cluster kubectl finds, in the same order, and take --context as kubectl does.

_PATH_FIELDS = {"clusters": ("cluster", ("certificate-authority",)),
                "users": ("user", ("client-certificate", "client-key", "tokenFile"))}


def kubectl_paths(explicit: str, environ: Mapping[str, str], home: Path) -> list[Path]:
    """The kubeconfig files kubectl would read, in order: ``--kubeconfig`` alone; else every
    file of ``KUBECONFIG`` (a list, merged, missing files skipped); else
    ``~/.kube/config`` when it exists; else none (then in-cluster)."""
    if explicit:
        return [Path(os.path.expanduser(explicit))]
    listed = [p for p in environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    if listed:
        seen: list[Path] = []
        for entry in listed:
            path = Path(os.path.expanduser(entry))
            if path not in seen and path.exists():
                seen.append(path)
        return seen
    default = home / ".kube" / "config"
    return [default] if default.exists() else []


def _read_doc(path: Path) -> dict[str, Any]:
    try:
        doc = _parse_yaml(path.read_text(), path)
    except (OSError, ValueError) as exc:
        detail = " ".join(str(exc).split())
        raise ConfigError(f"cannot read kubeconfig {path}: {detail}") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"kubeconfig {path} is not a kubeconfig (a YAML mapping with "
                          "clusters, users and contexts is expected)")
    return doc


def _first_named(docs: list[tuple[Path, dict[str, Any]]], section: str, name: str
                 ) -> tuple[Path, dict[str, Any]] | None:
    """The first entry named ``name`` in ``section`` across the files (kubectl's merge: the
    first file that defines a name wins)."""
    for path, doc in docs:
        items = doc.get(section)
        for item in items if isinstance(items, list) else ():
            if isinstance(item, dict) and item.get("name") == name:
                return path, item
    return None


def _absolute(entry: dict[str, Any], section: str, base: Path) -> dict[str, Any]:
    """An entry with its relative file paths made absolute against its own file's folder,
    as kubectl resolves them."""
    inner_key, fields = _PATH_FIELDS[section]
    inner = entry.get(inner_key)
    if not isinstance(inner, dict):
        return entry
    fixed = dict(inner)
    for name in fields:
        value = fixed.get(name)
        if isinstance(value, str) and value:
            fixed[name] = _resolve(base, value)
    stanza = fixed.get("exec")
    if isinstance(stanza, dict) and isinstance(stanza.get("command"), str):
        # An exec plugin's relative path (./bin/login) is its own file's too; a bare name
        # stays a PATH lookup.
        fixed["exec"] = {**stanza, "command": execplugin.resolve_command(stanza["command"], base)}
    return {**entry, inner_key: fixed}


def _merged(paths: list[Path], context: str) -> tuple[Path | None, dict[str, Any], str]:
    """Merge the files as kubectl does for the one context in use: the file that holds all
    of it (then it is loaded as it is), or one document made of the entries, their paths
    made absolute. Returns (that file or None, the document, the context's name)."""
    docs = [(path, _read_doc(path)) for path in paths]
    name = context or next((str(doc["current-context"]) for _, doc in docs
                            if doc.get("current-context")), "")
    shown = os.pathsep.join(map(str, paths))
    if not name:
        raise ConfigError(f"kubeconfig {shown} has no current-context: pass --context NAME "
                          "(kubectl config get-contexts lists them)")
    found = _first_named(docs, "contexts", name)
    if found is None:
        raise ConfigError(f"kubeconfig {shown}: no context named {name!r} (kubectl config "
                          "get-contexts lists them)")
    ctx_path, ctx_entry = found
    ctx = ctx_entry.get("context") if isinstance(ctx_entry.get("context"), dict) else {}
    assert isinstance(ctx, dict)
    parts: dict[str, tuple[Path, dict[str, Any]] | None] = {}
    for section, key in (("clusters", "cluster"), ("users", "user")):
        ref = ctx.get(key)
        parts[section] = _first_named(docs, section, ref) if ref else None
        if ref and parts[section] is None:
            raise ConfigError(f"kubeconfig {shown}: context {name!r} names {key} {ref!r}, "
                              f"which no file defines")
    homes = {ctx_path} | {part[0] for part in parts.values() if part is not None}
    if homes == {ctx_path}:
        return ctx_path, {}, name
    doc: dict[str, Any] = {"apiVersion": "v1", "kind": "Config", "current-context": name,
                           "contexts": [ctx_entry]}
    for section, part in parts.items():
        doc[section] = [_absolute(part[1], section, part[0].parent)] if part else []
    return None, doc, name


def load_like_kubectl(kubeconfig: str = "", context: str = "",
                      environ: Mapping[str, str] | None = None,
                      home: Path | None = None) -> Connection:
    """The connection kubectl would use: ``--kubeconfig``, else ``KUBECONFIG``, else
    ``~/.kube/config``, else the in-cluster service account; ``context`` instead of the
    current context. Every problem is a :class:`ConfigError` naming the file."""
    env = os.environ if environ is None else environ
    paths = kubectl_paths(kubeconfig, env, home if home is not None else Path.home())
    if not paths:
        if context:
            raise ConfigError(f"--context {context}: no kubeconfig found (no --kubeconfig, "
                              "KUBECONFIG or ~/.kube/config)")
        if not env.get("KUBERNETES_SERVICE_HOST"):
            raise ConfigError("no kubeconfig found (no --kubeconfig, KUBECONFIG or "
                              "~/.kube/config) and not running in a cluster: pass "
                              "--kubeconfig PATH, or set KUBECONFIG")
        return in_cluster()
    shown = os.pathsep.join(map(str, paths))

    def connect() -> Connection:
        if kubeconfig:
            return from_kubeconfig(str(paths[0]), context)
        single, doc, name = _merged(paths, context)
        if single is not None:
            return from_kubeconfig(str(single), name)
        return _from_merged(doc, name, shown)
    return checked(shown, connect)


def checked(shown: str, connect: Callable[[], Connection]) -> Connection:
    """``connect()``, with any failure of a kubeconfig whose fields have the wrong shapes
    or contents (a list where a map belongs, bad base64, a certificate that is not one) as
    one :class:`ConfigError` naming the file, never a raw exception."""
    try:
        return connect()
    except ConfigError:
        raise
    except (OSError, ValueError, TypeError, AttributeError, KeyError) as exc:
        detail = redact.scrub(" ".join(str(exc).split()))[:300] or "a field has the wrong type"
        raise ConfigError(f"kubeconfig {shown} cannot be used: {detail}") from None


def _from_merged(doc: dict[str, Any], context: str, shown: str) -> Connection:
    """Load one merged document (entries from several KUBECONFIG files) through a private
    file that exists only while it is read."""
    with tempfile.TemporaryDirectory(prefix="cpa-kubeconfig-") as tmp:
        path = Path(tmp, "config")
        path.touch(mode=0o600)
        import yaml  # see _parse_yaml
        path.write_text(yaml.safe_dump(doc))
        try:
            conn = from_kubeconfig(str(path), context)
        except ConfigError as exc:  # name the operator's files, not the private one
            raise ConfigError(str(exc).replace(str(path), shown)) from None
    conn.source = shown
    return conn
