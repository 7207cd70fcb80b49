"""Rendezvous between requesters and the `response` endpoint (one registry per process).

A requester (a memory publisher with ``request_reply``, or `Publisher.request`) registers
the request's ``correlation_id`` and waits; whatever output later sends a message with that
``correlation_id`` through a `response` endpoint completes the wait. A reply for a requester
that already gave up is dropped (and logged at debug level). When the route drops the request
instead (a handler or output failure that is not retriable), the runtime calls `fail`, so
the requester learns it at once instead of waiting out its timeout.
"""

from __future__ import annotations

import logging
import threading

from mq_bridge.errors import EndpointError
from mq_bridge.message import Message

__all__ = ["ReplyRegistry", "ReplyWaiter", "process_replies"]

_log = logging.getLogger("mq_bridge.response")


class ReplyWaiter:
    """One outstanding request. Use as a context manager so it is always unregistered."""

    __slots__ = ("_event", "_registry", "correlation_id", "error", "reply")

    def __init__(self, correlation_id: str, registry: ReplyRegistry) -> None:
        self.correlation_id = correlation_id
        self.reply: Message | None = None
        self.error: BaseException | None = None
        self._event = threading.Event()
        self._registry = registry

    def wait(self, timeout: float | None) -> Message | None:
        """The reply, or None when `timeout` seconds passed first; `EndpointError` when the
        route handling the request dropped it (see `fail`)."""
        self._event.wait(timeout)
        if self.error is not None:
            raise EndpointError(
                f"request {self.correlation_id}: the route handling it dropped it: {self.error!r}"
            )
        return self.reply

    def complete(self, reply: Message) -> None:
        self.reply = reply
        self._event.set()

    def fail(self, error: BaseException) -> None:
        """The route gave up on the request (a failure that is not retriable). A waiting
        thread stops waiting at once (`wait` raises); an input answering a client over the
        network (http) overrides this to say so (500)."""
        self.error = error
        self._event.set()

    def __enter__(self) -> ReplyWaiter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._registry.forget(self)


class ReplyRegistry:
    """Requests waiting for their replies, by ``correlation_id``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: dict[str, ReplyWaiter] = {}

    def expect(self, correlation_id: str) -> ReplyWaiter:
        """Register interest in the reply carrying `correlation_id`."""
        return self.register(ReplyWaiter(correlation_id, self))

    def register(self, waiter: ReplyWaiter) -> ReplyWaiter:
        """Register `waiter` under its ``correlation_id``: a subclass may act in `complete`
        (an input that forwards the reply to its broker's ``reply_to``, say)."""
        with self._lock:
            self._waiters[waiter.correlation_id] = waiter
        return waiter

    def deliver(self, message: Message) -> bool:
        """Hand `message` to the requester waiting for its ``correlation_id``; False if none."""
        correlation_id = message.get("correlation_id")
        with self._lock:
            waiter = self._waiters.pop(correlation_id, None) if correlation_id else None
        if waiter is None:
            _log.debug("dropping reply %s: no requester is waiting for it", correlation_id)
            return False
        waiter.complete(message)
        return True

    def fail(self, message: Message, error: BaseException) -> bool:
        """The route dropped `message`: fail the requester waiting for its
        ``correlation_id`` (False if none is waiting)."""
        correlation_id = message.get("correlation_id")
        with self._lock:
            waiter = self._waiters.pop(correlation_id, None) if correlation_id else None
        if waiter is None:
            return False
        waiter.fail(error)
        return True

    def forget(self, waiter: ReplyWaiter) -> None:
        with self._lock:
            if self._waiters.get(waiter.correlation_id) is waiter:
                del self._waiters[waiter.correlation_id]


_PROCESS_REPLIES = ReplyRegistry()


def process_replies() -> ReplyRegistry:
    """The registry every route, publisher and consumer of this process shares."""
    return _PROCESS_REPLIES
