"""The producer: encodes messages and appends them to the partition their key selects.

Each ``write_message`` is one locked ``pwrite`` of one record: when it returns, the record
is in the kernel (safe against a process crash) and its offset is known. ``write_messages``
encodes a whole batch and writes each partition's share with one locked ``pwrite`` per MiB.

``exclusive=True`` keeps each partition's lock from the producer's first write there until
``close()``: other producers of those partitions (any process) wait until then, consumers do
not. It saves two syscalls per call; use it when one producer is the partition's only writer.

Durability (``fsync=``): ``"never"`` (default) leaves flushing to the kernel; ``"batch"``
(group commit) has a background thread sync the partitions written to every
``batch_interval`` seconds, and syncs on ``flush()``/``close()``; ``"always"`` syncs
each write before it is acknowledged.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Iterable
from itertools import accumulate
from typing import Any

from .encoding import LENGTH_AND_CRC, TAG_TEXT, TIMESTAMP_TAG_KEYLEN
from .errors import ClosedError, InvalidOptionError, MessageTooLargeError
from .group_commit import GroupCommitter
from .keys import Partitioner, default_partitioner
from .message import RecordMetadata
from .partition import FSYNC_MODES, PartitionLog
from .payloads import encode_payload
from .topic import OpenTopic

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
        exclusive: bool = False,
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
        self._group_commit = fsync == "batch"
        self._committer = (
            GroupCommitter(topic.opened_logs, batch_interval) if self._group_commit else None
        )
        self._exclusive = bool(exclusive)
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
        try:
            route = self._routes.get(key) if partition is None else None
        except TypeError:  # unhashable, so not a valid key: _route() says why
            route = None
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
        offset = log.append_one(record, stamp, self._sync_each, self._durable_roll)
        if self._group_commit:
            log.dirty = True
        return _new_tuple(RecordMetadata, (log.partition, offset))

    def write_messages(self, messages: Iterable[tuple[Any, Any]]) -> dict[int, list[range]]:
        """Append many ``(key, message)`` pairs; return partition -> offsets written there.

        Offsets come as ranges: one per partition, unless another producer wrote to the
        partition between two of this batch's chunks (a chunk is about 1 MiB). Within a
        partition, offsets follow the order given. Each message is checked before its chunk
        is written; an invalid one raises, and earlier chunks stay written.
        """
        self._check_open()
        by_partition: dict[PartitionLog, list[tuple[bytes, Any]]] = {}
        routes = self._routes
        for key, message in messages:
            try:
                route = routes.get(key)
            except TypeError:  # unhashable, so not a valid key: _route() says why
                route = None
            if route is None or type(key) is not route[2]:
                route = self._route(key, None)
            share = by_partition.get(route[0])
            if share is None:
                share = by_partition[route[0]] = []
            share.append((route[1], message))
        written = {}
        for log, share in by_partition.items():
            written[log.partition] = self._write_share(log, share)
        if self._group_commit:
            for log in by_partition:
                log.dirty = True
        return dict(sorted(written.items()))

    def _write_share(self, log: PartitionLog, share: list[tuple[bytes, Any]]) -> list[range]:
        """Encode one partition's messages and append them, a chunk at a time."""
        stamp = time.time_ns() // 1000
        chunk_bytes = min(_CHUNK_BYTES, self._topic.config.segment_bytes // 2)
        prefixes: dict[bytes, tuple[bytes, int]] = {}
        pack, crc32, max_bytes = LENGTH_AND_CRC.pack, zlib.crc32, self._max_bytes
        records: list[bytes] = []
        runs: list[range] = []
        size = 0
        for key_bytes, message in share:
            if type(message) is str:
                known = prefixes.get(key_bytes)
                if known is None:
                    known = prefixes[key_bytes] = _prefix(stamp, TAG_TEXT, key_bytes)
                prefix, prefix_crc = known
                payload = message.encode()
            else:
                tag, payload = encode_payload(message, self._topic.registry, self._declared)
                prefix, prefix_crc = _prefix(stamp, tag, key_bytes)
            if len(payload) > max_bytes:
                raise self._too_large(payload)
            record = pack(len(prefix) + len(payload) + 4, crc32(payload, prefix_crc))
            record += prefix + payload
            records.append(record)
            size += len(record)
            if size >= chunk_bytes:
                self._append_chunk(log, records, stamp, runs)
                size = 0
        if records:
            self._append_chunk(log, records, stamp, runs)
        return runs

    def _append_chunk(
        self, log: PartitionLog, records: list[bytes], stamp: int, runs: list[range]
    ) -> None:
        positions = [0, *accumulate(map(len, records[:-1]))]
        first = log.append(b"".join(records), positions, stamp, self._sync_each, self._durable_roll)
        if runs and runs[-1].stop == first:
            runs[-1] = range(runs[-1].start, first + len(records))
        else:
            runs.append(range(first, first + len(records)))
        records.clear()

    def _route(self, key: Any, partition: int | None) -> Route:
        self._check_open()
        topic = self._topic
        key_bytes = topic.key_type.encode(key)
        chosen = self._partitioner(key, topic.partitions) if partition is None else partition
        log = topic.log(topic.check_partition(chosen))
        if self._exclusive:
            log.hold()
        route = (log, key_bytes, type(key))
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

    def flush(self) -> None:
        """Make every message written by this producer durable on disk now."""
        self._check_open()
        if self._committer is not None:
            self._committer.check()
        for log in self._topic.opened_logs():
            log.dirty = False
            log.sync()

    def close(self) -> None:
        """Sync pending writes (``fsync="batch"``) and release files. Harmless twice."""
        if self._closed:
            return
        if self._committer is not None:
            self._committer.stop()
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


def _prefix(stamp: int, tag: int, key_bytes: bytes) -> tuple[bytes, int]:
    """The bytes after a record's CRC and before its payload, and their CRC."""
    prefix = TIMESTAMP_TAG_KEYLEN.pack(stamp, tag, len(key_bytes)) + key_bytes
    return prefix, zlib.crc32(prefix)
