"""A publishing-only AMQP connection driven by the sending thread: publish, then read the
confirms, with no hand-over to an I/O thread.

Why: through pika's I/O thread a send costs two thread hops (``add_callback_threadsafe``
to the loop, an event set back), each a wake-up and a GIL hand-over, and pika builds and
marshals three frame objects per message on that thread while the sender waits. Here the
sending thread writes the frames of a whole batch (`frames.Publish`, in writes of about
64 KiB, so the broker starts on the first ones while the rest are built) and then reads
the confirms itself::

    send(m0..mN) ── Basic.Publish + header + body frames, few writes ──▶ broker
                 ◀── Basic.Ack / Basic.Nack (tag, multiple), Basic.Return ── (read here)

Scope: one channel (1) in confirm mode; declarations, request/reply and `delayed_ack`
stay on the pika connection. One send at a time (a lock): the socket is written and read
by one thread, which an SSL socket requires, so TLS works the same. The handshake is the
AMQP one (PLAIN or EXTERNAL through pika's credentials objects, Tune, Open) with
heartbeats off: nobody reads an idle link, and a link that died while idle is noticed
before the next send (the socket is readable: the broker's Connection.Close, or EOF), so
that send reconnects instead of failing.

Failures: a nack fails its messages (retriable), a return of a mandatory message fails
it (unroutable, not retriable), a channel closed by the broker fails what is unconfirmed
with its reason (not retriable; the channel is reopened next send), a lost connection or
no confirm within the bound fails what is unconfirmed (retriable) and drops the link,
which the next send reopens. Every wait is bounded: connect and handshake
`CONNECT_TIMEOUT`, each write and the confirms the caller's timeout.
"""

from __future__ import annotations

import platform
import select
import socket
import struct
import threading
import time
from collections.abc import Sequence
from typing import Any

from mq_bridge.endpoints.amqp.frames import Publish
from mq_bridge.errors import ConfigError, EndpointError, EndpointUnavailableError
from mq_bridge.message import Message

__all__ = ["DirectPublisher"]

CONNECT_TIMEOUT = 10.0
_MAX_PAUSE = 2.0  # the longest pause between two failed connection attempts
_WRITE_CHUNK = 1 << 16  # bytes built before they are written
_READ_SIZE = 1 << 16
_CHANNEL = 1
_FRAME_HEAD = struct.Struct(">BHI")
_METHOD_ID = struct.Struct(">HH")
_CONFIRM = struct.Struct(">QB")  # delivery tag, bits (multiple first)
_BASIC_ACK, _BASIC_NACK, _BASIC_RETURN = (60, 80), (60, 120), (60, 50)
_CONFIRMS = (_BASIC_ACK, _BASIC_NACK)
_CHANNEL_CLOSE, _CONNECTION_CLOSE = (20, 40), (10, 50)
_PROTOCOL_HEADER = b"AMQP\x00\x00\x09\x01"


class _Lost(Exception):
    """The connection is gone (EOF, socket error, Connection.Close, protocol error)."""


