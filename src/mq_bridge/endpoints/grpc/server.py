"""The `grpc` input in `server_mode`: the topic's published messages, from the embedded
server (`service.BridgeServer`), shared with the other server-mode inputs on its address.

Settling answers the publisher: ack -> the reply the route's `response` output delivered
for the message (matched by ``correlation_id``, which the input sets to the id when the
message has none), else ``Ack{ACK}``; nack -> ``Ack{NACK}`` (the publisher decides whether
to send again, as with mq-bridge). Messages still queued at close are answered NACK.
"""

from __future__ import annotations

import threading
import time
from collections import deque

from mq_bridge.endpoints.base import Batch, BuildContext, EndpointStatus, InputEndpoint
from mq_bridge.endpoints.grpc.codec import ack_response, from_bridge, nack_response, reply_response
from mq_bridge.endpoints.grpc.options import GrpcOptions
from mq_bridge.endpoints.grpc.pending import Pending, settle_all
from mq_bridge.endpoints.grpc.service import BridgeServer
from mq_bridge.endpoints.kit.connections import Lease, connection_key
from mq_bridge.endpoints.kit.drivers import require_driver
from mq_bridge.endpoints.kit.replies import ReplyRegistry, ReplyWaiter
from mq_bridge.endpoints.kit.wakeup import Wakeup
from mq_bridge.errors import ClosedError, EndpointError
from mq_bridge.message import Message

__all__ = ["GrpcServerInput"]

#: Messages published and not yet handed out, per input (then the server waits for room).
QUEUE_LIMIT = 16 * 1024
#: Filling a batch: a gap this long (s) between messages ends it, and it never waits
#: longer than `FILL_MAX` (s) once it has a message.
FILL_IDLE = 0.001
FILL_MAX = 0.010


class _ReplySlot(ReplyWaiter):
    """Where the route's reply to a published message lands: nobody waits on it (`ack`
    reads it once the route finished), so it needs no event of its own, per message."""

    __slots__ = ()

    def __init__(self, correlation_id: str, registry: ReplyRegistry) -> None:
        self.correlation_id = correlation_id
        self.reply = None
        self.error = None
        self._registry = registry

    def complete(self, reply: Message) -> None:
        self.reply = reply

    def fail(self, error: BaseException) -> None:
        self.error = error


