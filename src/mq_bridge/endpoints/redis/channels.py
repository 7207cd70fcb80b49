"""The `redis` endpoint's input (SUBSCRIBE / PSUBSCRIBE) and output (PUBLISH).

Pub/sub keeps nothing: a message reaches the subscribers connected when it is published,
once, and acks mean nothing (at most once). A message carries only its payload, so plain
Redis clients interoperate; a received message gets a new id and no metadata (plus
``mqb.src.redis_channel``, and ``mqb.src.redis_pattern`` for a pattern subscription, with
``MQB_SOURCE_METADATA=1``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from mq_bridge.endpoints.base import (
    Batch,
    BuildContext,
    EndpointStatus,
    InputEndpoint,
    OutputEndpoint,
)
from mq_bridge.endpoints.kit.wakeup import Wakeup
from mq_bridge.endpoints.redis.client import (
    CONNECT_TIMEOUT,
    MAX_BLOCK,
    acquire_client,
    translated_errors,
)
from mq_bridge.endpoints.redis.options import RedisOptions
from mq_bridge.errors import ClosedError, EndpointUnavailableError
from mq_bridge.message import NO_METADATA, Message, new_message_id

if TYPE_CHECKING:
    from redis import Redis
    from redis.client import PubSub

    from mq_bridge.endpoints.kit.connections import Lease

__all__ = ["RedisPublisher", "RedisSubscriber"]

ENDPOINT = "redis"
_DATA_TYPES = frozenset({"message", "pmessage", b"message", b"pmessage"})


class _Connected:
    """The connection lifecycle both sides share: lease, closed flag, lazy reconnect."""

    def __init__(self, options: RedisOptions, context: BuildContext) -> None:
        self._options = options
        self._context = context
        self.channel = options.channel_name(context.route_name)
        self._lease: Lease[Redis] | None = None
        self._closed = False

    def _acquire(self) -> None:
        self._closed = False
        if self._lease is None:
            self._lease = acquire_client(self._options, ENDPOINT, self._context.connections)

    def _release(self) -> None:
        self._closed = True
        lease, self._lease = self._lease, None
        if lease is not None:
            lease.release()

    def describe(self) -> str:
        return self._options.describe(self._context.route_name)

    def _state(self) -> EndpointStatus:
        healthy = self._lease is not None
        error = None if healthy else ("closed" if self._closed else "not connected")
        return EndpointStatus(healthy=healthy, target=self.describe(), error=error)


class RedisSubscriber(_Connected, InputEndpoint):
    """SUBSCRIBEs to `channel` (PSUBSCRIBE with `pattern`) on a connection of its own."""

    acks_in_any_order = True
    redelivers = False  # pub/sub keeps nothing

    def __init__(self, options: RedisOptions, context: BuildContext) -> None:
        super().__init__(options, context)
        self._pubsub: PubSub | None = None
        self._wakeup = Wakeup()

    def connect(self) -> None:
        """Subscribe, and wait until Redis confirmed it (messages from then on arrive)."""
        self._acquire()
        if self._pubsub is not None:
            return
        assert self._lease is not None
        pubsub = self._lease.connection.pubsub()
        try:
            with translated_errors(self.describe(), ENDPOINT):
                subscribe = pubsub.psubscribe if self._options.pattern else pubsub.subscribe
                subscribe(self.channel)
                if pubsub.get_message(timeout=CONNECT_TIMEOUT) is None:
                    raise EndpointUnavailableError(f"{self.describe()}: SUBSCRIBE not confirmed")
        except BaseException:
            pubsub.close()
            raise
        self._pubsub = pubsub

    def receive(self, max_messages: int, timeout: float | None) -> Batch:
        pubsub = self._subscription()
        wakeup = self._wakeup
        deadline = None if timeout is None else time.monotonic() + timeout
        messages: list[Message] = []
        with translated_errors(self.describe(), ENDPOINT):
            while not messages:
                remaining = None if deadline is None else deadline - time.monotonic()
                wait = MAX_BLOCK if remaining is None else max(0.0, min(MAX_BLOCK, remaining))
                if wakeup.pending:  # interrupted: only what is already there
                    wait = 0
                self._take(pubsub.get_message(timeout=wait), messages)
                if wakeup.pending or (remaining is not None and remaining <= 0):
                    break
            while messages and len(messages) < max_messages:  # what has already arrived
                if not self._take(pubsub.get_message(timeout=0), messages):
                    break
        wakeup.consume()  # whatever this receive returns answers an interrupt
        return Batch(messages)

    def _take(self, item: dict[str, Any] | None, messages: list[Message]) -> bool:
        """Append `item` if it is a published message; False when nothing had arrived."""
        if item is None:
            return False
        if item.get("type") in _DATA_TYPES:
            messages.append(self._message(item))
        return True

    def _message(self, item: dict[str, Any]) -> Message:
        data = item.get("data")
        payload = data if isinstance(data, bytes) else str(data).encode()
        if not self._context.source_metadata:
            return Message.trusted(payload, NO_METADATA, new_message_id())
        metadata = {"mqb.src.redis_channel": _text(item.get("channel"))}
        if item.get("pattern") is not None:
            metadata["mqb.src.redis_pattern"] = _text(item.get("pattern"))
        return Message.trusted(payload, metadata, new_message_id())

    def _subscription(self) -> PubSub:
        if self._closed:
            raise ClosedError(f"{self.describe()} input is closed")
        if self._pubsub is None:  # a reconnect failed earlier: try again (retriable)
            self.connect()
        assert self._pubsub is not None
        return self._pubsub

    def status(self) -> EndpointStatus:
        return self._state()

    def interrupt(self) -> None:
        self._wakeup.interrupt()

    def close(self) -> None:
        pubsub, self._pubsub = self._pubsub, None
        try:
            if pubsub is not None:
                pubsub.close()
        finally:
            self._release()


class RedisPublisher(_Connected, OutputEndpoint):
    """PUBLISHes each payload; `send` returns once Redis answered every PUBLISH."""

    def connect(self) -> None:
        self._acquire()

    def _client(self) -> Redis:
        if self._closed:
            raise ClosedError(f"{self.describe()} output is closed")
        if self._lease is None:
            self._acquire()
        assert self._lease is not None
        return self._lease.connection

    def send(self, messages: Sequence[Message]) -> None:
        client = self._client()
        with translated_errors(self.describe(), ENDPOINT):
            if len(messages) == 1:
                client.publish(self.channel, messages[0].payload)
                return
            pipe = client.pipeline(transaction=False)
            for message in messages:
                pipe.publish(self.channel, message.payload)
            pipe.execute()

    def send_one(self, message: Message) -> None:
        client = self._client()
        with translated_errors(self.describe(), ENDPOINT):
            client.publish(self.channel, message.payload)

    def status(self) -> EndpointStatus:
        return self._state()

    def close(self) -> None:
        self._release()


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)
