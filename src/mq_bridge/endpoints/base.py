"""The small interface every endpoint implements.

An endpoint is one module in `mq_bridge.endpoints`, registered by its config name in
`mq_bridge.endpoints.registry`. It may act as an input (the source of a route or of a
`Consumer`), as an output (the sink of a route or of a `Publisher`), or both.

The interface is synchronous: a route runs on its own thread and calls its endpoints
directly (see docs/design.md, "Threading model"). A client library that is asyncio-only
keeps a private event loop thread inside its endpoint.

Input lifecycle::

    connect() -> receive(max, timeout) -> Batch -> ack(batch) | nack(batch) -> ... -> close()

`receive` blocks for at most `timeout` seconds (forever when None) and returns a `Batch`,
empty on timeout. `interrupt()` may be called from another thread to end a blocking
`receive` early (a stopping route calls it); it is never lost (see `InputEndpoint.interrupt`,
built on `kit.wakeup.Wakeup`). Batches are acked in the order they were
received unless `acks_in_any_order` is true. `exhausted` becomes true once a bounded
source has handed out everything it has.

Output lifecycle::

    connect() -> send(messages) ... -> flush() -> close()

`send` raises `SendError` when only some messages failed (with per-message causes), or
any other exception when the whole batch failed; the errors' `retriable` flag tells the
runtime whether to retry. An output that answers requests implements `request`.

Middleware (`mq_bridge.middleware`) wraps these same interfaces, so a wrapped endpoint is
still an endpoint.

Optional fast paths an output may offer (the default implementations are always correct):
`send_one(message)` for a single message (publishers call it; the default calls `send`);
`try_send_one(message) -> bool`, which sends only if that cannot wait (the async publisher
calls it on the event loop and falls back to a thread when it returns False); and
`json_sender()`, a cheaper `Publisher.send_json` that encodes straight to the wire format
(see `OutputEndpoint.json_sender`). Middleware wrappers pass none of them on, so a
publisher with middleware takes the general path.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from mq_bridge.errors import EndpointError
from mq_bridge.message import Message

if TYPE_CHECKING:
    from mq_bridge.endpoints.kit.connections import ConnectionRegistry
    from mq_bridge.endpoints.kit.replies import ReplyRegistry

__all__ = [
    "Batch",
    "BuildContext",
    "EndpointStatus",
    "InputEndpoint",
    "JsonSender",
    "OutputEndpoint",
]

#: ``sender(data, metadata, id)``: see `OutputEndpoint.json_sender`.
JsonSender = Callable[[Any, "Mapping[str, str] | None", "str | int | None"], None]


@dataclass(slots=True)
class Batch:
    """Messages handed out by one `receive`, and the endpoint's private handle to ack them."""

    messages: list[Message]
    token: Any = None

    def __len__(self) -> int:
        return len(self.messages)

    def __bool__(self) -> bool:
        return bool(self.messages)


@dataclass(slots=True)
class EndpointStatus:
    """A point-in-time snapshot, as `Consumer.status()` returns it (as a dict)."""

    healthy: bool
    target: str
    pending: int | None = None
    capacity: int | None = None
    error: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "healthy": self.healthy,
            "target": self.target,
            "pending": self.pending,
            "capacity": self.capacity,
            "error": self.error,
            "details": dict(self.details),
        }


def _process_replies() -> ReplyRegistry:
    from mq_bridge.endpoints.kit.replies import process_replies

    return process_replies()


def _process_connections() -> ConnectionRegistry:
    from mq_bridge.endpoints.kit.connections import default_registry

    return default_registry()


@dataclass
class BuildContext:
    """Everything an endpoint or middleware factory needs from the runtime that builds it.

    Endpoints take what they need from here and never import the runtime's modules.
    """

    route_name: str
    allow_fault_injection: bool = False
    #: Builds an output endpoint (with its own middlewares) from an endpoint config
    #: such as ``{"memory": {"topic": "dead"}}`` (used by `dlq`, `fanout`, `switch`).
    build_output: Callable[[Mapping[str, Any]], OutputEndpoint] | None = None
    #: Builds an input endpoint the same way (used by `reader`, which pulls from one).
    build_input: Callable[[Mapping[str, Any]], InputEndpoint] | None = None
    #: Process-wide shared objects (memory topics, metrics) keyed by name.
    shared: dict[str, Any] = field(default_factory=dict)
    #: Set when the owning route stops: waits (retry backoff, delay, limiter) end early.
    stopping: threading.Event | None = None
    #: Inputs add their source cursor as ``mqb.src.*`` metadata (``MQB_SOURCE_METADATA``,
    #: read once by the runtime).
    source_metadata: bool = False
    #: Request/reply rendezvous: a requesting output waits here, `response` answers.
    replies: ReplyRegistry = field(default_factory=_process_replies)
    #: Broker connections shared by endpoints with the same connection settings
    #: (``shared: true``), reference-counted and closed with their last user.
    connections: ConnectionRegistry = field(default_factory=_process_connections)


