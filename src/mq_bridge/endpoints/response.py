"""response: sends each message back to the requester waiting for it.

Features
    - The output of a request/reply route: a `Publisher.request` (or a memory publisher with
      ``request_reply: true``) waits on the request's ``correlation_id``; the route's handler
      result keeps that ``correlation_id``, and this endpoint completes the wait with it.
    - A reply nobody waits for any more (the requester timed out) is dropped and logged at
      debug level; it is not an error for the route.

Options
    none (write ``response: {}``)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mq_bridge.runtime.replies import deliver_reply
from mq_bridge.endpoints.base import BuildContext, OutputEndpoint
from mq_bridge.message import Message

__all__ = ["SCHEMA", "ResponseOutput", "build_output"]

SCHEMA: dict[str, Any] = {"type": ["object", "null"], "additionalProperties": False}


class ResponseOutput(OutputEndpoint):
    """Completes the waiting request that each message answers."""

    def send(self, messages: Sequence[Message]) -> None:
        for message in messages:
            deliver_reply(message)

    def send_one(self, message: Message) -> None:
        deliver_reply(message)

    def describe(self) -> str:
        return "response"


def build_output(options: Any, context: BuildContext) -> ResponseOutput:
    return ResponseOutput()
