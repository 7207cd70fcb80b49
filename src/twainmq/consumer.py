"""The consumer: reads the partitions assigned to it, fairly, without a group.

``poll()`` hands out messages from a ready list that is refilled, when it runs dry, with one
chunk from every assigned partition that has new data, interleaved one message per partition
in turn. So a poll that finds a message costs an index and a list lookup, and no syscall.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from itertools import chain
from math import isfinite
from numbers import Real
from typing import Any

from . import unclosed
from .errors import (
    ClosedError,
    InvalidOptionError,
    InvalidPartitionError,
    OffsetOutOfRangeError,
    TwainMQError,
)
from .lookup import log_start, offset_for_timestamp
from .message import Message
from .reader import ON_GAP, PartitionReader
from .topic import OpenTopic

START_FROM = ("start", "now")
DEFAULT_FETCH_BYTES = 32 * 1024
_MAX_IDLE_SLEEP = 0.005


class Consumer:
    """Reads a topic's messages in offset order per partition.

    Created by ``Twain.consumer(topic, start_from=...)``. Without a group it reads every
    partition; ``assign()`` replaces the partitions it reads and where it reads them from.

    ``on_gap``: what a gap in a partition's offsets does (segment files missing or cut short
    at a record boundary, by a disk, a backup tool or a hand): ``"raise"`` (the default)
    raises TopicCorruptError naming the files, the partition and the offsets, on every poll
    until the consumer is moved past it with ``seek``; ``"skip"`` moves on to the next offset
    that can be read and logs a warning (logger ``twainmq``) naming them. A record that fails
    its checks raises in both modes.
    """

    def __init__(
        self,
        topic: OpenTopic,
        start_from: str | None = "start",
        fetch_bytes: int = DEFAULT_FETCH_BYTES,
        on_gap: str = "raise",
    ) -> None:
        # start_from=None: read nothing until assign() (a group member's engine: opening
        # every partition first cost 32 members of a 256-partition group ~5 s of CPU).
        if start_from is not None and start_from not in START_FROM:
            raise InvalidOptionError(f'start_from must be "start" or "now", not {start_from!r}')
        if type(fetch_bytes) is not int or fetch_bytes < 1024:
            raise InvalidOptionError(f"fetch_bytes {fetch_bytes!r} must be an integer >= 1024")
        if on_gap not in ON_GAP:
            raise InvalidOptionError(f'on_gap must be "raise" or "skip", not {on_gap!r}')
        self._on_gap = on_gap
        self._topic = topic
        self._fetch_bytes = fetch_bytes
        self._readers: dict[int, PartitionReader] = {}
        self._order: list[PartitionReader] = []
        self._ready: list[Message] = []
        self._chunks: list[list[Message]] | None = None  # what _ready interleaves, if known
        self._chunk_of: dict[int, list[Message]] = {}
        self._buffer_generation = 0  # changes whenever _ready is replaced
        self._next = 0
        self._ready_len = 0
        self._turn = 0
        self._closed = False
        self._finalizer = unclosed.watch(self, "consumer", topic, readers=self._readers)
        try:
            if start_from == "now":
                self.assign(topic.end_offsets())
            elif start_from == "start":
                self.assign({p: 0 for p in range(topic.partitions)})
        except BaseException:
            self.close()
            raise

    @property
    def topic(self) -> str:
        """The topic's name."""
        return self._topic.name

    def poll(self, timeout: float | None = None) -> Message | None:
        """Return the next message, or None if there is none (after waiting ``timeout`` s)."""
        i = self._next
        if i < self._ready_len:
            self._next = i + 1
            return self._ready[i]
        return self._poll_slow(timeout)

    def _poll_slow(self, timeout: float | None) -> Message | None:
        self._check_open()
        if timeout is not None:
            check_timeout(timeout)
        if self._refill():
            return self.poll()
        if not timeout:
            return None
        deadline = time.monotonic() + timeout
        pause = 0.0002
        while (remaining := deadline - time.monotonic()) > 0:
            time.sleep(min(pause, remaining))
            pause = min(pause * 2, _MAX_IDLE_SLEEP)
            if self._refill():
                return self.poll()
        return None

    def poll_many(self, n: int = 10, timeout: float | None = None) -> list[Message]:
        """Return up to ``n`` messages; waits up to ``timeout`` s only for the first one."""
        check_count(n)
        first = self.poll(timeout)
        if first is None:
            return []
        batch = [first]
        while len(batch) < n:
            if self._next >= self._ready_len:
                try:
                    if not self._refill():
                        break
                except TwainMQError:
                    break  # return what was taken; the error comes back on the next poll
            stop = min(self._ready_len, self._next + n - len(batch))
            batch.extend(self._ready[self._next : stop])
            self._next = stop
        return batch

    def __iter__(self) -> Iterator[Message]:
        """Yield messages until none is waiting."""
        while (message := self.poll()) is not None:
            yield message

    def _refill(self) -> bool:
        """Fetch a chunk from each partition with new data; False if none had any."""
        order = self._order
        if not order:
            return False
        self._turn = (self._turn + 1) % len(order)
        # Decoding creates thousands of small tuples at once; with the cyclic GC on, they
        # trigger collection after collection (a third of the time). None of them can form
        # a cycle, so the GC is paused while they are made and runs once afterwards.
        collecting = gc.isenabled()
        gc.disable()
        try:
            chunks = self._fetch_chunks(chain(order[self._turn :], order[: self._turn]))
        finally:
            if collecting:
                gc.enable()
        if not chunks:
            return False
        if len(chunks) == 1:
            self._ready = chunks[0]
        else:
            self._ready = interleave(chunks)
        self._chunks = chunks
        self._chunk_of = {chunk[0].partition: chunk for chunk in chunks}
        self._buffer_generation += 1
        self._next = 0
        self._ready_len = len(self._ready)
        return True

    def _fetch_chunks(self, readers: Iterable[PartitionReader]) -> list[list[Message]]:
        chunks: list[list[Message]] = []
        for reader in readers:
            try:
                chunk = reader.fetch(self._fetch_bytes)
            except TwainMQError:
                # Keep what other partitions gave: the failing reader stays at its bad
                # record and raises again on a later poll.
                if chunks:
                    break
                raise
            if chunk:
                chunks.append(chunk)
        return chunks

    def assign(self, positions: Mapping[int, int]) -> None:
        """Read exactly the partitions in ``positions`` (partition -> next offset to read).

        Offsets older than what retention kept move up to the oldest kept offset.
        """
        self._check_open()
        checked = {
            self._topic.check_partition(p): self._check_offset(p, o) for p, o in positions.items()
        }
        for partition in set(self._readers) - set(checked):
            self._readers.pop(partition).close()
        for partition, offset in sorted(checked.items()):
            reader = self._readers.get(partition)
            if reader is None:
                log = self._topic.log(partition)
                reader = PartitionReader(
                    log, self._topic.key_type, self._topic.registry, self._on_gap
                )
                self._readers[partition] = reader
            reader.seek(offset)
        self._order = [self._readers[p] for p in sorted(self._readers)]
        self._drop_ready()

    def assignment(self) -> list[int]:
        """The partitions this consumer reads, sorted."""
        return sorted(self._readers)

    def seek(self, partition: int, offset: int) -> None:
        """Read ``partition`` from ``offset`` next (``end_offsets()[partition]`` = the end)."""
        self._check_open()
        reader = self._assigned(partition)
        reader.seek(self._check_offset(partition, offset))
        self._drop_ready(partition)

    def seek_to_timestamp(self, when: datetime | float) -> dict[int, int]:
        """Seek every assigned partition to its first message written at or after ``when``.

        ``when`` is an aware datetime or seconds since the epoch. Returns the new positions.
        """
        offsets = self.offsets_for_timestamp(when)
        for partition, offset in offsets.items():
            self.seek(partition, offset)
        return offsets

    def offsets_for_timestamp(self, when: datetime | float) -> dict[int, int]:
        """Partition -> first offset written at or after ``when`` (the end offset if none)."""
        self._check_open()
        if isinstance(when, datetime):
            stamp = when.timestamp()
        elif isinstance(when, Real) and not isinstance(when, bool) and isfinite(when):
            stamp = float(when)
        else:
            raise InvalidOptionError(
                f"timestamp {when!r} must be a datetime or a finite number of seconds"
            )
        stamp_us = round(stamp * 1_000_000)
        return {
            p: offset_for_timestamp(r.log.directory, stamp_us, r.log.head())
            for p, r in self._readers.items()
        }

    def position(self, partition: int) -> int:
        """The offset of the next message ``poll()`` returns from ``partition``."""
        reader = self._assigned(partition)
        for i in range(self._next, self._ready_len):
            if self._ready[i].partition == partition:
                return self._ready[i].offset
        return reader.next_offset

    def positions(self) -> dict[int, int]:
        """Partition -> ``position(partition)`` of every assigned partition, at the cost of one
        step per partition (``position`` may scan every buffered message)."""
        self._check_open()
        found = {p: reader.next_offset for p, reader in self._readers.items()}
        if self._next < self._ready_len:
            found.update(self._buffered_positions())
        return found

    def position_mark(self) -> tuple[int, int]:
        """A mark of how far this consumer has read, for ``positions_since``."""
        return (self._buffer_generation, self._next)

    def positions_since(self, mark: tuple[int, int]) -> dict[int, int] | None:
        """The positions of the partitions whose messages ``poll()`` returned since ``mark``
        (others have not moved), at the cost of those messages; None when that cannot be
        told cheaply (messages were fetched, or a seek or assign happened, since): then ask
        ``positions()``. A group consumer that commits after every message uses this."""
        generation, start = mark
        if generation != self._buffer_generation or start > self._next:
            return None
        last: dict[int, tuple[int, Message]] = {}
        for index in range(start, self._next):
            message = self._ready[index]
            last[message.partition] = (index, message)
        return {p: self._position_after(message) for p, (_, message) in last.items()}

    def _position_after(self, message: Message) -> int:
        """The position of ``message``'s partition once ``message`` was returned."""
        chunk = self._chunk_of.get(message.partition)
        if chunk is None:
            return self._readers[message.partition].next_offset
        k = message.offset - chunk[0].offset
        if not (0 <= k < len(chunk) and chunk[k] is message):
            k = chunk.index(message)  # offsets not consecutive in the chunk (never so far)
        if k + 1 < len(chunk):
            return chunk[k + 1].offset
        return self._readers[message.partition].next_offset

    def _buffered_positions(self) -> dict[int, int]:
        """The offset of the first message not yet returned, of each partition that has one."""
        chunks = self._chunks
        if chunks is None:  # after a seek dropped one partition's: one pass over the rest
            first: dict[int, int] = {}
            for message in reversed(self._ready[self._next : self._ready_len]):
                first[message.partition] = message.offset
            return first
        # _ready is interleave(chunks): round r holds the r-th message of every chunk longer
        # than r. Find the round under way (r) and how many chunks it has served (served).
        lengths = sorted(len(chunk) for chunk in chunks)
        remaining, previous, i = self._next, 0, 0
        while i < len(lengths):
            active, span = len(lengths) - i, lengths[i] - previous
            if remaining < span * active:
                break
            remaining -= span * active
            previous = lengths[i]
            while i < len(lengths) and lengths[i] == previous:
                i += 1
        else:
            return {}
        active = len(lengths) - i
        rounds, served = previous + remaining // active, remaining % active
        found = {}
        for chunk in chunks:
            taken = min(len(chunk), rounds)
            if len(chunk) > rounds and served:
                taken, served = taken + 1, served - 1
            if taken < len(chunk):
                found[chunk[taken].partition] = chunk[taken].offset
        return found

    def end_offsets(self) -> dict[int, int]:
        """Partition -> the offset the next message written there gets (every partition)."""
        self._check_open()
        return self._topic.end_offsets()

    def beginning_offsets(self) -> dict[int, int]:
        """Partition -> the oldest offset still kept (every partition)."""
        self._check_open()
        logs = [self._topic.log(p) for p in range(self._topic.partitions)]
        return {log.partition: log_start(log.directory, log.head()) for log in logs}

    def close(self) -> None:
        """Release files; further calls raise ClosedError. Closing twice is harmless."""
        if self._closed:
            return
        self._closed = True
        self._finalizer.detach()
        self._drop_ready()
        for reader in self._readers.values():
            reader.close()
        self._readers.clear()
        self._order = []
        self._topic.close()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"partitions={self.assignment()}"
        return f"<Consumer topic={self.topic!r} {state}>"

    def _assigned(self, partition: int) -> PartitionReader:
        reader = self._readers.get(partition)
        if reader is None:
            self._topic.check_partition(partition)
            raise InvalidPartitionError(
                f"partition {partition} of topic {self.topic!r} is not assigned to this consumer "
                f"(assigned: {self.assignment()})"
            )
        return reader

    def _check_offset(self, partition: int, offset: Any) -> int:
        end = self._topic.log(partition).end_offset()
        if type(offset) is not int or not 0 <= offset <= end:
            raise OffsetOutOfRangeError(
                f"offset {offset!r} is outside partition {partition} of topic {self.topic!r} "
                f"(0 .. {end})"
            )
        return offset

    def _drop_ready(self, partition: int | None = None) -> None:
        """Forget fetched messages not yet returned (all, or one partition's)."""
        self._chunks = None
        self._chunk_of = {}
        self._buffer_generation += 1
        if partition is None:
            self._ready = []
        else:
            rest = self._ready[self._next : self._ready_len]
            self._ready = [m for m in rest if m.partition != partition]
        self._next = 0
        self._ready_len = len(self._ready)

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError(f"consumer of topic {self.topic!r} is closed")


def check_timeout(timeout: object) -> float:
    """Return ``timeout`` if it is a number of seconds >= 0, else raise InvalidOptionError."""
    seconds = float(timeout) if isinstance(timeout, Real) and type(timeout) is not bool else -1.0
    if not seconds >= 0:  # also NaN
        raise InvalidOptionError(f"timeout {timeout!r} must be a number of seconds >= 0")
    return seconds


def check_count(n: object) -> int:
    """Return ``n`` if it is an int >= 1, else raise InvalidOptionError."""
    if type(n) is not int or n < 1:
        raise InvalidOptionError(f"n {n!r} must be an integer >= 1")
    return n


def interleave(chunks: list[list[Message]]) -> list[Message]:
    """One message of each chunk in turn, as ``zip_longest`` would give them (without its
    fill values): whole rounds are zipped in C, then the chunks that are longer go on."""
    ready: list[Message] = []
    while chunks:
        shortest = min(map(len, chunks))
        ready += chain.from_iterable(zip(*chunks))
        chunks = [chunk[shortest:] for chunk in chunks if len(chunk) > shortest]
    return ready
