"""null: discards everything sent to it; as an input, a stream that never yields.

Features
    - The default output of a route that has none: the handler's results are dropped
      (the input is still acknowledged).
    - As an input it waits out each receive and returns nothing (useful as a placeholder).

Options
    none (write ``null: null`` or ``null: {}``)
"""

from __future__ import annotations

from collections.abc import Sequence

from mq_bridge.config.declarations import Options
from mq_bridge.endpoints.base import Batch, BuildContext, InputEndpoint, OutputEndpoint
from mq_bridge.endpoints.kit.wakeup import Wakeup
from mq_bridge.message import Message

__all__ = ["OPTIONS", "NullOptions", "build_input", "build_output"]


class NullOptions(Options):
    """No options (write ``null: null`` or ``null: {}``)."""


OPTIONS = NullOptions


class NullInput(InputEndpoint):
    """An input that never has a message."""

    def __init__(self) -> None:
        self._wakeup = Wakeup()

    def receive(self, max_messages: int, timeout: float | None) -> Batch:
        self._wakeup.pause(timeout)
        self._wakeup.consume()
        return Batch([])

    def describe(self) -> str:
        return "null"

    def interrupt(self) -> None:
        self._wakeup.interrupt()


class NullOutput(OutputEndpoint):
    """An output that accepts and drops every message."""

    def send(self, messages: Sequence[Message]) -> None:
        pass

    def send_one(self, message: Message) -> None:
        pass

    def describe(self) -> str:
        return "null"


def build_input(options: NullOptions, context: BuildContext) -> NullInput:
    return NullInput()


def build_output(options: NullOptions, context: BuildContext) -> NullOutput:
    return NullOutput()
