"""A small synchronous MQTT publisher, driven by the threads that send: the output's client.

Why: with paho, a send hands its PUBLISH to paho's network thread and sleeps until that
thread has read the PUBACK (with several small ``recv`` calls) and woken it: two thread
hand-overs of the GIL per message, most of a one-at-a-time send. Here the sending thread
writes the packets itself (``sendall``) and reads the acknowledgements itself, every ack
that has arrived in one ``recv``.

TCP_QUICKACK after a read while more acks are due (Linux): Mosquitto writes each PUBACK as
it goes, without TCP_NODELAY, so Nagle holds its next PUBACKs until our kernel
acknowledges the last segment, which it delays. Pipelined batches then crawl at one short
burst of acks per round of delayed ACKs (~10k msg/s here); acknowledging at once lifts
them ~7x. (With nothing more due, the next PUBLISH carries the ACK.)

Protocol: CONNECT with a clean start (no session is kept) and CONNACK; PUBLISH at QoS 0, 1
and 2 (PUBACK; PUBREC, PUBREL, PUBCOMP); PINGREQ when idle; DISCONNECT at close. v3.1.1
and v5 (its properties packed by the caller), plain TCP or TLS.

Threads: any number may `publish` at once on one connection. One lock (`_io`) keeps each
write whole and each read alone (an SSL object allows no concurrent use); one sender at a
time is the reader, reading for everyone until its own messages are acknowledged, while
the others wait on `_progress`. At most `window` messages are unacknowledged: ours
(`max_inflight`) or the broker's Receive Maximum (v5), whichever is smaller; a larger batch
sends more as acks come in. A keep-alive thread sends PINGREQ when the connection has been
idle for half the keep-alive, so the broker never drops an idle publisher; it also
notices a connection the broker closed, and so does a send after a second without writes
(one non-blocking read): the send then starts on a new connection instead of failing.

Connection loss: the socket is dropped, and each send in progress fails its unacknowledged
messages with `EndpointUnavailableError` (retriable); the next call connects again. Every
wait is bounded: connecting by its timeout, writes by `WRITE_TIMEOUT`, acks by
`ACK_TIMEOUT` (the connection is then dropped, as it cannot be trusted).
"""

from __future__ import annotations

import logging
import select
import socket
import ssl
import threading
import time
from collections.abc import Sequence

from mq_bridge.endpoints.kit.tls import ssl_context
from mq_bridge.endpoints.mqtt import wire
from mq_bridge.endpoints.mqtt.options import MqttOptions
from mq_bridge.errors import (
    ClosedError,
    ConfigError,
    EndpointError,
    EndpointUnavailableError,
    SendError,
)

__all__ = ["ACK_TIMEOUT", "DirectPublisher"]

log = logging.getLogger("mq_bridge.endpoints.mqtt")

ACK_TIMEOUT = 30.0  # the longest wait for a PUBACK/PUBCOMP on a live connection
WRITE_TIMEOUT = 5.0  # the longest blocked write
_IDLE_CHECK = 1.0  # a send after this long without a write first checks the connection
_SLICE = 0.05  # the longest single wait: a waiter checks for loss, close and its deadline
_READ_SIZE = 1 << 16
_QUICKACK = getattr(socket, "TCP_QUICKACK", 0)


class _Ticket:
    """One `publish` call: how many of its messages are unacknowledged, which failed."""

    __slots__ = ("refused", "remaining", "unacknowledged")

    def __init__(self, count: int) -> None:
        self.remaining = count
        self.refused: dict[int, str] = {}  # index -> the broker's reason (v5, >= 0x80)
        self.unacknowledged: list[int] = []  # indices on the wire when the connection was lost


