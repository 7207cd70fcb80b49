"""limiter: keep an endpoint under a message rate.

Input and output. A batch of n messages takes n / `messages_per_second` seconds of the
endpoint's time: a send (or a received batch) waits until the time of the batches before
it has passed. The pace counts messages, not batches, so the rate holds whatever the batch
size. Idle time is not saved up: after a pause the first batch goes at once, and the pace
starts again from there (no burst above the rate).

Options::

    limiter:
      messages_per_second: 200   # > 0; fractions allowed (0.5 = one message every 2 s)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from pydantic import Field

from mq_bridge.config.declarations import Options
from mq_bridge.endpoints.base import Batch, BuildContext, InputEndpoint, OutputEndpoint
from mq_bridge.endpoints.kit.wakeup import Wakeup
from mq_bridge.message import Message
from mq_bridge.middleware._sleep import WakeableSleep
from mq_bridge.middleware.base import InputMiddleware, OutputMiddleware

__all__ = ["OPTIONS", "LimiterOptions", "Pacer", "wrap_input", "wrap_output"]


class LimiterOptions(Options):
    """Paces the endpoint to at most messages_per_second, counting the messages of each
    batch."""

    messages_per_second: float = Field(
        gt=0,
        allow_inf_nan=False,
        description="The highest rate, in messages per second (a finite number > 0).",
    )


OPTIONS = LimiterOptions


class Pacer:
    """Hands out start times so that n messages occupy n / rate seconds each."""

    def __init__(self, rate: float, clock: Any = time.monotonic) -> None:
        self.interval = 1.0 / rate
        self._clock = clock
        self._next_free = 0.0
        self._lock = threading.Lock()

    def reserve(self, count: int) -> float:
        """Seconds the caller must wait before moving `count` messages (0 when on time)."""
        with self._lock:
            now = self._clock()
            start = max(now, self._next_free)
            self._next_free = start + count * self.interval
            return start - now


class LimiterOutput(OutputMiddleware):
    """Waits its turn before each send."""

    def __init__(
        self, inner: OutputEndpoint, pacer: Pacer, sleep: WakeableSleep | None = None
    ) -> None:
        super().__init__(inner)
        self.pacer = pacer
        self._sleep = sleep or WakeableSleep()

    def send(self, messages: Sequence[Message]) -> None:
        self._sleep.sleep(self.pacer.reserve(len(messages)))
        self.inner.send(messages)

    def close(self) -> None:
        self._sleep.wake()
        self.inner.close()


class LimiterInput(InputMiddleware):
    """Waits its turn before handing out each received batch."""

    def __init__(self, inner: InputEndpoint, pacer: Pacer) -> None:
        super().__init__(inner)
        self.pacer = pacer
        self._wakeup = Wakeup()  # the rule of `interrupt` (kept until a receive consumes it)
        self._sleep = WakeableSleep()  # the pacing wait, which an interrupt cuts short

    def receive(self, max_messages: int, timeout: float | None) -> Batch:
        batch = self.inner.receive(max_messages, timeout)  # it ends at once when interrupted
        if batch:
            wait = self.pacer.reserve(len(batch))
            if not self._wakeup.pending:
                self._sleep.sleep(wait)
        # Consumed, then the sleep re-armed: an interrupt in between stays pending.
        self._wakeup.consume()
        self._sleep.reset()
        return batch

    def interrupt(self) -> None:
        self._wakeup.interrupt()
        self._sleep.wake()
        self.inner.interrupt()


def wrap_output(
    inner: OutputEndpoint, options: LimiterOptions, context: BuildContext
) -> OutputEndpoint:
    """Wrap `inner` so it sends at most `messages_per_second`."""
    pacer = Pacer(options.messages_per_second)
    return LimiterOutput(inner, pacer, WakeableSleep.for_route(context))


def wrap_input(
    inner: InputEndpoint, options: LimiterOptions, context: BuildContext
) -> InputEndpoint:
    """Wrap `inner` so it hands out at most `messages_per_second`."""
    return LimiterInput(inner, Pacer(options.messages_per_second))
