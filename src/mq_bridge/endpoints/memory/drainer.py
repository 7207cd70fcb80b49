"""`MemoryDrainer`: read and discard messages from a memory topic, counting them.

Benchmarks and tests use it to empty a route's output topic as fast as possible.
"""

from __future__ import annotations

import time

from mq_bridge.endpoints.memory.topic import MemoryChannel, get_topic
from mq_bridge.errors import EndpointError

__all__ = ["MemoryDrainer"]


class MemoryDrainer:
    """Drains the shared queue of one memory topic."""

    def __init__(self, channel: MemoryChannel) -> None:
        """Prefer `MemoryDrainer.from_topic`."""
        self._channel = channel

    @classmethod
    def from_topic(cls, topic: str, capacity: int = 65536) -> MemoryDrainer:
        """A drainer for `topic` (created with `capacity` if it does not exist yet, else
        grown to it), as mq-bridge-py's."""
        name = topic.removeprefix("memory://")
        return cls(get_topic(name, capacity).queue)

    def drain(self, count: int, timeout: float | None = None, batch_size: int = 4096) -> int:
        """Take `count` messages and return `count`; a `timeout` (seconds) that passes first
        raises `EndpointError` (a `RuntimeError`) saying how many were taken, as in mq-bridge-py.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        taken = 0
        take = self._channel.take
        while taken < count:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                break
            taken += len(take(min(batch_size, count - taken), remaining))
        if taken < count:
            raise EndpointError(f"drained {taken} of {count} messages within {timeout}s")
        return taken
