"""A topic's ``Subscribe`` streams, and what each consumer id has not acknowledged.

The streams are asyncio queues read by the server's handlers on its loop; everything is
put through ``call_soon_threadsafe``, so a publish (on the loop) and a close (any thread)
reach a stream in the order they happened.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import OrderedDict
from typing import Any

__all__ = ["END", "MAX_RETAINED_CONSUMERS", "MAX_RETAINED_PER_CONSUMER", "SubscriberStreams"]

log = logging.getLogger("mq_bridge.endpoints.grpc")

MAX_RETAINED_PER_CONSUMER = 1024
MAX_RETAINED_CONSUMERS = 64
#: Put on a stream to end it.
END = object()

Stream = asyncio.Queue[Any]


class SubscriberStreams:
    """One topic's subscribers (`loop`: the server's loop, where the streams are read)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.lock = threading.Lock()
        self.streams: dict[str, Stream] = {}
        self.retained: OrderedDict[str, OrderedDict[str, Any]] = OrderedDict()

    def _put(self, stream: Stream, item: Any) -> None:
        try:
            self._loop.call_soon_threadsafe(stream.put_nowait, item)
        except RuntimeError:  # the loop is closed: the process is exiting
            pass

    def publish(self, bridge: Any) -> None:
        with self.lock:
            for consumer_id, stream in self.streams.items():
                kept = self.retained.setdefault(consumer_id, OrderedDict())
                kept[bridge.id] = bridge
                if len(kept) > MAX_RETAINED_PER_CONSUMER:
                    kept.popitem(last=False)
                    log.warning("grpc subscriber %s: too many unacknowledged messages", consumer_id)
                self._put(stream, bridge)

    def attach(self, consumer_id: str) -> tuple[Stream, list[Any]] | None:
        """A new stream for `consumer_id` and what to send again on it; None when the id
        already has a live stream."""
        with self.lock:
            if consumer_id in self.streams:
                return None
            stream: Stream = asyncio.Queue()
            self.streams[consumer_id] = stream
            if consumer_id not in self.retained:
                self.retained[consumer_id] = OrderedDict()
                while len(self.retained) > MAX_RETAINED_CONSUMERS:
                    self.retained.popitem(last=False)
            return stream, list(self.retained[consumer_id].values())

    def detach(self, consumer_id: str, stream: Stream, ephemeral: bool) -> None:
        """End `consumer_id`'s subscription `stream` (idempotent; a newer one stays)."""
        with self.lock:
            if self.streams.get(consumer_id) is not stream:
                return
            del self.streams[consumer_id]
            if ephemeral:
                self.retained.pop(consumer_id, None)
        self._put(stream, END)

    def acknowledge(self, consumer_id: str, message_id: str, acked: bool) -> bool:
        with self.lock:
            kept = self.retained.get(consumer_id)
            if kept is None or message_id not in kept:
                return False
            if acked:
                del kept[message_id]
            return True

    def close(self) -> None:
        with self.lock:
            for stream in self.streams.values():
                self._put(stream, END)
