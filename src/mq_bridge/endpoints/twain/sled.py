"""sled: mq-bridge-py's embedded-queue keys, served by our own embedded log (twainmq).

mq-bridge-py keeps a ``sled`` endpoint in a sled database directory. We accept the same
keys and keep the data in a twainmq store at `path` instead: **the files are ours, not
sled's** (a directory written by mq-bridge-py's sled is not read, and ours is not sled's).
Each `tree` is a one-partition topic, created on first use.

Features
    - Output: appends each batch with one write before `send` returns (as `twain`).
    - Input with ``delete_after_read: true`` (queue mode): a durable reader of the tree
      (the consumer group ``sled``): an acked message is never handed out again, across
      restarts, and readers in several processes share the tree. The records stay in the
      log until its retention removes them; they are consumed, not erased.
    - Input without it: reads the tree without keeping progress, from its start with
      ``read_from_start: true``, else from what is written after connecting — each new
      reader sees the same messages again, as mq-bridge-py's does. Nack re-reads the batch.

Options (mq-bridge-py 0.3.2's ``SledConfig``)
    path                the store's directory (required)
    tree                the queue's name (default "default")
    read_from_start     input: start at the tree's beginning (default false: new only)
    delete_after_read   input: queue mode, acked messages are consumed (default false)
"""

from __future__ import annotations

import threading
import time
from typing import Any

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
from mq_bridge.endpoints.twain.options import NAME_PATTERN, TwainOptions
from mq_bridge.errors import ClosedError, EndpointError

__all__ = ["OPTIONS", "SledOptions", "build_input", "build_output"]

#: The consumer group of queue-mode readers.
QUEUE_GROUP = "sled"
_FIRST_PAUSE = 0.0002
_MAX_PAUSE = 0.005


class SledOptions(Options):
    """An embedded queue in a local directory (kept in a twainmq store, not a sled one)."""

    model_config = {**Options.model_config, "title": "SledConfig"}

    path: str = Field(min_length=1, description="The store's directory.")
    tree: str | None = Field(
        None, pattern=NAME_PATTERN, description='The queue\'s name (default "default").'
    )
    read_from_start: bool = Field(False, description="Input: start at the tree's beginning.")
    delete_after_read: bool = Field(
        False, description="Input: queue mode; acked messages are consumed for good."
    )

    def as_twain(self) -> TwainOptions:
        return TwainOptions.model_validate({
            "root": self.path,
            "topic": self.tree or "default",
            "group": QUEUE_GROUP,
            "start_from": "start" if self.read_from_start else "now",
            "create": {"partitions": 1},
        })  # fmt: skip


OPTIONS = SledOptions


class SledReader(InputEndpoint):
    """Reads a tree without keeping progress (a twainmq consumer outside any group)."""

    def __init__(self, options: TwainOptions) -> None:
        self._options = options
        self._consumer: Any = None
        self._lock = threading.Lock()
        self._wakeup = Wakeup()

    def connect(self) -> None:
        from mq_bridge.endpoints.twain.options import open_store

        with self._lock:
            if self._consumer is None:
                store = open_store(self._options)
                self._consumer = store.consumer(self._options.topic, self._options.start_from)

    def receive(self, max_messages: int, timeout: float | None) -> Batch:
        from mq_bridge.endpoints.twain.codec import decode_batch

        wakeup = self._wakeup
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = _FIRST_PAUSE
        while True:
            with self._lock:
                if self._consumer is None:
                    raise ClosedError(f"{self.describe()} is not connected")
                try:
                    records = self._consumer.poll_many(max_messages, 0)
                except OSError as error:
                    raise EndpointError(f"{self.describe()}: {error}") from error
            interrupted = wakeup.consume()  # what the poll found answers it
            if records:
                messages, first, _after = decode_batch(records, self._options.topic)
                return Batch(messages, first)
            remaining = None if deadline is None else deadline - time.monotonic()
            if interrupted or (remaining is not None and remaining <= 0):
                return Batch([])
            wakeup.pause(pause if remaining is None else min(pause, remaining))
            pause = min(pause * 2, _MAX_PAUSE)

    def nack(self, batch: Batch) -> None:
        with self._lock:
            if self._consumer is not None and batch.token:
                for partition, offset in batch.token.items():
                    self._consumer.seek(partition, offset)

    def status(self) -> EndpointStatus:
        return EndpointStatus(healthy=self._consumer is not None, target=self.describe())

    def describe(self) -> str:
        return f"sled:{self._options.store_root}/{self._options.topic}"

    def interrupt(self) -> None:
        self._wakeup.interrupt()

    def close(self) -> None:
        with self._lock:
            consumer, self._consumer = self._consumer, None
        if consumer is not None:
            consumer.close()


def build_input(options: SledOptions, context: BuildContext) -> InputEndpoint:
    twain = options.as_twain()
    if options.delete_after_read:
        from mq_bridge.endpoints.twain.input import TwainInput

        return TwainInput(twain, QUEUE_GROUP, context.source_metadata)
    return SledReader(twain)


def build_output(options: SledOptions, context: BuildContext) -> OutputEndpoint:
    from mq_bridge.endpoints.twain.output import TwainOutput

    return TwainOutput(options.as_twain())
