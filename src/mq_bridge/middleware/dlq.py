"""dlq: send the messages that failed for good to a dead-letter endpoint.

Output only. When a send fails, the messages whose error is not retriable (a handler's
`NonRetryableError` or any other exception, a message a `retry` gave up on) are sent to the
dead-letter endpoint, and the original send then counts as handled for them. Retriable
failures are passed on unchanged, so the route (or a `retry` listed after this middleware)
tries them again. List dlq before retry: ``[dlq, retry]`` (the first is the outermost).

Each dead-lettered message keeps its payload and id, and gets in its metadata:

    mqb.dlq.error        the error, as text
    mqb.dlq.error_type   the error's class name
    mqb.dlq.route        the route's name
    mqb.dlq.attempts     how many times the message was tried
    mqb.dlq.endpoint     the output that failed it (e.g. ``memory:orders``)
    mqb.dlq.failed_at    when it was dead-lettered (ISO 8601, UTC)

If the dead-letter endpoint itself fails, those messages fail retriably: they are tried
again later rather than lost.

Options::

    dlq:
      endpoint: {memory: {topic: orders.dead}}   # any output endpoint, with its own middlewares
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ConfigDict, Field, field_validator

from mq_bridge.config.declarations import EndpointRef, Options
from mq_bridge.endpoints.base import BuildContext, EndpointStatus, OutputEndpoint
from mq_bridge.errors import ConfigError, EndpointError, SendError, is_retriable
from mq_bridge.message import Message
from mq_bridge.middleware.base import OutputMiddleware

__all__ = [
    "OPTIONS",
    "DeadLetterFailedError",
    "DeadLetterOptions",
    "DeadLetterOutput",
    "wrap_output",
]


class DeadLetterOptions(Options):
    """Sends messages that failed for good to another endpoint, with the error, route and
    attempt count in their metadata (mqb.dlq.*)."""

    model_config = ConfigDict(title="DeadLetterQueueMiddleware")  # mq-bridge's $defs name

    endpoint: EndpointRef = Field(description="The output endpoint that receives the dead letters.")

    @field_validator("endpoint")
    @classmethod
    def _names_an_endpoint(cls, endpoint: dict[str, Any]) -> dict[str, Any]:
        if not endpoint:
            raise ValueError("needs an output endpoint, e.g. {memory: {topic: dead}}")
        return endpoint


OPTIONS = DeadLetterOptions


class DeadLetterFailedError(EndpointError):
    """The dead-letter endpoint refused a message; it stays retriable so it is not lost."""

    retriable = True


class DeadLetterOutput(OutputMiddleware):
    """Passes sends to `inner` and diverts its non-retriable failures to `dead_letters`."""

    def __init__(self, inner: OutputEndpoint, dead_letters: OutputEndpoint, route: str) -> None:
        super().__init__(inner)
        self.dead_letters = dead_letters
        self.route = route

    def connect(self) -> None:
        self.dead_letters.connect()
        self.inner.connect()

    def send(self, messages: Sequence[Message]) -> None:
        try:
            self.inner.send(messages)
        except SendError as error:
            failures = error.failures
        except Exception as error:
            if is_retriable(error):
                raise
            failures = dict.fromkeys(range(len(messages)), error)
        else:
            return
        remaining = self._dead_letter(messages, failures)
        if remaining:
            raise SendError(remaining)

    def _dead_letter(
        self, messages: Sequence[Message], failures: Mapping[int, BaseException]
    ) -> dict[int, BaseException]:
        """Dead-letter the non-retriable failures; return the failures still open."""
        remaining = {i: e for i, e in failures.items() if is_retriable(e)}
        doomed = sorted(i for i in failures if i not in remaining)
        if not doomed:
            return remaining
        letters = [self._letter(messages[i], failures[i]) for i in doomed]
        try:
            self.dead_letters.send(letters)
        except SendError as error:
            for position, cause in error.failures.items():
                remaining[doomed[position]] = self._refused(cause)
        except Exception as error:
            for index in doomed:
                remaining[index] = self._refused(error)
        return remaining

    def _letter(self, message: Message, error: BaseException) -> Message:
        cause = _root_cause(error)
        return message.with_metadata(
            {
                "mqb.dlq.error": str(cause) or repr(cause),
                "mqb.dlq.error_type": type(cause).__name__,
                "mqb.dlq.route": self.route,
                "mqb.dlq.attempts": str(getattr(error, "attempts", 1)),
                "mqb.dlq.endpoint": self.inner.describe(),
                "mqb.dlq.failed_at": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            }
        )

    def _refused(self, cause: BaseException) -> DeadLetterFailedError:
        error = DeadLetterFailedError(
            f"dead-letter endpoint {self.dead_letters.describe()} failed: {cause!r}"
        )
        error.__cause__ = cause
        return error

    def flush(self) -> None:
        self.inner.flush()
        self.dead_letters.flush()

    def status(self) -> EndpointStatus:
        status = self.inner.status()
        dead = self.dead_letters.status()
        status.details["dlq"] = dead.as_dict()
        status.healthy = status.healthy and dead.healthy
        return status

    def close(self) -> None:
        try:
            self.inner.close()
        finally:
            self.dead_letters.close()


def _root_cause(error: BaseException) -> BaseException:
    """The handler's or endpoint's own error behind a `RetriesExhaustedError`."""
    return getattr(error, "last_error", error)


def wrap_output(
    inner: OutputEndpoint, options: DeadLetterOptions, context: BuildContext
) -> OutputEndpoint:
    """Wrap `inner` so its non-retriable failures go to the configured dead-letter endpoint."""
    if context.build_output is None:
        raise ConfigError("this runtime cannot build the dead-letter endpoint", "dlq.endpoint")
    return DeadLetterOutput(inner, context.build_output(options.endpoint), context.route_name)
