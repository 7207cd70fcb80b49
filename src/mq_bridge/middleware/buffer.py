"""buffer: gather small sends into one larger send to the wrapped output.

Output only. Sends arriving within `max_delay_ms` of each other (from several publisher
threads, or a route with ``concurrency`` > 1) are joined into one batch and sent together,
which is much cheaper on outputs with a per-call cost (a network round trip, an fsync).

A send still returns only once its own messages were delivered, and raises if they failed
(a `SendError` indexed into its own batch): buffering never acknowledges anything that was
not delivered. The price is latency: a lone sender waits up to `max_delay_ms` for company.
A send that fills the buffer to `max_messages` goes out at once; so does everything on
`flush()` and `close()`.

Options::

    buffer:
      max_messages: 500    # send as soon as this many are waiting
      max_delay_ms: 5      # the longest a message waits for others
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from pydantic import Field

from mq_bridge.config.declarations import MAX_MILLISECONDS, Options
from mq_bridge.endpoints.base import BuildContext, OutputEndpoint
from mq_bridge.errors import SendError
from mq_bridge.message import Message
from mq_bridge.middleware.base import OutputMiddleware

__all__ = ["OPTIONS", "BufferOptions", "BufferOutput", "wrap_output"]


class BufferOptions(Options):
    """Joins sends that arrive within max_delay_ms into one send of up to max_messages; each
    send still returns only once its messages were delivered."""

    max_messages: int = Field(ge=1, description="Send as soon as this many messages are waiting.")
    max_delay_ms: int = Field(
        ge=0,
        le=MAX_MILLISECONDS,
        description="The longest a message waits for others, in milliseconds.",
    )


OPTIONS = BufferOptions


class _Group:
    """Messages of several sends that go out in one inner send, and how that went."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.messages: list[Message] = []
        self.done = False
        self.failures: dict[int, BaseException] = {}

    def add(self, messages: Sequence[Message]) -> int:
        """Append a sender's messages; return where they start in the group."""
        start = len(self.messages)
        self.messages.extend(messages)
        return start

    def send_to(self, output: OutputEndpoint) -> None:
        try:
            output.send(self.messages)
        except SendError as error:
            self.failures = error.failures
        except BaseException as error:
            self.failures = dict.fromkeys(range(len(self.messages)), error)
            if not isinstance(error, Exception):
                raise

    def failures_of(self, start: int, count: int) -> dict[int, BaseException]:
        """One sender's failures, indexed into its own batch."""
        return {i - start: e for i, e in self.failures.items() if start <= i < start + count}


class BufferOutput(OutputMiddleware):
    """Group commit: the sender that fills or times out a group sends it for everyone."""

    def __init__(self, inner: OutputEndpoint, max_messages: int, max_delay: float) -> None:
        super().__init__(inner)
        self.max_messages = max_messages
        self.max_delay = max_delay
        self._changed = threading.Condition()
        self._open: _Group | None = None
        self._send_lock = threading.Lock()  # one inner send at a time, in group order

    def send(self, messages: Sequence[Message]) -> None:
        if not messages:
            return
        with self._changed:
            group = self._open or self._new_group()
            start = group.add(messages)
            leads = self._wait_for_company(group)
        if leads:
            self._send_group(group)
        else:
            with self._changed:
                self._changed.wait_for(lambda: group.done)
        failures = group.failures_of(start, len(messages))
        if failures:
            raise SendError(failures)

    def _new_group(self) -> _Group:
        self._open = _Group(time.monotonic() + self.max_delay)
        return self._open

    def _wait_for_company(self, group: _Group) -> bool:
        """Wait (lock held) until the group fills, times out or is taken; True to send it."""
        while self._open is group:
            remaining = group.deadline - time.monotonic()
            if len(group.messages) >= self.max_messages or remaining <= 0:
                self._open = None
                return True
            self._changed.wait(remaining)
        return False

    def _send_group(self, group: _Group) -> None:
        try:
            with self._send_lock:
                group.send_to(self.inner)
        finally:  # even on KeyboardInterrupt: never leave the other senders waiting forever
            with self._changed:
                group.done = True
                self._changed.notify_all()

    def flush(self) -> None:
        with self._changed:
            group, self._open = self._open, None
        if group is not None:
            self._send_group(group)
        self.inner.flush()

    def close(self) -> None:
        try:
            self.flush()
        finally:
            self.inner.close()


def wrap_output(
    inner: OutputEndpoint, options: BufferOptions, context: BuildContext
) -> OutputEndpoint:
    """Wrap `inner` so concurrent sends are joined into larger ones."""
    return BufferOutput(inner, options.max_messages, options.max_delay_ms / 1000)
