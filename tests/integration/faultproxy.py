"""A TCP proxy between the autoscaler and the API server that can misbehave on purpose.

TLS passes through untouched (the proxy only moves bytes), so the autoscaler talks to the
real API server with its real certificate and token; only the network in between lies:

* by default bytes flow both ways;
* ``freeze()``: every connection open now stops carrying bytes, for good, while staying
  open: a NAT or load balancer that dropped its state (a half-open connection). New
  connections work normally;
* ``blackhole()``: nothing moves at all, on old or new connections (new ones are accepted
  by the kernel but never answered); ``restore()`` lets the held bytes flow again, as a
  network that heals does;
* ``reset()``: every open connection is closed with a TCP RST (``idle_for``: only those
  that carried no byte for that long: a pooled connection between requests).

Two threads per connection pump the bytes (one per direction); ``close()`` ends them all.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time


class _Pair:
    """One proxied connection: the client's socket and ours to the API server."""

    def __init__(self, client: socket.socket, upstream: socket.socket) -> None:
        self.client = client
        self.upstream = upstream
        self.frozen = False
        self.closed = False
        self.pumps = 2  # the last pump to leave closes both sockets
        self.last_bytes = time.monotonic()  # when it last carried a byte, either way


class FaultProxy:
    """Listens on 127.0.0.1 (``port``) and forwards to ``target_host:target_port``."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self._target = (target_host, target_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._state = threading.Condition()
        self._pairs: set[_Pair] = set()
        self._blackhole = False
        self._closing = False
        self.connections = 0
        self._threads: list[threading.Thread] = []
        self._spawn(self._accept, "fault-proxy-accept")

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    # --- faults ------------------------------------------------------------------------
    def freeze(self) -> int:
        """Freeze every open connection for good; returns how many there were."""
        with self._state:
            for pair in self._pairs:
                pair.frozen = True
            return len(self._pairs)

    def blackhole(self) -> None:
        with self._state:
            self._blackhole = True

    def restore(self) -> None:
        with self._state:
            self._blackhole = False
            self._state.notify_all()

    def reset(self, idle_for: float = 0.0) -> int:
        """RST every open connection (with ``idle_for``: every one that carried no byte
        for that many seconds); returns how many."""
        pairs = self._idle(idle_for)
        for pair in pairs:
            self._drop(pair, rst=True)
        return len(pairs)

    def open_connections(self, idle_for: float = 0.0) -> int:
        """How many connections are open (and carried no byte for ``idle_for`` seconds)."""
        return len(self._idle(idle_for))

    def _idle(self, idle_for: float) -> list[_Pair]:
        now = time.monotonic()
        with self._state:
            return [p for p in self._pairs if now - p.last_bytes >= idle_for]

    def close(self) -> None:
        with self._state:
            self._closing = True
            pairs = list(self._pairs)
            self._state.notify_all()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self._listener.close()
        for pair in pairs:
            self._drop(pair, rst=False)
        for thread in self._threads:
            thread.join(5)

    # --- the work ----------------------------------------------------------------------
    def _spawn(self, target: object, name: str, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)  # type: ignore[arg-type]
        self._threads.append(thread)
        thread.start()

    def _wait_open(self, pair: _Pair | None = None) -> bool:
        """Block while the network is a black hole (or forever, for a frozen pair); False
        when the proxy or the pair is closing."""
        with self._state:
            while not self._closing and (self._blackhole or (pair is not None and pair.frozen)):
                if pair is not None and pair.closed:
                    return False
                self._state.wait(0.5)
            return not self._closing and not (pair is not None and pair.closed)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self._spawn(self._serve, "fault-proxy-conn", client)

    def _serve(self, client: socket.socket) -> None:
        if not self._wait_open():  # accepted by the kernel, unanswered during a black hole
            client.close()
            return
        try:
            upstream = socket.create_connection(self._target, timeout=5)
            upstream.settimeout(None)
        except OSError:
            client.close()
            return
        pair = _Pair(client, upstream)
        with self._state:
            self._pairs.add(pair)
            self.connections += 1
        self._spawn(self._pump, "fault-proxy-up", pair, client, upstream)
        self._pump(pair, upstream, client)

    def _pump(self, pair: _Pair, source: socket.socket, sink: socket.socket) -> None:
        try:
            while self._wait_open(pair):
                data = source.recv(65536)
                if not data:
                    break
                if not self._wait_open(pair):  # arrived as the fault began: hold it
                    break
                pair.last_bytes = time.monotonic()
                sink.sendall(data)
                pair.last_bytes = time.monotonic()
        except OSError:
            pass
        finally:
            self._drop(pair, rst=False)
            with self._state:
                pair.pumps -= 1
                last = pair.pumps == 0
            if last:  # only now: a socket closed under a blocked recv() would let its
                for sock in (pair.client, pair.upstream):  # fd be reused while still read
                    with contextlib.suppress(OSError):
                        sock.close()

    def _drop(self, pair: _Pair, rst: bool) -> None:
        """End a connection: wake both pumps (shutdown of the read side sends nothing);
        with ``rst`` the final close sends a RST instead of a FIN."""
        with self._state:
            if pair.closed:
                return
            pair.closed = True
            self._pairs.discard(pair)
            self._state.notify_all()
        for sock in (pair.client, pair.upstream):
            if rst:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RD)
