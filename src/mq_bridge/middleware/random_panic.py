"""random_panic: inject a fault on the Nth message, to test error handling for real.

Input and output. Builds only in a route with ``allow_fault_injection: true`` (anywhere
else it is a config error), so a test config pasted into production cannot break it.

Modes, and what happens on the message that triggers:

    panic              the whole call raises `InjectedPanicError` (not retriable)
    disconnect         the whole call raises `EndpointUnavailableError` (retriable)
    timeout            the whole call raises `SendTimeoutError` (retriable)
    json_format_error  output: that message fails with a `ValueError` (not retriable);
                       input: that message's payload is replaced by bytes that are not JSON
    nack               output: that message fails with a `RetryableError`;
                       input: the batch is nacked and an empty batch handed out

An input batch that raises is nacked first, so it is delivered again, not lost.

Options::

    random_panic:
      mode: disconnect          # default panic
      trigger_on_message: 3     # the 3rd message through (1-based); null = every message
      enabled: true
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Literal, get_args

from pydantic import Field

from mq_bridge.config.declarations import Options
from mq_bridge.endpoints.base import Batch, BuildContext, InputEndpoint, OutputEndpoint
from mq_bridge.errors import (
    ConfigError,
    EndpointUnavailableError,
    MQBridgeError,
    RetryableError,
    SendError,
    SendTimeoutError,
)
from mq_bridge.message import Message
from mq_bridge.middleware.base import InputMiddleware, OutputMiddleware

__all__ = ["OPTIONS", "InjectedPanicError", "RandomPanicOptions", "wrap_input", "wrap_output"]

Mode = Literal["panic", "disconnect", "timeout", "json_format_error", "nack"]
MODES: tuple[Mode, ...] = get_args(Mode)
NOT_JSON = b"\x00injected: not JSON{"


class RandomPanicOptions(Options):
    """Fault injection for tests: fails the Nth message (or every one) in the given mode.
    Needs the route option allow_fault_injection."""

    mode: Mode = Field("panic", description="The fault to inject.")
    trigger_on_message: int | None = Field(
        None,
        ge=1,
        description="The message (1-based count) that triggers; null = every message.",
    )
    enabled: bool = Field(True, description="Inject at all.")


OPTIONS = RandomPanicOptions


class InjectedPanicError(MQBridgeError, RuntimeError):
    """The fault random_panic injects in ``panic`` mode."""


class Trigger:
    """Counts messages and says which ones (by position in a batch) the fault hits."""

    def __init__(self, nth: int | None) -> None:
        self.nth = nth
        self.seen = 0
        self._lock = threading.Lock()

    def hits(self, count: int) -> list[int]:
        with self._lock:
            first = self.seen
            self.seen += count
        if self.nth is None:
            return list(range(count))
        position = self.nth - 1 - first
        return [position] if 0 <= position < count else []


def _whole_call_error(mode: str) -> Exception | None:
    if mode == "panic":
        return InjectedPanicError("random_panic: injected panic")
    if mode == "disconnect":
        return EndpointUnavailableError("random_panic: injected disconnect")
    if mode == "timeout":
        return SendTimeoutError("random_panic: injected timeout")
    return None


class PanicOutput(OutputMiddleware):
    """Fails the triggering message (or the whole send) in the configured mode."""

    def __init__(self, inner: OutputEndpoint, mode: str, trigger: Trigger) -> None:
        super().__init__(inner)
        self.mode = mode
        self.trigger = trigger

    def send(self, messages: Sequence[Message]) -> None:
        hits = self.trigger.hits(len(messages))
        if not hits:
            self.inner.send(messages)
            return
        error = _whole_call_error(self.mode)
        if error is not None:
            raise error
        failures: dict[int, BaseException] = {i: self._message_error() for i in hits}
        rest = [i for i in range(len(messages)) if i not in failures]
        try:
            self.inner.send([messages[i] for i in rest])
        except SendError as send_error:
            failures.update({rest[p]: e for p, e in send_error.failures.items()})
        raise SendError(failures)

    def _message_error(self) -> Exception:
        if self.mode == "nack":
            return RetryableError("random_panic: injected nack")
        return ValueError("random_panic: injected JSON format error")


class PanicInput(InputMiddleware):
    """Breaks the batch holding the triggering message in the configured mode."""

    def __init__(self, inner: InputEndpoint, mode: str, trigger: Trigger) -> None:
        super().__init__(inner)
        self.mode = mode
        self.trigger = trigger

    def receive(self, max_messages: int, timeout: float | None) -> Batch:
        batch = self.inner.receive(max_messages, timeout)
        hits = self.trigger.hits(len(batch)) if batch else []
        if not hits:
            return batch
        error = _whole_call_error(self.mode)
        if error is not None or self.mode == "nack":
            self.inner.nack(batch)
            if error is not None:
                raise error
            return Batch([])
        messages = list(batch.messages)
        for index in hits:
            messages[index] = messages[index].with_payload(NOT_JSON)
        return Batch(messages, batch.token)


def _refuse_unless_allowed(context: BuildContext) -> None:
    if not context.allow_fault_injection:
        raise ConfigError(
            "fault injection is off for this route; set allow_fault_injection: true "
            "on the route to use random_panic",
            "random_panic",
        )


def wrap_output(
    inner: OutputEndpoint, options: RandomPanicOptions, context: BuildContext
) -> OutputEndpoint:
    """Wrap `inner` to fail the triggering message; refuses without allow_fault_injection."""
    _refuse_unless_allowed(context)
    if not options.enabled:
        return inner
    return PanicOutput(inner, options.mode, Trigger(options.trigger_on_message))


def wrap_input(
    inner: InputEndpoint, options: RandomPanicOptions, context: BuildContext
) -> InputEndpoint:
    """Wrap `inner` to break the triggering batch; refuses without allow_fault_injection."""
    _refuse_unless_allowed(context)
    if not options.enabled:
        return inner
    return PanicInput(inner, options.mode, Trigger(options.trigger_on_message))
