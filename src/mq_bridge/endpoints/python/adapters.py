"""Python endpoint objects (mq-bridge 1.2.0's plugin interface) as this package's endpoints.

The object a registered factory returns implements any of::

    receive_batch(max_messages) -> iterable | None   input: Messages, bytes, str or JSON
                                                      values; None or [] when nothing is
                                                      there now; raise StopIteration at
                                                      the end of a bounded source
    commit(dispositions)                              input: one "ack"/"nack" per message
                                                      of a batch, in receive order
    send_batch(messages)                              output: returns once they are sent
    close()                                           both

Calls into one object are serialized (a lock), so it need not be thread-safe. An input
whose object has nothing polls it again after a short sleep that doubles up to 50 ms and
resets when data comes; `interrupt()` ends that sleep. `close()` closes the object and a
later `connect()` asks the factory for a new one (the runtime reconnects that way).

Exceptions from the object propagate unchanged: `RetryableError` (or anything with
``retriable = True``) is retried, anything else is not (see `mq_bridge.errors`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from mq_bridge.endpoints.base import Batch, InputEndpoint, OutputEndpoint
from mq_bridge.endpoints.kit.wakeup import Wakeup
from mq_bridge.errors import ConfigError, EndpointError
from mq_bridge.message import Message

__all__ = ["PythonInput", "PythonOutput", "as_message"]

_FIRST_SLEEP = 0.001
_LONGEST_SLEEP = 0.05


def as_message(item: Any) -> Message:
    """An item of a ``receive_batch`` result as a `Message`."""
    if isinstance(item, Message):
        return item
    if isinstance(item, (bytes, bytearray, memoryview)):
        return Message(item)
    if isinstance(item, str):
        return Message(item.encode())
    return Message.from_json(item)


class _PythonEndpoint:
    """The object, made by the factory on build and again after each close."""

    side = ""
    required = ""

    def __init__(self, name: str, make: Callable[[], Any]) -> None:
        self.name = name
        self._make = make
        self._lock = threading.Lock()
        self._object: Any = self._new_object()

    def _new_object(self) -> Any:
        made = self._make()
        if not callable(getattr(made, self.required, None)):
            raise ConfigError(
                f"the {self.name} endpoint's object ({type(made).__name__}) has no "
                f"{self.required}(), so it cannot be used as an {self.side}",
                path=self.name,
            )
        return made

    def _current(self) -> Any:
        if self._object is None:
            raise EndpointError(f"{self.describe()}: used after close() without connect()")
        return self._object

    def connect(self) -> None:
        with self._lock:
            if self._object is None:
                self._object = self._new_object()

    def describe(self) -> str:
        return f"python:{self.name}"

    def close(self) -> None:
        with self._lock:
            made, self._object = self._object, None
        closer = getattr(made, "close", None)
        if callable(closer):
            closer()


class PythonInput(_PythonEndpoint, InputEndpoint):
    """Reads through the object's ``receive_batch``; acks through its ``commit``."""

    side = "input"
    required = "receive_batch"

    def __init__(self, name: str, make: Callable[[], Any]) -> None:
        super().__init__(name, make)
        self._ended = False
        self._wakeup = Wakeup()

    def receive(self, max_messages: int, timeout: float | None) -> Batch:
        deadline = None if timeout is None else time.monotonic() + timeout
        sleep = _FIRST_SLEEP
        wakeup = self._wakeup
        while not self._ended:
            items = self._receive_batch(max_messages)
            interrupted = wakeup.consume()  # items found meanwhile answer it
            if items:
                return Batch([as_message(item) for item in items])
            remaining = None if deadline is None else deadline - time.monotonic()
            if interrupted or (remaining is not None and remaining <= 0):
                break
            wakeup.pause(sleep if remaining is None else min(sleep, remaining))
            sleep = min(sleep * 2, _LONGEST_SLEEP)
        wakeup.consume()
        return Batch([])

    def _receive_batch(self, max_messages: int) -> list[Any]:
        with self._lock:
            made = self._current()
            try:
                items = made.receive_batch(max_messages)
            except StopIteration:
                self._ended = True
                return []
            if items is None:
                return []
            items = list(items)
        if len(items) > max_messages:
            raise EndpointError(
                f"{self.describe()}: receive_batch({max_messages}) returned {len(items)} items"
            )
        return items

    def ack(self, batch: Batch) -> None:
        self._commit(batch, "ack")

    def nack(self, batch: Batch) -> None:
        self._commit(batch, "nack")

    def _commit(self, batch: Batch, disposition: str) -> None:
        with self._lock:
            commit = getattr(self._current(), "commit", None)
            if callable(commit):
                commit([disposition] * len(batch.messages))

    @property
    def exhausted(self) -> bool:
        return self._ended

    def interrupt(self) -> None:
        self._wakeup.interrupt()

    def connect(self) -> None:
        super().connect()
        self._ended = False


class PythonOutput(_PythonEndpoint, OutputEndpoint):
    """Sends through the object's ``send_batch``."""

    side = "output"
    required = "send_batch"

    def send(self, messages: Sequence[Message]) -> None:
        with self._lock:
            self._current().send_batch(list(messages))
