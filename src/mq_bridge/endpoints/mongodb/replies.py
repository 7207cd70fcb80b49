"""Request/reply through collections, as mq-bridge does it.

Requester (`MongoDbOutput.request`): the request is inserted with ``reply_to`` =
``<collection>_replies`` and a ``correlation_id`` in its metadata, then the requester polls
``<collection>_replies`` for a document whose ``metadata.correlation_id`` matches and takes
it with `find_one_and_delete` (first after `reply_polling_ms`, each wait half as long again,
at most 500 ms; `request_timeout_ms` in all).

Responder: a route reading the requests with a `response` output (the seed's responder
shape). For each request read, the input registers a forwarder with the process's reply
registry; when the `response` output delivers the handler's reply (same ``correlation_id``),
the forwarder inserts it into the request's ``reply_to`` collection (the normal layout,
``correlation_id`` in the metadata), acknowledged by the server before the route goes on.
Forwarders of a batch are forgotten once it is acked or nacked.
"""

from __future__ import annotations

import datetime
from typing import Any

from pymongo.database import Database

from mq_bridge.endpoints.kit import replies
from mq_bridge.endpoints.mongodb.client import translated
from mq_bridge.endpoints.mongodb.codec import reply_document
from mq_bridge.message import Message

__all__ = ["ReplyForwarders"]


class ReplyForwarders(replies.ReplyForwarders):
    """Inserts each reply into its request's ``reply_to`` collection."""

    def __init__(self, registry: replies.ReplyRegistry, id_format: str) -> None:
        super().__init__(registry)
        self._id_format = id_format
        self._database: Database[Any] | None = None

    def attach(self, database: Database[Any] | None) -> None:
        """The database replies are written to (None while disconnected)."""
        self._database = database

    def forward(self, reply: Message, reply_to: str, correlation_id: str) -> None:
        database = self._database
        if database is None:
            from mq_bridge.errors import EndpointUnavailableError

            raise EndpointUnavailableError(f"mongodb: cannot reply to {reply_to}: not connected")
        now = datetime.datetime.now(datetime.timezone.utc)
        document = reply_document(reply, correlation_id, self._id_format, now)
        with translated(f"mongodb: reply to {reply_to}"):
            database[reply_to].insert_one(document)
