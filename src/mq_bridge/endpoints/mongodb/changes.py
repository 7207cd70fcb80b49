"""The `mongodb` change stream input (`change_stream: true`, or `consume: capture_new`):
subscriber mode, where every subscriber sees every document inserted from its start on and
nothing is deleted.

Position. A change stream is resumed by the resume token of the last event handled. With
`cursor_id`, the token of each acknowledged batch's last event is stored in
`meta_collection` (else the message collection) as::

    {"_id": "cursor:<cursor_id>", "resume_token": {...}, "updated_at": DateTime}

(mq-bridge 0.3.2's cursor document has the same `_id` and keeps a `last_seq` there
instead), and a new subscriber with that `cursor_id` resumes after it: what was acked is
not delivered again, what was not is. Without `cursor_id` the subscriber starts at the
current end of the stream; close()+connect() (a route reconnecting) still resumes after
the last acked event, from memory.

Nack keeps the batch's messages and hands them out again, in stream order, before reading
on. Acks must come in receive order (the cursor is cumulative).

Change streams need a replica set (or sharded cluster) on a real MongoDB; on a standalone
`mongod` `connect()` fails with the server's error. NX-27017 opens them, but sends the
binaries inside events in its own shape (`codec.emulator_value` undoes it).
"""

from __future__ import annotations

import datetime
import threading
import time
from collections.abc import Mapping
from typing import Any

from pymongo.change_stream import CollectionChangeStream

from mq_bridge.endpoints.base import Batch, BuildContext, EndpointStatus
from mq_bridge.endpoints.mongodb.client import translated
from mq_bridge.endpoints.mongodb.codec import (
    change_stream_match,
    emulator_value,
    is_bookkeeping,
)
from mq_bridge.endpoints.mongodb.input import MongoDbInputBase
from mq_bridge.endpoints.mongodb.options import MongoDbOptions
from mq_bridge.message import Message

__all__ = ["MAX_AWAIT_MS", "MongoDbChangeStreamInput"]

#: How long one `getMore` waits on the server for new events (bounds interrupt latency).
MAX_AWAIT_MS = 200


#: (receive order, message, resume token after its event)
_Event = tuple[int, Message, "Mapping[str, Any] | None"]


class _Position:
    """A batch's place in the stream: the resume token after its last event."""

    __slots__ = ("events", "token")

    def __init__(self, token: Mapping[str, Any] | None, events: list[_Event]) -> None:
        self.token = token
        self.events = events


class MongoDbChangeStreamInput(MongoDbInputBase):
    """Inserted documents as they come, from a change stream (see the module docstring)."""

    def __init__(self, options: MongoDbOptions, context: BuildContext) -> None:
        super().__init__(options, context)
        self._stream: CollectionChangeStream[Any] | None = None
        self._resume_token: Mapping[str, Any] | None = None  # after the last acked event
        self._redeliver: list[_Event] = []
        self._sequence = 0
        self._lock = threading.Lock()
        self._pipeline = [{"$match": change_stream_match(options.query)}]

    def _opened(self) -> None:
        if self._stream is not None:
            return
        assert self._database is not None and self._collection is not None
        cursor_id = self._options.cursor_id
        with translated(f"{self.describe()}: cannot open the change stream"):
            if self._resume_token is None and cursor_id is not None:
                stored = self._cursors().find_one({"_id": _cursor_key(cursor_id)})
                if stored is not None and stored.get("resume_token"):
                    self._resume_token = stored["resume_token"]
            stream = self._collection.watch(
                self._pipeline, resume_after=self._resume_token, max_await_time_ms=MAX_AWAIT_MS
            )
        if self._resume_token is None:  # so a reconnect resumes here, not at a later end
            self._resume_token = stream.resume_token
        self._stream = stream
        with self._lock:
            self._redeliver.clear()  # the stream hands them out again from the position

    def _cursors(self) -> Any:
        assert self._database is not None
        return self._database[self._options.meta_collection or self._options.collection_name]

    def receive(self, max_messages: int, timeout: float | None) -> Batch:
        self._require_collection()
        max_messages = max(1, max_messages)
        with self._lock:
            again, self._redeliver = (
                self._redeliver[:max_messages],
                self._redeliver[max_messages:],
            )
        if again:
            self._wakeup.consume()  # these answer an interrupt
            return self._batch(again, again[-1][2])
        deadline = None if timeout is None else time.monotonic() + timeout
        events: list[_Event] = []
        token: Mapping[str, Any] | None = None
        stream = self._stream
        assert stream is not None
        while len(events) < max_messages:
            if self._wakeup.pending:
                break
            asked = time.monotonic()
            with translated(f"{self.describe()}: change stream failed"):
                event = stream.try_next()
            if event is None:
                now = time.monotonic()
                if events or (deadline is not None and now >= deadline):
                    break
                if now - asked < MAX_AWAIT_MS / 2000:
                    # The server answered without awaiting new events (NX-27017 ignores
                    # maxAwaitTimeMS; a MongoDB waits): pause instead of asking in a loop.
                    pause = self._options.polling_interval
                    if deadline is not None:
                        pause = min(pause, deadline - now)
                    if not self._wait(pause):
                        break
                continue
            token = event["_id"]
            message = self._event_message(event)
            if message is not None:
                self._sequence += 1
                events.append((self._sequence, message, token))
        self._wakeup.consume()  # what came (maybe nothing) answers an interrupt
        if not events:
            return Batch([])
        return self._batch(events, token)

    def _event_message(self, event: Mapping[str, Any]) -> Message | None:
        document = event.get("fullDocument")
        if not isinstance(document, Mapping):
            return None
        document = emulator_value(dict(document))
        if is_bookkeeping(document):
            return None  # mq-bridge's (and our) sequencer and cursor documents
        return self._message(document)

    def _batch(self, events: list[_Event], token: Mapping[str, Any] | None) -> Batch:
        messages = [message for _, message, _ in events]
        self._forwarders.expect(messages)
        return Batch(messages, _Position(token, events))

    def ack(self, batch: Batch) -> None:
        self._forwarders.forget(batch.messages)
        position = batch.token
        if not isinstance(position, _Position) or position.token is None:
            return
        self._resume_token = position.token
        cursor_id = self._options.cursor_id
        if cursor_id is None or self._database is None:
            return
        update = {
            "$set": {
                "resume_token": position.token,
                "updated_at": datetime.datetime.now(datetime.timezone.utc),
            }
        }
        with translated(f"{self.describe()}: cannot store the cursor {cursor_id!r}"):
            self._cursors().update_one({"_id": _cursor_key(cursor_id)}, update, upsert=True)

    def nack(self, batch: Batch) -> None:
        self._forwarders.forget(batch.messages)
        position = batch.token
        if not isinstance(position, _Position):
            return
        with self._lock:
            self._redeliver.extend(position.events)
            self._redeliver.sort(key=lambda item: item[0])

    def status(self) -> EndpointStatus:
        details = {
            "mode": "change_stream",
            "cursor_id": self._options.cursor_id,
            "redeliveries": len(self._redeliver),
        }
        return EndpointStatus(not self._closed, self.describe(), details=details)

    def _closing(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            try:
                stream.close()
            except Exception:  # the server may be gone: nothing to release then
                pass


def _cursor_key(cursor_id: str) -> str:
    """mq-bridge's `_id` for a cursor document."""
    return f"cursor:{cursor_id}"
