"""The `mongodb` inputs: the work queue (`MongoDbQueueInput`, the default) and what both
input modes share (`MongoDbInputBase`). The change stream is in `changes.py`."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from pymongo.collection import Collection
from pymongo.database import Database

from mq_bridge.endpoints.base import Batch, BuildContext, EndpointStatus, InputEndpoint
from mq_bridge.endpoints.kit.connections import Lease
from mq_bridge.endpoints.kit.wakeup import Wakeup
from mq_bridge.endpoints.mongodb.claims import Claim, Claims
from mq_bridge.endpoints.mongodb.client import acquire, ping, translated
from mq_bridge.endpoints.mongodb.codec import message_from_document
from mq_bridge.endpoints.mongodb.options import MongoDbOptions
from mq_bridge.endpoints.mongodb.replies import ReplyForwarders
from mq_bridge.errors import ClosedError
from mq_bridge.message import Message

__all__ = ["MongoDbInputBase", "MongoDbQueueInput"]

log = logging.getLogger("mq_bridge.endpoints.mongodb")


class MongoDbInputBase(InputEndpoint):
    """Connection, close/reopen, interrupt and reply forwarding for both input modes."""

    def __init__(self, options: MongoDbOptions, context: BuildContext) -> None:
        self._options = options
        self._context = context
        self._lease: Lease[Any] | None = None
        self._database: Database[Any] | None = None
        self._collection: Collection[Any] | None = None
        self._closed = False
        self._wakeup = Wakeup()
        self._forwarders = ReplyForwarders(context.replies, options.id_format)

    def connect(self) -> None:
        self._closed = False
        if self._lease is None:
            lease = acquire(self._options, self._context)
            try:
                ping(lease.connection, self._options)
            except BaseException:
                lease.release()
                raise
            self._lease = lease
            self._database = lease.connection[self._options.database]
            self._collection = self._database[self._options.collection_name]
            self._forwarders.attach(self._database)
        self._opened()

    def _opened(self) -> None:
        """Called by `connect` once the client is there: the mode's own setup."""

    def _require_collection(self) -> Collection[Any]:
        if self._closed:
            raise ClosedError(f"{self.describe()} is closed")
        if self._collection is None:
            self.connect()
        assert self._collection is not None
        return self._collection

    def _message(self, document: Mapping[str, Any]) -> Message:
        extra = None
        if self._context.source_metadata:
            extra = {
                "mqb.src.mongodb_database": self._options.database,
                "mqb.src.mongodb_collection": self._options.collection_name,
                "mqb.src.mongodb_id": str(document.get("_id")),
            }
        return message_from_document(document, self._options.collection_name, extra)

    def _wait(self, seconds: float) -> bool:
        """Sleep up to `seconds`; False when interrupted (the interrupt is consumed)."""
        if self._wakeup.pause(seconds):
            self._wakeup.consume()
            return False
        return True

    def interrupt(self) -> None:
        self._wakeup.interrupt()

    def describe(self) -> str:
        return self._options.describe()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._closing()
        finally:
            self._forwarders.close()
            self._forwarders.attach(None)
            lease, self._lease = self._lease, None
            self._database = self._collection = None
            if lease is not None:
                lease.release()

    def _closing(self) -> None:
        """Called by `close` while the client is still there."""


class MongoDbQueueInput(MongoDbInputBase):
    """Competing consumers: each document is claimed by one consumer, deleted on ack and
    freed on nack (see `claims.py`). Close frees what was handed out and not acked."""

    acks_in_any_order = True

    def __init__(self, options: MongoDbOptions, context: BuildContext) -> None:
        super().__init__(options, context)
        self._claims: Claims | None = None
        self._outstanding: dict[str, Claim] = {}
        self._lock = threading.Lock()

    def _opened(self) -> None:
        assert self._collection is not None
        if self._claims is None:
            claims = Claims(self._collection, self._options.query, self._options.lock_duration)
            with translated(f"{self.describe()}: cannot create the locked_until index"):
                claims.ensure_index()
            self._claims = claims

    def receive(self, max_messages: int, timeout: float | None) -> Batch:
        self._require_collection()
        claims = self._claims
        assert claims is not None
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with translated(f"{self.describe()}: cannot claim documents"):
                claim, documents = claims.claim(max(1, max_messages))
            if documents:
                self._wakeup.consume()  # these answer an interrupt
                return self._batch(claim, documents)
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return Batch([])
            pause = self._options.polling_interval
            if not self._wait(pause if remaining is None else min(pause, remaining)):
                return Batch([])

    def _batch(self, claim: Claim, documents: list[Mapping[str, Any]]) -> Batch:
        messages = [self._message(document) for document in documents]
        with self._lock:
            self._outstanding[claim.token] = claim
        self._forwarders.expect(messages)
        return Batch(messages, claim)

    def ack(self, batch: Batch) -> None:
        claim = self._settled(batch)
        if claim is not None and self._claims is not None:
            with translated(f"{self.describe()}: cannot delete acknowledged documents"):
                self._claims.delete(claim.ids)

    def nack(self, batch: Batch) -> None:
        claim = self._settled(batch)
        if claim is not None and self._claims is not None:
            with translated(f"{self.describe()}: cannot release documents"):
                self._claims.release(claim)

    def _settled(self, batch: Batch) -> Claim | None:
        self._forwarders.forget(batch.messages)
        claim = batch.token
        if not isinstance(claim, Claim):
            return None
        with self._lock:
            self._outstanding.pop(claim.token, None)
        return claim

    def status(self) -> EndpointStatus:
        details = {"mode": "work_queue", "outstanding_claims": len(self._outstanding)}
        pending = None
        if self._claims is not None:
            try:
                with translated(self.describe()):
                    pending = self._claims.pending()
            except Exception as error:  # a status never raises
                return EndpointStatus(False, self.describe(), error=str(error), details=details)
        return EndpointStatus(True, self.describe(), pending=pending, details=details)

    def _closing(self) -> None:
        with self._lock:
            outstanding = list(self._outstanding.values())
            self._outstanding.clear()
        claims, self._claims = self._claims, None
        if claims is None:
            return
        for claim in outstanding:  # handed out, never acked: give them back now
            try:
                with translated(f"{self.describe()}: cannot release documents"):
                    claims.release(claim)
            except Exception:  # their leases run out instead
                log.warning(
                    "%s: could not release %d claimed document(s) at close; they come back "
                    "when their lease ends",
                    self.describe(),
                    len(claim.ids),
                )
