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
from collections.abc import Iterable

from mq_bridge.endpoints.amqp.options import AmqpOptions
from mq_bridge.endpoints.base import BuildContext, OutputEndpoint
from mq_bridge.endpoints.kit.replies import ReplyRegistry, ReplyWaiter
from mq_bridge.message import Message

__all__ = ["ReplyForwarders"]


class _Forwarder(ReplyWaiter):
    """Publishes the reply to the request's ``reply_to`` queue when it completes."""

    __slots__ = ("_forwarders", "_reply_to")

    def __init__(self, correlation_id: str, forwarders: ReplyForwarders, reply_to: str) -> None:
        super().__init__(correlation_id, forwarders.registry)
        self._forwarders = forwarders
        self._reply_to = reply_to

    def complete(self, reply: Message) -> None:
        super().complete(reply)
        answer = reply.with_metadata(reply_to=self._reply_to, correlation_id=self.correlation_id)
        self._forwarders.output().send_one(answer)


class ReplyForwarders:
    """The input's registered forwarders, by ``correlation_id``."""

    def __init__(self, options: AmqpOptions, context: BuildContext) -> None:
        self.registry: ReplyRegistry = context.replies
        self._options = options.model_copy(
            update={"queue": None, "exchange": None, "subscribe_mode": False}
        )
        self._context = context
        self._output: OutputEndpoint | None = None
        self._lock = threading.Lock()
        self._waiting: dict[str, _Forwarder] = {}

    def expect(self, messages: Iterable[Message]) -> None:
        for message in messages:
            reply_to, correlation_id = message.get("reply_to"), message.get("correlation_id")
            if reply_to and correlation_id:
                forwarder = _Forwarder(correlation_id, self, reply_to)
                self._waiting[correlation_id] = forwarder
                self.registry.register(forwarder)

    def forget(self, messages: Iterable[Message]) -> None:
        if not self._waiting:
            return
        for message in messages:
            correlation_id = message.get("correlation_id")
            forwarder = self._waiting.pop(correlation_id, None) if correlation_id else None
            if forwarder is not None:
                self.registry.forget(forwarder)

    def output(self) -> OutputEndpoint:
        """The output replies go through (made and connected on the first reply)."""
        with self._lock:
            if self._output is None:
                from mq_bridge.endpoints.amqp.output import AmqpOutput

                output = AmqpOutput(self._options, self._context)
                output.connect()
                self._output = output
            return self._output

    def close(self) -> None:
        for forwarder in self._waiting.values():
            self.registry.forget(forwarder)
        self._waiting.clear()
        with self._lock:
            output, self._output = self._output, None
        if output is not None:
            output.close()
