"""Delivering a batch to a route's output side, with the error policy of docs/design.md.

    send ok                      -> done
    retriable failure            -> retry just the failed messages, capped exponential
                                    backoff, forever (until the route stops: then the batch
                                    is nacked, never lost)
    non-retriable failure        -> the message is logged, dropped (acknowledged) and
                                    counted (`metrics_snapshot()[route]["route"]["delivery"]
                                    ["dropped"]`); a `dlq` middleware, when configured, has
                                    already taken it

The output side is the handler stage wrapped by the output's middleware, so "failure"
covers handler errors (`RetryableError`, `NonRetryableError`, anything else) and endpoint
errors alike. Waits use the route's stop event, so a stop ends a backoff at once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from mq_bridge.endpoints.base import OutputEndpoint
from mq_bridge.errors import EndpointUnavailableError, SendError, is_retriable
from mq_bridge.message import Message

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
    ) -> None:
        self._output = output
        self._stopping = stopping
        self._route = route_name
        self._max_backoff = max(max_backoff, FIRST_BACKOFF)

    def deliver(self, messages: Sequence[Message]) -> bool:
        """True once every message is delivered or dropped; False if stopped while retrying."""
        try:
            self._output.send(messages)
            return True
        except Exception as error:
            return self._retry(messages, error)

    def _retry(self, messages: Sequence[Message], error: Exception) -> bool:
        pending = list(messages)
        delay = FIRST_BACKOFF
        attempt = 1
        while True:
            pending = self._keep_retriable(pending, error, attempt)
            if not pending:
                return True
            if self._stopping.wait(delay):
                return False
            if isinstance(error, EndpointUnavailableError):
                self._reconnect()
            delay = min(delay * 2, self._max_backoff)
            attempt += 1
            try:
                self._output.send(pending)
                return True
            except Exception as next_error:
                error = next_error

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
        try:
            self._output.close()
            self._output.connect()
        except Exception as error:
            _log.warning("route %s: reconnecting the output failed: %r", self._route, error)


def _count_dropped(route: str, count: int) -> None:
    # Imported here: the metrics module loads the config machinery (pydantic), which
    # `import mq_bridge` avoids, and a drop is rare.
    from mq_bridge.middleware.metrics import record_delivery_outcome

    record_delivery_outcome(route, dropped=count)