class InputEndpoint:
    """A source of messages. Subclasses implement `receive`; the rest has safe defaults."""

    #: Acks may come in any order (per-message ack transports: AMQP, NATS, MQTT).
    acks_in_any_order: ClassVar[bool] = False
    #: A nacked (or never acknowledged) message comes back: a queue, a log, a durable
    #: consumer. False where it cannot (a live subscriber, an http request, memory without
    #: `enable_nack`): a route then drops a message that failed without a decision instead
    #: of retrying it (docs/delivery.md, "When a handler fails").
    redelivers: bool = True

    def connect(self) -> None:
        """Open connections. Raise here (not later) when the config or server is wrong."""

    def receive(self, max_messages: int, timeout: float | None) -> Batch:
        """Up to `max_messages` messages, waiting at most `timeout` seconds for the first."""
        raise NotImplementedError

    def ack(self, batch: Batch) -> None:
        """The batch is done: advance the offset / delete it from the queue."""

    def nack(self, batch: Batch) -> None:
        """The batch was not handled: make it available for redelivery where possible."""

    @property
    def exhausted(self) -> bool:
        """True once a bounded source has handed out everything (never for streams)."""
        return False

    def status(self) -> EndpointStatus:
        return EndpointStatus(healthy=True, target=self.describe())

    def describe(self) -> str:
        """A short human-readable target, e.g. ``memory:orders`` (no secrets)."""
        return type(self).__name__

    def interrupt(self) -> None:
        """End a `receive` blocked in another thread as soon as possible; callable from any
        thread, at any time.

        An interrupt is remembered until a receive consumes it: the receive blocked at that
        moment, or else the next one, returns at once (empty, or with what it already has),
        and the receive after that waits normally again. So an interrupt that lands just
        before a receive starts is not lost (that receive does not wait out its timeout),
        and one that no receive was waiting for ends exactly one receive, not a later
        unrelated one. Implementations keep it with `mq_bridge.endpoints.kit.wakeup.Wakeup`;
        middleware forwards it to its inner input, whose receive consumes its own."""

    def close(self) -> None:
        """Release connections. Idempotent."""


class OutputEndpoint:
    """A sink of messages. Subclasses implement `send`."""

    def connect(self) -> None:
        """Open connections. Raise here (not later) when the config or server is wrong."""

    def send(self, messages: Sequence[Message]) -> None:
        """Deliver every message, or raise (`SendError` for a partial failure)."""
        raise NotImplementedError

    def send_one(self, message: Message) -> None:
        """Deliver one message; endpoints with a cheaper single-message path override it."""
        self.send((message,))

    def try_send_one(self, message: Message) -> bool:
        """Deliver one message only if that needs no waiting (no I/O, no backpressure).

        True when it was delivered; False when the caller should use `send_one` from a
        thread that may block. Middleware does not forward it, so wrapped outputs say False.
        """
        return False

    def request(self, message: Message, timeout: float | None) -> Message:
        """Send one message and wait for its reply.

        An output that does not answer requests sends the message, then raises: it was
        delivered, but only acknowledged (mq-bridge does the same). Request/reply outputs
        (memory with ``request_reply``, response, static, brokers' request modes) override it.
        """
        self.send_one(message)
        raise EndpointError(
            f"{self.describe()}: expected a response, but the endpoint only acknowledged the "
            "message (it was sent); request/reply needs an endpoint that answers, such as "
            "memory with `request_reply: true` read by a route with a `response` output"
        )

    def json_sender(self) -> JsonSender | None:
        """A cheaper `Publisher.send_json`: ``sender(data, metadata, id)`` encodes `data`
        straight to the wire format and sends it. It must check and fail exactly as
        ``send_one(Message.from_json(data, metadata, id))`` would. None: no fast path."""
        return None

    def flush(self) -> None:
        """Push out anything buffered."""

    def status(self) -> EndpointStatus:
        return EndpointStatus(healthy=True, target=self.describe())

    def describe(self) -> str:
        return type(self).__name__

    def close(self) -> None:
        """Flush and release connections. Idempotent."""
