"""Rendezvous between requesters and the `response` endpoint (one registry per process).

A requester (a memory publisher with ``request_reply``, or `Publisher.request`) registers
the request's ``correlation_id`` and waits; whatever output later sends a message with that
``correlation_id`` through a `response` endpoint completes the wait. A reply for a requester
that already gave up is dropped (and logged at debug level). When the route drops the request
instead (a handler or output failure that is not retriable), the runtime calls `fail`, so
the requester learns it at once instead of waiting out its timeout.

An input whose broker carries requests (``reply_to`` and ``correlation_id`` in a message's
metadata) answers them through `ReplyForwarders`: it registers a `ReplyForwarder` for each
request it hands out, and the endpoint's subclass says only how a reply is forwarded to
``reply_to`` (its broker's publish).
"""

from __future__ import annotations

import abc
import logging
import threading
from collections.abc import Iterable

from mq_bridge.errors import EndpointError
from mq_bridge.message import Message

__all__ = [
    "CORRELATION_KEY",
    "REPLY_TO_KEY",
    "ReplyForwarder",
    "ReplyForwarders",
    "ReplyRegistry",
    "ReplyWaiter",
    "process_replies",
]

#: The metadata keys of a request, as every endpoint spells them.
REPLY_TO_KEY = "reply_to"
CORRELATION_KEY = "correlation_id"

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

    def __contains__(self, correlation_id: object) -> bool:
        """Whether a requester (or forwarder) waits for the reply with `correlation_id`."""
        return correlation_id in self._waiters

    def forget(self, waiter: ReplyWaiter) -> None:
        with self._lock:
            if self._waiters.get(waiter.correlation_id) is waiter:
                del self._waiters[waiter.correlation_id]


class ReplyForwarder(ReplyWaiter):
    """A request an input handed out: its reply is forwarded to the request's ``reply_to``."""

    __slots__ = ("_forwarders", "reply_to")

    def __init__(self, correlation_id: str, reply_to: str, forwarders: ReplyForwarders) -> None:
        super().__init__(correlation_id, forwarders.registry)
        self.reply_to = reply_to
        self._forwarders = forwarders

    def complete(self, reply: Message) -> None:
        super().complete(reply)
        self._forwarders.forward(reply, self.reply_to, self.correlation_id)


class ReplyForwarders(abc.ABC):
    """An input's forwarders, by ``correlation_id``: the endpoint subclasses it with `forward`.

    - `expect` (a batch handed out): each message with both ``reply_to`` and
      ``correlation_id`` gets a forwarder, in this table and in the registry (a newer request
      with the same ``correlation_id`` replaces the older one);
    - `forget` (the batch acked or nacked): its forwarders leave both, so a reply after that
      has no one to go to;
    - `close` (the input closes): every forwarder left leaves both, then `release` frees what
      forwarding held. Afterwards the table may be used again (an input that reconnects).

    The table has a lock, held while the registry is updated too, so a `close` from another
    thread never races an `expect` into leaving a forwarder registered. `forward` runs on the
    thread that delivers the reply, without that lock.
    """

    def __init__(self, registry: ReplyRegistry) -> None:
        self.registry = registry
        self._lock = threading.Lock()
        self._waiting: dict[str, ReplyForwarder] = {}

    @abc.abstractmethod
    def forward(self, reply: Message, reply_to: str, correlation_id: str) -> None:
        """Send `reply` to `reply_to`, marked with `correlation_id` (the endpoint's part)."""

    def prepare(self) -> None:
        """Called before a request is registered: acquire what `forward` will need."""
        return  # nothing by default

    def release(self) -> None:
        """Called by `close`, once no forwarder is left: free what `prepare` acquired."""
        return  # nothing by default

    def expect(self, messages: Iterable[Message]) -> None:
        """Register a forwarder for each request among `messages`."""
        plain: dict[str, str] | None = None  # a metadata dict known to hold no request
        for message in messages:
            metadata = message.metadata_view
            if metadata is plain:
                continue  # the messages of one batch often share one metadata dict
            reply_to, correlation_id = metadata.get(REPLY_TO_KEY), metadata.get(CORRELATION_KEY)
            if not (reply_to and correlation_id):
                plain = metadata
                continue
            self.prepare()
            forwarder = ReplyForwarder(correlation_id, reply_to, self)
            with self._lock:
                self._waiting[correlation_id] = forwarder
                self.registry.register(forwarder)

    def forget(self, messages: Iterable[Message]) -> None:
        """Unregister the forwarders of `messages` (their batch was settled)."""
        if not self._waiting:
            return
        with self._lock:
            for message in messages:
                correlation_id = message.get(CORRELATION_KEY)
                forwarder = self._waiting.pop(correlation_id, None) if correlation_id else None
                if forwarder is not None:
                    self.registry.forget(forwarder)

    def close(self) -> None:
        """Unregister every forwarder left (unanswered requests), then `release`."""
        with self._lock:
            for forwarder in self._waiting.values():
                self.registry.forget(forwarder)
            self._waiting.clear()
        self.release()

    def __len__(self) -> int:
        """How many requests handed out still wait for their replies."""
        return len(self._waiting)


_PROCESS_REPLIES = ReplyRegistry()


def process_replies() -> ReplyRegistry:
    """The registry every route, publisher and consumer of this process shares."""
    return _PROCESS_REPLIES
