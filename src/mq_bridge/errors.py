"""Errors raised by mq_bridge.

    RuntimeError
    └── MQBridgeError                  root of everything the bridge raises
        ├── ConfigError                a config document is invalid (names the path;
        │                              also a ValueError)
        ├── EndpointError              an endpoint failed (connect, send, receive, request)
        │   ├── EndpointUnavailableError   connection refused / lost  (retriable)
        │   ├── SendTimeoutError       backpressure: a full output did not drain in time
        │   └── RequestTimeoutError    a request got no reply in time  (retriable)
        ├── SendError                  some messages of a batch failed (per-message causes)
        └── ClosedError                the object was closed

    RetryableError                     raised by handlers: try again later  (retriable)
    NonRetryableError                  raised by handlers: dead-letter or drop

Every bridge error is a `RuntimeError`, as mq-bridge-py raises for config, start and
request errors, so ``except RuntimeError:`` code written for it keeps working; decoding
errors are `ValueError` and wrong argument types `TypeError`, as there.

Every error has a ``retriable`` class attribute; retry loops ask it instead of listing
types. Exceptions that are not ours count as not retriable, except the ones that say a
resource is away for now: a `ConnectionError` (refused, reset, broken pipe) and an
`OSError` for a full disk or an I/O error (ENOSPC, EDQUOT, EIO). Those are back-pressure:
retried, never acknowledged and never dead-lettered.
"""

from __future__ import annotations

import errno
from collections.abc import Mapping, Sequence

__all__ = [
    "ClosedError",
    "ConfigError",
    "EndpointError",
    "EndpointUnavailableError",
    "MQBridgeError",
    "NonRetryableError",
    "RequestTimeoutError",
    "RetryableError",
    "SendError",
    "SendTimeoutError",
    "is_retriable",
]


class MQBridgeError(RuntimeError):
    """Root of the bridge's own errors."""

    retriable: bool = False


class ConfigError(MQBridgeError, ValueError):
    """A config document is invalid. `path` is the dotted location of the (first) problem.

    `problems` lists every problem found, each as ``"dotted.path: what is wrong"``.
    """

    def __init__(self, message: str, path: str = "", problems: Sequence[str] = ()) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.problems = list(problems) or [str(self)]


class EndpointError(MQBridgeError):
    """An endpoint failed."""


class EndpointUnavailableError(EndpointError):
    """The endpoint's server could not be reached; the route reconnects and retries."""

    retriable = True


class SendTimeoutError(EndpointError, TimeoutError):
    """An output stayed full (backpressure) for longer than the allowed wait."""

    retriable = True


class RequestTimeoutError(EndpointError, TimeoutError):
    """A request got no reply within its timeout (retriable: the responder may be slow)."""

    retriable = True


class SendError(MQBridgeError):
    """Some messages of a batch failed; the others were handled.

    `failures` maps a message's index in the batch to the exception that failed it.
    """

    def __init__(self, failures: Mapping[int, BaseException]) -> None:
        self.failures = dict(failures)
        first = next(iter(self.failures.values()), None)
        super().__init__(f"{len(self.failures)} message(s) of the batch failed; first: {first!r}")

    @property
    def retriable(self) -> bool:  # type: ignore[override]
        return all(is_retriable(error) for error in self.failures.values())


class ClosedError(MQBridgeError):
    """The publisher, consumer or route was closed and cannot be used any more."""


class RetryableError(Exception):
    """Raised by a handler: the message should be tried again later (with backoff)."""

    retriable = True


class NonRetryableError(Exception):
    """Raised by a handler: the message can never succeed; dead-letter or drop it."""

    retriable = False


#: OSError numbers that mean "not now": the disk is full or failed an I/O; space may be freed.
TRANSIENT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO})


def is_retriable(error: BaseException) -> bool:
    """Whether retrying may help: the error's ``retriable`` attribute when it has one; else
    True for a `ConnectionError` or an `OSError` in `TRANSIENT_ERRNOS`, False otherwise."""
    flag = getattr(error, "retriable", None)
    if flag is not None:
        return bool(flag)
    if isinstance(error, ConnectionError):
        return True
    return isinstance(error, OSError) and error.errno in TRANSIENT_ERRNOS
