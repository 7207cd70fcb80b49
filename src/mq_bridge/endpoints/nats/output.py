"""The `nats` output: publishes to a subject (JetStream, or core with `no_jetstream`).

What a returning `send` / `send_one` means:

- JetStream: the stream stored every message: each was published with a reply subject of
  the endpoint's inbox and its PubAck came back (a batch is published in one write and
  its PubAcks awaited together). A PubAck with an error, or none within `ACK_TIMEOUT`,
  fails that message (`SendError` names which; a missing PubAck is retriable).
- core NATS: the server has read the messages (a flush: PING/PONG after them); core NATS
  keeps nothing for a subject nobody subscribes.
- `delayed_ack: true`: the messages are in the client's outgoing buffer; `flush()` waits
  for the server. A JetStream publish then asks for no PubAck at all.

`request_reply`: each message is a native NATS request with its headers; `request`
returns the reply, `send` waits for each reply and drops it.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from mq_bridge.endpoints.base import BuildContext, EndpointStatus, OutputEndpoint
from mq_bridge.endpoints.kit.drivers import require_driver
from mq_bridge.endpoints.nats.codec import decode_headers, header_block, status_of
from mq_bridge.endpoints.nats.options import NatsOptions
from mq_bridge.errors import (
    ClosedError,
    EndpointError,
    EndpointUnavailableError,
    RequestTimeoutError,
    SendError,
)
from mq_bridge.message import Message

if TYPE_CHECKING:
    from mq_bridge.endpoints.kit.connections import Lease
    from mq_bridge.endpoints.nats.connection import FastClient
    from mq_bridge.endpoints.nats.link import Link

__all__ = ["ACK_TIMEOUT", "NatsOutput"]

#: The longest wait for a batch's PubAcks (mq-bridge waits 5 s too).
ACK_TIMEOUT = 5.0


class _Waiter:
    """The answers one `send` or `request` waits for, filled on the reading thread."""

    __slots__ = ("done", "failures", "remaining", "replies")

    def __init__(self, count: int) -> None:
        self.remaining = count
        self.failures: dict[int, BaseException] = {}
        self.replies: dict[int, tuple[bytes, bytes | None]] = {}
        self.done = threading.Event()  # set when the last answer arrives
        if count <= 0:
            self.done.set()

    def answer(self, index: int, payload: bytes, header: bytes | None) -> None:
        if header is not None:
            status = status_of(header, payload)
            if status == b"503":
                self.failures[index] = EndpointUnavailableError(
                    "nats: no responders (no stream captures the subject, or nobody serves it)"
                )
            elif status is not None:
                self.failures[index] = EndpointError(f"nats: server status {status.decode()}")
            else:
                self.replies[index] = (payload, header)
        elif payload[:12] == b'{"error":{"c' or b'"error"' in payload[:64]:
            self.failures[index] = EndpointError(f"nats: publish refused: {payload.decode()}")
        else:
            self.replies[index] = (payload, header)
        self.remaining -= 1
        if not self.remaining:
            self.done.set()


class NatsOutput(OutputEndpoint):
    """Publishes messages, waiting for the broker as the module docstring says."""

    def __init__(self, options: NatsOptions, context: BuildContext) -> None:
        self._options = options
        self._context = context
        self._subject = str(options.subject).encode()
        self._jetstream = not options.no_jetstream
        self._lease: Lease[FastClient] | None = None
        self._link: Link | None = None
        self._closed = False
        self._waiting: dict[int, tuple[_Waiter, int]] = {}
        self._tokens = itertools.count()
        self._inbox = b""
        self._subscription: Any = None

    def connect(self) -> None:
        if self._link is not None:
            return
        require_driver("nats", endpoint="nats", extra="nats", package="nats-py")
        from mq_bridge.endpoints.nats import jetstream
        from mq_bridge.endpoints.nats.connection import acquire_client, run
        from mq_bridge.endpoints.nats.link import open_link

        lease = acquire_client(self._options, self._context.connections)
        client = lease.connection
        link: Link | None = None
        try:
            if self._jetstream:
                run(jetstream.ensure_stream(client, self._options), "nats: setting up the stream")
            link = open_link(self._options, client)
            inbox = link.new_inbox()
            self._subscription = link.subscribe(f"{inbox}.*", self._on_answer)
        except BaseException:
            if link is not None:
                link.close()
            lease.release()
            raise
        self._inbox = inbox.encode() + b"."
        self._lease, self._link, self._closed = lease, link, False

    def send(self, messages: Sequence[Message]) -> None:
        """Publish every message; return once the broker has them (see the module)."""
        if self._options.request_reply:
            self._send_requests(messages)
            return
        link = self._open()
        wait = self._jetstream and not self._options.delayed_ack
        waiter = _Waiter(len(messages)) if wait else None
        commands: list[bytes] = []
        failures: dict[int, BaseException] = {}
        head = b"HPUB %s %s%%d %%d %%d\r\n%%s%%s\r\n" % (self._subject, self._inbox)
        tokens, waiting = self._tokens, self._waiting
        deduplicate, max_payload = self._options.deduplicate, link.max_payload
        for index, message in enumerate(messages):
            try:
                block = header_block(message, deduplicate)
            except ValueError as error:
                failures[index] = error
                continue
            payload = message.payload
            size = len(block) + len(payload)
            if size > max_payload:
                failures[index] = _too_large(size, max_payload)
            elif waiter is None:
                commands.append(
                    b"HPUB %s %d %d\r\n%s%s\r\n" % (self._subject, len(block), size, block, payload)
                )
            else:
                token = next(tokens)
                waiting[token] = (waiter, index)
                commands.append(head % (token, len(block), size, block, payload))
        if waiter is not None:
            waiter.remaining -= len(failures)  # nobody will answer for those
            if not waiter.remaining:
                waiter.done.set()
        if commands:
            failures.update(self._deliver(link, b"".join(commands), waiter))
        if failures:
            if len(failures) == len(messages) and len(set(map(type, failures.values()))) == 1:
                raise next(iter(failures.values()))
            raise SendError(failures)

    def send_one(self, message: Message) -> None:
        self.send((message,))

    def request(self, message: Message, timeout: float | None) -> Message:
        """Send `message` as a NATS request; its reply (whose id is the request's id)."""
        link = self._open()
        block = header_block(message)
        size = len(block) + len(message.payload)
        if size > link.max_payload:
            raise _too_large(size, link.max_payload)
        waiter = _Waiter(1)
        token = next(self._tokens)
        self._waiting[token] = (waiter, 0)
        command = b"HPUB %s %s%d %d %d\r\n%s%s\r\n" % (
            self._subject,
            self._inbox,
            token,
            len(block),
            size,
            block,
            message.payload,
        )
        limit = self._options.request_timeout if timeout is None else timeout
        try:
            link.write(command)
            answered = link.wait(waiter.done, limit)
        except EndpointUnavailableError:
            self._forget(waiter)
            raise
        if not answered:
            self._forget(waiter)
            raise RequestTimeoutError(
                f"no reply on NATS subject {self._options.subject!r} within {limit:g} s"
            )
        if waiter.failures:
            raise waiter.failures[0]
        payload, header = waiter.replies[0]
        from mq_bridge.endpoints.kit.wire import message_from_wire

        return message_from_wire(payload, decode_headers(header), message.id_int)

    def flush(self) -> None:
        from mq_bridge.endpoints.nats.connection import API_TIMEOUT

        self._open().flush(API_TIMEOUT)

    def status(self) -> EndpointStatus:
        link = self._link
        healthy = link is not None and link.is_connected
        details = {"jetstream": self._jetstream, "delayed_ack": self._options.delayed_ack}
        error = None if healthy else ("closed" if self._closed else "not connected")
        return EndpointStatus(healthy, self.describe(), error=error, details=details)

    def describe(self) -> str:
        return self._options.describe()

    def close(self) -> None:
        link, self._link = self._link, None
        lease, self._lease = self._lease, None
        self._closed = True
        if link is None or lease is None:
            return
        from mq_bridge.endpoints.nats.connection import API_TIMEOUT

        try:
            if link.is_connected:  # what delayed_ack left in the buffer goes out first
                link.flush(API_TIMEOUT)
                link.unsubscribe(self._subscription)
        except EndpointError:
            pass
        finally:
            link.close()
            lease.release()

    # -- sending --------------------------------------------------------------------------

    def _deliver(self, link: Link, data: bytes, waiter: _Waiter | None) -> dict[int, BaseException]:
        """Write `data`; wait for the PubAcks (`waiter`) or, on core NATS, a flush."""
        from mq_bridge.endpoints.nats.connection import API_TIMEOUT

        try:
            link.write(data)
            if waiter is None:
                if not self._jetstream and not self._options.delayed_ack:
                    link.flush(API_TIMEOUT)
                return {}
            answered = link.wait(waiter.done, ACK_TIMEOUT)
        except EndpointUnavailableError as error:
            if waiter is None:
                raise
            failed: BaseException = error
        else:
            if answered:
                return waiter.failures
            failed = EndpointUnavailableError(f"nats: no PubAck within {ACK_TIMEOUT:g} s")
        missing = self._forget(waiter)
        return {**waiter.failures, **dict.fromkeys(missing, failed)}

    def _send_requests(self, messages: Sequence[Message]) -> None:
        failures: dict[int, BaseException] = {}
        for index, message in enumerate(messages):
            try:
                self.request(message, self._options.request_timeout)
            except Exception as error:
                failures[index] = error
        if failures:
            raise SendError(failures)

    def _forget(self, waiter: _Waiter) -> list[int]:
        """Stop waiting for `waiter`'s answers; the indexes that never got one."""
        tokens = [token for token, (owner, _) in list(self._waiting.items()) if owner is waiter]
        found = (self._waiting.pop(token, None) for token in tokens)
        return sorted(entry[1] for entry in found if entry is not None)

    def _open(self) -> Link:
        link = self._link
        if link is None:
            raise ClosedError(
                f"{self.describe()} output is closed" if self._closed else "not connected"
            )
        return link

    # -- on the reading thread ----------------------------------------------------------------

    def _on_answer(
        self, subject: bytes, reply: bytes, payload: bytes, header: bytes | None
    ) -> None:
        try:
            token = int(subject[len(self._inbox) :])
        except ValueError:
            return
        entry = self._waiting.pop(token, None)
        if entry is not None:
            entry[0].answer(entry[1], payload, header)


def _too_large(size: int, max_payload: int) -> EndpointError:
    return EndpointError(
        f"nats: a message of {size} bytes (headers included) is larger than the server's "
        f"max_payload {max_payload}"
    )
