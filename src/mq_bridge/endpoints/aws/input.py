"""The aws input: an SQS consumer (long polling, DeleteMessageBatch, visibility 0 on nack)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mq_bridge.endpoints.aws.client import (
    AwsClients,
    SqsCall,
    acquire_clients,
    raise_translated,
    translated_errors,
)
from mq_bridge.endpoints.aws.codec import MAX_BATCH_ENTRIES
from mq_bridge.endpoints.aws.destinations import Queue, open_queue
from mq_bridge.endpoints.aws.options import AwsOptions
from mq_bridge.endpoints.aws.reader import QueueReader
from mq_bridge.endpoints.base import Batch, BuildContext, EndpointStatus, InputEndpoint
from mq_bridge.errors import ClosedError, ConfigError, is_retriable

if TYPE_CHECKING:
    from mq_bridge.endpoints.kit.connections import Lease

__all__ = ["AwsInput"]

log = logging.getLogger("mq_bridge.endpoints.aws")

#: Acks that could not reach SQS are kept and sent with the next ack, up to this many (past
#: it the oldest are forgotten: SQS delivers them again after their visibility timeout).
_MAX_UNSENT_ACKS = 10_000
_STATUS_ATTRIBUTES = [
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
]


class AwsInput(InputEndpoint):
    """Receives from one SQS queue; acks delete, nacks make visible again at once.

    Receiving runs on the input's own thread (`reader.QueueReader`), so `receive` honours
    its timeout and `interrupt()` although SQS long-polls in whole seconds. A batch's token
    is its receipt handles: `ack` deletes them (DeleteMessageBatch, 10 a call), `nack`
    sets their visibility to 0 (ChangeMessageVisibilityBatch), so SQS delivers them again
    at once. Acks may come in any order and from any thread. `close` gives back (visibility
    0) what was received but not acked, so another consumer gets it at once.
    """

    acks_in_any_order = True

    def __init__(self, options: AwsOptions, context: BuildContext) -> None:
        if options.queue_url is None:
            raise ConfigError("an aws input needs `queue_url` (SQS)", path="aws.queue_url")
        self._options = options
        self._context = context
        self._where = options.describe()
        self._queue_name = options.queue_url
        self._lease: Lease[AwsClients] | None = None
        self._sqs: Any = None
        self._call: SqsCall | None = None
        self._queue: Queue | None = None
        self._reader: QueueReader | None = None
        self._closed = False
        self._lock = threading.Lock()
        self._outstanding: set[str] = set()
        self._unsent_acks: list[str] = []
        self._release_lease: Callable[[], None] = lambda: None

    def connect(self) -> None:
        """Find the queue (which proves the server answers and the credentials work)."""
        self._closed = False
        if self._reader is not None:
            return
        lease = acquire_clients(self._options, self._context.connections)
        try:
            sqs = lease.connection.sqs()
            queue = open_queue(sqs, self._queue_name, self._where)
        except BaseException:
            lease.release()
            raise
        call = lease.connection.sqs_call()
        self._lease, self._sqs, self._queue, self._call = lease, sqs, queue, call
        holders = _Holders(lease.release)  # the input and its reader thread
        self._release_lease = holders.release
        self._reader = QueueReader(
            call,
            queue,
            self._options.batch_limit,
            self._options.long_poll_seconds,
            self._context.source_metadata,
            release=lambda handles: self._make_visible(call, queue, handles),
            done=holders.release,
            where=self._where,
        )

    def _connected(self) -> QueueReader:
        if self._closed:
            raise ClosedError(f"{self._where} input is closed")
        if self._reader is None:  # a reconnect failed earlier: try again (retriable)
            self.connect()
        assert self._reader is not None
        return self._reader

    def receive(self, max_messages: int, timeout: float | None) -> Batch:
        taken = self._connected().take(max_messages, timeout)
        if not taken:
            return Batch([])
        handles = [r.receipt_handle for r in taken]
        with self._lock:
            self._outstanding.update(handles)
        return Batch([r.message for r in taken], handles)

    def ack(self, batch: Batch) -> None:
        """Delete the batch's messages. A call that cannot reach SQS keeps them for the next
        ack (they stay invisible meanwhile, and come back after the visibility timeout if
        that never succeeds: at least once)."""
        handles: list[str] = batch.token or []
        if not handles:
            return
        if self._call is None or self._queue is None:
            self._connected()
        call, queue = self._call, self._queue
        if call is None or queue is None:
            raise ClosedError(f"{self._where} input is closed")
        with self._lock:
            self._outstanding.difference_update(handles)
            if self._unsent_acks:
                handles, self._unsent_acks = [*self._unsent_acks, *handles], []
        for start in range(0, len(handles), MAX_BATCH_ENTRIES):
            chunk = handles[start : start + MAX_BATCH_ENTRIES]
            try:
                self._delete(call, queue, chunk)
            except ConfigError:
                raise  # refused credentials: nothing later will work either
            except Exception as error:
                if not is_retriable(error):
                    # SQS delivers them again after their visibility timeout (at least
                    # once); raising would end the route over a duplicate.
                    log.error("%s: ack failed, delivered again later: %r", self._where, error)
                    continue
                log.warning("%s: ack failed, kept for the next one: %r", self._where, error)
                self._keep_unsent(handles[start:])
                return

    def _delete(self, call: SqsCall, queue: Queue, handles: list[str]) -> None:
        entries = [{"Id": str(i), "ReceiptHandle": h} for i, h in enumerate(handles)]
        try:
            answer = call("DeleteMessageBatch", {"QueueUrl": queue.url, "Entries": entries})
        except Exception as error:
            raise_translated(error, self._where)
        for failure in answer.get("Failed", ()):
            # An expired or stale receipt handle: SQS delivers the message again.
            log.warning(
                "%s: SQS did not delete a message (%s: %s); it will be delivered again",
                self._where,
                failure.get("Code"),
                failure.get("Message"),
            )

    def _keep_unsent(self, handles: list[str]) -> None:
        with self._lock:
            self._unsent_acks = (self._unsent_acks + handles)[-_MAX_UNSENT_ACKS:]

    def nack(self, batch: Batch) -> None:
        """Make the batch's messages visible again at once (visibility timeout 0)."""
        handles: list[str] = batch.token or []
        if not handles or self._call is None or self._queue is None:
            return
        with self._lock:
            self._outstanding.difference_update(handles)
        self._make_visible(self._call, self._queue, handles)

    def _make_visible(self, call: SqsCall, queue: Queue, handles: list[str]) -> None:
        """ChangeMessageVisibility 0, 10 a call; failures are logged (SQS delivers the
        messages again after their visibility timeout anyway)."""
        for start in range(0, len(handles), MAX_BATCH_ENTRIES):
            chunk = handles[start : start + MAX_BATCH_ENTRIES]
            entries = [
                {"Id": str(i), "ReceiptHandle": h, "VisibilityTimeout": 0}
                for i, h in enumerate(chunk)
            ]
            try:
                params = {"QueueUrl": queue.url, "Entries": entries}
                answer = call("ChangeMessageVisibilityBatch", params)
                failed = len(answer.get("Failed", ()))
            except Exception as error:
                log.warning("%s: could not give messages back: %r", self._where, error)
                return
            if failed:
                log.info("%s: %d message(s) could not be given back", self._where, failed)

    def status(self) -> EndpointStatus:
        target = self.describe()
        sqs, queue, reader = self._sqs, self._queue, self._reader
        if sqs is None or queue is None or reader is None:
            error = "closed" if self._closed else "not connected"
            return EndpointStatus(healthy=False, target=target, error=error)
        try:
            with translated_errors(target):
                attributes = sqs.get_queue_attributes(
                    QueueUrl=queue.url, AttributeNames=_STATUS_ATTRIBUTES
                ).get("Attributes", {})
        except Exception as error:
            return EndpointStatus(healthy=False, target=target, error=str(error))
        details: dict[str, Any] = dict(attributes)
        details["buffered"] = reader.buffered
        details["fifo"] = queue.fifo
        pending = int(attributes.get("ApproximateNumberOfMessages", 0))
        return EndpointStatus(healthy=True, target=target, pending=pending, details=details)

    def describe(self) -> str:
        return self._where

    def interrupt(self) -> None:
        reader = self._reader
        if reader is not None:
            reader.interrupt()

    def close(self) -> None:
        """Give back what was received but not acked, stop the reader, release the client."""
        self._closed = True
        reader, self._reader = self._reader, None
        if reader is None:
            return
        call, queue = self._call, self._queue
        assert call is not None and queue is not None
        with self._lock:
            left = [*reader.stop(), *self._outstanding]
            self._outstanding.clear()
            unsent, self._unsent_acks = self._unsent_acks, []
        try:
            for start in range(0, len(unsent), MAX_BATCH_ENTRIES):
                self._delete(call, queue, unsent[start : start + MAX_BATCH_ENTRIES])
        except Exception as error:
            log.info("%s: acks lost at close (delivered again later): %r", self._where, error)
        if left:
            self._make_visible(call, queue, left)
        self._sqs = self._queue = self._lease = self._call = None
        self._release_lease()


class _Holders:
    """Calls `release` once both holders (the input and its reader thread) let go."""

    def __init__(self, release: Callable[[], None], holders: int = 2) -> None:
        self._release = release
        self._holders = holders
        self._lock = threading.Lock()

    def release(self) -> None:
        with self._lock:
            self._holders -= 1
            last = self._holders == 0
        if last:
            self._release()
