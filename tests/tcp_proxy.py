"""A TCP proxy on a free loopback port, in front of a real server, for tests that need the
connection between a client and its broker to fail on cue.

    proxy = TcpProxy(("127.0.0.1", 5672))              # plain bytes both ways
    proxy = TcpProxy(upstream, tls=server_context)     # the client speaks TLS to the proxy
    context = self_signed_context(tmp_path)            # ... with tmp_path/"cert.pem" to trust
    proxy.drop_connections()                           # both sides of every connection cut
    proxy.close()

Each accepted client gets its own upstream connection and two pump threads. A subclass that
needs to look at the traffic (drop an ack, count pings) overrides `relay`, one direction at
a time. A client whose TLS handshake fails is refused, and the proxy keeps accepting.
"""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import threading
from pathlib import Path

import pytest

__all__ = ["TcpProxy", "cut", "self_signed_context"]


class TcpProxy:
    """Forwards each client on `port` to `upstream`; counts the clients in `connections`."""

    def __init__(self, upstream: tuple[str, int], tls: ssl.SSLContext | None = None) -> None:
        self._upstream, self._tls = upstream, tls
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self.connections = 0
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def relay(self, source: socket.socket, sink: socket.socket, from_upstream: bool) -> None:
        """Copy what `source` sends to `sink` until either end goes; override to interfere."""
        while data := source.recv(65536):
            sink.sendall(data)

    def drop_connections(self) -> None:
        """Cut every connection made so far, both sides (the listener stays)."""
        cut(*self._sockets)

    def close(self) -> None:
        self._listener.close()
        self.drop_connections()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            try:
                if self._tls is not None:
                    client = self._tls.wrap_socket(client, server_side=True)
            except OSError:
                client.close()  # a client that does not trust us: refused handshake
                continue
            self.connections += 1
            upstream = socket.create_connection(self._upstream, 5)
            upstream.settimeout(None)
            self._sockets += [client, upstream]
            for source, sink, from_upstream in (
                (client, upstream, False),
                (upstream, client, True),
            ):
                threading.Thread(
                    target=self._pump, args=(source, sink, from_upstream), daemon=True
                ).start()

    def _pump(self, source: socket.socket, sink: socket.socket, from_upstream: bool) -> None:
        try:
            self.relay(source, sink, from_upstream)
        except OSError:
            pass
        cut(source, sink)


def cut(*ends: socket.socket) -> None:
    """Close at once: a shutdown wakes the other pump's recv, a close alone would not."""
    for end in ends:
        try:
            end.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        end.close()


def self_signed_context(directory: Path) -> ssl.SSLContext:
    """A TLS server context for ``localhost``/127.0.0.1, its certificate (the one a client
    must trust) written to `directory`/cert.pem; skips the test without ``openssl``."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", "key.pem", "-out", "cert.pem", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        cwd=directory, check=True, capture_output=True, timeout=30,
    )  # fmt: skip
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(directory / "cert.pem", directory / "key.pem")
    return context
