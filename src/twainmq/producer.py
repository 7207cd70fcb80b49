"""The producer: encodes messages and appends them to the partition their key selects.

Each ``write_message`` is one locked ``pwrite`` of one record: when it returns, the record
is in the kernel (safe against a process crash) and its offset is known. ``write_messages``
encodes a whole batch and writes each partition's share with one locked ``pwrite`` per MiB.

A producer keeps a partition's lock between its writes and gives it back as soon as another
writer asks or after a millisecond without writes (lazy release, see ``partition.py``), so a
busy producer pays no lock syscalls. ``exclusive=True`` keeps each partition's lock from the
producer's first write there until ``close()``, whoever asks: other producers of those
partitions (any process) wait until then, consumers do not.

Records are built by ``encoding.frame`` / ``frame_text`` (bound once here); what depends on
the key alone (its bytes, its text records' head) is cached with the key's route.

Durability (``fsync=``): ``"never"`` (default) leaves flushing to the kernel; ``"batch"`` has
a background thread (``fsync_batcher.py``) sync the partitions written to every
``batch_interval`` seconds, and syncs on ``flush()``/``close()``; ``"always"`` syncs
each write before it is acknowledged.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from itertools import accumulate
from typing import Any, NamedTuple

from . import unclosed
from .encoding import (
    TAG_BYTES,
    TAG_TEXT,
    RecordPrefix,
    frame,
    frame_text,
    frame_with_prefix,
    record_prefix,
    text_head,
)
from .errors import (
    ClosedError,
    InvalidMessageError,
    InvalidOptionError,
    MessageTooLargeError,
    MessageTypeError,
)
from .fsync_batcher import FsyncBatcher
from .keys import Partitioner, default_partitioner
from .message import RecordMetadata
from .partition import FSYNC_MODES, PartitionLog
from .payloads import encode_payload, text_error
from .topic import OpenTopic

_new_tuple = tuple.__new__  # skips NamedTuple's Python-level __new__ on the hot path
_time_ns = time.time_ns  # bound once: write_message reads the clock per message
_CHUNK_BYTES = 1024 * 1024
_ROUTE_CACHE_SIZE = 65536


class _Route(NamedTuple):
    """Where one key's records go and how they are framed (cached per key).

    A NamedTuple, not a frozen dataclass: a route is made for every new key, and with many
    keys (the bridge keys by message id) a frozen dataclass's ``__init__`` was ~8% of
    ``write_message``; a tuple is built in C and its fields still have names.
    """

    log: PartitionLog
    key_class: type  # True == 1: a cached route serves only keys of its class, so True still fails
    key: bytes  # the key as stored
    text_head: bytes  # encoding.text_head(key): what follows a text record's timestamp


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
        MessageTypeError or UnregisteredMessageTypeError (nothing is written then).
        """
        try:
            route = self._routes.get(key) if partition is None else None
        except TypeError:  # unhashable, so not a valid key: _route() says why
            route = None
        if route is None or type(key) is not route.key_class:
            route = self._route(key, partition)
        stamp = _time_ns() // 1000
        if type(message) is str:
            try:
                payload = message.encode()
            except UnicodeEncodeError:
                raise InvalidMessageError(text_error(message)) from None
            record = frame_text(route.text_head, stamp, payload)
        else:
            tag, payload = encode_payload(message, self._topic.registry, self._declared)
            record = frame(route.key, stamp, tag, payload)
        if len(payload) > self._max_bytes:
            raise self._too_large(payload)
        log = route.log
        offset = log.append_one(record, stamp, self._sync_each, self._durable_roll)
        if self._sync_in_batches:
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
        if route is None or type(key) is not route.key_class:
            route = self._route(key, None)
        share = shares.get(route.log)
        if share is None:
            share = shares[route.log] = _Share(route.log)
        entry = keyed[key] = (share, route.key_class, None, route.key)
        return entry

    def _route(self, key: Any, partition: int | None) -> _Route:
        self._check_open()
        topic = self._topic
        key_bytes = topic.key_type.encode(key)
        chosen = self._partitioner(key, topic.partitions) if partition is None else partition
        log = topic.log(topic.check_partition(chosen))
        if self._exclusive:
            log.hold()
        route = _new_tuple(_Route, (log, type(key), key_bytes, text_head(key_bytes)))
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
