"""What a route does with a message its output side failed: the delivery rule, in one place.

A message is acknowledged at its source only after its output accepted it, or after a
decision let it go. Each failed message gets one of two verdicts:

    cause                                        verdict   why
    -------------------------------------------  --------  ---------------------------------
    retriable (`errors.is_retriable`): a broker  HOLD      the output is away for now: keep
      away, a full disk, a send timeout, a                 it, back off, try again (and
      handler's `RetryableError`                            reconnect the output if it is
    `ClosedError` while the route runs           HOLD        unreachable)
    `RetriesExhaustedError` of an unreachable    HOLD      `retry` gave up on the broker,
      output                                               not on the message
    `NonRetryableError` (a handler's decision)   DROP      decided: dead-lettered by a dlq
    `RetriesExhaustedError` of a handler's                 (which takes it before it gets
      `RetryableError`                                      here), else dropped and counted
    anything else: a handler bug, a message the  HOLD      nobody decided: the message is
      broker refuses                                       redelivered with backoff, the
                                                           route unhealthy, naming the error
                  ... but when the source cannot redeliver  DROP  (memory without
                  (`InputEndpoint.redelivers` is False) or        `enable_nack`, a live
                  the route says ``on_error: drop``               subscriber, an http request)

A held message never makes a hot loop: the deliverer waits the route's backoff between
attempts (`mq_bridge.endpoints.kit.backoff`), and a stop ends the wait and nacks the batch.
"""

from __future__ import annotations

import enum
import logging
import threading
import time

from mq_bridge.errors import (
    ClosedError,
    EndpointError,
    EndpointUnavailableError,
    NonRetryableError,
    RetryableError,
    is_retriable,
)

__all__ = [
    "ErrorLog",
    "FailurePolicy",
    "Verdict",
    "describe",
    "is_fault",
    "is_reconnectable",
    "needs_reconnect",
]


class Verdict(enum.Enum):
    HOLD = "hold"  # keep the message unacknowledged and try it again after a backoff
    DROP = "drop"  # let it go: acknowledged at the source, counted as dropped


class FailurePolicy:
    """The verdict for each failure cause, given what the source and the route allow."""

    def __init__(self, source_redelivers: bool, on_error: str, stopping: threading.Event) -> None:
        self.on_error = on_error
        self.redeliver_faults = source_redelivers and on_error == "redeliver"
        self._stopping = stopping

    def verdict(self, cause: BaseException) -> Verdict:
        if is_unavailable(cause, self._stopping) or is_retriable(cause):
            return Verdict.HOLD
        if is_decided(cause):
            return Verdict.DROP
        return Verdict.HOLD if self.redeliver_faults else Verdict.DROP

    def drop_reason(self, cause: BaseException) -> str:
        """Why a DROP verdict let the message go, for the log line."""
        if is_decided(cause):
            return "the handler gave up on it"
        if self.on_error == "drop":
            return "on_error: drop"
        return "its source cannot redeliver it"


def is_decided(cause: BaseException) -> bool:
    """A handler said this message can never succeed, or a `retry` ran out on the handler."""
    if isinstance(cause, NonRetryableError):
        return True
    last = getattr(cause, "last_error", None)  # RetriesExhaustedError
    return last is not None and isinstance(last, RetryableError)


def is_fault(cause: BaseException) -> bool:
    """Nobody decided this failure: a bug or a refusal (logged with its traceback)."""
    return not (is_retriable(cause) or is_decided(cause) or isinstance(cause, ClosedError))


def is_unavailable(cause: BaseException, stopping: threading.Event) -> bool:
    """The output (or what a `retry` gave up on) cannot be reached: a reason to reconnect."""
    last = getattr(cause, "last_error", None)
    if last is not None and not isinstance(last, RetryableError):
        cause = last
    if isinstance(cause, ClosedError):  # the route closed it only to reconnect it
        return not stopping.is_set()
    return isinstance(cause, EndpointUnavailableError | ConnectionError)


def is_reconnectable(error: BaseException) -> bool:
    """An input or connect failure that a reconnect may cure: a retriable error, any
    endpoint error (a broker restarting), a closed or refused connection. Anything else
    (a corrupt file, a bug) ends the route, which reports it."""
    return is_retriable(error) or isinstance(error, EndpointError | ClosedError | ConnectionError)


def needs_reconnect(causes: list[BaseException], stopping: threading.Event) -> bool:
    return any(is_unavailable(cause, stopping) for cause in causes)


class ErrorLog:
    """Logs failures of one route with a limit per error type: the first at once (with its
    traceback for a fault), then at most one line per `interval` seconds, which says how
    many more of that type came meanwhile. A flood of one bug costs a line, not a disk."""

    def __init__(self, logger: logging.Logger, route: str, interval: float = 10.0) -> None:
        self._log = logger
        self._route = route
        self._interval = interval
        self._last: dict[str, tuple[float, int]] = {}  # type name -> (logged at, suppressed)
        self._lock = threading.Lock()

    def failed(self, what: str, cause: BaseException, level: int = logging.WARNING) -> None:
        """Log `what` happened because of `cause`, unless its type was logged just now."""
        name = type(cause).__name__
        now = time.monotonic()
        with self._lock:
            logged_at, suppressed = self._last.get(name, (-self._interval, 0))
            if now - logged_at < self._interval:
                self._last[name] = (logged_at, suppressed + 1)
                return
            self._last[name] = (now, 0)
        more = f" ({suppressed} more {name} since the last report)" if suppressed else ""
        traceback = cause if is_fault(cause) and cause.__traceback__ is not None else None
        self._log.log(
            level, "route %s: %s: %r%s", self._route, what, cause, more, exc_info=traceback
        )


def describe(cause: BaseException) -> str:
    """A one-line reason for status(): the error's type and text."""
    return f"{type(cause).__name__}: {cause}"
