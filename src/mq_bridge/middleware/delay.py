"""delay: wait a fixed time before each batch goes through.

Input and output. On an output each `send` waits `delay_ms` first; on an input each
non-empty batch is held `delay_ms` before it is handed out. The wait is per batch, not per
message: with ``batch_size: 512`` and ``delay_ms: 100`` a route moves at most 512 messages
every 100 ms. Use `limiter` to cap a message rate instead.

Closing the output, interrupting the input or stopping the route ends a wait at once, so a
stopping route is not held up.

Options::

    delay:
      delay_ms: 250
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import Field

from mq_bridge.config.declarations import MAX_MILLISECONDS, Options
from mq_bridge.endpoints.base import Batch, BuildContext, InputEndpoint, OutputEndpoint
from mq_bridge.endpoints.kit.wakeup import Wakeup
from mq_bridge.message import Message
from mq_bridge.middleware._sleep import WakeableSleep
from mq_bridge.middleware.base import InputMiddleware, OutputMiddleware

__all__ = ["OPTIONS", "DelayOptions", "wrap_input", "wrap_output"]


class DelayOptions(Options):
    """Waits delay_ms before each batch is sent (output) or handed out (input)."""

    delay_ms: int = Field(ge=0, le=MAX_MILLISECONDS, description="The wait, in milliseconds.")


OPTIONS = DelayOptions


class DelayOutput(OutputMiddleware):
    """Waits before each send."""

    def __init__(
        self, inner: OutputEndpoint, seconds: float, sleep: WakeableSleep | None = None
    ) -> None:
        super().__init__(inner)
        self.seconds = seconds
        self._sleep = sleep or WakeableSleep()

    def send(self, messages: Sequence[Message]) -> None:
        self._sleep.sleep(self.seconds)
        self.inner.send(messages)

    def close(self) -> None:
        self._sleep.wake()
        self.inner.close()


class DelayInput(InputMiddleware):
    """Holds each received batch back before handing it out."""

    def __init__(self, inner: InputEndpoint, seconds: float) -> None:
        super().__init__(inner)
        self.seconds = seconds
        self._wakeup = Wakeup()  # the rule of `interrupt` (kept until a receive consumes it)
        self._sleep = WakeableSleep()  # the hold, which an interrupt cuts short

    def receive(self, max_messages: int, timeout: float | None) -> Batch:
        batch = self.inner.receive(max_messages, timeout)  # it ends at once when interrupted
        if batch and not self._wakeup.pending:
            self._sleep.sleep(self.seconds)
        # Consumed, then the sleep re-armed: an interrupt in between stays pending.
        self._wakeup.consume()
        self._sleep.reset()
        return batch

    def interrupt(self) -> None:
        self._wakeup.interrupt()
        self._sleep.wake()
        self.inner.interrupt()


def wrap_output(
    inner: OutputEndpoint, options: DelayOptions, context: BuildContext
) -> OutputEndpoint:
    """Wrap `inner` so each send waits `delay_ms` first."""
    return DelayOutput(inner, options.delay_ms / 1000, WakeableSleep.for_route(context))


def wrap_input(inner: InputEndpoint, options: DelayOptions, context: BuildContext) -> InputEndpoint:
    """Wrap `inner` so each received batch is held `delay_ms` before it is handed out."""
    return DelayInput(inner, options.delay_ms / 1000)