class GrpcServerInput(InputEndpoint):
    """Hands out what publishers send to this input's topic on the embedded server."""

    acks_in_any_order = True
    redelivers = False  # a nack answers the publisher with an error

    def __init__(self, options: GrpcOptions, context: BuildContext) -> None:
        self._options = options
        self._context = context
        self._topic = options.topic_name
        self._lease: Lease[BridgeServer] | None = None
        self._queue: deque[Pending] = deque()
        self._ready = threading.Condition()
        self._wakeup = Wakeup(self._ready)
        self._closed = False

    def connect(self) -> None:
        if self._lease is not None:
            return
        require_driver("grpc", endpoint="grpc", extra="grpc", package="grpcio")
        options = self._options
        key = connection_key("grpc-server", target=options.target, settings=_server_key(options))
        lease = self._context.connections.acquire(
            key, lambda: BridgeServer(options), BridgeServer.stop, shared=True
        )
        try:
            lease.connection.register(self._topic, self)
        except BaseException:
            lease.release()
            raise
        with self._ready:
            self._closed = False
        self._lease = lease

    @property
    def port(self) -> int | None:
        """The port the server listens on (useful with port 0)."""
        return self._lease.connection.port if self._lease is not None else None

    def full(self) -> bool:
        """(Called by the server.) Whether the queue is at its limit (and still open)."""
        return len(self._queue) >= QUEUE_LIMIT and not self._closed

    def offer(self, pending: Pending) -> bool:
        """(Called by the server.) Queue a published message; False once closed."""
        with self._ready:
            if self._closed:
                return False
            self._queue.append(pending)
            if len(self._queue) == 1:  # the receiver waits only on an empty queue
                self._ready.notify_all()
        return True

    def receive(self, max_messages: int, timeout: float | None) -> Batch:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._ready:
            queue = self._queue
            interrupted = self._wakeup.wait_until(
                lambda: queue or self._closed or self._lease is None, deadline
            )
            if not queue:
                if self._closed:
                    raise ClosedError(f"{self.describe()} is closed")
                if self._lease is None:
                    raise EndpointError(f"{self.describe()}: connect() was not called")
                return Batch([])
            if len(queue) > 1 and not interrupted:  # a backlog is forming: messages come fast
                self._top_up(max_messages)
                self._wakeup.consume()  # one that ended the top-up
            count = min(max_messages, len(self._queue))
            taken = [self._queue.popleft() for _ in range(count)]
        return self._hand_out(taken)

    def _top_up(self, max_messages: int) -> None:
        """(Under the lock.) While messages keep arriving (a PublishBatch stream, many
        publishers: more than one was waiting), wait for a fuller batch: `FILL_IDLE`
        without one ends the wait, `FILL_MAX` at most, so each message does not cost a
        batch and a wake-up."""
        end = time.monotonic() + FILL_MAX
        wakeup = self._wakeup
        while len(self._queue) < max_messages and not wakeup.pending and not self._closed:
            before = len(self._queue)
            remaining = end - time.monotonic()
            if remaining <= 0:
                return
            self._ready.wait(min(FILL_IDLE, remaining))
            if len(self._queue) == before:
                return

    def _hand_out(self, taken: list[Pending]) -> Batch:
        messages: list[Message] = []
        waiters: list[ReplyWaiter] = []
        replies = self._context.replies
        for pending in taken:
            message = from_bridge(pending.bridge)
            correlation_id = message.metadata_view.get("correlation_id")
            if correlation_id is None:
                correlation_id = f"{message.id_int:032x}"
                message = message.with_metadata(correlation_id=correlation_id)
            messages.append(message)
            waiters.append(replies.register(_ReplySlot(correlation_id, replies)))
        return Batch(messages, (taken, waiters))

    def ack(self, batch: Batch) -> None:
        taken, waiters = batch.token
        answers = []
        for pending, waiter in zip(taken, waiters, strict=True):
            self._context.replies.forget(waiter)
            request_id = pending.bridge.id
            reply = waiter.reply
            answer = (
                ack_response(request_id) if reply is None else reply_response(request_id, reply)
            )
            answers.append((pending, answer))
        settle_all(answers)  # one wake-up of the server for the batch

    def nack(self, batch: Batch) -> None:
        taken, waiters = batch.token
        for waiter in waiters:
            self._context.replies.forget(waiter)
        reason = "Downstream processing failed"
        settle_all([(pending, nack_response(pending.bridge.id, reason)) for pending in taken])

    def interrupt(self) -> None:
        self._wakeup.interrupt()

    def status(self) -> EndpointStatus:
        return EndpointStatus(
            healthy=self._lease is not None,
            target=self.describe(),
            pending=len(self._queue),
            details={"mode": "server", "port": self.port, "topic": self._topic},
        )

    def describe(self) -> str:
        return self._options.describe()

    def close(self) -> None:
        with self._ready:
            self._closed = True
            left = list(self._queue)
            self._queue.clear()
            self._ready.notify_all()
            lease, self._lease = self._lease, None
        settle_all([(p, nack_response(p.bridge.id, "Internal queue closed")) for p in left])
        if lease is not None:
            lease.connection.unregister(self._topic, self)
            lease.release()


def _server_key(options: GrpcOptions) -> object:
    """The settings that make a server: inputs on one address must agree on them."""
    return options.model_dump(
        include={
            "tls",
            "timeout_ms",
            "max_decoding_message_size",
            "max_encoding_message_size",
            "http2_keepalive_interval_ms",
            "http2_keepalive_timeout_ms",
            "initial_stream_window_size",
            "concurrency_limit_per_connection",
        }
    )
