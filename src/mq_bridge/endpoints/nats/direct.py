"""A small synchronous NATS client for the endpoint's hot paths: JetStream publishes with
their PubAcks, pull requests with their deliveries, acks.

Why: nats-py lives on the kit's asyncio loop thread, so every send or pull from a route's
thread costs two thread hops (``call_soon_threadsafe`` to the loop, a lock released back),
each a wake-up and a GIL hand-over of tens of µs: most of a one-at-a-time send. Here the
caller's thread writes the protocol bytes (``sendall``) and reads the answers itself.

Scope: plain ``nats://`` servers, with user/password or a token (options or URL userinfo).
TLS and WebSocket servers take `link.LoopLink` (nats-py) instead: this client reads and
writes one socket from two threads at once, which an SSL object does not allow.

Threads: any thread may write (a lock keeps each write whole); one thread at a time reads.
`wait(event)` makes its caller the reader until `event` is set, or, while another thread
reads, waits for that one to set it. Whoever reads hands each message to its
subscription's handler and answers the server's PINGs.

Connection loss: the socket is dropped, every `wait` in progress raises
`EndpointUnavailableError` (retriable), and the next call connects again (each server once,
`CONNECT_TIMEOUT` each), subscribing again. A connection unused for `IDLE_CHECK` seconds is
checked before use (its PINGs answered, a close by the server noticed), so a call on it
starts on a live connection.
"""

from __future__ import annotations

import json
import logging
import secrets
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from urllib.parse import unquote, urlsplit

from mq_bridge.endpoints.nats.options import NatsOptions
from mq_bridge.errors import ConfigError, EndpointUnavailableError

__all__ = ["CONNECT_TIMEOUT", "DirectLink", "TlsRequiredError"]

log = logging.getLogger("mq_bridge.endpoints.nats")

#: ``handler(subject, reply, payload, header_block)``, called on the reading thread.
RawHandler = Callable[[bytes, bytes, bytes, "bytes | None"], None]

CONNECT_TIMEOUT = 3.0
IDLE_CHECK = 10.0
_SLICE = 0.05  # longest single socket read: a waiter checks its event this often
_READ_SIZE = 1 << 16
_WRITE_TIMEOUT = 5.0  # bound on each blocked send
_PING = b"PING\r\n"
_PONG = b"PONG\r\n"


class TlsRequiredError(EndpointUnavailableError):
    """The server asks for TLS: use `link.LoopLink` for it."""


class _Server:
    __slots__ = ("host", "password", "port", "token", "user", "where")

    def __init__(self, url: str, options: NatsOptions) -> None:
        parts = urlsplit(url if "://" in url else f"nats://{url}")
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 4222
        self.where = f"{self.host}:{self.port}"
        self.user, self.password, self.token = options.username, options.password, options.token
        if parts.username and options.username is None and options.token is None:
            if parts.password is None:
                self.token = unquote(parts.username)
            else:
                self.user, self.password = unquote(parts.username), unquote(parts.password)

    def connect_command(self) -> bytes:
        fields: dict[str, object] = {
            "verbose": False,
            "pedantic": False,
            "protocol": 1,
            "headers": True,
            "no_responders": True,
            "lang": "python3",
            "version": "mq-bridge-direct",
            "name": "mq-bridge-py",
        }
        if self.user is not None:
            fields["user"], fields["pass"] = self.user, self.password or ""
        if self.token is not None:
            fields["auth_token"] = self.token
        return b"CONNECT %s\r\nPING\r\n" % json.dumps(fields).encode()


