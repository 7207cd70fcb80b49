"""The `memory` output: publishes to a memory topic, or requests and waits for replies."""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from mq_bridge.endpoints.base import EndpointStatus, OutputEndpoint
from mq_bridge.endpoints.memory.options import MemoryOptions
from mq_bridge.endpoints.memory.topic import MemoryTopic
from mq_bridge.errors import ClosedError, RequestTimeoutError, SendError
from mq_bridge.message import Message

if TYPE_CHECKING:
    from mq_bridge.endpoints.kit.replies import ReplyRegistry

__all__ = ["MemoryOutput"]


class MemoryOutput(OutputEndpoint):
    """Publishes to a memory topic; with `request_reply`, waits for each reply."""

    def __init__(self, topic: MemoryTopic, options: MemoryOptions, replies: ReplyRegistry) -> None:
        self._topic = topic
        self._replies = replies
        self._request_reply = options.request_reply
        self._send_timeout = options.send_timeout_ms / 1000
        self._request_timeout = options.request_timeout_ms / 1000
        self._closed = False
        if not self._request_reply:  # the publisher hot path: one call less per message
            self.send_one = functools.partial(topic.queue.put_within, self._send_timeout)  # type: ignore[method-assign]

    def connect(self) -> None:
        self._closed = False  # a closed output opens again: the route's reconnect

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
        if not self._request_reply:  # a plain publish: sent, then "only acknowledged"
            return super().request(message, timeout)
        correlation_id = message.get("correlation_id")
        if correlation_id is None:
            correlation_id = message.assigned_id()
            message = message.with_metadata(correlation_id=correlation_id)
        started = time.monotonic()
        with self._replies.expect(correlation_id) as waiter:
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
            target=self._topic.name,
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
