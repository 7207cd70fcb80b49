"""memory: in-process topics, for tests, local pipelines and request/reply inside one process.

Features
    - A topic is a process-wide FIFO named by `topic`; queue-mode readers compete for its
      messages, `subscribe_mode` readers each get every message published after they
      subscribed (broadcast).
    - `capacity` bounds a topic: a writer waits for room up to `send_timeout_ms`, then gets
      a clear `SendTimeoutError` (a route retries it with backoff) instead of blocking forever.
    - Nack always requeues at the front, in order (holding a batch costs nothing in memory),
      so `enable_nack` is accepted for compatibility and never needed: nothing is lost.
    - `request_reply`: `send` waits for each message's reply, `request` returns it; the reply
      is whatever a route sends through a `response` output with the same `correlation_id`.
    - With ``MQB_SOURCE_METADATA=1`` inputs add ``mqb.src.memory_topic``.

Options
    topic / url          topic name, optionally ``memory://name`` (required)
    capacity             max queued messages per channel; default 100, 0 = unbounded. The
                         first user creates the topic; a later, larger capacity grows it
    request_reply        output: wait for a reply to each message (default false)
    request_timeout_ms   output: how long to wait for a reply (default 30000)
    subscribe_mode       input: broadcast subscriber instead of a queue reader (default false)
    enable_nack          accepted for compatibility (nack always works here)
    send_timeout_ms      output: max wait for room in a full topic (default 10000)
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping, Sequence
from typing import Any

from mq_bridge.runtime import knobs as _env
from mq_bridge.runtime.replies import expect_reply
from mq_bridge.endpoints.memory.topic import MemoryChannel, MemoryTopic, get_topic
from mq_bridge.endpoints.base import (
    Batch,
    BuildContext,
    EndpointStatus,
    InputEndpoint,
    OutputEndpoint,
)
from mq_bridge.errors import ClosedError, ConfigError, RequestTimeoutError, SendError
from mq_bridge.message import Message

__all__ = ["SCHEMA", "MemoryInput", "MemoryOutput", "build_input", "build_output"]

_MS_OPTION = {"type": ["integer", "null"], "minimum": 0}

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "topic": {"type": "string", "minLength": 1, "description": "Topic name or memory:// URL."},
        "url": {"type": "string", "minLength": 1, "description": "Alias for `topic`."},
        "capacity": {**_MS_OPTION, "description": "Max queued messages; 0 = unbounded."},
        "request_reply": {"type": "boolean", "default": False},
        "request_timeout_ms": {**_MS_OPTION, "description": "Reply wait (default 30000)."},
        "subscribe_mode": {"type": "boolean", "default": False},
        "enable_nack": {"type": "boolean", "default": False},
        "send_timeout_ms": {**_MS_OPTION, "description": "Max wait for room (default 10000)."},
    },
    "additionalProperties": False,
    "anyOf": [{"required": ["topic"]}, {"required": ["url"]}],
}


def topic_name(options: Mapping[str, Any]) -> str:
    """The topic named by `topic` or `url`, without a ``memory://`` prefix."""
    name = options.get("topic") or options.get("url")
    if not isinstance(name, str) or not name:
        raise ConfigError("needs a `topic` (or `url`)", path="memory")
    if "://" in name:
        scheme, _, rest = name.partition("://")
        if scheme != "memory":
            raise ConfigError(f"only memory:// topics are supported, got {name!r}", "memory.url")
        name = rest
    return name


def _seconds(options: Mapping[str, Any], key: str, default_ms: int) -> float:
    value = options.get(key)
    return (default_ms if value is None else value) / 1000


