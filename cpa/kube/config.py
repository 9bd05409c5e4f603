"""Where the API server is and how to authenticate to it.

In a pod (upstream's only mode) this reads the service-account files. Outside a cluster it
reads a kubeconfig. We read the common kubeconfig fields ourselves and hand only exotic auth
(``exec`` plugins, ``auth-provider``) to the official ``kubernetes`` client's loader: importing
that package costs about 31 MiB of RSS, which alone would eat half of a 64 MiB budget, so
the daemon's common paths never import it.
"""

from __future__ import annotations

import base64
import os
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
TOKEN_REREAD_SECONDS = 60.0


class ConfigError(Exception):
    """No usable API server configuration; the message says what to provide."""


@dataclass(slots=True)
class Connection:
    """Everything an HTTP client needs to reach the API server."""

    server: str
    ssl_context: ssl.SSLContext | None
    authorization: Callable[[], str | None]  # the Authorization header value, or None
    source: str  # "in-cluster" or the kubeconfig path, for logs


class FileToken:
    """A bearer token read from a file and re-read periodically.

    Projected service-account tokens rotate (about hourly); client-go re-reads the file, so
    must we, or the daemon starts failing with 401 after the first rotation.
    """

    def __init__(self, path: Path, clock: Callable[[], float] = time.monotonic) -> None:
        self._path = path
        self._clock = clock
        self._lock = threading.Lock()
        self._value: str | None = None
        self._read_at = 0.0

    def __call__(self) -> str | None:
        now = self._clock()
        with self._lock:
            if self._value is None or now - self._read_at >= TOKEN_REREAD_SECONDS:
                try:
                    self._value = self._path.read_text().strip()
                    self._read_at = now
                except OSError as exc:
                    if self._value is None:
                        raise ConfigError(f"cannot read token file {self._path}: {exc}") from exc
            return f"Bearer {self._value}"


def _context(ca_file: str | None, ca_data: bytes | None, insecure: bool) -> ssl.SSLContext:
    ctx = ssl.create_default_context(
        cafile=ca_file, cadata=ca_data.decode() if ca_data is not None else None)
    if insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


def in_cluster() -> Connection:
    """Service-account config, exactly the files and variables client-go uses in a pod."""
    host = os.environ.get("KUBERNETES_SERVICE_HOST", "")
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise ConfigError(
            "not running in a cluster (KUBERNETES_SERVICE_HOST/PORT are unset): pass "
            "--kubeconfig or set KUBECONFIG to run outside a cluster")
    token_path = SA_DIR / "token"
    ca_path = SA_DIR / "ca.crt"
    if not token_path.exists() or not ca_path.exists():
        raise ConfigError(
            f"service-account files missing in {SA_DIR}: is automountServiceAccountToken "
            "disabled for this pod?")
    if ":" in host:
        host = f"[{host}]"
    token = FileToken(token_path)
    token()
    return Connection(f"https://{host}:{port}", _context(str(ca_path), None, False), token,
                      "in-cluster")


def _b64(value: str) -> bytes:
    return base64.b64decode(value)


def _resolve(base: Path, path: str) -> str:
    p = Path(os.path.expanduser(path))
    return str(p if p.is_absolute() else base / p)


def _named(items: Any, name: str, what: str, path: Path) -> dict[str, Any]:
    for item in items or []:
        if isinstance(item, dict) and item.get("name") == name:
            inner = item.get(what)
            return inner if isinstance(inner, dict) else {}
    raise ConfigError(f"kubeconfig {path}: no {what} named {name!r}")