class DirectPublisher:
    """Publishes with confirms from the caller's thread (see the module)."""

    def __init__(
        self,
        parameters: Any,  # pika.ConnectionParameters (URL, credentials, TLS)
        target: str,
        exchange: str,
        routing_key: str,
        mandatory: bool,
        delivery_mode: int,
    ) -> None:
        self._parameters = parameters
        self._target = target
        self._exchange, self._routing_key = exchange, routing_key
        self._mandatory, self._delivery_mode = mandatory, delivery_mode
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._buffer = bytearray()
        self._frames: Publish | None = None  # set while the channel is open
        self._tag = 0  # the delivery tag of the channel's latest publish
        self._failures = 0
        self._retry_at = 0.0
        self._closed = False
        self._frame_max = 0
        self._settling: _Settling | None = None  # the send whose confirms are read
        self._expecting: tuple[int, int] | None = None  # (channel, method) `_expect` awaits
        self._expected: Any = None
        self.error: BaseException | None = None  # the latest loss, for status()

    def open(self) -> None:
        """Connect and open the channel now (the first send would otherwise)."""
        with self._lock:
            self._ready()

    # -- sending ----------------------------------------------------------------------------

    def send(
        self, messages: Sequence[Message], timeout: float, reply_to: str | None = None
    ) -> dict[int, BaseException]:
        """Publish `messages`; return once each is confirmed or failed: the failures by
        index. Raises (nothing published) when the link cannot be opened."""
        with self._lock:
            frames = self._ready()
            deadline = time.monotonic() + timeout
            settling = _Settling(messages, self._target)
            try:
                self._write(frames, settling, reply_to, deadline)
                self._settling = settling
                while settling.remaining:
                    self._read(deadline)
            except _Lost as lost:
                settling.fail_unconfirmed(self._drop(lost))
            except _ChannelClosed as closed:
                settling.fail_unconfirmed(closed.error)
            finally:
                self._settling = None
            return settling.failures

    def _write(
        self, frames: Publish, settling: _Settling, reply_to: str | None, deadline: float
    ) -> None:
        """Write the frames of every message (that encodes), about 64 KiB at a time."""
        out: list[bytes] = []
        size = 0
        key = self._routing_key
        for index, message in enumerate(settling.messages):
            settling.written = index + 1
            try:
                frames.message(message, key, reply_to, out)
            except ValueError as error:
                settling.failures[index] = EndpointError(f"{self._target}: cannot publish: {error}")
                continue
            self._tag += 1
            settling.expect(self._tag, index)
            size += len(message.payload) + 100
            if size >= _WRITE_CHUNK:
                self._sendall(b"".join(out), deadline)
                out.clear()
                size = 0
        if out:
            self._sendall(b"".join(out), deadline)

    # -- the connection ---------------------------------------------------------------------

    def _ready(self) -> Publish:
        """The open channel, (re)connecting first if needed. Lock held."""
        if self._closed:
            raise EndpointUnavailableError(f"{self._target}: the publisher was closed")
        if self._sock is not None and self._readable():
            try:  # the broker said something while we were idle: a close, most likely
                self._settling = None
                self._read(time.monotonic() + CONNECT_TIMEOUT)
            except _Lost as lost:
                self._drop(lost)
            except _ChannelClosed:
                pass
        if self._sock is None:
            self._connect()
        if self._frames is None:
            self._open_channel()
        assert self._frames is not None
        return self._frames

    def _readable(self) -> bool:
        sock = self._sock
        assert sock is not None
        if getattr(sock, "pending", None) is not None and sock.pending():  # type: ignore[attr-defined]
            return True
        readable, _, _ = select.select([sock], [], [], 0)
        return bool(readable)

    def _connect(self) -> None:
        pause = self._retry_at - time.monotonic()
        if pause > 0:
            time.sleep(min(pause, _MAX_PAUSE))
        deadline = time.monotonic() + CONNECT_TIMEOUT
        try:
            self._handshake(deadline)
        except (_Lost, OSError) as error:
            self._failures += 1
            self._retry_at = time.monotonic() + min(_MAX_PAUSE, 0.05 * 2**self._failures)
            self._drop(error)
            raise EndpointUnavailableError(f"{self._target}: cannot connect ({error})") from None
        except BaseException:
            self._drop(None)
            raise
        self._failures = 0
        self.error = None

    def _handshake(self, deadline: float) -> None:
        from pika import spec

        params = self._parameters
        sock = socket.create_connection((params.host, params.port), CONNECT_TIMEOUT)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        if params.ssl_options is not None:
            ssl_options = params.ssl_options
            try:
                sock = ssl_options.context.wrap_socket(
                    sock, server_hostname=ssl_options.server_hostname
                )
            except BaseException:
                sock.close()
                raise
        self._sock, self._buffer = sock, bytearray()
        self._tag, self._frames = 0, None
        self._sendall(_PROTOCOL_HEADER, deadline)
        start = self._expect(0, spec.Connection.Start, deadline)
        mechanism, response = params.credentials.response_for(start)
        if mechanism is None:
            raise ConfigError(
                f"{self._target}: the broker offers no authentication we can use "
                f"({start.mechanisms!r})",
                path="amqp.password",
            )
        properties = {
            "product": "mq-bridge (twainmq)",
            "platform": f"Python {platform.python_version()}",
            "capabilities": {
                "authentication_failure_close": True,
                "basic.nack": True,
                "connection.blocked": True,
                "publisher_confirms": True,
            },
            **(params.client_properties or {}),
        }
        self._call(0, spec.Connection.StartOk(properties, mechanism, response, params.locale))
        tune = self._expect(0, spec.Connection.Tune, deadline, auth=True)
        frame_max = _negotiate(params.frame_max, tune.frame_max)
        channel_max = _negotiate(params.channel_max, tune.channel_max)
        # Heartbeats off: nobody reads an idle link (see the module).
        self._call(0, spec.Connection.TuneOk(channel_max, frame_max, 0), deadline)
        self._call(0, spec.Connection.Open(params.virtual_host), deadline)
        self._expect(0, spec.Connection.OpenOk, deadline, access=True)
        self._frame_max = frame_max

    def _open_channel(self) -> None:
        from pika import spec

        deadline = time.monotonic() + CONNECT_TIMEOUT
        try:
            self._call(_CHANNEL, spec.Channel.Open(), deadline)
            self._expect(_CHANNEL, spec.Channel.OpenOk, deadline)
            self._call(_CHANNEL, spec.Confirm.Select(), deadline)
            self._expect(_CHANNEL, spec.Confirm.SelectOk, deadline)
        except _Lost as lost:
            raise self._drop(lost) from None
        except _ChannelClosed as closed:
            raise closed.error from None
        self._tag = 0
        self._frames = Publish(
            _CHANNEL, self._frame_max, self._exchange, self._mandatory, self._delivery_mode
        )

    def _call(self, channel: int, method: Any, deadline: float | None = None) -> None:
        from pika import frame

        data = frame.Method(channel, method).marshal()
        self._sendall(data, deadline or time.monotonic() + CONNECT_TIMEOUT)

    def _expect(
        self, channel: int, kind: type, deadline: float, auth: bool = False, access: bool = False
    ) -> Any:
        """Read until the method `kind` arrives on `channel` (handshake and channel setup)."""
        self._settling = None
        self._expected = None
        self._expecting = (channel, kind.INDEX)  # type: ignore[attr-defined]
        try:
            while self._expected is None:
                self._read(deadline)
        except _Lost as lost:
            code = getattr(lost, "code", None)
            if auth and code in (None, 403):
                raise ConfigError(
                    f"{self._target}: authentication failed ({lost})", path="amqp.password"
                ) from None
            if access and code in (None, 403, 530):
                raise ConfigError(
                    f"{self._target}: access denied (vhost or permissions)", path="amqp.url"
                ) from None
            raise
        finally:
            self._expecting = None
        return self._expected

    def _sendall(self, data: bytes, deadline: float) -> None:
        sock = self._sock
        if sock is None:
            raise _Lost("not connected")
        try:
            sock.settimeout(max(0.001, deadline - time.monotonic()))
            sock.sendall(data)
        except TimeoutError:
            raise _Lost("a write timed out") from None
        except OSError as error:
            raise _Lost(repr(error)) from None

    def _read(self, deadline: float) -> None:
        """Read once from the socket and handle every whole frame in the buffer."""
        sock = self._sock
        if sock is None:
            raise _Lost("not connected")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _Lost("no answer in time")
        try:
            sock.settimeout(remaining)
            data = sock.recv(_READ_SIZE)
        except TimeoutError:
            raise _Lost("no answer in time") from None
        except OSError as error:
            raise _Lost(repr(error)) from None
        if not data:
            raise _Lost("the broker closed the connection")
        buffer = self._buffer
        buffer += data
        position, end = 0, len(buffer)
        try:
            while end - position >= 8:
                kind, channel, size = _FRAME_HEAD.unpack_from(buffer, position)
                stop = position + 8 + size
                if stop > end:
                    break
                if buffer[stop - 1] != 0xCE:
                    raise _Lost("a malformed frame")
                start, position = position, stop  # consumed, even if handling it raises
                self._frame(kind, channel, buffer, start, stop)
        finally:
            del buffer[:position]

    def _frame(self, kind: int, channel: int, buffer: bytearray, start: int, stop: int) -> None:
        if kind == 1:
            method = _METHOD_ID.unpack_from(buffer, start + 7)
            settling = self._settling
            if settling is not None and method in _CONFIRMS:
                tag, bits = _CONFIRM.unpack_from(buffer, start + 11)
                settling.confirm(tag, bool(bits & 1), method == _BASIC_ACK)
                return
            self._method(channel, method, bytes(buffer[start:stop]))
        elif kind == 2 and self._settling is not None and self._settling.returning:
            from pika import frame

            _, header = frame.decode_frame(bytes(buffer[start:stop]))
            self._settling.returned(header.properties.message_id)
        # Body frames (of a returned message) and heartbeats need nothing.

    def _method(self, channel: int, method: tuple[int, int], data: bytes) -> None:
        from pika import frame, spec

        _, decoded = frame.decode_frame(data)
        arguments = decoded.method
        if method == _CONNECTION_CLOSE:
            try:
                self._call(0, spec.Connection.CloseOk())
            except _Lost:
                pass
            lost = _Lost(f"closed by the broker: {arguments.reply_code} {arguments.reply_text}")
            lost.code = arguments.reply_code  # type: ignore[attr-defined]
            raise lost
        if method == _CHANNEL_CLOSE:
            self._frames = None
            self._call(channel, spec.Channel.CloseOk())
            raise _ChannelClosed(
                EndpointError(
                    f"{self._target}: the broker closed the channel: "
                    f"{arguments.reply_code} {arguments.reply_text}"
                )
            )
        if method == _BASIC_RETURN and self._settling is not None:
            self._settling.returning = True
            return
        expecting = self._expecting
        if expecting is not None and (channel, decoded.method.INDEX) == expecting:
            self._expected = arguments
        # Anything else (Connection.Blocked/Unblocked, ...) needs no answer: waits are bounded.

    def _drop(self, reason: BaseException | None) -> EndpointUnavailableError:
        """Close the socket after a loss; the error that fails what was unconfirmed."""
        sock, self._sock = self._sock, None
        self._frames, self._buffer = None, bytearray()
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass
        error = EndpointUnavailableError(f"{self._target}: publishing link lost ({reason})")
        if reason is not None:
            self.error = error
        return error

    def close(self) -> None:
        """Close the connection: politely when idle; a send in progress is cut short (its
        unconfirmed messages fail, retriably). Idempotent."""
        self._closed = True
        if not self._lock.acquire(blocking=False):
            sock = self._sock
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)  # the sender's read ends; it drops the link
                except OSError:
                    pass
            return
        try:
            if self._sock is not None:
                from pika import spec

                try:
                    self._call(0, spec.Connection.Close(200, "closed", 0, 0))
                except _Lost:
                    pass
            self._drop(None)
        finally:
            self._lock.release()


