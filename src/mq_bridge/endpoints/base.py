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
`receive` early (a stopping route calls it). Batches are acked in the order they were
received unless `acks_in_any_order` is true. `exhausted` becomes true once a bounded
source has handed out everything it has.

Output lifecycle::

    connect() -> send(messages) ... -> flush() -> close()

`send` raises `SendError` when only some messages failed (with per-message causes), or
any other exception when the whole batch failed; the errors' `retriable` flag tells the
runtime whether to retry. An output that answers requests implements `request`.

Middleware (`mq_bridge.middleware`) wraps these same interfaces, so a wrapped endpoint is
still an endpoint.

Changes since the foundation (issue 4): `OutputEndpoint.send_one(message)` is an optional
fast path for a single message (publishers call it; the default calls `send`);
`OutputEndpoint.try_send_one(message) -> bool` sends only if that cannot wait (the async
publisher calls it on the event loop and falls back to a thread when it returns False; the
default returns False); `endpoint_config_items` lives here for the factory. An output may
also offer `json_sender() -> Callable[[data, metadata, id], None]`, a cheaper
`Publisher.send_json` that encodes straight to its wire format (the `file` endpoint does); it
must check and fail exactly as `send_json` through `send_one` would. Middleware wrappers do
not pass it on, so a publisher with middleware takes the general path.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from mq_bridge.message import Message

__all__ = ["Batch", "BuildContext", "EndpointStatus", "InputEndpoint", "OutputEndpoint"]


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


@dataclass
class BuildContext:
    """What an endpoint or middleware factory may need from the runtime that builds it."""

    route_name: str
    allow_fault_injection: bool = False
    #: Builds an output endpoint (with its own middlewares) from an endpoint config
    #: such as ``{"memory": {"topic": "dead"}}`` (used by `dlq`, `fanout`, `switch`).
    build_output: Callable[[Mapping[str, Any]], OutputEndpoint] | None = None
    #: Process-wide shared objects (memory topics, metrics, reply waiters) keyed by name.
    shared: dict[str, Any] = field(default_factory=dict)
    #: Set when the owning route stops: waits (retry backoff, delay, limiter) end early.
    stopping: threading.Event | None = None


class InputEndpoint:
    """A source of messages. Subclasses implement `receive`; the rest has safe defaults."""

    #: Acks may come in any order (per-message ack transports: AMQP, NATS, MQTT).
    acks_in_any_order: ClassVar[bool] = False

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
        """End a `receive` blocked in another thread as soon as possible."""

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
        """Send one message and wait for its reply (request/reply outputs only)."""
        raise NotImplementedError(f"{self.describe()} does not support request/reply")

    def flush(self) -> None:
        """Push out anything buffered."""

    def status(self) -> EndpointStatus:
        return EndpointStatus(healthy=True, target=self.describe())

    def describe(self) -> str:
        return type(self).__name__

    def close(self) -> None:
        """Flush and release connections. Idempotent."""


def endpoint_config_items(config: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The (name, options) pairs of an endpoint config, leaving out `middlewares`."""
    return [(key, value) for key, value in config.items() if key != "middlewares"]