def from_kubeconfig(path: str, context_name: str = "") -> Connection:
    """Load the current context of a kubeconfig file (``context_name``, when given,
    instead)."""
    import yaml

    file = Path(os.path.expanduser(path.split(os.pathsep)[0]))
    try:
        doc = yaml.safe_load(file.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read kubeconfig {file}: {exc}") from exc
    ctx_name = context_name or doc.get("current-context")
    if not ctx_name:
        raise ConfigError(f"kubeconfig {file} has no current-context")
    context = _named(doc.get("contexts"), ctx_name, "context", file)
    cluster = _named(doc.get("clusters"), context.get("cluster", ""), "cluster", file)
    user = _named(doc.get("users"), context.get("user", ""), "user", file) \
        if context.get("user") else {}
    if "exec" in user or "auth-provider" in user:
        return _via_official_client(str(file), cluster)
    server = str(cluster.get("server", "")).rstrip("/")
    if not server:
        raise ConfigError(f"kubeconfig {file}: cluster of context {ctx_name!r} has no server")
    base = file.parent
    ssl_ctx: ssl.SSLContext | None = None
    if server.startswith("https://"):
        ca_file = _resolve(base, cluster["certificate-authority"]) \
            if cluster.get("certificate-authority") else None
        ca_data = _b64(cluster["certificate-authority-data"]) \
            if cluster.get("certificate-authority-data") else None
        ssl_ctx = _context(ca_file, ca_data, bool(cluster.get("insecure-skip-tls-verify")))
        _load_client_cert(ssl_ctx, user, base)
    header: str | None = None
    if user.get("token"):
        header = f"Bearer {user['token']}"
    elif user.get("tokenFile"):
        return Connection(server, ssl_ctx, FileToken(Path(_resolve(base, user["tokenFile"]))),
                          str(file))
    elif user.get("username") and user.get("password"):
        basic = base64.b64encode(f"{user['username']}:{user['password']}".encode()).decode()
        header = f"Basic {basic}"
    return Connection(server, ssl_ctx, lambda: header, str(file))


def _load_client_cert(ctx: ssl.SSLContext, user: dict[str, Any], base: Path) -> None:
    cert_file = user.get("client-certificate")
    key_file = user.get("client-key")
    if cert_file and key_file:
        ctx.load_cert_chain(_resolve(base, cert_file), _resolve(base, key_file))
        return
    cert_data = user.get("client-certificate-data")
    key_data = user.get("client-key-data")
    if cert_data and key_data:
        # ssl can only load a key pair from files; keep them only as long as loading takes.
        import tempfile  # only for a kubeconfig with inline client certificates

        with tempfile.TemporaryDirectory() as tmp:
            cert_path, key_path = Path(tmp, "tls.crt"), Path(tmp, "tls.key")
            cert_path.write_bytes(_b64(cert_data))
            key_path.write_bytes(_b64(key_data))
            key_path.chmod(0o600)
            ctx.load_cert_chain(str(cert_path), str(key_path))


def _via_official_client(path: str, cluster: dict[str, Any]) -> Connection:
    """exec / auth-provider users: let the official client run the plugin and refresh it."""
    try:
        from kubernetes import client, config  # heavy import, only on this path
    except ImportError as exc:  # the container image leaves the client out
        raise ConfigError(
            f"{path} authenticates with an exec or auth-provider plugin, which needs the "
            "official kubernetes Python client: install it (pip install kubernetes), or use "
            "a kubeconfig with a token or client certificate") from exc

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
    import yaml

    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except (OSError, ValueError, yaml.YAMLError) as exc:
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
        detail = " ".join(str(exc).split())[:300] or "a field has the wrong type"
        raise ConfigError(f"kubeconfig {shown} cannot be used: {detail}") from None


def _from_merged(doc: dict[str, Any], context: str, shown: str) -> Connection:
    """Load one merged document (entries from several KUBECONFIG files) through a private
    file that exists only while it is read."""
    import tempfile

    import yaml

    with tempfile.TemporaryDirectory(prefix="cpa-kubeconfig-") as tmp:
        path = Path(tmp, "config")
        path.touch(mode=0o600)
        path.write_text(yaml.safe_dump(doc))
        conn = from_kubeconfig(str(path), context)
    conn.source = shown
    return conn
