"""Reading core NATS (`no_jetstream`): a queue subscription shared by the route's instances
(mq-bridge's group ``mq-bridge-{stream or subject}``), or a plain one in `subscriber_mode`.

Core NATS keeps nothing: messages arriving while nobody reads are gone, acks and nacks have
nothing to tell the server. Received messages wait in a bounded buffer (`MAX_BUFFERED`;
beyond it the newest are dropped with a warning, as the server would drop them for a slow
consumer).

Requests: a message with a native reply subject is a request (``Publisher.request`` of a
NATS publisher with `request_reply`, or any NATS requester). It gets ``reply_to`` metadata
and a ``correlation_id`` (its own, else its id); the route's `response` output completes
the wait registered here, and `ack` publishes that reply to the requester's reply subject.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from typing import Any

from mq_bridge.endpoints.base import Batch, EndpointStatus
from mq_bridge.endpoints.kit.replies import ReplyRegistry, ReplyWaiter
from mq_bridge.endpoints.kit.source_metadata import with_source
from mq_bridge.endpoints.kit.wakeup import Wakeup
from mq_bridge.endpoints.kit.wire import message_from_wire
from mq_bridge.endpoints.nats.codec import (
    RawMessage,
    decode_headers,
    encode_headers,
    message_headers,
    publish_command,
)
from mq_bridge.endpoints.nats.connection import FastClient, run
from mq_bridge.errors import EndpointError
from mq_bridge.message import Message

__all__ = ["MAX_BUFFERED", "SubscriptionReader"]

log = logging.getLogger("mq_bridge.endpoints.nats")

MAX_BUFFERED = 100_000


class SubscriptionReader:
    """A core-NATS subscription read in batches."""

    def __init__(self, client: FastClient, subject: str, queue: str, replies: ReplyRegistry):
        self._client = client
        self._subject, self._queue = subject, queue
        self._replies = replies
        self._buffer: collections.deque[RawMessage] = collections.deque()
        self._ready = threading.Condition()
        self._wakeup = Wakeup(self._ready)
        self._dropped = 0
        self._subscription: Any = None

    def start(self) -> None:
        subscribe = self._client.raw_subscribe(self._subject, self._on_message, self._queue)
        self._subscription = run(subscribe, f"nats: subscribing {self._subject}")
        # The SUB must reach the server before connect() returns, or early messages miss it.
        run(self._client.flush(), "nats: subscribing")

    def receive(self, max_messages: int, timeout: float | None, tag_source: bool) -> Batch:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._ready:
            self._wakeup.wait_until(lambda: self._buffer, deadline)
            count = min(max_messages, len(self._buffer))
            raw = [self._buffer.popleft() for _ in range(count)]
        messages: list[Message] = []
        waiters: list[tuple[bytes, ReplyWaiter]] = []
        for subject, reply, payload, header in raw:
            message = message_from_wire(payload, decode_headers(header))
            if reply:
                message, waiter = self._expect_reply(message, reply)
                waiters.append((reply, waiter))
            if tag_source:
                fields = {"nats_subject": subject.decode("utf-8", "replace")}
                metadata = with_source(message.metadata_view, fields, True)
                message = Message.trusted(message.payload, metadata, message.id_int)
            messages.append(message)
        return Batch(messages, waiters)

    def ack(self, batch: Batch) -> None:
        """Send the replies the route produced for the requests in `batch`."""
        commands = []
        for reply_subject, waiter in batch.token or ():
            with waiter:
                reply = waiter.wait(0)
            if reply is not None:
                block = encode_headers(message_headers(reply))
                commands.append(publish_command(reply_subject, b"", block, reply.payload))
        if commands:
            data = b"".join(commands)

            async def send() -> None:
                self._client.write(data)
                await self._client.flush()

            try:
                run(send(), "nats: sending replies")
            except EndpointError as error:
                log.warning(
                    "nats: replies to %d request(s) were not sent: %s", len(commands), error
                )

    def nack(self, batch: Batch) -> None:
        """Nothing to release on core NATS; the requests simply get no reply."""
        for _, waiter in batch.token or ():
            waiter.__exit__(None, None, None)

    def status(self, target: str) -> EndpointStatus:
        details = {"buffered": len(self._buffer), "dropped": self._dropped, "queue": self._queue}
        return EndpointStatus(bool(self._client.is_connected), target, details=details)

    def interrupt(self) -> None:
        self._wakeup.interrupt()

    def stop(self) -> None:
        if self._subscription is None:
            return
        try:
            run(self._client.raw_unsubscribe(self._subscription), "nats: unsubscribing")
        except EndpointError as error:
            log.warning("nats: unsubscribing %s: %s", self._subject, error)
        self._subscription = None

    def _expect_reply(self, message: Message, reply: bytes) -> tuple[Message, ReplyWaiter]:
        updates = {}
        if "reply_to" not in message.metadata_view:
            updates["reply_to"] = reply.decode("utf-8", "replace")
        correlation_id = message.get("correlation_id")
        if correlation_id is None:
            correlation_id = updates["correlation_id"] = message.assigned_id()
        if updates:
            message = message.with_metadata(updates)
        return message, self._replies.expect(correlation_id)

    def _on_message(
        self, subject: bytes, reply: bytes, payload: bytes, header: bytes | None
    ) -> None:
        with self._ready:
            if len(self._buffer) >= MAX_BUFFERED:
                self._dropped += 1
                if self._dropped in (1, 1000, 100_000):
                    log.warning("nats: %s: buffer full, dropped %d", self._subject, self._dropped)
                return
            self._buffer.append((subject, reply, payload, header))
            self._ready.notify()
