"""Delivering a batch to a route's output side, with the error policy of docs/design.md.

    send ok                      -> done
    retriable failure            -> retry just the failed messages, capped exponential
                                    backoff, forever (until the route stops: then the batch
                                    is nacked, never lost)
    non-retriable failure        -> the message is logged, dropped (acknowledged) and
                                    counted (`metrics_snapshot()[route]["route"]["delivery"]
                                    ["dropped"]`); a `dlq` middleware, when configured, has
                                    already taken it; a requester waiting for its reply
                                    (an http client, `Publisher.request`) is failed at once

The output side is the handler stage wrapped by the output's middleware, so "failure"
covers handler errors (`RetryableError`, `NonRetryableError`, anything else) and endpoint
errors alike. Waits use the route's stop event, so a stop ends a backoff at once.

Counters (``observability.counters``): the deliverer counts retries, drops, errors and
output reconnects. The handler stage, when the route has one, counts what the handler
handled and what the output endpoint took; without one, the deliverer counts a delivered
batch as handled and sent (a message a ``dlq`` took counts as sent there too).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from mq_bridge.endpoints.base import OutputEndpoint
from mq_bridge.endpoints.kit.replies import ReplyRegistry
from mq_bridge.errors import EndpointUnavailableError, SendError, is_retriable
from mq_bridge.message import Message
from mq_bridge.observability.counters import route_counters
from mq_bridge.runtime.handler import HandlerStage

__all__ = ["Deliverer"]

_log = logging.getLogger("mq_bridge.route")

FIRST_BACKOFF = 0.01


class Deliverer:
    """Sends batches through `output`, retrying and dropping as the error policy says."""

    def __init__(
        self,
        output: OutputEndpoint,
        stopping: threading.Event,
        route_name: str,
        max_backoff: float,
        replies: ReplyRegistry | None = None,
    ) -> None:
        self._output = output
        self._replies = replies
        self._stopping = stopping
        self._route = route_name
        self._max_backoff = max(max_backoff, FIRST_BACKOFF)
        self._counters = route_counters(route_name)
        stage = _handler_stage(output)
        if stage is not None:
            stage.counters = self._counters
        self._counts_sent = stage is None

    @property
    def output(self) -> OutputEndpoint:
        """The route's output side (its outermost middleware)."""
        return self._output

    def deliver(self, messages: Sequence[Message]) -> bool:
        """True once every message is delivered or dropped; False if stopped while retrying."""
        try:
            self._output.send(messages)
        except Exception as error:
            return self._retry(messages, error)
        if self._counts_sent:
            cell = self._counters.cell()
            cell.handled += len(messages)
            cell.sent += len(messages)
        return True

    def _retry(self, messages: Sequence[Message], error: Exception) -> bool:
        pending = list(messages)
        delay = FIRST_BACKOFF
        attempt = 1
        sent = 0  # messages some attempt delivered
        while True:
            failed = len(error.failures) if isinstance(error, SendError) else len(pending)
            self._counters.note_error(error, failed)
            sent += len(pending) - failed
            pending = self._keep_retriable(pending, error, attempt)
            if not pending:
                self._count_settled(len(messages), sent)
                return True
            if self._stopping.wait(delay):
                return False
            if isinstance(error, EndpointUnavailableError):
                self._reconnect()
            delay = min(delay * 2, self._max_backoff)
            attempt += 1
            self._counters.add(retried=len(pending))
            try:
                self._output.send(pending)
                self._count_settled(len(messages), sent + len(pending))
                return True
            except Exception as next_error:
                error = next_error

    def _count_settled(self, handled: int, sent: int) -> None:
        """Without a handler stage: a batch of `handled` messages left the output side,
        `sent` of them delivered (the rest dropped, or dead-lettered by a dlq)."""
        if self._counts_sent:
            self._counters.add(handled=handled, sent=sent)

    def _keep_retriable(
        self, pending: list[Message], error: Exception, attempt: int
    ) -> list[Message]:
        failures = (
            error.failures
            if isinstance(error, SendError)
            else dict.fromkeys(range(len(pending)), error)
        )
        retry: list[Message] = []
        dropped = 0
        for index in sorted(failures):
            cause = failures[index]
            if is_retriable(cause):
                retry.append(pending[index])
            else:
                dropped += 1
                if self._replies is not None:  # a requester waiting for it: fail it now
                    self._replies.fail(pending[index], cause)
                _log.warning(
                    "route %s: dropping message %s: %r (not retriable)",
                    self._route,
                    pending[index].id,
                    cause,
                )
        if dropped:
            _count_dropped(self._route, dropped)
        if retry:
            first = next(c for c in failures.values() if is_retriable(c))
            log = _log.warning if attempt in (1, 10) or attempt % 100 == 0 else _log.debug
            log(
                "route %s: retrying %d message(s) (attempt %d): %r",
                self._route,
                len(retry),
                attempt,
                first,
            )
        return retry

    def _reconnect(self) -> None:
        self._counters.note_reconnect("output")
        try:
            self._output.close()
            self._output.connect()
        except Exception as error:
            _log.warning("route %s: reconnecting the output failed: %r", self._route, error)


def _count_dropped(route: str, count: int) -> None:
    route_counters(route).add(dropped=count)


def _handler_stage(output: OutputEndpoint) -> HandlerStage | None:
    """The handler stage inside `output`'s middleware, if the route has a handler."""
    node: object = output
    while node is not None:
        if isinstance(node, HandlerStage):
            return node
        node = getattr(node, "inner", None)
    return None