class _ChannelClosed(Exception):
    def __init__(self, error: EndpointError) -> None:
        super().__init__(str(error))
        self.error = error


class _Settling:
    """The confirms one send waits for: delivery tags mapped to message indexes."""

    __slots__ = ("_by_tag", "_low", "_returned", "_target", "failures", "messages",
                 "remaining", "returning", "written")  # fmt: skip

    def __init__(self, messages: Sequence[Message], target: str) -> None:
        self.messages = messages
        self.failures: dict[int, BaseException] = {}
        self.remaining = 0  # published, not confirmed yet
        self.written = 0  # messages[:written] were encoded (and published, or failed)
        self.returning = False  # a Basic.Return came: its header frame is next
        self._by_tag: dict[int, int] = {}  # unconfirmed tag -> index
        self._low = 0  # no unconfirmed tag below this one
        self._returned: set[str] = set()
        self._target = target

    def expect(self, tag: int, index: int) -> None:
        if not self._by_tag and not self.remaining:
            self._low = tag
        self._by_tag[tag] = index
        self.remaining += 1

    def confirm(self, tag: int, multiple: bool, acked: bool) -> None:
        by_tag = self._by_tag
        for each in range(self._low, tag + 1) if multiple else (tag,):
            index = by_tag.pop(each, None)
            if index is None:
                continue
            self.remaining -= 1
            if not acked:
                self.failures[index] = EndpointUnavailableError(
                    f"{self._target}: the broker nacked the message"
                )
            elif self._returned:
                message_id = self.messages[index].assigned_id()
                if message_id in self._returned:
                    self._returned.discard(message_id)
                    self.failures[index] = EndpointError(
                        f"{self._target}: unroutable: no queue took the message"
                    )
        if multiple and tag >= self._low:
            self._low = tag + 1

    def returned(self, message_id: str | None) -> None:
        """A Basic.Return's header: its message is acked next, and fails."""
        self.returning = False
        if message_id is not None:
            self._returned.add(message_id)

    def fail_unconfirmed(self, error: BaseException) -> None:
        """Fail every message not confirmed: published ones and those never written."""
        for index in self._by_tag.values():
            self.failures.setdefault(index, error)
        for index in range(self.written, len(self.messages)):
            self.failures.setdefault(index, error)
        self._by_tag.clear()
        self.remaining = 0


def _negotiate(client: int | None, server: int | None) -> int:
    """AMQP tuning: the smaller value, 0 meaning no limit."""
    client, server = client or 0, server or 0
    return max(client, server) if client == 0 or server == 0 else min(client, server)