class MemoryInput(InputEndpoint):
    """Reads a memory topic as a queue reader or a broadcast subscriber."""

    acks_in_any_order = True  # an ack only forgets the batch; nothing is cumulative

    def __init__(self, topic: MemoryTopic, subscribe: bool) -> None:
        self._topic = topic
        self._subscribe = subscribe
        self._channel: MemoryChannel | None = None
        self._closed = False
        self._tag_source = _env.source_metadata_enabled()

    def connect(self) -> None:
        if self._channel is None:
            self._channel = self._topic.subscribe() if self._subscribe else self._topic.queue

    def receive(self, max_messages: int, timeout: float | None) -> Batch:
        channel = self._channel
        if channel is None:
            raise ClosedError(f"{self.describe()} is closed" if self._closed else "not connected")
        messages = channel.take(max_messages, timeout)
        if self._tag_source and messages:
            tag = {"mqb.src.memory_topic": self._topic.name}
            messages = [m.with_metadata(tag) for m in messages]
        return Batch(messages, messages)

    def nack(self, batch: Batch) -> None:
        if self._channel is not None and batch.messages:
            self._channel.requeue(batch.token)

    def status(self) -> EndpointStatus:
        channel = self._channel or self._topic.queue
        return EndpointStatus(
            healthy=not self._closed,
            target=self.describe(),
            pending=len(channel),
            capacity=channel.capacity or None,
            details={"mode": "subscribe" if self._subscribe else "queue"},
        )

    def describe(self) -> str:
        return f"memory:{self._topic.name}"

    def interrupt(self) -> None:
        if self._channel is not None:
            self._channel.interrupt()

    def close(self) -> None:
        if self._channel is not None and self._subscribe:
            self._topic.unsubscribe(self._channel)
        self._channel = None
        self._closed = True


class MemoryOutput(OutputEndpoint):
    """Publishes to a memory topic; with `request_reply`, waits for each reply."""

    def __init__(self, topic: MemoryTopic, options: Mapping[str, Any]) -> None:
        self._topic = topic
        self._request_reply = bool(options.get("request_reply"))
        self._send_timeout = _seconds(options, "send_timeout_ms", 10_000)
        self._request_timeout = _seconds(options, "request_timeout_ms", 30_000)
        self._closed = False
        if not self._request_reply:  # the publisher hot path: one call less per message
            self.send_one = functools.partial(topic.queue.put_within, self._send_timeout)  # type: ignore[method-assign]

    def send_one(self, message: Message) -> None:
        self.send((message,))

    def try_send_one(self, message: Message) -> bool:
        if self._closed:
            raise ClosedError(f"{self.describe()} output is closed")
        return not self._request_reply and self._topic.queue.try_put(message)

    def send(self, messages: Sequence[Message]) -> None:
        if self._closed:
            raise ClosedError(f"{self.describe()} output is closed")
        if not self._request_reply:
            self._topic.queue.put_many(messages, self._send_timeout)
            return
        failures: dict[int, BaseException] = {}
        for index, message in enumerate(messages):
            try:
                self.request(message, self._request_timeout)
            except Exception as error:
                failures[index] = error
        if failures:
            raise SendError(failures)

    def request(self, message: Message, timeout: float | None) -> Message:
        if self._closed:
            raise ClosedError(f"{self.describe()} output is closed")
        correlation_id = message.get("correlation_id")
        if correlation_id is None:
            correlation_id = message.id
            message = message.with_metadata(correlation_id=correlation_id)
        started = time.monotonic()
        with expect_reply(correlation_id) as waiter:
            self._topic.queue.put_one(message, self._send_timeout)
            remaining = (
                None if timeout is None else max(0.0, timeout - (time.monotonic() - started))
            )
            reply = waiter.wait(remaining)
        if reply is None:
            raise RequestTimeoutError(
                f"no reply on memory topic {self._topic.name!r} within {timeout}s "
                f"(correlation_id {correlation_id}); does a route with a `response` output "
                "read it?"
            )
        return reply

    def status(self) -> EndpointStatus:
        queue = self._topic.queue
        return EndpointStatus(
            healthy=True,
            target=self.describe(),
            pending=len(queue),
            capacity=queue.capacity or None,
        )

    def describe(self) -> str:
        return f"memory:{self._topic.name}"

    def close(self) -> None:
        self._closed = True
        self.send_one = self._send_after_close  # type: ignore[method-assign]

    def _send_after_close(self, message: Message) -> None:
        raise ClosedError(f"{self.describe()} output is closed")


def build_input(options: Mapping[str, Any], context: BuildContext) -> MemoryInput:
    """A queue reader, or a broadcast subscriber with ``subscribe_mode: true``."""
    topic = get_topic(topic_name(options), options.get("capacity"))
    return MemoryInput(topic, bool(options.get("subscribe_mode")))


def build_output(options: Mapping[str, Any], context: BuildContext) -> MemoryOutput:
    """A publisher to the topic."""
    return MemoryOutput(get_topic(topic_name(options), options.get("capacity")), options)
