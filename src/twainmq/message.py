"""What producers return and consumers receive."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, NamedTuple

from .encoding import TAG_DATACLASS
from .keys import KeyType
from .payloads import MessageTypeRegistry, decode_dataclass


class RecordMetadata(NamedTuple):
    """Where a written message landed: its partition and its offset in that partition."""

    partition: int
    offset: int


class Message:
    """A message read from a topic.

    ``offset`` and ``partition`` locate it; ``key`` is the producer's key; ``timestamp`` is
    when it was written (UTC ``datetime``; ``timestamp_us`` as an integer); ``message`` is
    the payload as it was sent: ``str``, ``bytes`` or a registered dataclass instance
    (decoded on first access, so an unregistered type raises only when it is read).
    """

    __slots__ = (
        "_key",
        "_key_type",
        "_payload",
        "_registry",
        "_tag",
        "offset",
        "partition",
        "timestamp_us",
    )

    def __init__(
        self,
        offset: int,
        partition: int,
        key: bytes,
        timestamp_us: int,
        tag: int,
        payload: Any,
        key_type: KeyType,
        registry: MessageTypeRegistry,
    ) -> None:
        self.offset = offset
        self.partition = partition
        self._key = key
        self.timestamp_us = timestamp_us
        self._tag = tag
        self._payload = payload
        self._key_type = key_type
        self._registry = registry

    @property
    def key(self) -> int | str:
        """The message key (``int`` for u8..u64 topics, ``str`` for charN topics)."""
        return self._key_type.decode(self._key)

    @property
    def timestamp(self) -> datetime:
        """When the message was written, as a UTC datetime."""
        seconds, micros = divmod(self.timestamp_us, 1_000_000)
        return datetime.fromtimestamp(seconds, tz=timezone.utc).replace(microsecond=micros)

    @property
    def message(self) -> Any:
        """The payload: ``str``, ``bytes`` or a dataclass instance."""
        if self._tag == TAG_DATACLASS:
            where = f"partition {self.partition} offset {self.offset}"
            self._payload = decode_dataclass(self._payload, self._registry, where)
            self._tag = -1
        return self._payload

    def __repr__(self) -> str:
        stamp = self.timestamp.isoformat(timespec="microseconds").replace("+00:00", "Z")
        return (
            f"Message(partition={self.partition}, offset={self.offset}, key={self.key!r}, "
            f"timestamp={stamp}, message={self.message!r})"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Message):
            return NotImplemented
        return (self.partition, self.offset, self.key, self.timestamp_us, self.message) == (
            other.partition,
            other.offset,
            other.key,
            other.timestamp_us,
            other.message,
        )

    __hash__ = None  # type: ignore[assignment]
