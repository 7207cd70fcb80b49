"""retry: send again, with exponential backoff, the messages that failed retriably.

Output only. A send that fails is retried for the failed messages alone (a `SendError`'s
`failures`), and only for those whose error is retriable (`errors.is_retriable`: a handler's
`RetryableError`, an unreachable server, a send timeout). Non-retriable failures are passed
on at once. After `max_attempts` sends in all, the messages still failing fail for good: they
are raised as a `SendError` whose causes are `RetriesExhaustedError`s (not retriable, carrying
the attempt count), which a `dlq` listed before this middleware dead-letters.

Options::

    retry:
      max_attempts: 3           # sends in all, the first one included (0 or 1: no retry)
      initial_interval_ms: 100  # wait before the second attempt
      max_interval_ms: 5000     # cap of the wait
      multiplier: 2.0           # wait grows by this factor after each attempt
      jitter: 0.2               # each wait is shortened by up to this fraction, at random

The waits come from the project's one backoff (`mq_bridge.endpoints.kit.backoff.Backoff`),
the same the runtime uses while an output is unreachable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import Field, model_validator

from mq_bridge.config.declarations import MAX_MILLISECONDS, Options
from mq_bridge.endpoints.base import BuildContext, OutputEndpoint
from mq_bridge.endpoints.kit.backoff import Backoff
from mq_bridge.errors import ConfigError, MQBridgeError, SendError, is_retriable
from mq_bridge.message import Message
from mq_bridge.middleware._sleep import WakeableSleep
from mq_bridge.middleware.base import OutputMiddleware

__all__ = [
    "OPTIONS",
    "Backoff",  # re-exported: it lives in the kit, shared with the runtime
    "RetriesExhaustedError",
    "RetryOptions",
    "RetryOutput",
    "wrap_output",
]


class RetryOptions(Options):
    """Retries the messages of a send that failed retriably, with exponential backoff; after
    the last attempt they fail for good (a dlq listed before it receives them)."""

    max_attempts: int = Field(
        3, ge=0, description="Sends in all, the first one included (0 and 1: no retry)."
    )
    initial_interval_ms: int = Field(
        100,
        ge=0,
        le=MAX_MILLISECONDS,
        description="Wait before the second attempt, in milliseconds.",
    )
    max_interval_ms: int = Field(
        5000,
        ge=0,
        le=MAX_MILLISECONDS,
        description="Longest wait between two attempts, in milliseconds.",
    )
    multiplier: float = Field(
        2.0,
        ge=1,
        allow_inf_nan=False,
        description="Factor by which the wait grows after each attempt.",
    )
    jitter: float = Field(
        0.2,
        ge=0,
        le=1,
        allow_inf_nan=False,
        description="Each wait is shortened by a random fraction up to this (0 to 1).",
    )

    @model_validator(mode="after")
    def _cap_not_below_first_wait(self) -> RetryOptions:
        if self.max_interval_ms < self.initial_interval_ms:
            raise ValueError(
                f"max_interval_ms ({self.max_interval_ms}) is below initial_interval_ms "
                f"({self.initial_interval_ms})"
            )
        return self


OPTIONS = RetryOptions


class RetriesExhaustedError(MQBridgeError):
    """A message kept failing retriably until the last attempt; it has failed for good."""

    retriable = False

    def __init__(self, attempts: int, last_error: BaseException) -> None:
        super().__init__(f"gave up after {attempts} attempt(s): {last_error!r}")
        self.attempts = attempts
        self.last_error = last_error


class RetryOutput(OutputMiddleware):
    """Re-sends the retriably failed messages of a batch until they pass or attempts run out."""

    def __init__(
        self,
        inner: OutputEndpoint,
        max_attempts: int,
        backoff: Backoff,
        sleep: WakeableSleep | None = None,
    ) -> None:
        super().__init__(inner)
        self.max_attempts = max_attempts
        self.backoff = backoff
        self._sleep = sleep or WakeableSleep()

    def send(self, messages: Sequence[Message]) -> None:
        first_failures = self._try_send(messages)
        if first_failures:  # the common case, success, costs one call and no copies
            self._retry(messages, first_failures)

    def _retry(self, messages: Sequence[Message], failures: Mapping[int, BaseException]) -> None:
        pending = list(range(len(messages)))
        final: dict[int, BaseException] = {}
        attempt = 1
        while True:
            if attempt > 1:
                failures = self._try_send([messages[i] for i in pending])
            retriable = self._split(pending, failures, final)
            if not retriable:
                break
            if attempt >= self.max_attempts:
                for index, error in retriable.items():
                    final[index] = RetriesExhaustedError(attempt, error)
                break
            if not self._sleep.sleep(self.backoff.delay(attempt)):
                final.update(retriable)  # stopping: hand them back still retriable, not lost
                break
            pending = sorted(retriable)
            attempt += 1
        if final:
            raise SendError(final)

    def _try_send(self, batch: Sequence[Message]) -> Mapping[int, BaseException]:
        """The failures of one attempt, by index in `batch` (empty when all went through)."""
        try:
            self.inner.send(batch)
        except SendError as error:
            return error.failures
        except Exception as error:
            return dict.fromkeys(range(len(batch)), error)
        return {}

    @staticmethod
    def _split(
        pending: list[int],
        failures: Mapping[int, BaseException],
        final: dict[int, BaseException],
    ) -> dict[int, BaseException]:
        """Sort one attempt's failures: non-retriable ones into `final`, the rest returned.

        Both are keyed by the message's index in the original batch.
        """
        retriable: dict[int, BaseException] = {}
        for position, error in failures.items():
            index = pending[position]
            if is_retriable(error):
                retriable[index] = error
            else:
                final[index] = error
        return retriable

    def close(self) -> None:
        self._sleep.wake()
        self.inner.close()


def _backoff_from(options: RetryOptions) -> Backoff:
    return Backoff(
        options.initial_interval_ms / 1000,
        options.max_interval_ms / 1000,
        options.multiplier,
        options.jitter,
    )


def wrap_output(
    inner: OutputEndpoint, options: RetryOptions, context: BuildContext
) -> OutputEndpoint:
    """Wrap `inner` so retriable send failures are retried with backoff."""
    _refuse_inner_dlq(inner)
    return RetryOutput(
        inner,
        max(1, options.max_attempts),
        _backoff_from(options),
        WakeableSleep.for_route(context),
    )


def _refuse_inner_dlq(inner: OutputEndpoint) -> None:
    """A dlq inside retry would dead-letter before any retry and never see what retry gives up
    on; say so at build time rather than surprise the user later."""
    from mq_bridge.middleware.dlq import DeadLetterOutput

    endpoint: object = inner
    while endpoint is not None:
        if isinstance(endpoint, DeadLetterOutput):
            raise ConfigError(
                "'retry' is listed before 'dlq' in this output's middlewares; the first "
                "middleware is the outermost, so list dlq first: [dlq, retry]",
                "middlewares",
            )
        endpoint = getattr(endpoint, "inner", None)
