"""Small helpers for the bridge's tests: memory topics, endpoints opened by hand, and a retry
through a broker restart."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from mq_bridge import Consumer, Message
from mq_bridge.endpoints.base import InputEndpoint, OutputEndpoint
from mq_bridge.errors import is_retriable
from mq_bridge.runtime.factory import build_input, build_output, new_context

T = TypeVar("T")


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


def open_input(
    config: dict[str, Any], route: str = "test", source_metadata: bool | None = None
) -> InputEndpoint:
    """The input `config` describes, built for a route named `route` and connected.

    `source_metadata` overrides ``MQB_SOURCE_METADATA`` for this input (None: as it says)."""
    context = new_context(route)
    if source_metadata is not None:
        context.source_metadata = source_metadata
    source = build_input(config, context)
    source.connect()
    return source


def open_output(config: dict[str, Any], route: str = "test") -> OutputEndpoint:
    """The output `config` describes, built for a route named `route` and connected."""
    output = build_output(config, new_context(route))
    output.connect()
    return output


def retrying(
    call: Callable[[], T],
    deadline: float,
    pause: float = 0.2,
    errors: type[Exception] | tuple[type[Exception], ...] = Exception,
) -> T:
    """`call()` until it returns: an error of `errors` that is retriable (`is_retriable`) is
    tried again after `pause` seconds until `deadline` (a `time.monotonic()` value) passes.
    What a test does while a broker restarts (`tests.brokers.restart_broker`)."""
    while True:
        try:
            return call()
        except errors as error:
            if not is_retriable(error) or time.monotonic() > deadline:
                raise
            time.sleep(pause)
