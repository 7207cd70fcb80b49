"""Small helpers for tests that go through memory topics."""

from __future__ import annotations

import time
import uuid

from mq_bridge import Consumer, Message


def unique(name: str) -> str:
    """A topic name no other test uses (memory topics are process-wide)."""
    return f"{name}-{uuid.uuid4().hex[:8]}"


def read(topic: str, count: int, timeout: float = 30.0) -> list[Message]:
    """Up to `count` messages from a memory topic, waiting at most `timeout` seconds."""
    got: list[Message] = []
    deadline = time.monotonic() + timeout
    with Consumer.from_config({"memory": {"topic": topic}}) as consumer:
        while len(got) < count and time.monotonic() < deadline:
            got += consumer.poll(count - len(got), 100)
        consumer.commit()
    return got
