"""Process-wide in-memory topics: a bounded FIFO channel per name, plus broadcast channels.

    publish ──► topic "orders": shared queue channel ──► queue-mode readers (compete)
                                    └─ (while any exist) ──► one channel per subscriber

While a topic has broadcast subscribers, published messages go to each of them (each sees
every message published after it subscribed); otherwise they go to the shared queue.
A channel holds at most `capacity` messages (0 = unbounded); a writer waits for room up to
its timeout, then gets `SendTimeoutError` instead of blocking forever.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from mq_bridge.endpoints.kit.wakeup import Wakeup
from mq_bridge.errors import SendError, SendTimeoutError
from mq_bridge.message import Message

__all__ = ["DEFAULT_CAPACITY", "MemoryChannel", "MemoryTopic", "get_topic"]

DEFAULT_CAPACITY = 100
_COMPACT_AFTER = 4096
_NONES: list[None] = []


def _nones(count: int) -> list[None]:
    """A list of `count` Nones (a shared one grown on demand, sliced: cheap to make)."""
    global _NONES
    if len(_NONES) < count:
        _NONES = [None] * max(count, 2 * len(_NONES))
    return _NONES[:count]


_topics_lock = threading.Lock()
_topics: dict[str, MemoryTopic] = {}


class MemoryChannel:
    """A bounded FIFO of messages with blocking reads and back-pressured writes."""

    def __init__(self, name: str, capacity: int) -> None:
        self.name = name
        self.capacity = capacity
        # A list and a read position: a take is one C-speed slice, not a pop per message.
        # Taken slots are set to None at once (so messages are freed) and dropped from the
        # front once they are the larger half.
        self._items: list[Message | None] = []
        self._head = 0
        self._lock = threading.Lock()
        self._readable = threading.Condition(self._lock)
        self._writable = threading.Condition(self._lock)
        self._waiting_readers = 0
        # Readers already woken but not yet running: a burst of writes wakes each reader
        # once instead of paying for a notify per message.
        self._wakeups_pending = 0
        self._waiting_writers = 0
        #: While not empty, writes go to these channels instead (a topic's subscribers).
        self.broadcast_to: tuple[MemoryChannel, ...] = ()

    def __len__(self) -> int:
        return len(self._items) - self._head

    def put_one(self, message: Message, timeout: float | None) -> None:
        """Append one message, waiting at most `timeout` seconds for room."""
        self.put_within(timeout, message)

    def put_within(self, timeout: float | None, message: Message) -> None:
        """`put_one` with the timeout first, so a publisher binds it once with `partial`."""
        if self.broadcast_to:
            for channel in self.broadcast_to:
                channel.put_within(timeout, message)
            return
        with self._lock:
            if self.capacity and len(self._items) - self._head >= self.capacity:
                self._wait_for_room(timeout, time.monotonic())
            self._items.append(message)
            if self._waiting_readers > self._wakeups_pending:
                self._wakeups_pending += 1
                self._readable.notify()

    def try_put(self, message: Message) -> bool:
        """Append one message if there is room right now (never to broadcast channels)."""
        if self.broadcast_to:
            return False
        with self._lock:
            if self.capacity and len(self._items) - self._head >= self.capacity:
                return False
            self._items.append(message)
            if self._waiting_readers > self._wakeups_pending:
                self._wakeups_pending += 1
                self._readable.notify()
            return True

    def put_many(self, messages: Sequence[Message], timeout: float | None) -> None:
        """Append all messages in order, as room allows; on timeout the rest fail (SendError)."""
        if self.broadcast_to:
            for channel in self.broadcast_to:
                channel.put_many(messages, timeout)
            return
        start = time.monotonic()
        done = 0
        with self._lock:
            while done < len(messages):
                room = self.capacity - len(self) if self.capacity else len(messages)
                if room <= 0:
                    try:
                        self._wait_for_room(timeout, start)
                    except SendTimeoutError as error:
                        raise SendError(dict.fromkeys(range(done, len(messages)), error)) from None
                    continue
                self._items.extend(messages[done : done + room])
                done += room
                if self._waiting_readers > self._wakeups_pending:
                    self._wakeups_pending = self._waiting_readers
                    self._readable.notify_all()

    def _wait_for_room(self, timeout: float | None, start: float) -> None:
        self._waiting_writers += 1
        try:
            while len(self) >= self.capacity:
                remaining = None if timeout is None else timeout - (time.monotonic() - start)
                if remaining is not None and remaining <= 0:
                    raise SendTimeoutError(
                        f"memory topic {self.name!r} stayed full ({self.capacity} messages) "
                        f"for {timeout}s; is anything reading it? Raise `capacity` or "
                        "`send_timeout_ms`"
                    )
                self._writable.wait(remaining)
        finally:
            self._waiting_writers -= 1

    def take(
        self, max_messages: int, timeout: float | None, wakeup: Wakeup | None = None
    ) -> list[Message]:
        """Up to `max_messages`, waiting at most `timeout` seconds for the first one; a
        reader's `wakeup` (made by `wakeup()`) ends the wait, or the next one, at once."""
        with self._lock:
            if len(self._items) == self._head:
                if not self._wait_for_items(timeout, wakeup):
                    return []
            elif wakeup is not None and wakeup.pending:
                wakeup.consume()  # what is there answers the interrupt: the next take waits
            items, head = self._items, self._head
            end = head + max_messages
            if end >= len(items):  # everything: hand over the list itself
                taken = items if head == 0 else items[head:]
                self._items, self._head = [], 0
            else:
                taken = items[head:end]
                items[head:end] = _nones(max_messages)
                self._head = end
                if end > _COMPACT_AFTER and end * 2 > len(items):
                    del items[:end]
                    self._head = 0
            if self._waiting_writers:
                self._writable.notify_all()
            return taken  # type: ignore[return-value]  # slots before the head only are None

    def _wait_for_items(self, timeout: float | None, wakeup: Wakeup | None) -> bool:
        # Wakeup.wait_until's loop, plus the count of readers already woken (see __init__).
        deadline = None if timeout is None else time.monotonic() + timeout
        self._waiting_readers += 1
        try:
            while len(self._items) == self._head and not (wakeup is not None and wakeup.pending):
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._readable.wait(remaining)
                if self._wakeups_pending:
                    self._wakeups_pending -= 1
            if wakeup is not None:
                wakeup.consume()
            return len(self._items) > self._head
        finally:
            self._waiting_readers -= 1

    def requeue(self, messages: Sequence[Message]) -> None:
        """Put messages back at the front, in their original order (a nack)."""
        with self._lock:
            count, head = len(messages), self._head
            if head >= count:  # the usual case: the slots they were taken from are free
                self._items[head - count : head] = messages
                self._head = head - count
            else:
                self._items[head:head] = messages
            if self._waiting_readers > self._wakeups_pending:
                self._wakeups_pending = self._waiting_readers
                self._readable.notify_all()

    def wakeup(self) -> Wakeup:
        """A reader's own interrupt for `take`: it ends that reader's wait only (others
        reading the same channel wake, find it is not theirs, and wait on)."""
        return Wakeup(self._readable)


