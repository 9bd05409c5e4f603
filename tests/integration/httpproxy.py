"""An HTTPS proxy between the autoscaler and the API server that lies about single requests.

:mod:`tests.integration.faultproxy` only moves bytes, so it can break a network but not one
request. This proxy terminates TLS with the API server's own certificate and key (so the
daemon's kubeconfig, pointed at the proxy, verifies it as it would the API server), reads
each HTTP/1.1 request, and forwards it over TLS to the real API server, unless a
:class:`Rule` says otherwise:

* :class:`Respond`: answer without forwarding (a 429 with ``Retry-After``, a 503);
* :class:`Delay`: hold the request, then forward it (the answer is as of then: a slow GET);
* :class:`Hang`: never answer (until the client gives up or the proxy closes);
* :class:`Reset`: read the request, then close the connection with a TCP RST, no answer
  (a connection reset as a load balancer restarts);
* :class:`Drip`: forward it, then send the answer one byte per ``interval``;
* :class:`Inject`: forward it, and send ``data`` before the answer's first body byte (a
  forged watch frame or event on the front of a real stream);
* :class:`Rewrite`: forward it, and send the answer's whole body as ``edit`` changed it (a
  malformed object in a real answer).

Every request is recorded (:attr:`HttpFaultProxy.seen`) with when it arrived, when its answer
began and its status, so a test can count what a process sent, e.g. the scale PUTs of a
replica after its renew deadline, from outside the process.

One thread per client connection (this is a test tool); :meth:`HttpFaultProxy.close` ends
them all.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host",
               "proxy-connection", "te", "trailer", "upgrade"}


@dataclass
class Request:
    """One request as the proxy received it."""

    method: str
    target: str  # path and query, as sent
    headers: dict[str, str]
    body: bytes
    arrived: float  # time.monotonic()
    wall: float  # time.time()
    connection: int  # which client connection (in accept order)
    status: int | None = None  # of the answer sent (None: none sent, yet or ever)
    answered: float | None = None  # monotonic time the answer's head was sent
    rule: str = ""  # the rule that applied, if any

    @property
    def path(self) -> str:
        return urlsplit(self.target).path

    @property
    def query(self) -> dict[str, str]:
        return {k: v[-1] for k, v in parse_qs(urlsplit(self.target).query).items()}

    @property
    def is_watch(self) -> bool:
        return self.query.get("watch") in ("1", "true")


@dataclass
class Respond:
    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Delay:
    seconds: float


@dataclass
class Hang:
    pass


@dataclass
class Reset:
    pass


@dataclass
class Drip:
    interval: float


@dataclass
class Inject:
    data: bytes


@dataclass
class Rewrite:
    edit: Callable[[bytes], bytes]


Action = Respond | Delay | Hang | Reset | Drip | Inject | Rewrite


@dataclass
class Rule:
    """``action`` for the requests ``match`` accepts, ``times`` times (None: every time)."""

    name: str
    match: Callable[[Request], bool]
    action: Action
    times: int | None = None
    applied: int = 0


class HttpFaultProxy:
    """Listens on 127.0.0.1 with TLS (``cert``/``key``: the API server's) and forwards to
    ``https://127.0.0.1:target_port`` (verified against ``ca_file``)."""

    def __init__(self, target_port: int, cert: Path, key: Path, ca_file: Path) -> None:
        self._target = ("127.0.0.1", target_port)
        self._server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._server_ctx.load_cert_chain(str(cert), str(key))
        self._client_ctx = ssl.create_default_context(cafile=str(ca_file))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._rules: list[Rule] = []
        self.seen: list[Request] = []
        self._clients: set[socket.socket] = set()  # each client's socket, to cut
        self._closing = threading.Event()
        self._accepted = 0
        self._threads: list[threading.Thread] = []
        self._spawn(self._accept)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    # --- the test's side -------------------------------------------------------------
    def add(self, rule: Rule) -> Rule:
        with self._lock:
            self._rules.append(rule)
        return rule

    def remove(self, rule: Rule) -> None:
        with self._lock:
            if rule in self._rules:
                self._rules.remove(rule)

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    def requests(self, method: str | None = None,
                 where: Callable[[Request], bool] | None = None) -> list[Request]:
        with self._lock:
            seen = list(self.seen)
        return [r for r in seen if (method is None or r.method == method)
                and (where is None or where(r))]

    def drop_connections(self) -> int:
        """Close every client connection (as a restarted load balancer would): the daemon
        reconnects, and its next requests meet the rules in force."""
        with self._lock:
            clients = list(self._clients)
        for sock in clients:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        return len(clients)

    def close(self) -> None:
        self._closing.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self._listener.close()
        self.drop_connections()
        for thread in self._threads:
            thread.join(5)

    # --- the work --------------------------------------------------------------------
    def _spawn(self, target: Callable[..., None], *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True,
                                  name="http-fault-proxy")
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self._closing.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                index = self._accepted
                self._accepted += 1
                self._clients.add(client)
            self._spawn(self._serve, client, index)

    def _rule_for(self, request: Request) -> Rule | None:
        with self._lock:
            for rule in self._rules:
                if (rule.times is None or rule.applied < rule.times) and rule.match(request):
                    rule.applied += 1
                    request.rule = rule.name
                    return rule
        return None

    def _serve(self, client: socket.socket, index: int) -> None:
        upstream: http.client.HTTPSConnection | None = None
        tls: ssl.SSLSocket | None = None
        try:
            client.settimeout(30)
            tls = self._server_ctx.wrap_socket(client, server_side=True)
            tls.settimeout(None)
            with self._lock:  # wrap_socket took the descriptor over: cut this one
                self._clients.discard(client)
                self._clients.add(tls)
            rfile = tls.makefile("rb")
            while not self._closing.is_set():
                request = self._read_request(rfile, index)
                if request is None:
                    return
                with self._lock:
                    self.seen.append(request)
                rule = self._rule_for(request)
                action = rule.action if rule is not None else None
                if isinstance(action, Respond):
                    self._send_head(tls, request, action.status,
                                    {**action.headers, "Content-Length": str(len(action.body))})
                    tls.sendall(action.body)
                    continue
                if isinstance(action, Hang):
                    rfile.read(1)  # until the client gives up (or the proxy closes)
                    return
                if isinstance(action, Reset):  # the close below then sends a RST
                    tls.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                   struct.pack("ii", 1, 0))
                    return
                if isinstance(action, Delay) and self._closing.wait(action.seconds):
                    return
                if upstream is None:
                    upstream = http.client.HTTPSConnection(*self._target, timeout=120,
                                                           context=self._client_ctx)
                headers = {k: v for k, v in request.headers.items()
                           if k.lower() not in _HOP_BY_HOP}
                upstream.request(request.method, request.target, body=request.body or None,
                                 headers=headers)
                resp = upstream.getresponse()
                self._relay(tls, request, resp, action)
        except (OSError, http.client.HTTPException, ValueError):
            return
        finally:
            with self._lock:
                self._clients.discard(client)
                if tls is not None:
                    self._clients.discard(tls)
            if upstream is not None:
                upstream.close()
            for sock in (tls, client):
                if sock is not None:
                    with contextlib.suppress(OSError):
                        sock.close()

    @staticmethod
    def _read_request(rfile: object, index: int) -> Request | None:
        readline = rfile.readline  # type: ignore[attr-defined]
        line = readline(65537)
        if not line:
            return None
        method, target, _version = line.decode("latin-1").rstrip("\r\n").split(" ", 2)
        headers: dict[str, str] = {}
        while True:
            raw = readline(65537)
            if raw in (b"\r\n", b"\n", b""):
                break
            name, _, value = raw.decode("latin-1").partition(":")
            headers[name.strip()] = value.strip()
        length = int(next((v for k, v in headers.items() if k.lower() == "content-length"),
                          "0"))
        body = rfile.read(length) if length else b""  # type: ignore[attr-defined]
        return Request(method, target, headers, body, time.monotonic(), time.time(), index)

    def _send_head(self, tls: ssl.SSLSocket, request: Request, status: int,
                   headers: dict[str, str]) -> None:
        reason = http.client.responses.get(status, "Status")
        head = f"HTTP/1.1 {status} {reason}\r\n" + "".join(
            f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        tls.sendall(head.encode("latin-1"))
        with self._lock:
            request.status = status
            request.answered = time.monotonic()

    def _relay(self, tls: ssl.SSLSocket, request: Request, resp: http.client.HTTPResponse,
               action: Action | None) -> None:
        headers = {k: v for k, v in resp.getheaders() if k.lower() not in _HOP_BY_HOP}
        if resp.chunked and not isinstance(action, Drip | Rewrite):
            self._send_head(tls, request, resp.status,
                            {**headers, "Transfer-Encoding": "chunked"})
            if isinstance(action, Inject):
                tls.sendall(b"%x\r\n%s\r\n" % (len(action.data), action.data))
            while True:
                data = resp.read1(65536)
                if not data:
                    break
                tls.sendall(b"%x\r\n%s\r\n" % (len(data), data))
            tls.sendall(b"0\r\n\r\n")
            return
        body = resp.read()
        if isinstance(action, Inject):
            body = action.data + body
        if isinstance(action, Rewrite):
            body = action.edit(body)
        self._send_head(tls, request, resp.status, {**headers, "Content-Length": str(len(body))})
        if isinstance(action, Drip):
            for i in range(len(body)):
                tls.sendall(body[i:i + 1])
                if self._closing.wait(action.interval):
                    return
            return
        tls.sendall(body)
