"""reader: an output that answers each message with the next message of an input.

Features
    - ``{"reader": {<an input endpoint>}}`` wraps an input (with its own middlewares).
      `request(message)` returns the next message the input has, after acknowledging it
      at the input: a `Publisher.request` pulls one message, a route whose output is a
      `reader` fetches one message per message it handles. `send` pulls and acknowledges
      one message per message sent, and discards them (mq-bridge-py 0.3.2 does the same).
    - A request waits for a message up to its timeout (`RequestTimeoutError`); `send` waits
      until one is there, or until the route stops.
    - Output only: as an input, use the wrapped endpoint itself.

Options
    the input endpoint, e.g. ``{memory: {topic: answers}}``
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from pydantic import RootModel

from mq_bridge.config.declarations import InputEndpointRef
from mq_bridge.endpoints.base import BuildContext, EndpointStatus, InputEndpoint, OutputEndpoint
from mq_bridge.errors import ConfigError, RequestTimeoutError
from mq_bridge.message import Message

__all__ = ["OPTIONS", "ReaderOptions", "ReaderOutput", "build_output"]

#: How long one wait of `send` lasts before it looks at the route's stop flag again.
_SLICE = 0.25


class ReaderOptions(RootModel[InputEndpointRef]):
    """An input endpoint read one message per request (an output that pulls)."""


OPTIONS = ReaderOptions


class ReaderOutput(OutputEndpoint):
    """Pulls one message from `source` per message sent or requested."""

    def __init__(self, source: InputEndpoint, stopping: threading.Event | None) -> None:
        self._source = source
        self._stopping = stopping
        self._lock = threading.Lock()

    def connect(self) -> None:
        self._source.connect()

    def send(self, messages: Sequence[Message]) -> None:
        for _ in messages:
            self._next(None)

    def request(self, message: Message, timeout: float | None) -> Message:
        return self._next(timeout)

    def _next(self, timeout: float | None) -> Message:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while True:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise RequestTimeoutError(f"{self.describe()}: no message within {timeout:g} s")
                if self._stopping is not None and self._stopping.is_set():
                    raise RequestTimeoutError(f"{self.describe()}: the route is stopping")
                wait = _SLICE if remaining is None else min(_SLICE, remaining)
                batch = self._source.receive(1, wait)
                if batch:
                    self._source.ack(batch)
                    return batch.messages[0]

    def status(self) -> EndpointStatus:
        inner = self._source.status()
        return EndpointStatus(
            healthy=inner.healthy, target=self.describe(), pending=inner.pending, error=inner.error
        )

    def describe(self) -> str:
        return f"reader[{self._source.describe()}]"

    def close(self) -> None:
        self._source.close()


def build_output(options: ReaderOptions, context: BuildContext) -> ReaderOutput:
    if context.build_input is None:
        raise ConfigError("reader needs a context that can build its input", path="reader")
    return ReaderOutput(context.build_input(options.root), context.stopping)