class DirectLink:
    """A NATS connection used from the callers' own threads (see the module)."""

    def __init__(self, options: NatsOptions) -> None:
        self._servers = [_Server(url, options) for url in options.servers]
        self._sock: socket.socket | None = None
        self._poller = select.poll()
        self._closed = False
        self._generation = 0  # one more on every connect and every loss
        self._write_lock = threading.Lock()
        self._read_lock = threading.Lock()  # taken before the write lock, never after
        self._pending = b""  # bytes read, not yet parsed
        self._pongs: deque[threading.Event] = deque()
        self._owed_pongs = 0  # PINGs of the server not answered yet
        self._handlers: dict[bytes, RawHandler] = {}  # by sid
        self._subjects: dict[bytes, bytes] = {}
        self._sids = 0
        self._last_read = 0.0
        self._prefix = f"_INBOX.{secrets.token_hex(11)}"
        self.max_payload = 1 << 20

    # -- the Link interface ----------------------------------------------------------------

    @property
    def is_connected(self) -> bool:
        return self._sock is not None

    @property
    def generation(self) -> int:
        return self._generation

    def new_inbox(self) -> str:
        self._sids += 1
        return f"{self._prefix}.{self._sids}"

    def ensure(self, deadline: float | None = None) -> None:
        """Connected from here on (connecting now if need be), else the retriable error."""
        if self._closed:
            raise EndpointUnavailableError("nats: the connection was closed")
        if self._sock is not None and time.monotonic() - self._last_read > IDLE_CHECK:
            self._check_idle()
        if self._sock is None:
            with self._read_lock, self._write_lock:
                if self._sock is None and not self._closed:
                    self._connect()

    def subscribe(self, subject: str, handler: RawHandler) -> bytes:
        """Subscribe `subject` (again after each reconnect); its messages go to `handler`."""
        self._sids += 1
        sid = b"%d" % self._sids
        self._handlers[sid], self._subjects[sid] = handler, subject.encode()
        self.write(b"SUB %s %s\r\n" % (self._subjects[sid], sid))
        return sid

    def unsubscribe(self, sid: bytes) -> None:
        self._handlers.pop(sid, None)
        self._subjects.pop(sid, None)
        if self._sock is not None:
            self.write(b"UNSUB %s\r\n" % sid)

    def write(self, data: bytes) -> None:
        """Send `data` whole; `EndpointUnavailableError` when the connection is lost."""
        self.ensure()
        with self._write_lock:
            self._send(data)

    def wait(self, done: threading.Event, timeout: float) -> bool:
        """Read until `done` is set (True) or `timeout` passes (False); raises the retriable
        `EndpointUnavailableError` when the connection is lost meanwhile."""
        deadline = time.monotonic() + timeout
        generation = self._generation
        while not done.is_set():
            if self._generation != generation or self._sock is None:
                raise EndpointUnavailableError("nats: the connection was lost")
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if self._read_lock.acquire(blocking=False):
                try:
                    while not done.is_set() and self._generation == generation:
                        left = deadline - time.monotonic()
                        if left <= 0:
                            return False
                        self._read(min(left, _SLICE))
                finally:
                    self._read_lock.release()
            else:  # another thread reads: it sets `done`, or lets go of the socket
                done.wait(min(left, 0.002))
        return True

    def flush(self, timeout: float) -> None:
        """Return once the server has read everything written before (PING, PONG)."""
        self.ensure()
        pong = threading.Event()
        with self._write_lock:
            generation = self._generation
            self._pongs.append(pong)
            self._send(_PING)
        if not self.wait(pong, timeout):
            raise EndpointUnavailableError(f"nats: no PONG within {timeout:g} s")
        if self._generation != generation:
            raise EndpointUnavailableError("nats: the connection was lost")

    def close(self) -> None:
        self._closed = True
        with self._write_lock:
            self._lost(self._generation, None)

    # -- writing (holding the write lock) --------------------------------------------------

    def _send(self, data: bytes) -> None:
        sock, generation = self._sock, self._generation
        if sock is None:
            raise EndpointUnavailableError("nats: the connection was lost")
        if self._owed_pongs:
            data, self._owed_pongs = _PONG * self._owed_pongs + data, 0
        try:
            sock.sendall(data)
        except OSError as error:
            self._lost(generation, error)
            raise EndpointUnavailableError(f"nats: writing failed: {error!r}") from error

    # -- reading (holding the read lock) ---------------------------------------------------

    def _read(self, timeout: float) -> None:
        sock, generation = self._sock, self._generation
        if sock is None:
            return
        try:
            if not self._poller.poll(timeout * 1000):
                return
            chunk = sock.recv(_READ_SIZE)
        except OSError as error:
            self._lost(generation, error)
            return
        if not chunk:
            self._lost(generation, ConnectionResetError("closed by the server"))
            return
        self._last_read = time.monotonic()
        self._parse(self._pending + chunk if self._pending else chunk)

    def _parse(self, data: bytes) -> None:
        """Hand over every whole message in `data`; keep the rest for the next read."""
        handlers, position, size = self._handlers, 0, len(data)
        while (end := data.find(b"\r\n", position)) >= 0:
            if data.startswith(b"HMSG ", position):
                words = data[position:end].split(b" ")
                header_size, total = int(words[-2]), int(words[-1])
                reply = words[3] if len(words) == 6 else b""
            elif data.startswith(b"MSG ", position):
                words = data[position:end].split(b" ")
                header_size, total = -1, int(words[-1])
                reply = words[3] if len(words) == 5 else b""
            else:
                self._control(data[position:end])
                position = end + 2
                continue
            start = end + 2
            if start + total + 2 > size:
                break  # the rest of the message is still to come
            position = start + total + 2
            handler = handlers.get(words[2])
            if handler is None:
                continue
            if header_size < 0:
                header, payload = None, data[start : start + total]
            else:
                split = start + header_size
                header, payload = data[start:split], data[split : start + total]
            try:
                handler(words[1], reply, payload, header)
            except Exception:  # a handler bug must not break the connection
                log.exception("nats: handling a message on %r failed", words[1])
        self._pending = data[position:]
        if self._owed_pongs and self._write_lock.acquire(blocking=False):
            try:
                self._send(b"")
            except EndpointUnavailableError:
                pass
            finally:
                self._write_lock.release()

    def _control(self, line: bytes) -> None:
        if line == b"PING":
            self._owed_pongs += 1  # sent now or with the next write (see _parse)
        elif line == b"PONG":
            if self._pongs:
                self._pongs.popleft().set()
        elif line.startswith(b"-ERR"):
            log.warning("nats: the server says %s", line.decode("utf-8", "replace"))
        elif line.startswith(b"INFO "):
            self._info(line)

    def _check_idle(self) -> None:
        """Answer what arrived while nobody read; notice a connection the server closed."""
        if not self._read_lock.acquire(blocking=False):
            return  # someone is reading: it is alive
        try:
            self._read(0)
            self._last_read = time.monotonic()
        finally:
            self._read_lock.release()

    def _info(self, line: bytes) -> dict[str, object]:
        info: dict[str, object] = json.loads(line[5:])
        max_payload = info.get("max_payload")
        if isinstance(max_payload, int):
            self.max_payload = max_payload
        return info

    # -- connecting (holding both locks) -----------------------------------------------------

    def _connect(self) -> None:
        errors = []
        for server in self._servers:
            try:
                sock, rest = self._handshake(server)
                subscriptions = b"".join(
                    b"SUB %s %s\r\n" % (subject, sid) for sid, subject in self._subjects.items()
                )
                sock.sendall(subscriptions)
            except (OSError, ValueError) as error:
                errors.append(f"{server.where}: {error!r}")
                continue
            self._sock, self._pending, self._owed_pongs = sock, rest, 0
            self._poller = select.poll()
            self._poller.register(sock, select.POLLIN)
            self._generation += 1
            self._last_read = time.monotonic()
            return
        raise EndpointUnavailableError(f"nats: cannot connect: {'; '.join(errors)}")

    def _handshake(self, server: _Server) -> tuple[socket.socket, bytes]:
        """A socket past CONNECT (and the bytes read after the PONG that confirms it)."""
        sock = socket.create_connection((server.host, server.port), CONNECT_TIMEOUT)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            buffer = b""
            connected = False
            while True:
                while b"\r\n" not in buffer:
                    chunk = sock.recv(_READ_SIZE)
                    if not chunk:
                        raise ConnectionResetError("closed by the server during the handshake")
                    buffer += chunk
                line, buffer = buffer.split(b"\r\n", 1)
                if line.startswith(b"INFO ") and not connected:
                    if self._info(line).get("tls_required"):
                        raise TlsRequiredError(f"nats: {server.where} requires TLS")
                    sock.sendall(server.connect_command())
                    connected = True
                elif line.startswith(b"-ERR"):
                    raise _refused(line, server)
                elif line == b"PING":
                    sock.sendall(_PONG)
                elif line == b"PONG" and connected:
                    sock.settimeout(_WRITE_TIMEOUT)
                    return sock, buffer
        except BaseException:
            sock.close()
            raise

    def _lost(self, generation: int, error: BaseException | None) -> None:
        """Drop the connection (once per loss), waking every waiter."""
        if self._generation != generation:
            return
        sock, self._sock = self._sock, None
        self._generation += 1
        while self._pongs:
            self._pongs.popleft().set()
        if sock is not None:
            sock.close()
        if error is not None and not self._closed:
            log.warning("nats: lost the connection (%r); reconnecting on the next call", error)


def _refused(line: bytes, server: _Server) -> Exception:
    text = line[4:].decode("utf-8", "replace").strip(" '")
    if "authorization" in text.lower() or "authentication" in text.lower():
        message = f"the server {server.where} refused the credentials ({text})"
        return ConfigError(message, "nats.username")
    return ValueError(text)