class DirectPublisher:
    """One MQTT connection publishing from its callers' threads (see the module)."""

    def __init__(self, options: MqttOptions, client_id: str, window: int) -> None:
        self.options = options
        self.client_id = client_id
        self.v5 = options.protocol_version == "v5"
        self._where = options.describe()
        self._tls = ssl_context(options.tls, options.url, path="mqtt.tls")
        self._limit = max(1, min(window, 65535))
        self._window = self._limit
        self._io = threading.Lock()  # the socket and the state below
        self._reader = threading.Lock()  # whoever holds it reads for everyone
        self._progress = threading.Condition(threading.Lock())
        self._watchers = 0  # senders waiting on `_progress`
        self._sock: socket.socket | ssl.SSLSocket | None = None
        self._poller = select.poll()
        self._generation = 0  # one more at every connect and every loss
        self._pending: dict[int, tuple[_Ticket, int]] = {}  # packet id -> (ticket, index)
        self._free = 0  # room in the window
        self._packet_id = 0
        self._rest = b""  # bytes read, not parsed yet
        self._last_write = 0.0
        self._pinged = False  # a PINGREQ is unanswered
        self._closed = False
        self._stop = threading.Event()
        self._keeper: threading.Thread | None = None

    # -- use ------------------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        return self._sock is not None

    def open(self, timeout: float) -> None:
        """Connect within `timeout` (or raise), and start the keep-alive thread."""
        self.ensure(timeout)
        if self.options.keep_alive and self._keeper is None:
            self._keeper = threading.Thread(
                target=self._keep_alive, name=f"mqtt-keepalive-{self.client_id}", daemon=True
            )
            self._keeper.start()

    def ensure(self, timeout: float) -> int:
        """The connection's generation, connecting first (within `timeout`) if need be."""
        if self._closed:
            raise ClosedError(f"{self._where} is closed")
        if self._sock is not None and time.monotonic() - self._last_write > _IDLE_CHECK:
            self._check_idle()
        if self._sock is None:
            with self._reader, self._io:
                if self._sock is None and not self._closed:
                    self._connect(timeout)
        return self._generation

    def publish(self, items: Sequence[tuple[bytes, bytes]], qos: int, timeout: float) -> None:
        """Publish each ``(head, tail)`` of `wire.publish_parts`; return once every one was
        acknowledged (QoS 1: PUBACK, QoS 2: PUBCOMP; QoS 0: written). Raises the retriable
        `EndpointUnavailableError` when none is known to have arrived, else `SendError`
        with exactly the unacknowledged (retriable) and refused (not retriable) ones."""
        generation = self.ensure(timeout)
        if not qos:
            with self._io:
                self._send(b"".join([head + tail for head, tail in items]), generation)
            if self._generation != generation:
                raise self._failure(_Ticket(len(items)), 0, len(items))
            return
        ticket, count, sent = _Ticket(len(items)), len(items), 0
        remaining, deadline = count, time.monotonic() + ACK_TIMEOUT
        while True:
            if sent < count and self._free:
                sent = self._write(ticket, items, sent, generation)
            if not ticket.remaining:
                break
            if self._generation != generation:
                raise self._failure(ticket, sent, count)
            now = time.monotonic()
            if ticket.remaining < remaining:  # progress: the bound is on silence
                remaining, deadline = ticket.remaining, now + ACK_TIMEOUT
            elif now > deadline:
                with self._io:
                    self._lost(generation, TimeoutError(f"no ack within {ACK_TIMEOUT:g} s"))
                raise self._failure(ticket, sent, count)
            self._await()
        if ticket.refused:
            raise self._failure(ticket, count, count)

    def close(self) -> None:
        """DISCONNECT and drop the connection; waiting senders raise `ClosedError`."""
        self._closed = True
        self._stop.set()
        with self._io:
            sock = self._sock
            if sock is not None:
                try:
                    sock.sendall(wire.DISCONNECT)
                except OSError:
                    pass
            self._lost(self._generation, None)
        with self._progress:
            self._progress.notify_all()
        keeper = self._keeper
        if keeper is not None and keeper is not threading.current_thread():
            keeper.join(WRITE_TIMEOUT + 1)

    # -- sending --------------------------------------------------------------------------

    def _write(
        self, ticket: _Ticket, items: Sequence[tuple[bytes, bytes]], sent: int, generation: int
    ) -> int:
        """Write as many of `items` (from `sent` on) as the window has room for."""
        with self._io:
            if self._generation != generation:
                return sent
            count = min(len(items) - sent, self._free)
            if count <= 0:
                return sent
            self._free -= count
            pending, packet_id = self._pending, self._packet_id
            parts: list[bytes] = []
            for index in range(sent, sent + count):
                packet_id = packet_id % 0xFFFF + 1
                while packet_id in pending:
                    packet_id = packet_id % 0xFFFF + 1
                pending[packet_id] = (ticket, index)
                head, tail = items[index]
                parts += (head, packet_id.to_bytes(2, "big"), tail)
            self._packet_id = packet_id
            self._send(b"".join(parts), generation)
        return sent + count

    def _send(self, data: bytes, generation: int) -> None:
        """Write `data` whole (holding `_io`); a failure drops the connection."""
        sock = self._sock
        if sock is None or self._generation != generation:
            return  # lost meanwhile: the caller sees the new generation
        try:
            sock.sendall(data)
        except OSError as error:
            self._lost(generation, error)
        self._last_write = time.monotonic()

    def _failure(self, ticket: _Ticket, sent: int, count: int) -> Exception:
        """The error of a publish: its unacknowledged messages (those on the wire at the
        loss, and those not sent yet) and its refused ones."""
        if self._closed:
            return ClosedError(f"{self._where} is closed")
        lost = EndpointUnavailableError(
            f"{self._where}: the connection was lost before the broker acknowledged"
        )
        failures: dict[int, Exception] = dict.fromkeys(
            [*ticket.unacknowledged, *range(sent, count)], lost
        )
        for index, reason in ticket.refused.items():
            failures[index] = EndpointError(f"{self._where}: the broker refused: {reason}")
        if count == 1:
            return failures[0]
        if len(failures) == count and not ticket.refused:
            return lost  # nothing is known to have arrived
        return SendError(dict(sorted(failures.items())))

    # -- reading --------------------------------------------------------------------------

    def _await(self) -> None:
        """Read once as the reader, or wait for the reader to make progress."""
        if self._reader.acquire(blocking=False):
            try:
                self._read(_SLICE)
            finally:
                self._reader.release()
            self._notify()
        else:
            with self._progress:
                self._watchers += 1
                try:
                    if self._reader.locked():  # else: it was let go of, become the reader
                        self._progress.wait(_SLICE)
                finally:
                    self._watchers -= 1

    def _notify(self) -> None:
        """Wake the waiting senders (after a read, and when the reader lets go)."""
        if self._watchers:
            with self._progress:
                self._progress.notify_all()

    def _read(self, timeout: float) -> None:
        """Wait up to `timeout` for bytes, then read and handle what arrived (holding
        `_reader`)."""
        sock, generation = self._sock, self._generation
        if sock is None:
            return
        if not (isinstance(sock, ssl.SSLSocket) and sock.pending()):
            try:
                if not self._poller.poll(timeout * 1000):
                    return
            except (OSError, ValueError):  # closed meanwhile
                return
        with self._io:
            if self._generation != generation:
                return
            try:
                data = sock.recv(_READ_SIZE)
            except OSError as error:
                self._lost(generation, error)
                return
            if not data:
                self._lost(generation, ConnectionResetError("closed by the broker"))
                return
            self._handle(self._rest + data if self._rest else data, generation)
            if self._pending and _QUICKACK and self._generation == generation:
                try:  # more acks to come: ACK what came now, or Nagle holds them
                    sock.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)
                except OSError:
                    pass

    def _handle(self, data: bytes, generation: int) -> None:
        """Act on every whole packet in `data`, keep the rest (holding `_io`)."""
        position, size, pending, answers = 0, len(data), self._pending, []
        freed = 0
        while position + 2 <= size:
            length, start = data[position + 1], position + 2
            if length & 0x80:
                length, start = _length(data, position + 1)
                if start < 0:
                    break
            end = start + length
            if end > size:
                break
            kind = data[position] & 0xF0
            position = end
            if kind in (0x40, 0x50, 0x70):  # PUBACK, PUBREC, PUBCOMP
                packet_id = data[start] << 8 | data[start + 1]
                reason = data[start + 2] if length > 2 else 0
                if kind == 0x50 and reason < 0x80:
                    answers.append(wire.pubrel(data[start : start + 2]))
                    continue
                entry = pending.pop(packet_id, None)
                if entry is None:
                    continue
                ticket, index = entry
                ticket.remaining -= 1
                freed += 1
                if reason >= 0x80:
                    ticket.refused[index] = wire.reason_text(reason)
            elif kind == 0xD0:  # PINGRESP
                self._pinged = False
            elif kind == 0xE0:  # DISCONNECT (v5): the broker closes the connection
                reason = data[start] if length else 0
                self._lost(generation, ConnectionAbortedError(wire.reason_text(reason)))
                return
        self._free += freed
        self._rest = data[position:]
        if answers:
            self._send(b"".join(answers), generation)

    # -- the connection -------------------------------------------------------------------

    def _connect(self, timeout: float) -> None:
        """Connect, CONNECT and read the CONNACK (holding both locks)."""
        address = self.options.address
        deadline = time.monotonic() + timeout
        try:
            sock = socket.create_connection((address.host, address.port), timeout)
        except OSError as error:
            raise EndpointUnavailableError(f"{self._where}: cannot connect: {error}") from error
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._tls is not None:
                sock = self._tls.wrap_socket(sock, server_hostname=address.host)
            username, password = self.options.credentials
            sock.sendall(
                wire.connect_packet(
                    self.client_id,
                    v5=self.v5,
                    keep_alive=self.options.keep_alive,
                    username=username,
                    password=password,
                )
            )
            connack, rest = self._read_connack(sock, deadline)
        except ssl.SSLCertVerificationError as error:
            sock.close()
            raise EndpointUnavailableError(f"{self._where}: TLS: {error}") from error
        except (OSError, ValueError) as error:
            sock.close()
            raise EndpointUnavailableError(f"{self._where}: cannot connect: {error!r}") from error
        except BaseException:
            sock.close()
            raise
        if connack.code:
            sock.close()
            raise self._refusal(connack)
        sock.settimeout(WRITE_TIMEOUT)
        self._sock, self._rest, self._pinged = sock, rest, False
        self._poller = select.poll()
        self._poller.register(sock, select.POLLIN)
        self._window = min(self._limit, connack.receive_maximum or 65535)
        self._free, self._pending = self._window, {}
        self._generation += 1
        self._last_write = time.monotonic()

    def _read_connack(self, sock: socket.socket, deadline: float) -> tuple[wire.ConnAck, bytes]:
        buffer = b""
        while True:
            if len(buffer) >= 2:
                length, start = _length(buffer, 1)
                if start > 0 and len(buffer) >= start + length:
                    if buffer[0] != 0x20:
                        raise ValueError(f"expected a CONNACK, got packet type {buffer[0] >> 4}")
                    body, rest = buffer[start : start + length], buffer[start + length :]
                    return wire.parse_connack(body, self.v5), rest
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no CONNACK in time")
            sock.settimeout(left)
            chunk = sock.recv(_READ_SIZE)
            if not chunk:
                raise ConnectionResetError("closed by the broker before the CONNACK")
            buffer += chunk

    def _refusal(self, connack: wire.ConnAck) -> Exception:
        reason = wire.reason_text(connack.code, self.v5)
        if connack.reason:
            reason += f": {connack.reason}"
        if wire.refuses_credentials(connack.code, self.v5):
            field = "mqtt.password" if self.options.credentials[0] else "mqtt.username"
            message = f"{self._where}: the broker refused the credentials ({reason})"
            return ConfigError(message, field)
        return EndpointUnavailableError(f"{self._where}: the broker refused: {reason}")

    def _lost(self, generation: int, error: BaseException | None) -> None:
        """Drop the connection once (holding `_io`): every send in progress fails what it
        has on the wire, and the next call connects again."""
        if self._generation != generation or self._sock is None:
            return
        sock, self._sock = self._sock, None
        self._generation += 1
        for ticket, index in self._pending.values():
            ticket.unacknowledged.append(index)
        self._pending, self._free, self._rest = {}, 0, b""
        sock.close()
        if error is not None and not self._closed:
            log.warning(
                "%s: connection lost (%r); reconnecting at the next send", self._where, error
            )

    def _check_idle(self) -> None:
        """Read what came while nobody read: a connection the broker closed is dropped
        now, so the send starts on a new one instead of failing."""
        if self._reader.acquire(blocking=False):
            try:
                self._read(0)
            finally:
                self._reader.release()

    def _keep_alive(self) -> None:
        """PINGREQ after half the keep-alive without a write; a connection whose PINGRESP
        does not come within the other half is dropped."""
        half = self.options.keep_alive / 2
        while not self._stop.wait(min(half, 1.0)):
            if self._sock is None or time.monotonic() - self._last_write < half:
                continue
            if not self._reader.acquire(blocking=False):
                continue  # a sender is reading: the connection is in use
            try:
                self._ping(half)
            finally:
                self._reader.release()
                self._notify()

    def _ping(self, timeout: float) -> None:
        with self._io:
            generation = self._generation
            self._pinged = True
            self._send(wire.PINGREQ, generation)
        deadline = time.monotonic() + timeout
        while self._pinged and self._generation == generation and not self._stop.is_set():
            if time.monotonic() > deadline:
                with self._io:
                    self._lost(generation, TimeoutError("no PINGRESP"))
                return
            self._read(_SLICE)
            self._notify()


def _length(data: bytes, position: int) -> tuple[int, int]:
    """The remaining length at `position` and where the packet's body starts (-1: the
    length is not all there yet)."""
    value, shift = 0, 0
    for index in range(position, min(position + 4, len(data))):
        byte = data[index]
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, index + 1
        shift += 7
    return 0, -1
