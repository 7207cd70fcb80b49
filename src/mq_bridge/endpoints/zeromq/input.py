"""The `zeromq` input: a PULL, SUB or REP socket (see `mq_bridge.endpoints.zeromq`).

ZeroMQ stores nothing and acknowledges nothing, so "ack" and "nack" are local: a nacked
batch goes back to the front of this input's own queue and is handed out again (until
`close`, which drops it: nothing was promised to the sender). A REP input answers each
request once every message it carried is settled: with the replies that the route's
`response` output delivered for them (a JSON array, possibly empty), as mq-bridge does.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from mq_bridge.endpoints.base import Batch, BuildContext, EndpointStatus, InputEndpoint
from mq_bridge.endpoints.kit.replies import ReplyWaiter
from mq_bridge.endpoints.kit.source_metadata import with_source
from mq_bridge.endpoints.kit.wakeup import Wakeup
from mq_bridge.endpoints.zeromq.codec import (
    MetadataCache,
    decode,
    decode_many,
    encode_envelopes,
)
from mq_bridge.endpoints.zeromq.options import ZeroMqOptions
from mq_bridge.endpoints.zeromq.sockets import FrameIO, Waker, open_socket, zmq_module
from mq_bridge.errors import ClosedError, ConfigError, EndpointError
from mq_bridge.message import Message

__all__ = ["ZeroMqInput"]

log = logging.getLogger("mq_bridge.endpoints.zeromq")

#: Filling a batch: a gap this long (ms) between messages ends it...
FILL_IDLE_MS = 1
#: ...and it never waits longer than this (s) once it has a message.
FILL_MAX = 0.010


@dataclass(slots=True, eq=False)
class _Request:
    """A REQ peer's request: its routing frames, and the replies of its messages so far."""

    envelope: list[bytes]
    open_parts: int
    replies: list[Message | None] = field(default_factory=list)

    def settle(self, index: int, reply: Message | None) -> bool:
        """Record message `index`'s reply; True when every message is settled."""
        self.replies[index] = reply
        self.open_parts -= 1
        return self.open_parts == 0

    def answer(self) -> list[bytes]:
        replies = [reply for reply in self.replies if reply is not None]
        return [*self.envelope, encode_envelopes(replies)]


@dataclass(slots=True, eq=False)
class _Delivery:
    """One handed-out message; `request` is set for a REP input."""

    message: Message
    request: _Request | None = None
    index: int = 0
    waiter: ReplyWaiter | None = None


