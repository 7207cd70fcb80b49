"""The `mongodb` output: inserts documents and returns once the server acknowledged them."""

from __future__ import annotations

import datetime
import logging
import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any

from pymongo import ASCENDING
from pymongo.collection import Collection
from pymongo.database import Database
from pymongo.errors import BulkWriteError, DuplicateKeyError

from mq_bridge.endpoints.base import BuildContext, EndpointStatus, OutputEndpoint
from mq_bridge.endpoints.kit.connections import Lease
from mq_bridge.endpoints.mongodb.client import acquire, ping, translated
from mq_bridge.endpoints.mongodb.codec import document_for, message_from_document
from mq_bridge.endpoints.mongodb.direct import DirectInserter, direct_eligible
from mq_bridge.endpoints.mongodb.options import MongoDbOptions
from mq_bridge.errors import (
    ClosedError,
    EndpointError,
    EndpointUnavailableError,
    RequestTimeoutError,
    SendError,
)
from mq_bridge.message import Message

__all__ = ["MongoDbOutput"]

log = logging.getLogger("mq_bridge.endpoints.mongodb")

#: MongoDB's duplicate key error: the document (same `_id`, same message) is there already.
DUPLICATE_KEY = 11000
#: The longest pause between two looks for a reply (mq-bridge's bound).
MAX_REPLY_POLL = 0.5


class MongoDbOutput(OutputEndpoint):
    """Inserts each message as a document (one unordered insert per batch) and returns once
    the server acknowledged the write (the URL's write concern; pymongo's default is w=1).
    The `_id` is the message id, so a message sent again after a lost acknowledgement is not
    stored twice: the duplicate key counts as sent. Inserts use a `DirectInserter` where the
    connection allows it (see `direct.py`), pymongo otherwise; everything else is pymongo."""

    def __init__(self, options: MongoDbOptions, context: BuildContext) -> None:
        self._options = options
        self._context = context
        self._lease: Lease[Any] | None = None
        self._database: Database[Any] | None = None
        self._collection: Collection[Any] | None = None
        self._closed = False
        self._lock = threading.Lock()
        self._format = options.storage_format
        self._id_format = options.id_format
        self._direct: DirectInserter | None = None  # when the connection allows it

    def connect(self) -> None:
        with self._lock:
            self._closed = False  # a closed output opens again: the route's reconnect
            if self._lease is not None:
                return
            lease = acquire(self._options, self._context)
            try:
                ping(lease.connection, self._options)
                database = lease.connection[self._options.database]
                self._prepare(database)
            except BaseException:
                lease.release()
                raise
            self._lease, self._database = lease, database
            self._collection = database[self._options.collection_name]
            if direct_eligible(self._options, lease.connection):
                self._direct = DirectInserter(
                    lease.connection,
                    self._options.database,
                    self._options.collection_name,
                    self.describe(),
                )

    def _prepare(self, database: Database[Any]) -> None:
        """The capped collection, TTL index and reply index the options ask for."""
        options, name = self._options, self._options.collection_name
        if options.capped_size_bytes is not None:
            with translated(f"{self.describe()}: cannot create the capped collection"):
                if name not in database.list_collection_names(filter={"name": name}):
                    database.create_collection(name, capped=True, size=options.capped_size_bytes)
        if options.ttl_seconds is not None:
            _index(database[name], "created_at", options.ttl_seconds)
        if options.request_reply:
            replies = database[options.reply_collection]
            _index(replies, "metadata.correlation_id", None)
            if options.ttl_seconds is not None:  # replies nobody collected expire too
                _index(replies, "created_at", options.ttl_seconds)

    def _require(self) -> Collection[Any]:
        if self._closed:
            raise ClosedError(f"{self.describe()} is closed")
        if self._collection is None:
            self.connect()
        assert self._collection is not None
        return self._collection

    def send(self, messages: Sequence[Message]) -> None:
        if not messages:
            return
        collection = self._require()
        if len(messages) == 1:
            self._insert_one(collection, messages[0])
            return
        now = _utc_now()
        documents = [document_for(m, self._format, self._id_format, now) for m in messages]
        direct = self._direct
        if direct is not None:
            direct.insert(documents)
            return
        with translated(f"{self.describe()}: insert failed"):
            try:
                collection.insert_many(documents, ordered=False)
            except BulkWriteError as error:
                _raise_failures(error)  # SendError is not pymongo's: it passes through

    def send_one(self, message: Message) -> None:
        self._insert_one(self._require(), message)

    def _insert_one(self, collection: Collection[Any], message: Message) -> None:
        document = document_for(message, self._format, self._id_format, _utc_now())
        direct = self._direct
        if direct is not None:
            try:
                direct.insert((document,))
            except SendError as error:  # one message: its own error, not a batch's
                raise error.failures[0] from None
            return
        with translated(f"{self.describe()}: insert failed"):
            try:
                collection.insert_one(document)
            except DuplicateKeyError:
                pass  # sent before (its acknowledgement was lost): it is there

    def request(self, message: Message, timeout: float | None) -> Message:
        """Insert `message` as a request and wait for its reply in ``<collection>_replies``."""
        collection = self._require()
        correlation_id = message.get("correlation_id") or str(uuid.uuid4())
        reply_to = self._options.reply_collection
        request = message.with_metadata(correlation_id=correlation_id, reply_to=reply_to)
        self._insert_one(collection, request)
        assert self._database is not None
        replies = self._database[reply_to]
        limit = self._options.request_timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        pause = self._options.reply_polling
        while True:
            try:
                with translated(f"{self.describe()}: cannot read replies"):
                    document = replies.find_one_and_delete(
                        {"metadata.correlation_id": correlation_id},
                        sort=[("_id", ASCENDING)],
                    )
            except EndpointUnavailableError as error:
                log.warning("%s; looking again", error)
                document = None
            if document is not None:
                return message_from_document(document, reply_to)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RequestTimeoutError(
                    f"{self.describe()}: no reply with correlation_id {correlation_id} in "
                    f"{reply_to} within {limit:g}s"
                )
            time.sleep(min(pause, remaining))
            pause = min(pause * 1.5, MAX_REPLY_POLL)

    def status(self) -> EndpointStatus:
        return EndpointStatus(
            healthy=not self._closed,
            target=self.describe(),
            details={
                "format": self._format,
                "id_format": self._id_format,
                "direct": self._direct is not None,
            },
        )

    def describe(self) -> str:
        return self._options.describe()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            lease, self._lease = self._lease, None
            direct, self._direct = self._direct, None
            self._database = self._collection = None
        if direct is not None:
            direct.close()
        if lease is not None:
            lease.release()


