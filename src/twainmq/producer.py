"""The producer: encodes messages and appends them to the partition their key selects.

Each ``write_message`` is one locked ``pwrite`` of one record: when it returns, the record
is in the kernel (safe against a process crash) and its offset is known. ``write_messages``
encodes a whole batch and writes each partition's share with one locked ``pwrite`` per MiB.

A producer keeps a partition's lock between its writes and gives it back as soon as another
writer asks or after a millisecond without writes (lazy release, see ``partition.py``), so a
busy producer pays no lock syscalls. ``exclusive=True`` keeps each partition's lock from the
producer's first write there until ``close()``, whoever asks: other producers of those
partitions (any process) wait until then, consumers do not.

Durability (``fsync=``): ``"never"`` (default) leaves flushing to the kernel; ``"batch"``
(group commit) has a background thread sync the partitions written to every
``batch_interval`` seconds, and syncs on ``flush()``/``close()``; ``"always"`` syncs
each write before it is acknowledged.
"""

from __future__ import annotations

import struct
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
Route = tuple[PartitionLog, bytes, type, bytes]
"""(partition, key bytes, key class, a text record's bytes after its timestamp up to the
payload: tag, key length, key)."""
# Bound once: write_message runs these per message.
_time_ns, _crc32, _pack_length_crc = time.time_ns, zlib.crc32, LENGTH_AND_CRC.pack
_pack_stamp, _TAG_KEYLEN_AT = struct.Struct("<q").pack, TIMESTAMP_TAG_KEYLEN.pack


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
        log = route[0]
        stamp = _time_ns() // 1000
        if type(message) is str:
            payload = message.encode()
            tail = _pack_stamp(stamp) + route[3] + payload
        else:
            tag, payload = encode_payload(message, self._topic.registry, self._declared)
            tail = _TAG_KEYLEN_AT(stamp, tag, len(route[1])) + route[1] + payload
        if len(payload) > self._max_bytes:
            raise self._too_large(payload)
        record = _pack_length_crc(len(tail) + 4, _crc32(tail)) + tail
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
        stamp = time.time_ns() // 1000
        chunk_bytes = min(_CHUNK_BYTES, self._topic.config.segment_bytes // 2)
        shares: dict[PartitionLog, _Share] = {}
        keyed: dict[Any, _KeyEntry] = {}
        pack, crc32, max_bytes = LENGTH_AND_CRC.pack, zlib.crc32, self._max_bytes
        for key, message in messages:
            try:
                entry = keyed.get(key)
            except TypeError:  # unhashable, so not a valid key: _route() says why
                entry = None
            if entry is None or type(key) is not entry[3]:
                entry = self._key_entry(key, keyed, shares, stamp)
            share, prefix, prefix_crc = entry[0], entry[1], entry[2]
            if type(message) is str:
                payload = message.encode()
            else:
                tag, payload = encode_payload(message, self._topic.registry, self._declared)
                prefix, prefix_crc = _prefix(stamp, tag, entry[4])
            if len(payload) > max_bytes:
                raise self._too_large(payload)
            record = pack(len(prefix) + len(payload) + 4, crc32(payload, prefix_crc))
            record += prefix + payload
            share.records.append(record)
            share.size += len(record)
            if share.size >= chunk_bytes:
                share.write(stamp, self._sync_each, self._durable_roll)
        for share in shares.values():
            share.write(stamp, self._sync_each, self._durable_roll)
            share.log.dirty = share.log.dirty or self._group_commit
        return {share.log.partition: share.runs for share in sorted(shares.values())}

    def _key_entry(
        self, key: Any, keyed: dict[Any, _KeyEntry], shares: dict[PartitionLog, _Share], stamp: int
    ) -> _KeyEntry:
        """Route a key seen for the first time in a batch; cache its record prefix."""
        try:
            route = self._routes.get(key)  # keys repeat across batches: reuse their routing
        except TypeError:  # unhashable, so not a valid key: _route() says why
            route = None
        if route is None or type(key) is not route[2]:
            route = self._route(key, None)
        log, key_bytes, key_class, _ = route
        share = shares.get(log)
        if share is None:
            share = shares[log] = _Share(log)
        entry = (share, *_prefix(stamp, TAG_TEXT, key_bytes), key_class, key_bytes)
        keyed[key] = entry
        return entry

    def _route(self, key: Any, partition: int | None) -> Route:
        self._check_open()
        topic = self._topic
        key_bytes = topic.key_type.encode(key)
        chosen = self._partitioner(key, topic.partitions) if partition is None else partition
        log = topic.log(topic.check_partition(chosen))
        if self._exclusive:
            log.hold()
        route = (log, key_bytes, type(key), bytes((TAG_TEXT, len(key_bytes))) + key_bytes)
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


class _Share:
    """One partition's part of a ``write_messages`` batch: records not yet written, and the
    offset ranges already written."""

    __slots__ = ("log", "records", "runs", "size")

    def __init__(self, log: PartitionLog) -> None:
        self.log = log
        self.records: list[bytes] = []
        self.runs: list[range] = []
        self.size = 0

    def __lt__(self, other: _Share) -> bool:
        return self.log.partition < other.log.partition

    def write(self, stamp: int, sync: bool, durable_roll: bool) -> None:
        """Append the pending records with one locked write."""
        records = self.records
        if not records:
            return
        positions = [0, *accumulate(map(len, records[:-1]))]
        first = self.log.append(b"".join(records), positions, stamp, sync, durable_roll)
        runs = self.runs
        if runs and runs[-1].stop == first:
            runs[-1] = range(runs[-1].start, first + len(records))
        else:
            runs.append(range(first, first + len(records)))
        records.clear()
        self.size = 0


_KeyEntry = tuple[_Share, bytes, int, type, bytes]
"""(partition share, text-record prefix, its CRC, key class, key bytes) of a batch's key."""
