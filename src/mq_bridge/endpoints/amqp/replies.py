"""Answering AMQP requests from a route whose output is `response` (the peer's responder shape).

A request read by the input carries ``reply_to`` and ``correlation_id`` (AMQP properties,
in the message's metadata). For each, the input registers a `ReplyForwarder` with the
process's reply registry: when the route's `response` output delivers the reply (same
``correlation_id``), the forwarder publishes it to ``reply_to`` through an `amqp` output of
the input's connection settings (no queue, no exchange: it sends to each message's
``reply_to``), with the publisher confirm awaited as for any send. Forwarders of a batch are
forgotten when the batch is acked or nacked (a reply after that has no one to go to).
"""

from __future__ import annotations

import threading

from mq_bridge.endpoints.amqp.options import AmqpOptions
from mq_bridge.endpoints.base import BuildContext, OutputEndpoint
from mq_bridge.endpoints.kit import replies
from mq_bridge.message import Message

__all__ = ["ReplyForwarders"]


class ReplyForwarders(replies.ReplyForwarders):
    """Publishes each reply to its request's ``reply_to`` queue."""

    def __init__(self, options: AmqpOptions, context: BuildContext) -> None:
        super().__init__(context.replies)
        self._options = options.model_copy(
            update={"queue": None, "exchange": None, "subscribe_mode": False}
        )
        self._context = context
        self._output: OutputEndpoint | None = None
        self._output_lock = threading.Lock()

    def forward(self, reply: Message, reply_to: str, correlation_id: str) -> None:
        answer = reply.with_metadata(reply_to=reply_to, correlation_id=correlation_id)
        self.output().send_one(answer)

    def output(self) -> OutputEndpoint:
        """The output replies go through (made and connected on the first reply)."""
        with self._output_lock:
            if self._output is None:
                from mq_bridge.endpoints.amqp.output import AmqpOutput

                output = AmqpOutput(self._options, self._context)
                output.connect()
                self._output = output
            return self._output

    def release(self) -> None:
        with self._output_lock:
            output, self._output = self._output, None
        if output is not None:
            output.close()
