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

from collections.abc import Mapping, Sequence
from typing import Any

from mq_bridge.endpoints.base import Batch, BuildContext, InputEndpoint, OutputEndpoint
from mq_bridge.message import Message, new_message_id

__all__ = ["SCHEMA", "build_input", "build_output"]

SCHEMA: dict[str, Any] = {
    "oneOf": [
        {"type": "string", "description": "The body."},
        {
            "type": "object",
            "properties": {
                "body": {"type": "string"},
                "raw": {"type": "boolean", "default": False},
                "metadata": {"type": "object", "additionalProperties": {"type": "string"}},
            },
            "required": ["body"],
            "additionalProperties": False,
        },
    ]
}


def _body_and_metadata(options: Any) -> tuple[bytes, dict[str, str]]:
    if isinstance(options, str):
        return options.encode(), {}
    assert isinstance(options, Mapping)
    return str(options["body"]).encode(), dict(options.get("metadata") or {})


class StaticInput(InputEndpoint):
    """An endless source of copies of one message."""

    def __init__(self, body: bytes, metadata: dict[str, str]) -> None:
        self._body = body
        self._metadata = metadata

    def receive(self, max_messages: int, timeout: float | None) -> Batch:
        make = Message._trusted
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
        metadata["correlation_id"] = message.get("correlation_id") or message.id
        return Message._trusted(self._body, metadata, new_message_id())

    def describe(self) -> str:
        return "static"


def build_input(options: Any, context: BuildContext) -> StaticInput:
    return StaticInput(*_body_and_metadata(options))


def build_output(options: Any, context: BuildContext) -> StaticOutput:
    return StaticOutput(*_body_and_metadata(options))