def _raise_failures(error: BulkWriteError) -> None:
    """Per-document failures of an unordered insert_many as a `SendError` (duplicate keys:
    already stored, so sent); a write concern error fails the whole batch (retriable)."""
    details = error.details or {}
    if details.get("writeConcernErrors"):
        raise EndpointUnavailableError(
            f"write concern not satisfied: {details['writeConcernErrors'][0].get('errmsg')}"
        )
    failures: dict[int, BaseException] = {}
    for write_error in details.get("writeErrors", ()):
        if write_error.get("code") == DUPLICATE_KEY:
            continue
        index = int(write_error.get("index", 0))
        failures[index] = EndpointError(f"insert failed: {write_error.get('errmsg')}")
    if failures:
        raise SendError(failures)


def _index(collection: Collection[Any], field: str, ttl_seconds: int | None) -> None:
    """Create an index (a TTL index when `ttl_seconds`); a failure is logged, as the peer
    does (an index with other options may exist under that name)."""
    extra: dict[str, Any] = {} if ttl_seconds is None else {"expireAfterSeconds": ttl_seconds}
    try:
        with translated(f"cannot create the index on {collection.name}.{field}"):
            collection.create_index([(field, ASCENDING)], **extra)
    except EndpointUnavailableError:
        raise
    except EndpointError as error:
        log.warning("mongodb: %s", error)


def _utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)
