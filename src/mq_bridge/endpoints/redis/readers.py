"""How the `redis_streams` input reads: as a consumer-group member, or tailing the stream.

Both readers are used by one input under its lock-free receive loop; their `read` returns
entries as hiredis parses them (``[entry id, [field, value, ...]]``, see `codec`), at most
`count`, blocking at most `block_ms` (None: not at all). Entry ids are ``bytes`` such as
``b"1700000000000-0"``. The commands that carry entries or acks (XREADGROUP, XREAD,
XCLAIM, XAUTOCLAIM, XACK) go through a `CommandChannel`, one round trip each; the rare
ones (XGROUP, XINFO, XPENDING, XREVRANGE) through redis-py's client.

`GroupReader` (XREADGROUP + XACK) hands out, in this order of preference:

1. entries this input nacked (XCLAIM to itself: in id order, at once);
2. entries pending longer than ``redelivery_timeout_ms`` at any consumer of the group, a
   dead one's included (XAUTOCLAIM, checked at most every `CLAIM_INTERVAL` seconds, or at
   once while a scan is under way);
3. its own pending entries left from an earlier run with the same ``consumer_name``
   (XREADGROUP from id 0, once after each connect);
4. new entries (XREADGROUP ``>``).

When Redis answers NOGROUP (a restart emptied it, or the stream was deleted) the group is
created again, with MKSTREAM, from id 0: everything in the stream then was written after the
group was lost, so none of it is skipped.

`TailReader` (``subscriber_mode``) reads with XREAD after the last entry it handed out,
starting after the stream's last entry at connect: no group, no acks. A nack rewinds it to
before the batch, so the batch (and whatever followed it) is read again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from operator import itemgetter
from typing import Any

from mq_bridge.endpoints.redis.client import missing_group
from mq_bridge.endpoints.redis.commands import CommandChannel

__all__ = ["CLAIM_INTERVAL", "HANDBACK_IDLE_MS", "GroupReader", "TailReader", "entry_ids"]

Entries = list[Any]
_entry_id = itemgetter(0)
#: A `redis.Redis` client (its stubs type every reply as a loose union: we read replies
#: as the RESP2 shapes redis-py documents).
Redis = Any

#: How often a group reader looks for entries pending too long at other consumers.
CLAIM_INTERVAL = 1.0
#: The idle time given to entries an input hands back on close: older than any
#: ``redelivery_timeout_ms``, so the group's other readers claim them at once. (Redis
#: ignores an idle time beyond the epoch, so not "infinite": ten years.)
HANDBACK_IDLE_MS = 10 * 365 * 86_400_000


def _stream_entries(reply: Any) -> Entries:
    """The entries of an XREAD/XREADGROUP reply for one stream ([] when it timed out)."""
    if not reply:
        return []
    if isinstance(reply, dict):  # RESP3 (``protocol=3`` in the URL): {stream: entries}
        return [entry for entries in reply.values() for entry in entries]
    entries: Entries = reply[0][1]
    return entries


def entry_ids(entries: Entries) -> tuple[bytes, ...]:
    """The ids of `entries`, in order (a batch's ack token)."""
    return tuple(map(_entry_id, entries))


def _present(entries: Entries) -> Entries:
    """Without the entries deleted from the stream while pending (their fields are nil:
    a history read, or a claim before Redis 7)."""
    return [entry for entry in entries if entry is not None and entry[1] is not None]


def _block(block_ms: int | None) -> tuple[Any, ...]:
    return () if block_ms is None else ("BLOCK", block_ms)


class GroupReader:
    """A member of a consumer group (see the module docstring)."""

    def __init__(
        self, stream: str, group: str, consumer: str, start: str, redelivery_ms: int
    ) -> None:
        self.stream, self.group, self.consumer = stream, group, consumer
        self._start = start
        self._redelivery_ms = redelivery_ms
        self._lock = threading.Lock()
        self._outstanding: set[bytes] = set()  # handed out, neither acked nor handed back
        self._nacked: list[bytes] = []
        self._own_cursor: bytes | None = b"0"  # None: own pending entries all re-read
        self._claim_cursor = b"0-0"
        self._next_claim = 0.0
        self._xack = ("XACK", stream, group)

    def open(self, client: Redis) -> None:
        """Join the group (creating it, and the stream, when missing)."""
        self._create_group(client, self._start)
        # From now on a missing group was lost (a restart, a deleted stream): whatever the
        # stream holds when it is created again is newer than the loss, so read it all.
        self._start = "0"
        self._own_cursor = b"0"
        self._next_claim = 0.0

    def _create_group(self, client: Redis, start: str) -> None:
        try:
            client.xgroup_create(self.stream, self.group, id=start, mkstream=True)
        except Exception as error:
            if not str(error).startswith("BUSYGROUP"):
                raise

    def read(
        self, channel: CommandChannel, client: Redis, count: int, block_ms: int | None
    ) -> Entries:
        try:
            entries = self._read(channel, count, block_ms)
        except Exception as error:
            if not missing_group(error):
                raise
            self._create_group(client, "0")  # lost (restart): nothing in it is old
            entries = self._read(channel, count, block_ms)
        if entries:
            with self._lock:
                self._outstanding.update(map(_entry_id, entries))
        return entries

    def _read(self, channel: CommandChannel, count: int, block_ms: int | None) -> Entries:
        entries = self._take_nacked(channel, count) if self._nacked else []
        if not entries and self._redelivery_ms and time.monotonic() >= self._next_claim:
            entries = self._claim_stale(channel, count)
        if not entries and self._own_cursor is not None:
            entries = self._read_group(channel, count, None, self._own_cursor)
            self._own_cursor = entries[-1][0] if entries else None
            entries = _present(entries)  # history may hold entries deleted since
        if not entries:
            entries = self._read_group(channel, count, block_ms, b">")
        return entries

    def _read_group(
        self, channel: CommandChannel, count: int, block_ms: int | None, after: bytes
    ) -> Entries:
        command = ("XREADGROUP", "GROUP", self.group, self.consumer, "COUNT", count,
                   *_block(block_ms), "STREAMS", self.stream, after)  # fmt: skip
        return _stream_entries(channel.call_one(command))

    def _take_nacked(self, channel: CommandChannel, count: int) -> Entries:
        with self._lock:
            ids, self._nacked = self._nacked[:count], self._nacked[count:]
        if not ids:
            return []
        command = ("XCLAIM", self.stream, self.group, self.consumer, 0, *ids)
        return _present(channel.call_one(command))

    def _claim_stale(self, channel: CommandChannel, count: int) -> Entries:
        command = ("XAUTOCLAIM", self.stream, self.group, self.consumer, self._redelivery_ms,
                   self._claim_cursor, "COUNT", count)  # fmt: skip
        reply = channel.call_one(command)
        cursor, entries = reply[0], reply[1]
        self._claim_cursor = cursor
        if cursor in (b"0-0", "0-0"):  # the scan is complete: look again in a while
            self._next_claim = time.monotonic() + min(CLAIM_INTERVAL, self._redelivery_ms / 2000)
        return _present(entries)

    def ack(self, channel: CommandChannel, ids: Sequence[bytes]) -> None:
        """XACK every id in one command (a batch's acks: one round trip)."""
        channel.call_one((*self._xack, *ids))
        with self._lock:
            self._outstanding.difference_update(ids)

    def nack(self, ids: Sequence[bytes]) -> None:
        """Hand these out again first, in id order (they stay pending to this consumer)."""
        with self._lock:
            self._nacked = sorted({*self._nacked, *ids}, key=_entry_order)

    def hand_back(self, client: Redis) -> None:
        """Make every unacked entry claimable by the group's other readers at once, and
        leave the group when nothing is pending here any more."""
        with self._lock:
            ids, self._outstanding, self._nacked = sorted(self._outstanding), set(), []
        if ids:
            client.xclaim(
                self.stream,
                self.group,
                self.consumer,
                0,
                tuple(ids),
                idle=HANDBACK_IDLE_MS,
                justid=True,
            )
            return
        mine = client.xpending_range(self.stream, self.group, "-", "+", 1, self.consumer)
        if not mine:
            client.xgroup_delconsumer(self.stream, self.group, self.consumer)

    def pending(self, client: Redis) -> tuple[int | None, dict[str, Any]]:
        """The group's backlog: entries not yet delivered (lag) plus delivered, unacked."""
        for group in client.xinfo_groups(self.stream):
            name = group.get("name")
            if name in (self.group, self.group.encode()):
                lag, unacked = group.get("lag"), int(group.get("pending") or 0)
                details = {"group": self.group, "consumer": self.consumer, "lag": lag}
                details["unacked"] = unacked
                return (None if lag is None else int(lag) + unacked), details
        return None, {"group": self.group, "consumer": self.consumer}


class TailReader:
    """XREAD after the last entry handed out (``subscriber_mode``)."""

    def __init__(self, stream: str) -> None:
        self.stream = stream
        self._last = b"0-0"
        self._lock = threading.Lock()

    def open(self, client: Redis) -> None:
        """Start after the stream's current last entry: only new entries are read."""
        newest = client.xrevrange(self.stream, "+", "-", count=1)
        self._last = newest[0][0] if newest else b"0-0"

    def read(
        self, channel: CommandChannel, client: Redis, count: int, block_ms: int | None
    ) -> Entries:
        with self._lock:
            after = self._last
        command = ("XREAD", "COUNT", count, *_block(block_ms), "STREAMS", self.stream, after)
        entries = _stream_entries(channel.call_one(command))
        if entries:
            with self._lock:
                if self._last == after:  # not rewound by a nack meanwhile
                    self._last = entries[-1][0]
        return entries

    def nack(self, ids: Sequence[bytes]) -> None:
        if not ids:
            return
        before = _previous_id(min(ids, key=_entry_order))
        with self._lock:
            if _entry_order(before) < _entry_order(self._last):
                self._last = before


def _entry_order(entry_id: bytes) -> tuple[int, int]:
    milliseconds, _, sequence = entry_id.partition(b"-")
    return int(milliseconds), int(sequence or 0)


def _previous_id(entry_id: bytes) -> bytes:
    """The greatest entry id below `entry_id` (XREAD reads strictly after its argument)."""
    milliseconds, sequence = _entry_order(entry_id)
    if sequence:
        return b"%d-%d" % (milliseconds, sequence - 1)
    return b"%d-%d" % (milliseconds - 1, (1 << 64) - 1) if milliseconds else b"0-0"
