"""The producer: encodes messages and appends them to the partition their key selects.

Each ``write_message`` is one locked ``pwrite`` of one record: when it returns, the record
is in the kernel (safe against a process crash) and its offset is known. ``write_messages``
encodes a whole batch and writes each partition's share with one locked ``pwrite`` per MiB.

A producer keeps a partition's lock between its writes and gives it back as soon as another
writer asks or after a millisecond without writes (lazy release, see ``partition.py``), so a
busy producer pays no lock syscalls. ``exclusive=True`` keeps each partition's lock from the
producer's first write there until ``close()``, whoever asks: other producers of those
partitions (any process) wait until then, consumers do not.

Records have ``encoding``'s layout: ``write_message`` frames its record inline (what
``encoding.frame_text`` builds), ``write_messages`` through ``encoding``'s functions. What
depends on the key alone (its partition, its text records' head) is cached per key, for at
most ``_ROUTE_CACHE_SIZE`` keys (docs/design.md, "Single writes").

Durability (``fsync=``): ``"never"`` (default) leaves flushing to the kernel; ``"batch"`` has
a background thread (``fsync_batcher.py``) sync the partitions written to every
``batch_interval`` seconds, and syncs on ``flush()``/``close()``; ``"always"`` syncs
each write before it is acknowledged.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Iterable
from itertools import accumulate
from typing import Any, cast

from . import unclosed
from .encoding import (
    LENGTH_AND_CRC,
    TAG_BYTES,
    TAG_TEXT,
    TIMESTAMP,
    TIMESTAMP_TAG,
    RecordPrefix,
    frame,
    frame_with_prefix,
    record_prefix,
    text_head,
    text_head_struct,
)
from .errors import (
    ClosedError,
    InvalidMessageError,
    InvalidOptionError,
    MessageTooLargeError,
    MessageTypeError,
)
from .fsync_batcher import FsyncBatcher
from .keys import Partitioner, default_partitioner, int_partition
from .message import RecordMetadata
from .partition import FSYNC_MODES, PartitionLog
from .payloads import encode_payload, text_error
from .topic import OpenTopic

_new_tuple = tuple.__new__  # skips NamedTuple's Python-level __new__ on the hot path
_time_ns = time.time_ns  # bound once: write_message reads the clock per message
# encoding's record layout, bound once: write_message frames its record inline.
_pack_timestamp, _pack_length_crc = TIMESTAMP.pack, LENGTH_AND_CRC.pack
_pack_timestamp_tag, _crc32 = TIMESTAMP_TAG.pack, zlib.crc32
_CHUNK_BYTES = 1024 * 1024
_ROUTE_CACHE_SIZE = 65536


_Route = tuple[int, bytes]
"""Where one key's records go and how they are framed, cached per key: (its partition, its
text records' head ``encoding.text_head``, which ends with the key as stored).