class MemoryTopic:
    """A named topic: the shared queue channel and any broadcast subscriber channels."""

    def __init__(self, name: str, capacity: int) -> None:
        self.name = name
        self.queue = MemoryChannel(name, capacity)
        self._lock = threading.Lock()

    @property
    def capacity(self) -> int:
        return self.queue.capacity

    def raise_capacity(self, capacity: int) -> None:
        """Grow (never shrink) the bound; 0 means unbounded and wins."""
        if self.queue.capacity and (capacity == 0 or capacity > self.queue.capacity):
            self.queue.capacity = capacity

    def subscribe(self) -> MemoryChannel:
        """A new broadcast channel that receives every message published from now on."""
        channel = MemoryChannel(self.name, self.capacity)
        with self._lock:
            self.queue.broadcast_to = (*self.queue.broadcast_to, channel)
        return channel

    def unsubscribe(self, channel: MemoryChannel) -> None:
        with self._lock:
            self.queue.broadcast_to = tuple(c for c in self.queue.broadcast_to if c is not channel)


def get_topic(name: str, capacity: int | None = None) -> MemoryTopic:
    """The process-wide topic `name`, created on first use with `capacity` (default 100)."""
    with _topics_lock:
        topic = _topics.get(name)
        if topic is None:
            topic = _topics[name] = MemoryTopic(name, DEFAULT_CAPACITY)
            if capacity is not None:
                topic.queue.capacity = capacity
        elif capacity is not None:
            topic.raise_capacity(capacity)
        return topic