class ZeroMqInput(InputEndpoint):
    """Reads a PULL, SUB or REP (ROUTER) socket from the caller's thread."""

    acks_in_any_order = True

    def __init__(self, options: ZeroMqOptions, context: BuildContext) -> None:
        from mq_bridge.config.declarations import OptionError

        try:
            self._socket_type = options.socket_for("input")
        except OptionError as error:
            raise ConfigError(str(error), path="socket_type") from None
        self._options = options
        self._context = context
        self._format = options.wire_format
        self._lock = threading.Lock()  # the socket's: it is not thread-safe
        self._queue_lock = threading.Lock()  # `_pending`'s (nack runs on other threads)
        self._socket: Any = None
        self._poller: Any = None
        self._waker: Waker | None = None
        #: Nacked or not yet handed out: `Message`s (PULL, SUB) or `_Delivery`s (REP).
        self._pending: deque[Any] = deque()
        self._outbox: deque[list[bytes]] = deque()  # REP answers waiting for the socket
        # The flag of the rule `interrupt` keeps; the waker ends a poll (the wait here).
        self._wakeup = Wakeup()
        self._closing = False  # close() ends a waiting receive without an interrupt
        self._closed = False
        self._metadata_cache = MetadataCache()

    def connect(self) -> None:
        with self._lock:
            if self._socket is not None:
                return
            zmq = zmq_module()
            self._zmq = zmq
            self._io = FrameIO(zmq)
            self._socket = open_socket(self._options, self._socket_type)
            self._waker = Waker()
            self._poller = zmq.Poller()
            self._poller.register(self._socket, zmq.POLLIN)
            self._poller.register(self._waker.fileno, zmq.POLLIN)
            self._closed = self._closing = False

    def receive(self, max_messages: int, timeout: float | None) -> Batch:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            if self._socket is None:
                if self._closed:
                    raise ClosedError(f"{self.describe()} is closed")
                raise EndpointError(f"{self.describe()}: connect() was not called")
            deliveries = self._wait_and_take(max_messages, deadline)
        self._flush_outbox()
        if not deliveries:
            return Batch([])
        if self._socket_type != "rep":
            return Batch(deliveries, deliveries)  # the token: what a nack puts back
        self._expect_replies(deliveries)
        return Batch([delivery.message for delivery in deliveries], deliveries)

    def _wait_and_take(self, max_messages: int, deadline: float | None) -> list[Any]:
        """(Under the socket lock.) Up to `max_messages`, waiting until `deadline`."""
        wakeup = self._wakeup
        while True:
            self._send_outbox()
            self._fill(max_messages)
            if self._pending:
                # a backlog is forming (messages come in fast): wait for a fuller batch
                if len(self._pending) > 1 and not wakeup.pending:
                    self._top_up(max_messages)
                wakeup.consume()  # these answer an interrupt
                return self._pop(max_messages)
            if wakeup.consume() or self._closing:
                return []
            if deadline is None:
                wait_ms = None
            else:
                wait_ms = math.ceil((deadline - time.monotonic()) * 1000)
                if wait_ms <= 0:
                    return []
            events = dict(self._poller.poll(wait_ms))
            if self._waker is not None and self._waker.fileno in events:
                self._waker.clear()

    def _fill(self, max_messages: int) -> None:
        """Queue what the socket has without waiting, until `max_messages` are queued."""
        socket, pending, receive_many = self._socket, self._pending, self._io.receive_many
        # A `json` ZeroMQ message may carry a whole batch: take those one at a time.
        per_message = self._format != "json"
        while len(pending) < max_messages:
            limit = max_messages - len(pending) if per_message else 1
            received = receive_many(socket, limit)
            if self._socket_type == "rep" or self._context.source_metadata:
                for frames in received:
                    self._read(frames)
            else:
                messages, problems = decode_many(received, self._format, self._metadata_cache)
                for problem in problems:
                    log.warning("%s: %s; delivered as raw bytes", self.describe(), problem)
                pending.extend(messages)
            if len(received) < limit:
                return  # the socket had no more

    def _top_up(self, max_messages: int) -> None:
        """While messages keep arriving, wait for a fuller batch: `FILL_IDLE` without one
        ends the wait, `FILL_MAX` at most. A sender of single messages would otherwise
        cost a wake-up and a batch per message (and, in one process, a GIL hand-over)."""
        end = time.monotonic() + FILL_MAX
        while len(self._pending) < max_messages and not self._wakeup.pending:
            remaining = end - time.monotonic()
            if remaining <= 0 or not self._io.readable(self._socket, FILL_IDLE_MS):
                return
            self._fill(max_messages)

    def _pop(self, max_messages: int) -> list[Any]:
        with self._queue_lock:
            pending = self._pending
            if len(pending) <= max_messages:  # the usual case: all of it, without a loop
                taken = list(pending)
                pending.clear()
                return taken
            return [pending.popleft() for _ in range(max_messages)]

    def _read(self, frames: list[bytes]) -> None:
        """Queue the messages of one ZeroMQ message."""
        envelope: list[bytes] = []
        if self._socket_type == "rep":
            try:
                split = frames.index(b"") + 1
            except ValueError:
                log.warning("%s: dropped a request without a REQ envelope", self.describe())
                return
            envelope, frames = frames[:split], frames[split:]
        decoded = decode(frames, self._format, self._metadata_cache)
        if decoded.problem is not None:
            log.warning("%s: %s; delivered as raw bytes", self.describe(), decoded.problem)
        messages = decoded.messages
        if self._context.source_metadata:
            messages = self._with_source(messages, frames)
        if self._socket_type != "rep":
            self._pending.extend(messages)
            return
        request = _Request(envelope, len(messages), [None] * len(messages))
        if not messages:  # an empty batch: answer at once
            self._outbox.append(request.answer())
        for index, message in enumerate(messages):
            if message.metadata_view.get("correlation_id") is None:
                message = message.with_metadata(correlation_id=f"{message.id_int:032x}")
            self._pending.append(_Delivery(message, request, index))

    def _with_source(self, messages: list[Message], frames: list[bytes]) -> list[Message]:
        topic = None
        if self._socket_type == "sub" and len(frames) > (2 if self._format == "raw_framed" else 1):
            topic = bytes(frames[0]).decode("utf-8", "replace")
        fields = {"zeromq_topic": topic if topic is not None else self._options.topic}
        return [
            Message.trusted(
                message.payload,
                with_source(message.metadata, fields, True),
                message.id_int,
            )
            for message in messages
        ]

    def _expect_replies(self, deliveries: list[_Delivery]) -> None:
        replies = self._context.replies
        for delivery in deliveries:
            correlation_id = delivery.message.metadata_view["correlation_id"]
            delivery.waiter = replies.expect(correlation_id)

    def ack(self, batch: Batch) -> None:
        self._settle(batch, redeliver=False)

    def nack(self, batch: Batch) -> None:
        self._settle(batch, redeliver=True)

    def _settle(self, batch: Batch, redeliver: bool) -> None:
        deliveries: list[Any] = batch.token or []
        if self._socket_type != "rep":
            if redeliver:
                self._requeue(deliveries)
            return
        for delivery in deliveries:
            waiter, delivery.waiter = delivery.waiter, None
            if waiter is not None:
                self._context.replies.forget(waiter)
            if not redeliver and delivery.request is not None:
                reply = waiter.reply if waiter is not None else None
                if delivery.request.settle(delivery.index, reply):
                    self._outbox.append(delivery.request.answer())
        if redeliver:
            self._requeue(deliveries)
        self._flush_outbox()

    def _requeue(self, items: list[Any]) -> None:
        """Put a nacked batch back in front, in order."""
        with self._queue_lock:
            self._pending.extendleft(reversed(items))
        if self._waker is not None:
            self._waker.wake()  # a receive waiting on the socket hands them out

    def _flush_outbox(self) -> None:
        """Send waiting REP answers now if the socket is free, else wake its holder."""
        if not self._outbox:
            return
        if self._lock.acquire(blocking=False):
            try:
                self._send_outbox()
            finally:
                self._lock.release()
            return
        if self._waker is not None:
            self._waker.wake()

    def _send_outbox(self) -> None:
        """(Under the socket lock.)"""
        socket, zmq = self._socket, getattr(self, "_zmq", None)
        while self._outbox:
            frames = self._outbox.popleft()
            if socket is None or zmq is None:
                continue
            try:
                socket.send_multipart(frames, zmq.NOBLOCK)
            except zmq.ZMQError as error:
                log.warning("%s: could not answer a request: %s", self.describe(), error)

    def interrupt(self) -> None:
        self._wakeup.interrupt()  # before the wake: the woken poll sees it
        waker = self._waker
        if waker is not None:
            waker.wake()

    def status(self) -> EndpointStatus:
        return EndpointStatus(
            healthy=self._socket is not None,
            target=self.describe(),
            pending=None,
            details={"queued": len(self._pending)},
        )

    def describe(self) -> str:
        return self._options.describe("input")

    def close(self) -> None:
        self._closing = True
        waker = self._waker
        if waker is not None:
            waker.wake()  # a receive waiting in another thread returns; then we go on
        with self._lock:
            self._send_outbox()
            socket, self._socket = self._socket, None
            waker, self._waker = self._waker, None
            for delivery in self._pending:
                if isinstance(delivery, _Delivery) and delivery.waiter is not None:
                    self._context.replies.forget(delivery.waiter)
            self._pending.clear()
            self._closed = True
        if socket is not None:
            socket.close(linger=0 if self._socket_type != "rep" else 1000)
        if waker is not None:
            waker.close()