Plain tuples of an int and bytes, for speed, measured: the interpreter unpacks exact tuples
on a fast path (a NamedTuple is a subclass), and the cyclic GC stops tracking a tuple of
untracked objects at its first collection, so cached routes are not traversed again (65,536
new keys: 0.4 ms of older-generation collections instead of 3.8 ms with the partition's log
in the route). 133 bytes a key (65,536 keys: 8.3 MiB).
"""


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
        self._routes: dict[Any, _Route] = {}
        self._partition_count = topic.partitions
        # partition -> its log, None until opened (_route opens a key's partition first).
        self._logs: list[PartitionLog] = _unopened(topic.partitions)
        key_type = topic.key_type
        self._key_class = str if key_type.is_text else int
        self._key_width = key_type.width
        self._key_max = (1 << 8 * key_type.width) - 1
        # Packs an integer key's text head (tag, key length, key) in one call.
        self._int_head = None if key_type.is_text else text_head_struct(key_type.width).pack
        self._declared = frozenset(topic.config.message_types)
        self._max_bytes = topic.config.max_message_bytes
        self._sync_each = fsync == "always"
        self._durable_roll = fsync != "never"
        self._sync_in_batches = fsync == "batch"
        self._batcher = (
            FsyncBatcher(topic.opened_logs, batch_interval) if self._sync_in_batches else None
        )
        self._exclusive = bool(exclusive)
        self._closed = False
        self._finalizer = unclosed.watch(self, "producer", topic, batcher=self._batcher)

    @property
    def topic(self) -> str:
        """The topic's name."""
        return self._topic.name

    def write_message(self, key: Any, message: Any, partition: int | None = None) -> RecordMetadata:
        """Append ``message`` under ``key``; return the partition and offset it landed at.

        ``partition`` overrides the partitioner. Raises InvalidKeyError, MessageTooLargeError,
        MessageTypeError or UnregisteredMessageTypeError (nothing is written then), and
        StorageFullError or StorageIOError when the disk refuses the write (retriable: nothing
        of it is kept, and the same call can be made again once the disk takes writes).
        """
        # The hot path of single writes (see docs/design.md, "Where a single write's time
        # goes"): one dict lookup for the key's route, the record framed inline (the bytes of
        # encoding.frame_text / frame: tests/twainmq/test_single_writes.py compares them), one
        # call into the partition.
        try:
            route = self._routes.get(key)
        except TypeError:  # unhashable, so not a valid key: _route() says why
            route = None
        # True == 1 and both hash alike: the cache serves only keys of the topic's own class.
        if route is None or partition is not None or type(key) is not self._key_class:
            route = self._route(key, partition)
        number, head = route
        log = self._logs[number]
        stamp = _time_ns() // 1000
        if type(message) is str:
            try:
                payload = message.encode()
            except UnicodeEncodeError:
                raise InvalidMessageError(text_error(message)) from None
            covered = _pack_timestamp(stamp) + head + payload
        elif type(message) is bytes:  # what the bridge writes: skip the type dispatch
            payload = message
            covered = _pack_timestamp_tag(stamp, TAG_BYTES) + head[1:] + payload
        else:  # head[1:] is the key's length and bytes
            tag, payload = encode_payload(message, self._topic.registry, self._declared)
            covered = _pack_timestamp_tag(stamp, tag) + head[1:] + payload
        if len(payload) > self._max_bytes:
            raise self._too_large(payload)
        offset = log.append_one(
            _pack_length_crc(len(covered) + 4, _crc32(covered)) + covered,
            stamp,
            self._sync_each,
            self._durable_roll,
        )
        if self._sync_in_batches:
            log.dirty = True
        return _new_tuple(RecordMetadata, (number, offset))

    def write_messages(self, messages: Iterable[tuple[Any, Any]]) -> dict[int, list[range]]:
        """Append many ``(key, message)`` pairs; return partition -> offsets written there.

        Offsets come as ranges: one per partition, unless another producer wrote to the
        partition between two of this batch's chunks (a chunk is about 1 MiB). Within a
        partition, offsets follow the order given. Each message is checked before its chunk
        is written; an invalid one raises, and earlier chunks stay written. So does a chunk
        the disk refuses (StorageFullError, StorageIOError: retriable): nothing of that chunk
        is kept, earlier chunks (and other partitions' shares) are, and a retry of the whole
        batch writes those again.
        """
        self._check_open()
        stamp = time.time_ns() // 1000
        chunk_bytes = min(_CHUNK_BYTES, self._topic.config.segment_bytes // 2)
        shares: dict[PartitionLog, _Share] = {}
        keyed: dict[Any, _BatchKey] = {}
        max_bytes = self._max_bytes
        for item in messages:
            try:
                key, message = item
            except (TypeError, ValueError):
                raise MessageTypeError(
                    f"write_messages item {item!r:.80} is not a (key, message) pair"
                ) from None
            try:
                entry = keyed.get(key)
            except TypeError:  # unhashable, so not a valid key: _route() says why
                entry = None
            if entry is None:
                entry = self._batch_key(key, keyed, shares, stamp)
            share, key_class, text_prefix, key_bytes = entry
            if type(key) is not key_class:  # True == 1 and hashes alike: route it on its own
                share, key_class, text_prefix, key_bytes = self._batch_key(
                    key, keyed, shares, stamp
                )
            if type(message) is str:
                try:
                    payload = message.encode()
                except UnicodeEncodeError:
                    raise InvalidMessageError(text_error(message)) from None
                if text_prefix is None:  # the key's first text record of this batch
                    text_prefix = record_prefix(key_bytes, stamp, TAG_TEXT)
                    keyed[key] = (share, key_class, text_prefix, key_bytes)
                record = frame_with_prefix(text_prefix, payload)
            elif type(message) is bytes:  # what the bridge writes: skip the type dispatch
                payload = message
                record = frame(key_bytes, stamp, TAG_BYTES, message)
            else:
                tag, payload = encode_payload(message, self._topic.registry, self._declared)
                record = frame(key_bytes, stamp, tag, payload)
            if len(payload) > max_bytes:
                raise self._too_large(payload)
            share.records.append(record)
            share.size += len(record)
            if share.size >= chunk_bytes:
                share.write(stamp, self._sync_each, self._durable_roll)
        for share in shares.values():
            share.write(stamp, self._sync_each, self._durable_roll)
            share.log.dirty = share.log.dirty or self._sync_in_batches
        return {share.log.partition: share.runs for share in sorted(shares.values())}

    def _batch_key(
        self, key: Any, keyed: dict[Any, _BatchKey], shares: dict[PartitionLog, _Share], stamp: int
    ) -> _BatchKey:
        """Route a key seen for the first time in a batch. Its text-record prefix (framed at
        ``stamp``) is made by its first text record: bytes payloads never need it, and a
        bridge output keys every message differently (by its id)."""
        try:
            route = self._routes.get(key)  # keys repeat across batches: reuse their routing
        except TypeError:  # unhashable, so not a valid key: _route() says why
            route = None
        if route is None or type(key) is not self._key_class:
            route = self._route(key, None)
        number, head = route
        log = self._logs[number]
        share = shares.get(log)
        if share is None:
            share = shares[log] = _Share(log)
        entry = keyed[key] = (share, type(key), None, head[2:])
        return entry

    def _route(self, key: Any, partition: int | None) -> _Route:
        """Route a key the cache does not hold, and cache it (unless ``partition`` is given,
        or the key is of a subclass of the topic's key class)."""
        if self._closed:
            self._check_open()
        int_head = self._int_head
        if partition is None and int_head and type(key) is int and 0 <= key <= self._key_max:
            # An integer key in range (the common case): the key type's checks and the
            # default partitioner inlined, the head packed in one call.
            head = int_head(TAG_TEXT, self._key_width, key)
            if self._partitioner is default_partitioner:
                number = int_partition(key, self._partition_count)
            else:
                number = self._topic.check_partition(self._partitioner(key, self._partition_count))
        else:
            head = text_head(self._topic.key_type.encode(key))
            chosen = (
                self._partitioner(key, self._partition_count) if partition is None else partition
            )
            number = self._topic.check_partition(chosen)
            if type(key) is not self._key_class:
                partition = number  # a str subclass: not cached (see write_message)
        if self._logs[number] is None:
            self._open_log(number)
        route = (number, head)
        if partition is None:
            routes = self._routes
            if len(routes) >= _ROUTE_CACHE_SIZE:
                routes.clear()
            routes[key] = route
        return route

    def _open_log(self, partition: int) -> None:
        log = self._topic.log(partition)
        if self._exclusive:
            log.hold()
        self._logs[partition] = log

    def _too_large(self, payload: bytes) -> MessageTooLargeError:
        return MessageTooLargeError(
            f"message of {len(payload)} bytes is larger than max_message_bytes "
            f"{self._max_bytes} of topic {self.topic!r}"
        )

    def flush(self) -> None:
        """Make every message written by this producer durable on disk now."""
        self._check_open()
        if self._batcher is not None:
            self._batcher.check()
        for log in self._topic.opened_logs():
            log.dirty = False
            log.sync()

    def close(self) -> None:
        """Sync pending writes (``fsync="batch"``) and release files. Harmless twice."""
        if self._closed:
            return
        if self._batcher is not None:
            self._batcher.stop()
        self._closed = True
        self._finalizer.detach()
        self._routes.clear()
        self._logs = _unopened(self._partition_count)
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


def _unopened(partitions: int) -> list[PartitionLog]:
    return cast("list[PartitionLog]", [None] * partitions)


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


_BatchKey = tuple[_Share, type, RecordPrefix | None, bytes]
"""A key of one ``write_messages`` batch: (its partition's share, the key's class, the prefix
of its text records at the batch's timestamp (None until its first text record), its bytes
for other payloads). A plain tuple (unpacked where it is used), not a class: see
``encoding.RecordPrefix``."""
