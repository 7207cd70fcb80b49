"""Request/reply through collections, as mq-bridge does it.

Requester (`MongoDbOutput.request`): the request is inserted with ``reply_to`` =
``<collection>_replies`` and a ``correlation_id`` in its metadata, then the requester polls
``<collection>_replies`` for a document whose ``metadata.correlation_id`` matches and takes
it with `find_one_and_delete` (first after `reply_polling_ms`, each wait half as long again,
at most 500 ms; `request_timeout_ms` in all).

Responder: a route reading the requests with a `response` output (the seed's responder
shape). For each request read, the input registers a `_Forwarder` with the process's reply
registry; when the `response` output delivers the handler's reply (same ``correlation_id``),
the forwarder inserts it into the request's ``reply_to`` collection (the normal layout,
``correlation_id`` in the metadata), acknowledged by the server before the route goes on.
Forwarders of a batch are forgotten once it is acked or nacked.
"""

from __future__ import annotations

import datetime
import threading
from collections.abc import Iterable
from typing import Any

from pymongo.database import Database

from mq_bridge.endpoints.kit.replies import ReplyRegistry, ReplyWaiter
from mq_bridge.endpoints.mongodb.client import translated
from mq_bridge.endpoints.mongodb.codec import reply_document
from mq_bridge.message import Message

__all__ = ["ReplyForwarders"]


class _Forwarder(ReplyWaiter):
    """Inserts the reply into the request's ``reply_to`` collection when it completes."""

    __slots__ = ("_forwarders", "_reply_to")

    def __init__(self, correlation_id: str, forwarders: ReplyForwarders, reply_to: str) -> None:
        super().__init__(correlation_id, forwarders.registry)
        self._forwarders = forwarders
        self._reply_to = reply_to

    def complete(self, reply: Message) -> None:
        super().complete(reply)
        self._forwarders.insert(self._reply_to, self.correlation_id, reply)


class ReplyForwarders:
    """An input's registered forwarders, by ``correlation_id``."""

    def __init__(self, registry: ReplyRegistry, id_format: str) -> None:
        self.registry = registry
        self._id_format = id_format
        self._database: Database[Any] | None = None
        self._lock = threading.Lock()
        self._waiting: dict[str, _Forwarder] = {}

    def attach(self, database: Database[Any] | None) -> None:
        """The database replies are written to (None while disconnected)."""
        self._database = database

    def expect(self, messages: Iterable[Message]) -> None:
        for message in messages:
            reply_to, correlation_id = message.get("reply_to"), message.get("correlation_id")
            if reply_to and correlation_id:
                forwarder = _Forwarder(correlation_id, self, reply_to)
                with self._lock:
                    self._waiting[correlation_id] = forwarder
                self.registry.register(forwarder)

    def forget(self, messages: Iterable[Message]) -> None:
        if not self._waiting:
            return
        for message in messages:
            correlation_id = message.get("correlation_id")
            with self._lock:
                forwarder = self._waiting.pop(correlation_id, None) if correlation_id else None
            if forwarder is not None:
                self.registry.forget(forwarder)

    def insert(self, reply_to: str, correlation_id: str, reply: Message) -> None:
        database = self._database
        if database is None:
            from mq_bridge.errors import EndpointUnavailableError

            raise EndpointUnavailableError(f"mongodb: cannot reply to {reply_to}: not connected")
        now = datetime.datetime.now(datetime.timezone.utc)
        document = reply_document(reply, correlation_id, self._id_format, now)
        with translated(f"mongodb: reply to {reply_to}"):
            database[reply_to].insert_one(document)

    def close(self) -> None:
        with self._lock:
            waiting = list(self._waiting.values())
            self._waiting.clear()
        for forwarder in waiting:
            self.registry.forget(forwarder)
