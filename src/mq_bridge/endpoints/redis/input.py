"""The `redis_streams` input: a consumer-group member (or a tail reader) of one stream."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from typing import TYPE_CHECKING

from mq_bridge.endpoints.base import Batch, BuildContext, EndpointStatus, InputEndpoint
from mq_bridge.endpoints.kit.wakeup import Wakeup
from mq_bridge.endpoints.redis.client import (
    MAX_BLOCK,
    acquire_client,
    is_unavailable,
    raise_translated,
    translated_errors,
)
from mq_bridge.endpoints.redis.codec import decode_entries
from mq_bridge.endpoints.redis.commands import CommandChannel
from mq_bridge.endpoints.redis.options import RedisStreamsOptions
from mq_bridge.endpoints.redis.readers import GroupReader, TailReader, entry_ids
from mq_bridge.errors import ClosedError

if TYPE_CHECKING:
    from redis import Redis

    from mq_bridge.endpoints.kit.connections import Lease

__all__ = ["RedisStreamsInput"]

log = logging.getLogger("mq_bridge.endpoints.redis_streams")

ENDPOINT = "redis_streams"
_POLL_PAUSE = 0.005  # block_ms 0: pause between polls of an empty stream


def default_consumer_name() -> str:
    """Unique per input: host, process and a random part (a restarted process is new)."""
    return f"mqb-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


class RedisStreamsInput(InputEndpoint):
    """Reads a stream through a consumer group, or tails it in ``subscriber_mode``.

    Reads and acks each hold a connection of their own (`CommandChannel`): a batch is one
    XREADGROUP round trip, its ack one XACK of all its ids. ``receive`` blocks in slices of
    at most `MAX_BLOCK` seconds, so `interrupt()` and the timeout are noticed quickly. Acks
    may come from another thread (pipelined routes) while a read blocks. An ack that cannot
    reach the server is kept and sent with the next one; until then the entries stay
    pending, so at worst they are delivered again (at least once), never lost.
    """

    acks_in_any_order = True

    def __init__(self, options: RedisStreamsOptions, context: BuildContext) -> None:
        self._options = options
        self._context = context
        self.stream = options.stream_name(context.route_name)
        self._where = options.describe(context.route_name)
        self._reader: GroupReader | TailReader
        self._group: GroupReader | None = None
        if options.subscriber_mode:
            self._reader = TailReader(self.stream)
        else:
            self._reader = self._group = GroupReader(
                self.stream,
                options.group or f"mq-bridge-{self.stream}",
                options.consumer_name or default_consumer_name(),
                "0" if options.read_from_start else "$",
                options.redelivery_timeout,
            )
        self._lease: Lease[Redis] | None = None
        self._reads: CommandChannel | None = None
        self._acks: CommandChannel | None = None
        self._closed = False
        self._wakeup = Wakeup()
        self._unsent_acks: list[bytes] = []
        self._acks_lock = threading.Lock()

    def connect(self) -> None:
        """Reach the server and join the group (or find the stream's end); raises if not."""
        self._closed = False
        if self._lease is not None:
            return
        lease = acquire_client(self._options, ENDPOINT, self._context.connections)
        try:
            with translated_errors(self._where, ENDPOINT):
                self._reader.open(lease.connection)
        except BaseException:
            lease.release()
            raise
        self._reads = CommandChannel(lease.connection)
        self._acks = CommandChannel(lease.connection)
        self._lease = lease

    def _client(self) -> Redis:
        if self._closed:
            raise ClosedError(f"{self._where} input is closed")
        if self._lease is None:  # a reconnect failed earlier: try again (retriable)
            self.connect()
        assert self._lease is not None
        return self._lease.connection

    def receive(self, max_messages: int, timeout: float | None) -> Batch:
        client = self._client()
        reads, reader = self._reads, self._reader
        if reads is None:
            raise ClosedError(f"{self._where} input is closed")
        wakeup = self._wakeup
        deadline = None if timeout is None else time.monotonic() + timeout
        block_cap = min(MAX_BLOCK, self._options.block_seconds)
        while True:
            remaining = None if deadline is None else deadline - time.monotonic()
            block = block_cap if remaining is None else min(block_cap, remaining)
            if wakeup.pending:  # interrupted: only what is already there
                block = 0
            block_ms = int(block * 1000) if block >= 0.001 else None  # never BLOCK 0: forever
            try:
                if self._unsent_acks:
                    self._send_unsent_acks()
                entries = reader.read(reads, client, max_messages, block_ms)
            except Exception as error:
                raise_translated(error, self._where, ENDPOINT)
            interrupted = wakeup.consume()  # entries found meanwhile answer it
            if entries:
                messages = decode_entries(entries, self.stream, self._context.source_metadata)
                return Batch(messages, entry_ids(entries))
            if interrupted or (remaining is not None and remaining <= 0):
                return Batch([])
            if block_ms is None:
                wakeup.pause(_POLL_PAUSE if remaining is None else min(_POLL_PAUSE, remaining))

    def ack(self, batch: Batch) -> None:
        """XACK the batch's entries, all in one command (a no-op in ``subscriber_mode``)."""
        ids = batch.token
        group = self._group
        if not ids or group is None:
            return
        acks = self._acks
        if acks is None or self._closed:
            self._client()  # ClosedError, or connects again after a failed reconnect
            acks = self._acks
            if acks is None:
                raise ClosedError(f"{self._where} input is closed")
        if self._unsent_acks:
            with self._acks_lock:
                ids, self._unsent_acks = [*self._unsent_acks, *ids], []
        try:
            group.ack(acks, ids)
        except Exception as error:
            if not is_unavailable(error):
                raise_translated(error, self._where, ENDPOINT)
            log.warning("%s: ack failed, kept for the next one: %r", self._where, error)
            with self._acks_lock:
                self._unsent_acks.extend(ids)

    def _send_unsent_acks(self) -> None:
        """Acks that failed earlier (the server was away), sent before the next read."""
        group, acks = self._group, self._acks
        if not self._unsent_acks or group is None or acks is None:
            return
        with self._acks_lock:
            ids, self._unsent_acks = self._unsent_acks, []
        try:
            group.ack(acks, ids)
        except BaseException:
            with self._acks_lock:
                self._unsent_acks[:0] = ids
            raise

    def nack(self, batch: Batch) -> None:
        """Deliver the batch again, first (group), or re-read from it (subscriber_mode)."""
        if batch.token:
            self._reader.nack(batch.token)

    def status(self) -> EndpointStatus:
        target = self.describe()
        if self._lease is None:
            error = "closed" if self._closed else "not connected"
            return EndpointStatus(healthy=False, target=target, error=error)
        if self._group is None:
            return EndpointStatus(healthy=True, target=target, details={"mode": "subscriber"})
        try:
            with translated_errors(target, ENDPOINT):
                pending, details = self._group.pending(self._lease.connection)
        except Exception as error:
            return EndpointStatus(healthy=False, target=target, error=str(error))
        return EndpointStatus(healthy=True, target=target, pending=pending, details=details)

    def describe(self) -> str:
        return self._where

    def interrupt(self) -> None:
        self._wakeup.interrupt()

    def close(self) -> None:
        """Hand unacked entries back to the group, leave it, release the connections."""
        self._closed = True
        lease, self._lease = self._lease, None
        if lease is None:
            return
        try:
            if self._group is not None:
                self._send_unsent_acks()
                self._group.hand_back(lease.connection)
        except Exception as error:  # they stay pending: redelivered after the timeout
            log.info("%s: could not hand entries back on close: %r", self._where, error)
        finally:
            for channel in (self._reads, self._acks):
                if channel is not None:
                    channel.close()
            self._reads = self._acks = None
            lease.release()
