"""Publisher confirms, pipelined: many messages in flight, each send waits for its own.

All of it runs on the connection's I/O thread except `Pending.wait`::

    send(messages) ── publish m0..mN (one hand-over) ──▶ broker
                  ◀── basic.ack / basic.nack (delivery tag, multiple) ──
    Confirms maps each delivery tag to (Pending, index); a multiple ack settles every
    tag up to it. The send returns once its Pending has no message left unsettled.

A channel in confirm mode numbers its publishes 1, 2, 3, ...; `Confirms.expect` follows
the same count, so it is called once per successful ``basic_publish``, in order.
"""

from __future__ import annotations

import threading
from typing import Any

from mq_bridge.endpoints.amqp.connection import Channel
from mq_bridge.errors import EndpointError, EndpointUnavailableError

__all__ = ["Confirms", "Pending"]


class Pending:
    """The outcome of one send: per message, confirmed or the error that failed it."""

    __slots__ = ("_event", "failures", "remaining", "size")

    def __init__(self, size: int) -> None:
        self.size = size
        self.remaining = size
        self.failures: dict[int, BaseException] = {}
        self._event = threading.Event()

    def settle(self, index: int, error: BaseException | None = None) -> None:
        if error is not None:
            self.failures[index] = error
        self.remaining -= 1
        if self.remaining <= 0:
            self._event.set()

    def fail_from(self, start: int, error: BaseException) -> None:
        """Messages `start`.. were never published (the channel failed)."""
        failure = error if isinstance(error, EndpointError) else _unavailable(error)
        for index in range(start, self.size):
            self.settle(index, failure)

    def done_all(self) -> None:
        """Without confirms: every message was handed to the connection."""
        self.remaining = 0
        self._event.set()

    def wait(self, timeout: float) -> bool:
        return self._event.wait(timeout)


class Confirms:
    """The publisher confirms of one channel (see the module docstring)."""

    def __init__(self, channel: Channel, target: str) -> None:
        self.channel = channel
        self._target = target
        self._last = 0  # the delivery tag of the latest publish
        self._low = 1  # no unsettled tag below this one
        self._waiting: dict[int, tuple[Pending, int, Any]] = {}
        self._returned: set[str] = set()

    def enable(self, done: Any) -> None:
        """Put the channel in confirm mode (``channel.run(confirms.enable, timeout)``)."""
        self.channel.pika.add_on_return_callback(self._on_return)
        self.channel.pika.confirm_delivery(self._on_confirm, callback=done)

    def expect(self, pending: Pending, index: int, routed_to: str | None) -> None:
        """The message `index` of `pending` was just published. `routed_to` (a message
        id) when it was published `mandatory`: a return of it fails it."""
        self._last += 1
        self._waiting[self._last] = (pending, index, routed_to)

    def _on_confirm(self, frame: Any) -> None:
        method = frame.method
        acked = method.NAME == "Basic.Ack"
        tag = method.delivery_tag
        waiting = self._waiting
        tags = range(self._low, tag + 1) if method.multiple else (tag,)
        for each in tags:
            entry = waiting.pop(each, None)
            if entry is not None:
                self._settle(entry, acked)
        low, last = self._low, self._last
        while low <= last and low not in waiting:
            low += 1
        self._low = low

    def _settle(self, entry: tuple[Pending, int, Any], acked: bool) -> None:
        pending, index, message_id = entry
        error: BaseException | None = None
        if not acked:
            error = EndpointUnavailableError(f"{self._target}: the broker nacked the message")
        elif message_id is not None and message_id in self._returned:
            self._returned.discard(message_id)
            error = EndpointError(f"{self._target}: unroutable: no queue took the message")
        pending.settle(index, error)

    def _on_return(self, _channel: Any, _method: Any, properties: Any, _body: bytes) -> None:
        # A returned mandatory message is confirmed (acked) right after its return.
        self._returned.add(properties.message_id)

    def fail_all(self, error: BaseException) -> None:
        """The channel closed: every unconfirmed message fails with `error`."""
        waiting, self._waiting = self._waiting, {}
        for pending, index, _ in waiting.values():
            pending.settle(index, error)


def _unavailable(error: BaseException) -> EndpointUnavailableError:
    return EndpointUnavailableError(f"publishing failed ({error!r})")
