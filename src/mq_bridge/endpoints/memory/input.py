"""The `memory` input: a queue reader or a broadcast subscriber of a memory topic."""

from __future__ import annotations

from mq_bridge.endpoints.base import Batch, EndpointStatus, InputEndpoint
from mq_bridge.endpoints.kit.wakeup import Wakeup
from mq_bridge.endpoints.memory.topic import MemoryChannel, MemoryTopic
from mq_bridge.errors import ClosedError

__all__ = ["MemoryInput"]


class MemoryInput(InputEndpoint):
    """Reads a memory topic as a queue reader or a broadcast subscriber."""

    acks_in_any_order = True  # an ack only forgets the batch; nothing is cumulative

    def __init__(self, topic: MemoryTopic, subscribe: bool, tag_source: bool) -> None:
        self._topic = topic
        self._subscribe = subscribe
        self._channel: MemoryChannel | None = None
        self._wakeup: Wakeup | None = None
        self._closed = False
        self._tag_source = tag_source

    def connect(self) -> None:
        if self._channel is None:
            self._channel = self._topic.subscribe() if self._subscribe else self._topic.queue
            self._wakeup = self._channel.wakeup()

    def receive(self, max_messages: int, timeout: float | None) -> Batch:
        channel = self._channel
        if channel is None:
            raise ClosedError(f"{self.describe()} is closed" if self._closed else "not connected")
        messages = channel.take(max_messages, timeout, self._wakeup)
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
            target=self._topic.name,  # mq-bridge's status names the topic alone
            pending=len(channel),
            capacity=channel.capacity or None,
            details={"mode": "subscribe" if self._subscribe else "queue"},
        )

    def describe(self) -> str:
        return f"memory:{self._topic.name}"

    def interrupt(self) -> None:
        wakeup = self._wakeup
        if wakeup is not None:
            wakeup.interrupt()

    def close(self) -> None:
        if self._channel is not None and self._subscribe:
            self._topic.unsubscribe(self._channel)
        self._channel = None
        self._closed = True
