"""stream_buffer: an in-process buffer of message streams, one partition per correlation id.

Features
    - The output appends each message to the partition named by its ``correlation_id``
      metadata; a message without one fails (not retriable), as in mq-bridge-py 0.3.2.
    - The input reads one partition: ``correlation_id`` is required there, so a reader
      receives exactly one request's or response's stream (an HTTP handler streaming a
      reply through ``stream_response_to`` writes here; the request's reader drains it).
    - A partition holds at most `capacity` messages (default 100); a writer waits up to
      10 s for room, then gets `SendTimeoutError` (retriable). Nack puts a batch back in
      front, in order. A partition is dropped when its last reader closes and it is empty,
      so finished streams do not accumulate.
    - Process-wide, like memory topics: nothing leaves the process or survives it.

Options (mq-bridge-py 0.3.2's ``StreamBufferConfig``)
    topic            the buffer's name, shared by writers and readers (required)
    correlation_id   input: the partition read (required on inputs; not set on outputs)
    capacity         messages per partition (default 100; 0 = unbounded)
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from pydantic import Field

from mq_bridge.config.declarations import Options
from mq_bridge.endpoints.base import (
    Batch,
    BuildContext,
    EndpointStatus,
    InputEndpoint,
    OutputEndpoint,
)
from mq_bridge.endpoints.kit.wakeup import Wakeup
from mq_bridge.endpoints.memory.topic import DEFAULT_CAPACITY, MemoryChannel
from mq_bridge.errors import ConfigError, NonRetryableError, SendError
from mq_bridge.message import Message

__all__ = ["OPTIONS", "StreamBufferOptions", "build_input", "build_output"]

#: The metadata field naming a message's partition.
CORRELATION_ID = "correlation_id"
#: How long a writer waits for room in a full partition.
SEND_TIMEOUT = 10.0


class StreamBufferOptions(Options):
    """A correlated in-process buffer: writers append by correlation_id, a reader reads one."""

    model_config = {**Options.model_config, "title": "StreamBufferConfig"}

    topic: str = Field(min_length=1, description="The buffer, shared by writers and readers.")
    correlation_id: str | None = Field(
        None, min_length=1, description="Input: the partition to read (required there)."
    )
    capacity: int | None = Field(
        None, ge=0, description="Messages per partition (default 100; 0: unbounded)."
    )


OPTIONS = StreamBufferOptions


class _Partitions:
    """Every buffer's partitions: (topic, correlation id) -> channel, with reader counts."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._channels: dict[tuple[str, str], MemoryChannel] = {}
        self._readers: dict[tuple[str, str], int] = {}

    def channel(self, key: tuple[str, str], capacity: int) -> MemoryChannel:
        with self._lock:
            channel = self._channels.get(key)
            if channel is None:
                channel = self._channels[key] = MemoryChannel(f"{key[0]}/{key[1]}", capacity)
            return channel

    def open_reader(self, key: tuple[str, str], capacity: int) -> MemoryChannel:
        channel = self.channel(key, capacity)
        with self._lock:
            self._readers[key] = self._readers.get(key, 0) + 1
        return channel

    def close_reader(self, key: tuple[str, str]) -> None:
        with self._lock:
            left = self._readers.get(key, 1) - 1
            if left > 0:
                self._readers[key] = left
                return
            self._readers.pop(key, None)
            channel = self._channels.get(key)
            if channel is not None and len(channel) == 0:
                del self._channels[key]

    def __len__(self) -> int:
        with self._lock:
            return len(self._channels)


PARTITIONS = _Partitions()


def _capacity(options: StreamBufferOptions) -> int:
    return DEFAULT_CAPACITY if options.capacity is None else options.capacity


class StreamBufferOutput(OutputEndpoint):
    """Appends each message to its correlation id's partition."""

    def __init__(self, options: StreamBufferOptions) -> None:
        self._topic = options.topic
        self._capacity = _capacity(options)

    def send(self, messages: Sequence[Message]) -> None:
        failures: dict[int, BaseException] = {}
        for index, message in enumerate(messages):
            correlation = message.metadata_view.get(CORRELATION_ID)
            if not correlation:
                failures[index] = NonRetryableError(
                    f"{self.describe()}: the message has no {CORRELATION_ID!r} metadata, "
                    "which names the stream it belongs to"
                )
                continue
            try:
                channel = PARTITIONS.channel((self._topic, correlation), self._capacity)
                channel.put_one(message, SEND_TIMEOUT)
            except Exception as error:
                failures[index] = error
        if failures:
            raise SendError(failures)

    def describe(self) -> str:
        return f"stream_buffer:{self._topic}"


class StreamBufferInput(InputEndpoint):
    """Reads the partition of one correlation id."""

    def __init__(self, options: StreamBufferOptions, correlation: str) -> None:
        self._key = (options.topic, correlation)
        self._capacity = _capacity(options)
        self._channel: MemoryChannel | None = None
        self._wakeup: Wakeup | None = None

    def connect(self) -> None:
        if self._channel is None:
            self._channel = PARTITIONS.open_reader(self._key, self._capacity)
            self._wakeup = self._channel.wakeup()

    def _open(self) -> MemoryChannel:
        self.connect()
        assert self._channel is not None
        return self._channel

    def receive(self, max_messages: int, timeout: float | None) -> Batch:
        channel = self._open()
        return Batch(channel.take(max_messages, timeout, self._wakeup))

    def nack(self, batch: Batch) -> None:
        self._open().requeue(batch.messages)

    def status(self) -> EndpointStatus:
        pending = len(self._channel) if self._channel is not None else None
        return EndpointStatus(healthy=True, target=self.describe(), pending=pending)

    def describe(self) -> str:
        return f"stream_buffer:{self._key[0]}/{self._key[1]}"

    def interrupt(self) -> None:
        wakeup = self._wakeup
        if wakeup is not None:
            wakeup.interrupt()

    def close(self) -> None:
        if self._channel is not None:
            self._channel = None
            PARTITIONS.close_reader(self._key)


def build_input(options: StreamBufferOptions, context: BuildContext) -> StreamBufferInput:
    if options.correlation_id is None:
        raise ConfigError(
            "a stream_buffer input reads one stream: set `correlation_id`",
            path="stream_buffer.correlation_id",
        )
    return StreamBufferInput(options, options.correlation_id)


def build_output(options: StreamBufferOptions, context: BuildContext) -> StreamBufferOutput:
    return StreamBufferOutput(options)
