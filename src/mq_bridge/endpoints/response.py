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
from typing import TYPE_CHECKING

from mq_bridge.config.declarations import Options
from mq_bridge.endpoints.base import BuildContext, OutputEndpoint
from mq_bridge.message import Message

if TYPE_CHECKING:
    from mq_bridge.endpoints.kit.replies import ReplyRegistry

__all__ = ["OPTIONS", "ResponseOptions", "ResponseOutput", "build_output"]


class ResponseOptions(Options):
    """No options (write ``response: {}`` or ``response: null``)."""


OPTIONS = ResponseOptions


class ResponseOutput(OutputEndpoint):
    """Completes the waiting request that each message answers."""

    def __init__(self, replies: ReplyRegistry) -> None:
        self._deliver = replies.deliver

    def send(self, messages: Sequence[Message]) -> None:
        for message in messages:
            self._deliver(message)

    def send_one(self, message: Message) -> None:
        self._deliver(message)

    def request(self, message: Message, timeout: float | None) -> Message:
        """The message itself, with its id: a request to `response` answers itself (the
        reply a waiting requester would get from a route ending here)."""
        message.id_int  # noqa: B018 - a new message gets its id as it travels
        self._deliver(message)
        return message

    def describe(self) -> str:
        return "response"


def build_output(options: ResponseOptions, context: BuildContext) -> ResponseOutput:
    return ResponseOutput(context.replies)
