"""The producer: encodes messages and appends them to the partition their key selects.

Each ``write_message`` is one locked ``pwrite`` of one record: when it returns, the record
is in the kernel (safe against a process crash) and its offset is known. ``write_messages``
encodes a whole batch and writes each partition's share with one locked ``pwrite`` per MiB.

Durability (``fsync=``): ``"never"`` (default) leaves flushing to the kernel; ``"batch"``
syncs the partitions written since the last sync once ``batch_interval`` seconds have passed
(checked on each write), and on ``flush()``/``close()`` (group commit); ``"always"`` syncs
each write before it is acknowledged.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Iterable
from typing import Any

from .encoding import LENGTH_AND_CRC, TAG_TEXT, TIMESTAMP_TAG_KEYLEN
from .errors import ClosedError, InvalidKeyError, InvalidOptionError, MessageTooLargeError
from .keys import Partitioner, default_partitioner
from .message import RecordMetadata
from .partition import FSYNC_MODES, PartitionLog
from .payloads import encode_payload
from .topic import OpenTopic

_SINGLE = [0]
_new_tuple = tuple.__new__  # skips NamedTuple's Python-level __new__ on the hot path
_CHUNK_BYTES = 1024 * 1024
_ROUTE_CACHE_SIZE = 65536
Route = tuple[PartitionLog, bytes, type]


class Producer:
    """Writes messages to one topic. Use as a context manager, or call ``close()``."""

    def __init__(
        self,
        topic: OpenTopic,
        fsync: str = "never",
        partitioner: Partitioner | None = None,
        batch_interval: float = 0.01,
    ) -> None:
        if fsync not in FSYNC_MODES:
            raise InvalidOptionError(f"fsync {fsync!r} must be one of {', '.join(FSYNC_MODES)}")
        if not isinstance(batch_interval, (int, float)) or batch_interval < 0:
            raise InvalidOptionError(f"batch_interval {batch_interval!r} must be >= 0 seconds")
        self._topic = topic
        self._fsync = fsync
        self._partitioner = partitioner or default_partitioner
        self._routes: dict[Any, Route] = {}
        self._declared = frozenset(topic.config.message_types)
        self._max_bytes = topic.config.max_message_bytes
        self._sync_each = fsync == "always"
        self._durable_roll = fsync != "never"
        self._batch_ns = int(batch_interval * 1e9) if fsync == "batch" else -1
        self._last_sync_ns = time.monotonic_ns()
        self._unsynced: set[PartitionLog] = set()
        self._closed = False

    @property
    def topic(self) -> str:
        """The topic's name."""
        return self._topic.name

    def write_message(self, key: Any, message: Any, partition: int | None = None) -> RecordMetadata:
        """Append ``message`` under ``key``; return the partition and offset it landed at.

        ``partition`` overrides the partitioner. Raises InvalidKeyError, MessageTooLargeError,
        MessageTypeError or UnregisteredMessageTypeError (nothing is written then).
        """
        route = self._routes.get(key) if partition is None else None
        if route is None or type(key) is not route[2]:
            route = self._route(key, partition)
        log, key_bytes = route[0], route[1]
        if type(message) is str:
            tag, payload = TAG_TEXT, message.encode()
        else:
            tag, payload = encode_payload(message, self._topic.registry, self._declared)
        if len(payload) > self._max_bytes:
            raise self._too_large(payload)
        stamp = time.time_ns() // 1000
        tail = TIMESTAMP_TAG_KEYLEN.pack(stamp, tag, len(key_bytes)) + key_bytes + payload
        record = LENGTH_AND_CRC.pack(len(tail) + 4, zlib.crc32(tail)) + tail
        offset = log.append(record, _SINGLE, stamp, self._sync_each, self._durable_roll)
        if self._batch_ns >= 0:
            self._note_unsynced(log)
        return _new_tuple(RecordMetadata, (log.partition, offset))

    def write_messages(self, messages: Iterable[tuple[Any, Any]]) -> dict[int, list[range]]:
        """Append many ``(key, message)`` pairs; return partition -> offsets written there.

        Offsets come as ranges: one per partition, unless another producer wrote to the
        partition between two of this batch's chunks (a chunk is about 1 MiB). Within a
        partition, offsets follow the order given. Each message is checked before its chunk
        is written; an invalid one raises, and earlier chunks stay written.
        """
        self._check_open()
        batch = _Batch(self, time.time_ns() // 1000)
        for key, message in messages:
            batch.add(key, message)
        return batch.finish()

    def _route(self, key: Any, partition: int | None) -> Route:
        self._check_open()
        topic = self._topic
        key_bytes = topic.key_type.encode(key)
        chosen = self._partitioner(key, topic.partitions) if partition is None else partition
        route = (topic.log(topic.check_partition(chosen)), key_bytes, type(key))
        if partition is None:
            if len(self._routes) >= _ROUTE_CACHE_SIZE:
                self._routes.clear()
            self._routes[key] = route
        return route

    def _too_large(self, payload: bytes) -> MessageTooLargeError:
        return MessageTooLargeError(
            f"message of {len(payload)} bytes is larger than max_message_bytes "
            f"{self._max_bytes} of topic {self.topic!r}"
        )

    def _note_unsynced(self, log: PartitionLog) -> None:
        self._unsynced.add(log)
        self._sync_if_due()

    def _sync_if_due(self) -> None:
        if time.monotonic_ns() - self._last_sync_ns >= self._batch_ns:
            self._sync_unsynced()

    def _sync_unsynced(self) -> None:
        for log in self._unsynced:
            log.sync()
        self._unsynced.clear()
        self._last_sync_ns = time.monotonic_ns()

    def flush(self) -> None:
        """Make every message written by this producer durable on disk now."""
        self._check_open()
        for log in self._topic.opened_logs():
            log.sync()
        self._unsynced.clear()
        self._last_sync_ns = time.monotonic_ns()

    def close(self) -> None:
        """Sync pending writes (``fsync="batch"``) and release files. Harmless twice."""
        if self._closed:
            return
        if self._unsynced:
            self._sync_unsynced()
        self._closed = True
        self._routes.clear()
        self._topic.close()

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError(f"producer of topic {self.topic!r} is closed")

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = " closed" if self._closed else ""
        return f"<Producer topic={self.topic!r} fsync={self._fsync!r}{state}>"


class _Batch:
    """One ``write_messages`` call: records grouped per partition, written per MiB."""

    def __init__(self, producer: Producer, stamp: int) -> None:
        self.producer = producer
        self.stamp = stamp
        self.prefixes: dict[Any, tuple[PartitionLog, bytes, int, type, list[Any], list[int]]] = {}
        self.pending: dict[PartitionLog, tuple[list[bytes], list[int]]] = {}
        self.sizes: dict[PartitionLog, int] = {}
        self.written: dict[int, list[range]] = {}
        # A chunk never spans more than a segment, so batches roll like single writes.
        self.chunk_bytes = min(_CHUNK_BYTES, producer._topic.config.segment_bytes // 2)

    def add(self, key: Any, message: Any) -> None:
        """Encode one message into its partition's pending chunk."""
        entry = self.prefixes.get(key)
        if entry is None or type(key) is not entry[3]:
            entry = self._prefix(key)
        log, prefix, prefix_crc, _, parts, positions = entry
        if type(message) is str:
            payload = message.encode()
        else:
            producer = self.producer
            tag, payload = encode_payload(message, producer._topic.registry, producer._declared)
            prefix = TIMESTAMP_TAG_KEYLEN.pack(self.stamp, tag, prefix[9]) + prefix[10:]
            prefix_crc = zlib.crc32(prefix)
        if len(payload) > self.producer._max_bytes:
            raise self.producer._too_large(payload)
        size = self.sizes[log]
        positions.append(size)
        parts.append(
            LENGTH_AND_CRC.pack(len(prefix) + len(payload) + 4, zlib.crc32(payload, prefix_crc))
        )
        parts.append(prefix)
        parts.append(payload)
        size += 8 + len(prefix) + len(payload)
        self.sizes[log] = size
        if size >= self.chunk_bytes:
            self._write(log)

    def _prefix(self, key: Any) -> tuple[PartitionLog, bytes, int, type, list[Any], list[int]]:
        log, key_bytes, key_class = self.producer._route(key, None)
        prefix = TIMESTAMP_TAG_KEYLEN.pack(self.stamp, TAG_TEXT, len(key_bytes)) + key_bytes
        if log not in self.pending:
            self.pending[log] = ([], [])
            self.sizes[log] = 0
        parts, positions = self.pending[log]
        entry = (log, prefix, zlib.crc32(prefix), key_class, parts, positions)
        try:
            self.prefixes[key] = entry
        except TypeError:
            raise InvalidKeyError(f"key {key!r} is not hashable") from None
        return entry

    def _write(self, log: PartitionLog) -> None:
        parts, positions = self.pending[log]
        if not positions:
            return
        producer = self.producer
        first = log.append(
            b"".join(parts), positions, self.stamp, producer._sync_each, producer._durable_roll
        )
        runs = self.written.setdefault(log.partition, [])
        if runs and runs[-1].stop == first:
            runs[-1] = range(runs[-1].start, first + len(positions))
        else:
            runs.append(range(first, first + len(positions)))
        parts.clear()
        positions.clear()
        self.sizes[log] = 0
        if producer._batch_ns >= 0:
            producer._unsynced.add(log)

    def finish(self) -> dict[int, list[range]]:
        """Write every pending chunk; return partition -> offsets written."""
        for log in list(self.pending):
            self._write(log)
        if self.producer._batch_ns >= 0:
            self.producer._sync_if_due()
        return dict(sorted(self.written.items()))
