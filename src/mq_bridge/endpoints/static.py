"""static: a fixed message, as an endless input or as the answer to every request.

Features
    - Input: every receive returns `max_messages` copies of the body (a load generator or a
      heartbeat source). Each copy has its own id.
    - Output: `send` accepts and drops messages; `request` answers with the body, carrying
      the request's ``correlation_id``.

Options
    a bare string (the body), or
    body       the body text (required); used verbatim as UTF-8 bytes
    raw        accepted for compatibility: the body is always used verbatim
    metadata   extra metadata on each produced message
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from pydantic import Field, RootModel

from mq_bridge.config.declarations import Options
from mq_bridge.endpoints.base import Batch, BuildContext, InputEndpoint, OutputEndpoint
from mq_bridge.message import Message, new_message_id

__all__ = ["OPTIONS", "StaticBody", "StaticOptions", "build_input", "build_output"]


class StaticBody(Options):
    """The body with options."""

    #: The body and metadata are message data, which any input may bring with a NUL too.
    NUL_ALLOWED: ClassVar[frozenset[str]] = frozenset({"body", "metadata"})

    body: str = Field(description="The body text, used verbatim as UTF-8 bytes.")
    raw: bool = Field(False, description="Accepted for compatibility: the body is verbatim.")
    metadata: dict[str, str] = Field(
        default_factory=dict, description="Extra metadata on each produced message."
    )


class StaticOptions(RootModel[str | StaticBody]):
    """A fixed message: the body as a string, or a mapping with `body`."""

    def body_and_metadata(self) -> tuple[bytes, dict[str, str]]:
        if isinstance(self.root, str):
            return self.root.encode(), {}
        return self.root.body.encode(), dict(self.root.metadata)


OPTIONS = StaticOptions


class StaticInput(InputEndpoint):
    """An endless source of copies of one message."""

    def __init__(self, body: bytes, metadata: dict[str, str]) -> None:
        self._body = body
        self._metadata = metadata

    def receive(self, max_messages: int, timeout: float | None) -> Batch:
        make = Message.trusted
        return Batch(
            [make(self._body, self._metadata, new_message_id()) for _ in range(max_messages)]
        )

    def describe(self) -> str:
        return "static"


class StaticOutput(OutputEndpoint):
    """Drops what is sent; answers every request with the body."""

    def __init__(self, body: bytes, metadata: dict[str, str]) -> None:
        self._body = body
        self._metadata = metadata

    def send(self, messages: Sequence[Message]) -> None:
        pass

    def request(self, message: Message, timeout: float | None) -> Message:
        metadata = dict(self._metadata)
        metadata["correlation_id"] = message.get("correlation_id") or message.assigned_id()
        return Message.trusted(self._body, metadata, new_message_id())

    def describe(self) -> str:
        return "static"


def build_input(options: StaticOptions, context: BuildContext) -> StaticInput:
    return StaticInput(*options.body_and_metadata())


def build_output(options: StaticOptions, context: BuildContext) -> StaticOutput:
    return StaticOutput(*options.body_and_metadata())
