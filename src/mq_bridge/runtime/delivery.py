"""Delivering a batch to a route's output side, under the delivery rule of `failures`.

    send ok                       -> done: the input acks the batch
    some messages failed          -> each gets a verdict (`runtime.failures`):
        HOLD (the output is away, a full disk, a retriable error, a fault the source
              could redeliver)    -> kept: after a backoff the deliverer reconnects the
                                     output if it is unreachable, and sends just those
                                     messages again, until they pass or the route stops
                                     (then the batch is nacked, never lost)
        DROP (decided: a handler's NonRetryableError; or a fault the source cannot
              redeliver)          -> logged with its reason, counted as dropped,
                                     acknowledged; a requester waiting for its reply (an
                                     http client, `Publisher.request`) is failed at once

While a message is held the route is unhealthy (`RouteCounters.problems["output"]`, read by
`Route.status()`, the metrics and the console), and it reads nothing new (in the direct
loop the receive waits for this delivery; in the worker loop `max_handling` bounds it).

The output side is the handler stage wrapped by the output's middleware, so "failure"
covers handler errors and endpoint errors alike; a `dlq` middleware has already taken what
it dead-letters. Waits use the route's stop event, so a stop ends a backoff at once.

Counters (``observability.counters``): the deliverer counts retries, drops, errors and
output reconnects. The handler stage, when the route has one, counts what the handler
handled and what the output endpoint took; without one, the deliverer counts a delivered
batch as handled and sent (a message a ``dlq`` took counts as sent there too).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence

from mq_bridge.endpoints.base import OutputEndpoint
from mq_bridge.endpoints.kit.backoff import Backoff
from mq_bridge.endpoints.kit.replies import ReplyRegistry
from mq_bridge.errors import EndpointUnavailableError, SendError
from mq_bridge.message import Message
from mq_bridge.observability.counters import route_counters
from mq_bridge.runtime.failures import (
    ErrorLog,
    FailurePolicy,
    Verdict,
    describe,
    needs_reconnect,
)
from mq_bridge.runtime.handler import HandlerStage

__all__ = ["Deliverer"]

_log = logging.getLogger("mq_bridge.route")


class Deliverer:
    """Sends batches through `output`, holding and dropping as the delivery rule says."""

    def __init__(
        self,
        output: OutputEndpoint,
        stopping: threading.Event,
        route_name: str,
        backoff: Backoff,
        policy: FailurePolicy,
        replies: ReplyRegistry | None = None,
    ) -> None:
        self._output = output
        self._replies = replies
        self._stopping = stopping
        self._route = route_name
        self._backoff = backoff
        self._policy = policy
        self._errors = ErrorLog(_log, route_name)
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
        """True once every message is delivered or dropped; False if stopped while holding."""
        try:
            self._output.send(messages)
        except Exception as error:
            return self._settle(messages, error)
        if self._counts_sent:
            cell = self._counters.cell()
            cell.handled += len(messages)
            cell.sent += len(messages)
        return True

    def _settle(self, messages: Sequence[Message], error: Exception) -> bool:
        """Hold what must not be let go until it passes (True) or the route stops (False)."""
        pending = list(messages)
        attempt = 0
        sent = 0  # messages some attempt delivered
        while True:
            failures = _failures_of(error, len(pending))
            self._counters.note_error(error, len(failures))
            sent += len(pending) - len(failures)
            held, causes = self._sort(pending, failures)
            if not held:
                self._healthy_again()
                self._count_settled(len(messages), sent)
                return True
            attempt += 1
            self._report_held(len(held), causes[0], attempt)
            if self._stopping.wait(self._backoff.delay(attempt)):
                return False
            pending = held
            if needs_reconnect(causes, self._stopping):
                reconnect_error = self._reconnect()
                if reconnect_error is not None:  # still away: never send on a closed output
                    error = reconnect_error
                    continue
            self._counters.add(retried=len(pending))
            try:
                self._output.send(pending)
            except Exception as next_error:
                error = next_error
                continue
            self._healthy_again()
            self._count_settled(len(messages), sent + len(pending))
            return True

    def _sort(
        self, pending: list[Message], failures: Mapping[int, BaseException]
    ) -> tuple[list[Message], list[BaseException]]:
        """Drop what the rule lets go; the messages to hold, and their causes."""
        held: list[Message] = []
        causes: list[BaseException] = []
        dropped = 0
        for index in sorted(failures):
            cause = failures[index]
            if self._policy.verdict(cause) is Verdict.HOLD:
                held.append(pending[index])
                causes.append(cause)
                continue
            why = self._policy.drop_reason(cause)
            if self._replies is not None and self._replies.fail(pending[index], cause):
                # Its requester was told (an http client's 500, `request()` raising): it
                # holds the message and decides; nothing was lost, so it is no drop.
                self._errors.failed(f"failing request {pending[index].id} ({why})", cause)
                continue
            dropped += 1
            self._errors.failed(f"dropping message {pending[index].id} ({why})", cause)
        if dropped:
            self._counters.add(dropped=dropped)
        return held, causes

    def _report_held(self, count: int, cause: BaseException, attempt: int) -> None:
        problem = f"{count} message(s) held, retrying: {describe(cause)}"
        self._counters.set_health("output", problem)
        self._errors.failed(f"holding {count} message(s) (attempt {attempt})", cause)

    def _healthy_again(self) -> None:
        if "output" in self._counters.problems:
            self._counters.set_health("output", None)
            _log.warning("route %s: the output delivers again", self._route)

    def _count_settled(self, handled: int, sent: int) -> None:
        """Without a handler stage: a batch of `handled` messages left the output side,
        `sent` of them delivered (the rest dropped, or dead-lettered by a dlq)."""
        if self._counts_sent:
            self._counters.add(handled=handled, sent=sent)

    def _reconnect(self) -> EndpointUnavailableError | None:
        """Close and connect the output again; None when it connected, else why not (as an
        unavailability, so the next attempt reconnects again instead of sending)."""
        self._counters.note_reconnect("output")
        try:
            self._output.close()
            self._output.connect()
        except Exception as error:
            unavailable = EndpointUnavailableError(
                f"reconnecting {self._output.describe()} failed: {error!r}"
            )
            unavailable.__cause__ = error
            return unavailable
        return None


def _failures_of(error: Exception, count: int) -> Mapping[int, BaseException]:
    """``index -> cause`` for the messages of a send of `count` that failed with `error`."""
    if isinstance(error, SendError):
        return error.failures
    return dict.fromkeys(range(count), error)


def _handler_stage(output: OutputEndpoint) -> HandlerStage | None:
    """The handler stage inside `output`'s middleware, if the route has a handler."""
    node: object = output
    while node is not None:
        if isinstance(node, HandlerStage):
            return node
        node = getattr(node, "inner", None)
    return None
